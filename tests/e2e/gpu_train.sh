#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu_train.sh - dlaunch-train on CUDA under dlaunch, end to end. Needs a
# CUDA build and a GPU; skipped otherwise with one line saying why.
#   - one rank per GPU trains on cuda (--device auto picks it);
#   - more ranks than GPUs: --device auto trains on the CPU and says so in
#     one line, --device cuda fails at once, suggesting nothing it refuses;
#   - Fashion-MNIST: the CUDA run's test accuracy within 0.5 point of the
#     CPU run's with the same options, 3 epochs (when the data set is in
#     $FASHION_MNIST_DIR, default the Debian package's folder);
#   - kill -9 and resume on CUDA: the final checkpoint identical, byte for
#     byte, to an uninterrupted CUDA run's;
#   - with two GPUs or more: one DDP step over NCCL on a 32 + 31 split
#     gives the parameters of one process on the whole batch (1e-5), with
#     and without SyncBatchNorm.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_train.sh"

need_bin dlaunch-train dlaunch
DIST_BENCH=${DLAUNCH_BUILD:-$BIN/..}/bench/dist_bench
if [ ! -x "$DIST_BENCH" ]; then
	# make all builds it: a missing one is a broken build, not a machine
	# without a GPU
	not_ok "dlaunch-train on CUDA: $DIST_BENCH (which counts the GPUs) missing: build it with make"
	finish
fi
gpus=$("$DIST_BENCH" --device-count |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["cuda_devices"])')
if [ "${gpus:-0}" -eq 0 ]; then
	skip "dlaunch-train on CUDA: the CUDA runtime sees no GPU (or a build without CUDA)"
	finish
fi
echo "# $("$DIST_BENCH" --device-count)"

# dl N LOG ARGS...: N ranks of dlaunch-train under dlaunch --standalone
# (--max-restarts $MAX_RESTARTS, default 0), bounded
dl() {
	local n=$1 log=$2
	shift 2
	OMP_NUM_THREADS=1 timeout -k 5 600 "$BIN/dlaunch" --standalone \
		--nproc-per-node "$n" --max-restarts "${MAX_RESTARTS:-0}" \
		--no-python "$TRAIN" --timeout 60s "$@" >"$log" 2>&1
}
SMALL=(--data synthetic:4096 --model 32-64-4 --global-batch 64 --log-every 1000)

# ---- one rank per GPU ------------------------------------------------------
dl 1 "$TEST_TMP/one.log" "${SMALL[@]}" --epochs 2
check_eq "1 rank, 1 GPU: exits 0" 0 $?
check_eq "1 rank, 1 GPU: --device auto trains on cuda" cuda \
	"$(summary_field "$TEST_TMP/one.log" device)"
check "1 rank, 1 GPU: test accuracy above 85%" \
	below 0.85 "$(summary_field "$TEST_TMP/one.log" test_accuracy)"

# ---- more ranks than GPUs --------------------------------------------------
over=$((gpus + 1))
dl "$over" "$TEST_TMP/auto.log" "${SMALL[@]}" --epochs 1
check_eq "$over ranks, $gpus GPU(s), --device auto: exits 0" 0 $?
check_eq "$over ranks, $gpus GPU(s), --device auto: trains on the cpu" cpu \
	"$(summary_field "$TEST_TMP/auto.log" device)"
check_eq "$over ranks, $gpus GPU(s), --device auto: says so in one line" 1 \
	"$(grep -c "$over rank(s) on this node (LOCAL_WORLD_SIZE) but $gpus visible CUDA device(s).*training on the CPU with the tcp backend" "$TEST_TMP/auto.log")"
dl "$over" "$TEST_TMP/cuda.log" "${SMALL[@]}" --epochs 1 --device cuda
rc=$?
check "$over ranks, $gpus GPU(s), --device cuda: fails" test "$rc" -ne 0
check "$over ranks, $gpus GPU(s), --device cuda: says why" \
	grep -q -- "--device cuda: $over rank(s) on this node" "$TEST_TMP/cuda.log"
