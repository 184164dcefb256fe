#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# build_cuda.sh - how the Makefile finds the CUDA toolkit: from what nvcc
# itself reports (a wrapper script on PATH, as on these machines, must not
# send the build to /usr/local/include), and a toolkit without the runtime,
# cuBLAS and NCCL headers gives a warning and a CPU-only build, not a
# failed one. Reads make's database (make -pn); builds nothing. And what
# the CUDA build embeds: machine code that every GPU the toolkit knows can
# run and PTX for the newest architecture (else a newer GPU runs no kernel
# at all), checked in what nvcc is asked for and in the fatbinary of the
# built dlaunch-train (tests/e2e/progs/fatbin.py reads it).
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

# The architectures: every compute_N the toolkit lists must be covered by
# machine code of its family no newer than it (sm_80 code runs on sm_86,
# sm_100 on sm_103, ...), and the newest family must have PTX.
archs=$("$real" --list-gpu-arch 2>/dev/null | sed -n 's/^compute_\([0-9]*\)$/\1/p' | sort -n)
if [ -z "$archs" ]; then
	not_ok "nvcc --list-gpu-arch lists no architecture"
	finish
fi
newest=$(echo "$archs" | tail -n 1)
newest_family=$((newest / 10 * 10))
# covered IMAGES: every listed architecture has an elf image of its family
# no newer than it, and the newest family a ptx image
covered() {
	local images=$1 a ok=0
	for a in $archs; do
		echo "$images" | awk -v a="$a" '$1 == "elf" && int($2 / 10) == int(a / 10) && $2 <= a { f = 1 } END { exit !f }' ||
			{ echo "no machine code for sm_$a" >&2; ok=1; }
	done
	echo "$images" | grep -qx "ptx $newest_family" ||
		{ echo "no PTX for compute_$newest_family" >&2; ok=1; }
	return $ok
}
flags=$(make_var NVCCFLAGS)
# shellcheck disable=SC2086 # NVCCFLAGS is a list of words
asked=$("$real" --dryrun -c -x cu /dev/null -o /dev/null $flags 2>&1 |
	grep -o 'kind=[a-z]*,sm=[0-9]*' | sed 's/kind=\(.*\),sm=/\1 /')
check "nvcc is asked for machine code of every architecture and PTX of compute_$newest_family" \
	covered "$asked"

need_bin dlaunch-train
if ! objcopy -O binary --only-section=.nv_fatbin "$BIN/dlaunch-train" \
	"$TEST_TMP/fatbin" 2>/dev/null || [ ! -s "$TEST_TMP/fatbin" ]; then
	skip "the fatbinary of dlaunch-train: $BIN/dlaunch-train was built without CUDA (NO_CUDA=1 or a sanitizer build)"
	finish
fi
images=$(python3 "$ROOT/tests/e2e/progs/fatbin.py" "$TEST_TMP/fatbin")
check "dlaunch-train carries machine code of every architecture and PTX of compute_$newest_family" \
	covered "$images"
if command -v zstd >/dev/null; then
	python3 "$ROOT/tests/e2e/progs/fatbin.py" --ptx "$newest_family" \
		"$TEST_TMP/fatbin" >"$TEST_TMP/ptx"
	check "the PTX is for .target sm_$newest_family" grep -q "^\.target sm_$newest_family" "$TEST_TMP/ptx"
	missing=""
	for k in $(sed -n 's/^__global__ void \(k_[a-z_]*\)(.*/\1/p' "$ROOT/trainer/mlp_cuda.cu"); do
		grep -q "^\.entry .*${#k}${k}E" "$TEST_TMP/ptx" || missing="$missing $k"
	done
	check_eq "every kernel of mlp_cuda.cu is in the PTX" "" "$missing"
else
	skip "the PTX text of dlaunch-train: no zstd tool to unpack it"
fi
finish
