#!/bin/bash
# build_cuda.sh - how the Makefile finds the CUDA toolkit: from what nvcc
# itself reports (a wrapper script on PATH, as on these machines, must not
# send the build to /usr/local/include), and a toolkit without the runtime,
# cuBLAS and NCCL headers gives a warning and a CPU-only build, not a
# failed one. Reads make's database (make -pn); builds nothing.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

# make_var NAME [ENV...]: NAME's value in make's database, with ENV set and
# no CUDA_HOME inherited
make_var() {
	local name=$1
	shift
	env -u CUDA_HOME -u NVCC "$@" make -C "$ROOT" -pn --no-print-directory \
		2>"$TEST_TMP/make.err" </dev/null |
		sed -n "s/^$name :\?= //p" | head -1
}

# a toolkit that only answers nvcc --dryrun, pointing at an empty tree
fake=$TEST_TMP/fake-cuda
mkdir -p "$fake/bin" "$fake/include"
cat >"$fake/bin/nvcc" <<SH
#!/bin/sh
echo '#\$ TOP=$fake/bin/..'
SH
chmod +x "$fake/bin/nvcc"
got=$(make_var NVCC PATH="$fake/bin:/usr/sbin:/usr/bin:/sbin:/bin")
check_eq "nvcc without headers: CUDA left out" "" "$got"
check "nvcc without headers: the build says why" \
	grep -q "no cuda_runtime.h, nccl.h and cublas_v2.h under '$fake/include'" \
	"$TEST_TMP/make.err"
got=$(make_var NVCC NO_CUDA=1)
check_eq "NO_CUDA=1: CUDA left out" "" "$got"

# the real toolkit, reached through a wrapper script in another folder
real=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
if [ -z "$real" ]; then
	skip "nvcc behind a wrapper: no CUDA toolkit on this machine"
	finish
fi
# the toolkit's root as nvcc itself reports it (nvcc may be a wrapper
# script in /usr/local/bin, as on these machines)
root=$("$real" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
root=$(cd "${root:-$(dirname "$(readlink -f "$real")")/..}" 2>/dev/null && pwd -P)
if [ ! -f "$root/include/cuda_runtime.h" ] || [ ! -f "$root/include/nccl.h" ]; then
	skip "nvcc behind a wrapper: the toolkit at $root lacks its headers"
	finish
fi
mkdir -p "$TEST_TMP/wrap"
printf '#!/bin/sh\nexec %s "$@"\n' "$real" >"$TEST_TMP/wrap/nvcc"
chmod +x "$TEST_TMP/wrap/nvcc"
got=$(make_var CUDA_HOME PATH="$TEST_TMP/wrap:/usr/sbin:/usr/bin:/sbin:/bin")
check_eq "nvcc behind a wrapper: the toolkit's root is nvcc's own" "$root" "$got"
got=$(make_var CUDA_CPPFLAGS PATH="$TEST_TMP/wrap:/usr/sbin:/usr/bin:/sbin:/bin")
check_eq "nvcc behind a wrapper: headers from the toolkit" \
	"-I$root/include -DDLAUNCH_HAVE_CUDA=1" "$got"
got=$(make_var NVCC CUDA_HOME="$fake" \
	PATH="$TEST_TMP/wrap:/usr/sbin:/usr/bin:/sbin:/bin")
check_eq "CUDA_HOME without headers: CUDA left out" "" "$got"
check "CUDA_HOME without headers: the build says why" \
	grep -q "under '$fake/include'" "$TEST_TMP/make.err"
finish