check "$over ranks, $gpus GPU(s), --device cuda: suggests no tcp" \
	bash -c "! grep -qi 'use the tcp' '$TEST_TMP/cuda.log'"

# ---- Fashion-MNIST: CUDA against the CPU -----------------------------------
# FASHION_MNIST_DIR: the IDX files where the Debian package is not installed
fm=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ -f "$fm/train-images-idx3-ubyte.gz" ] || [ -f "$fm/train-images-idx3-ubyte" ]; then
	dl 1 "$TEST_TMP/fm-cpu.log" --data-dir "$fm" --epochs 3 --device cpu
	dl 1 "$TEST_TMP/fm-cuda.log" --data-dir "$fm" --epochs 3 --device cuda
	a=$(summary_field "$TEST_TMP/fm-cpu.log" test_accuracy)
	b=$(summary_field "$TEST_TMP/fm-cuda.log" test_accuracy)
	echo "# fashion-mnist, 3 epochs, 1 rank: cpu $a, cuda $b"
	check "fashion-mnist: cuda accuracy $b within 0.5 point of the cpu's $a" \
		python3 -c 'import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 0.005)' "$a" "$b"
else
	skip "fashion-mnist on cuda against the cpu: no data set in $fm (install dataset-fashion-mnist or set FASHION_MNIST_DIR)"
fi

# ---- kill -9 and resume on CUDA --------------------------------------------
DET=("${SMALL[@]}" --epochs 3 --checkpoint-every 20 --device cuda)
dl 1 "$TEST_TMP/ref.log" "${DET[@]}" --checkpoint-dir "$TEST_TMP/ref"
ref=$TEST_TMP/ref/ckpt-000000000192.dlck
check "cuda determinism: the uninterrupted run ends with a step-192 checkpoint" test -f "$ref"
DLAUNCH_TRAIN_CRASH_AT_STEP=75 MAX_RESTARTS=1 \
	dl 1 "$TEST_TMP/crash.log" "${DET[@]}" --checkpoint-dir "$TEST_TMP/crash"
check_eq "cuda determinism: dlaunch --max-restarts 1 run exits 0" 0 $?
check "cuda determinism: the rank was SIGKILLed at step 75" \
	grep -q 'DLAUNCH_TRAIN_CRASH_AT_STEP=75: killing myself' "$TEST_TMP/crash.log"
check "cuda determinism: the restart resumed from a checkpoint" \
	grep -Eq 'resumed from .*ckpt-0000000000(60|75)\.dlck' "$TEST_TMP/crash.log"
check "cuda determinism: final checkpoint identical to the uninterrupted run's" \
	cmp -s "$ref" "$TEST_TMP/crash/ckpt-000000000192.dlck"

# ---- DDP over NCCL ---------------------------------------------------------
if [ "$gpus" -ge 2 ]; then
	for bn in "" --batch-norm; do
		name=${bn:-plain}
		ONE=(--data synthetic:630 --model 32-16-4 --global-batch 63
			--max-steps 1 --lr-schedule constant --device cuda $bn)
		dl 1 "$TEST_TMP/one-$name.log" "${ONE[@]}" --checkpoint-dir "$TEST_TMP/one-$name"
		dl 2 "$TEST_TMP/dp-$name.log" "${ONE[@]}" --checkpoint-dir "$TEST_TMP/dp-$name"
		check "nccl ($name): 2 ranks train on nccl" \
			grep -q 'backend nccl' "$TEST_TMP/dp-$name.log"
		a=$(newest_ckpt "$TEST_TMP/one-$name")
		b=$(newest_ckpt "$TEST_TMP/dp-$name")
		if [ -n "$a" ] && [ -n "$b" ]; then
			diff=$(ckpt_params_maxdiff "$a" "$b")
			check "nccl ($name): 2 ranks on a 32+31 split match 1 process (max diff $diff)" \
				below "$diff" 1e-5
		else
			not_ok "nccl ($name): runs left no checkpoint"
			tail -n 5 "$TEST_TMP/one-$name.log" "$TEST_TMP/dp-$name.log"
		fi
	done
else
	skip "ddp over nccl against one process: needs 2 GPUs, $gpus visible"
fi
finish
