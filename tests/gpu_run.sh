#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu_run.sh - the GPU checks in one go, for a session lent a GPU machine
# that has a driver, CUDA, NCCL and PyTorch but not Debian's packages (so
# nothing can be built there).
#
#   tests/gpu_run.sh pack
#       here: builds (make all tests bench-build), then writes
#       build/gpu-pack.tar.xz: dlaunch, dlaunch-rdzv, dlaunch-train,
#       dist_bench, the GPU unit tests, the shared libraries they need
#       except libc's and the large CUDA ones (cuBLAS, NCCL: the GPU
#       machine's are used), and Fashion-MNIST (when installed).
#   tests/gpu_run.sh run [--bench] [--quick] [--python PY]
#       on the GPU machine, in the repository root with the pack carried
#       there: unpacks it into build/gpu-pack, finds the CUDA libraries
#       the binaries still lack (CUDA's folders, PyTorch's nvidia wheels),
#       runs test_device, test_mlp_cuda, test_nccl and test_dist_nccl (the
#       collective library's NCCL cases) and tests/e2e/gpu_train.sh, and
#       with --bench bench/gpu_bench.sh on the pack (--quick: fewer repetitions; PY: a
#       Python with CUDA torch).
#       Logs go to $OUT (or build/gpu-pack/out); the last line is
#       "N passed, N failed, N skipped", and the status is non-zero when
#       anything failed or nothing passed.
set -u
cd "$(dirname "$0")/.."
PACK=build/gpu-pack

# deps FILE...: the shared libraries FILEs load (path per line) that the
# pack carries: not libc's, the loader's or the large CUDA ones
deps() {
	ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' |
		sort -u | grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcublas|libcublasLt|libnccl|libcuda)\.so'
}

pack() {
	local bins tests t
	make -s -j2 all tests bench-build || exit 1
	if [ ! -f build/bin/dlaunch-train ] ||
		! objdump -h build/bin/dlaunch-train | grep -q nv_fatbin; then
		echo "gpu_run: build/bin/dlaunch-train has no CUDA code (is nvcc found?)" >&2
		exit 1
	fi
	rm -rf "$PACK" build/gpu-pack.tar.xz
	mkdir -p "$PACK/bin" "$PACK/bench" "$PACK/tests" "$PACK/lib" "$PACK/data"
	bins="build/bin/dlaunch build/bin/dlaunch-rdzv build/bin/dlaunch-train"
	tests="test_device test_mlp_cuda test_nccl test_dist_nccl"
	cp $bins "$PACK/bin/"
	cp build/bench/dist_bench "$PACK/bench/"
	for t in $tests; do cp "build/tests/$t" "$PACK/tests/"; done
	# shellcheck disable=SC2046 # word splitting of the file list
	cp -L $(deps $bins build/bench/dist_bench $(printf 'build/tests/%s ' $tests)) "$PACK/lib/"
	strip --strip-unneeded "$PACK"/lib/* 2>/dev/null
	if [ -d /usr/share/datasets/fashion-mnist ]; then
		cp /usr/share/datasets/fashion-mnist/*.gz "$PACK/data/"
	fi
	tar -C build -cJf build/gpu-pack.tar.xz gpu-pack
	rm -rf "$PACK"
	echo "gpu_run: build/gpu-pack.tar.xz ($(du -m build/gpu-pack.tar.xz | cut -f1) MiB);" \
		"on the GPU machine: tests/gpu_run.sh run [--bench]"
}

# find_cuda_libs: LD_LIBRARY_PATH gains the folders of the libraries the
# packed binaries still do not find
find_cuda_libs() {
	local lib dir missing roots
	roots="/usr/local /usr/lib /usr/lib64 /opt"
	roots="$roots $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)"
	for lib in $(ldd "$PACK"/bin/* "$PACK"/bench/* "$PACK"/tests/* 2>/dev/null |
		awk '$3 == "not" { print $1 }' | sort -u); do
		# shellcheck disable=SC2086 # a list of folders
		dir=$(find $roots -name "$lib" -print -quit 2>/dev/null)
		if [ -n "$dir" ]; then
			LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$dir")
			export LD_LIBRARY_PATH
		fi
	done
	missing=$(ldd "$PACK"/bin/* "$PACK"/bench/* "$PACK"/tests/* 2>/dev/null |
		awk '$3 == "not" { print $1 }' | sort -u)
	if [ -n "$missing" ]; then
		echo "gpu_run: not found on this machine:" $missing >&2
		return 1
	fi
}

run() {
	local bench=0 quick="" python="" out passed=0 failed=0 skipped=0 t log p f s
	while [ $# -gt 0 ]; do
		case "$1" in
		--bench) bench=1; shift ;;
		--quick) quick=--quick; shift ;;
		--python) python=$2; shift 2 ;;
		*) echo "gpu_run: unknown option $1" >&2; exit 2 ;;
		esac
	done
	if [ ! -d "$PACK" ]; then
		[ -f build/gpu-pack.tar.xz ] || {
			echo "gpu_run: no build/gpu-pack.tar.xz (run tests/gpu_run.sh pack where the build is)" >&2
			exit 1
		}
		tar -C build -xJf build/gpu-pack.tar.xz || exit 1
	fi
	out=${OUT:-$PACK/out}
	mkdir -p "$out"
	export LD_LIBRARY_PATH=$PWD/$PACK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	find_cuda_libs || exit 1
	export DLAUNCH_BUILD=$PWD/$PACK DLAUNCH_BIN=$PWD/$PACK/bin
	export CMOCKA_MESSAGE_OUTPUT=stdout
	nvidia-smi >"$out/nvidia-smi.txt" 2>&1
	"$PACK/bench/dist_bench" --device-count | tee "$out/devices.json"
	for t in "$PACK"/tests/test_*; do
		log=$out/$(basename "$t").log
		timeout -k 5 900 "$t" >"$log" 2>&1
		rc=$?
		p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
		f=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
		s=$(grep -Eo '^\[  SKIPPED \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
		if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
		printf '%-20s %3d passed %3d failed %3d skipped\n' "$(basename "$t")" "$p" "$f" "$s"
		grep '^skip - ' "$log"
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	done
	log=$out/gpu_train.log
	FASHION_MNIST_DIR=$PWD/$PACK/data timeout -k 10 1800 bash tests/e2e/gpu_train.sh >"$log" 2>&1
	rc=$?
	grep -E '^(ok|not ok|skip) - |^# ' "$log"
	p=$(grep -c '^ok - ' "$log") f=$(grep -c '^not ok - ' "$log") s=$(grep -c '^skip - ' "$log")
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	if [ $bench -eq 1 ]; then
		FASHION_MNIST_DIR=$PWD/$PACK/data BUILD=$PACK \
			bench/gpu_bench.sh $quick ${python:+--python "$python"} \
			>"$out/gpu_bench.log" 2>&1
		echo "gpu_bench: exit $? (log: $out/gpu_bench.log)"
		cp bench/results/gpu.json "$out/" 2>/dev/null
		tail -n 20 "$out/gpu_bench.log"
	fi
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}

case "${1:-}" in
pack) pack ;;
run) shift; run "$@" ;;
*) sed -n '3,24p' "$0"; exit 2 ;;
esac
