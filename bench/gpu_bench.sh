#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# gpu_bench.sh - dlaunch's GPU benchmarks, for a machine with NVIDIA GPUs
# (not run by `make bench`, which measures the CPU paths).
#
#   bench/gpu_bench.sh [--quick] [--python /path/to/python-with-cuda-torch]
#
# Builds with CUDA into build/gpu (BUILD=DIR to use another, already built
# one, e.g. a build carried to a machine without a compiler), then
# bench/bench.py gpu measures:
#   - NCCL communicator creation at world size 1: dist_init plus the first
#     one-element all-reduce (dist_bench --device cuda --init-only) vs
#     torch.distributed.init_process_group('nccl') plus its first
#     all_reduce (PyTorch creates the communicator lazily there);
#   - dlaunch-train --device cuda vs bench/ddp_mlp.py --device cuda
#     (PyTorch DDP, nccl), one rank per visible GPU: samples/s, accuracy;
#   - the wall time of a one-step training job from the launcher's start:
#     dlaunch --standalone ... dlaunch-train --max-steps 1 vs torchrun
#     --standalone ... ddp_mlp.py --max-steps 1.
# The GPUs are those the CUDA runtime sees (dist_bench --device-count:
# CUDA_VISIBLE_DEVICES applies). Results: bench/results/gpu.json (with the
# GPUs' names), and a "gpu" section in the table that `bench/bench.py
# report` prints. The PyTorch side needs a CUDA build of torch (Debian's
# python3-torch is CPU only): pass --python, else only the dlaunch side is
# measured and the report says so.
set -eu
cd "$(dirname "$0")/.."

if [ -n "${BUILD:-}" ]; then
	build=$BUILD
else
	build=build/gpu
	NVCC=$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
	if [ ! -x "$NVCC" ]; then
		echo "gpu_bench: nvcc not found (install the CUDA toolkit, or" \
			"pass BUILD=DIR of a CUDA build)" >&2
		exit 1
	fi
	make -s BUILD="$build" NVCC="$NVCC" all bench-build
fi
if ! count=$("$build/bench/dist_bench" --device-count); then
	echo "gpu_bench: $build/bench/dist_bench --device-count failed" >&2
	exit 1
fi
case "$count" in
'{"cuda_devices": 0,'*)
	echo "gpu_bench: the CUDA runtime sees no GPU ($count; check the" \
		"driver and CUDA_VISIBLE_DEVICES)" >&2
	exit 1
	;;
esac
echo "gpu_bench: $count"
exec /usr/bin/python3 bench/bench.py --build "$build" "$@" gpu
