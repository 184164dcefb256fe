#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# train_ddp.sh - dlaunch-train across ranks (under dlaunch when built, by
# hand otherwise), on small synthetic data:
#   - 2 ranks train and report a JSON summary with a good accuracy;
#   - DDP averaging: one step at world size 2 with an odd global batch
#     (split 32 + 31) gives the parameters of one process on the whole
#     batch, within float rounding; the same holds with SyncBatchNorm
#     (statistics over the global batch), which training at 2 ranks uses;
#   - determinism: a rank SIGKILLed mid-training, restarted and resumed from
#     the checkpoint ends with a final checkpoint identical, byte for byte,
#     to an uninterrupted run's;
#   - a world size that changes between runs continues from the checkpoint
#     with the same global batch.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_train.sh"

need_bin dlaunch-train dlaunch
SMALL=(--data synthetic:4096 --model 32-64-4 --global-batch 64 --log-every 1000)

# ---- 2 ranks train ---------------------------------------------------------
ranks 2 "$TEST_TMP/two.log" "${SMALL[@]}" --epochs 2
check_eq "2 ranks: training exits 0" 0 $?
check_eq "2 ranks: the summary reports world size 2" 2 \
	"$(summary_field "$TEST_TMP/two.log" world_size)"
check_eq "2 ranks: 2 epochs of 64 steps" 128 "$(summary_field "$TEST_TMP/two.log" steps)"
check "2 ranks: test accuracy above 85%" \
	below 0.85 "$(summary_field "$TEST_TMP/two.log" test_accuracy)"
ranks 2 "$TEST_TMP/progress.log" "${SMALL[@]}" --epochs 1 --log-every 10
check "2 ranks: rank 0 prints progress with loss, samples/s and eta" \
	grep -Eq 'epoch 1/1 step [0-9]+/64 loss [0-9.]+ samples/s [0-9]+ eta ' \
	"$TEST_TMP/progress.log"
check "2 ranks: test accuracy each epoch" \
	grep -q 'epoch 1/2 done: .*test accuracy' "$TEST_TMP/two.log"

# ---- DDP equals one process on the global batch ------------------------------
for bn in "" --batch-norm; do
	name=${bn:-plain}
	ONE=(--data synthetic:630 --model 32-16-4 --global-batch 63 --max-steps 1
		--lr-schedule constant $bn)
	ranks_manual 1 "$TEST_TMP/one-$name.log" "${ONE[@]}" \
		--checkpoint-dir "$TEST_TMP/one-$name"
	ranks 2 "$TEST_TMP/dp-$name.log" "${ONE[@]}" --checkpoint-dir "$TEST_TMP/dp-$name"
	a=$(newest_ckpt "$TEST_TMP/one-$name")
	b=$(newest_ckpt "$TEST_TMP/dp-$name")
	if [ -n "$a" ] && [ -n "$b" ]; then
		diff=$(ckpt_params_maxdiff "$a" "$b")
		check "DDP ($name): 2 ranks on a 32+31 split match 1 process (max diff $diff)" \
			below "$diff" 1e-6
	else
		not_ok "DDP ($name): runs left no checkpoint"
		tail -n 5 "$TEST_TMP/one-$name.log" "$TEST_TMP/dp-$name.log"
	fi
done
ranks 2 "$TEST_TMP/bn.log" "${SMALL[@]}" --epochs 2 --batch-norm
check_eq "SyncBatchNorm: 2 ranks train with --batch-norm" 0 $?
check "SyncBatchNorm: test accuracy above 85%" \
	below 0.85 "$(summary_field "$TEST_TMP/bn.log" test_accuracy)"

# ---- determinism under kill -9 ----------------------------------------------
DET=("${SMALL[@]}" --epochs 3 --checkpoint-every 20)
ranks 2 "$TEST_TMP/ref.log" "${DET[@]}" --checkpoint-dir "$TEST_TMP/ref"
ref=$TEST_TMP/ref/ckpt-000000000192.dlck
check "determinism: the uninterrupted run ends with a step-192 checkpoint" test -f "$ref"
if [ -x "$BIN/dlaunch" ]; then
	DLAUNCH_TRAIN_CRASH_AT_STEP=75 DLAUNCH_TRAIN_CRASH_RANK=1 MAX_RESTARTS=1 \
		PLAIN=1 ranks 2 "$TEST_TMP/crash.log" "${DET[@]}" --checkpoint-dir "$TEST_TMP/crash"
	check_eq "determinism: dlaunch --max-restarts 1 run exits 0" 0 $?
	# the same crash with the control channel: rank 0 stays, the new rank
	# 1 takes its state from rank 0 (docs/worker-protocol.md)
	DLAUNCH_TRAIN_CRASH_AT_STEP=75 DLAUNCH_TRAIN_CRASH_RANK=1 MAX_RESTARTS=1 \
		ranks 2 "$TEST_TMP/inplace.log" "${DET[@]}" --checkpoint-dir "$TEST_TMP/inplace"
	check_eq "determinism in place: dlaunch --max-restarts 1 run exits 0" 0 $?
	check "determinism in place: rank 0 re-formed in place" \
		grep -q 'rank 0 of 2: re-formed in place' "$TEST_TMP/inplace.log"
	check "determinism in place: the new rank 1 took its state from rank 0" \
		grep -Eq 'rank 1: took the state of step 7[45] from rank 0' "$TEST_TMP/inplace.log"
	check "determinism in place: final checkpoint identical to the uninterrupted run's" \
		cmp -s "$ref" "$TEST_TMP/inplace/ckpt-000000000192.dlck"
else
	DLAUNCH_TRAIN_CRASH_AT_STEP=75 DLAUNCH_TRAIN_CRASH_RANK=1 \
		ranks_manual 2 "$TEST_TMP/crash.log" "${DET[@]}" --checkpoint-dir "$TEST_TMP/crash"
	TORCHELASTIC_RESTART_COUNT=1 ranks_manual 2 "$TEST_TMP/crash2.log" "${DET[@]}" \
		--checkpoint-dir "$TEST_TMP/crash"
	cat "$TEST_TMP/crash2.log" >>"$TEST_TMP/crash.log"
fi
check "determinism: rank 1 was SIGKILLed at step 75" \
	grep -q 'DLAUNCH_TRAIN_CRASH_AT_STEP=75: killing myself' "$TEST_TMP/crash.log"
# the plain ranks (and those started by hand) restart from a checkpoint
check "determinism: the restart resumed from a checkpoint" \
	grep -Eq 'resumed from .*ckpt-0000000000(60|75)\.dlck' "$TEST_TMP/crash.log"
check "determinism: final checkpoint identical to the uninterrupted run's" \
	cmp -s "$ref" "$TEST_TMP/crash/ckpt-000000000192.dlck"

# ---- the world size changes between runs ----------------------------------------
ranks 2 "$TEST_TMP/ws1.log" "${DET[@]}" --max-steps 100 --checkpoint-dir "$TEST_TMP/ws"
ranks 3 "$TEST_TMP/ws2.log" "${DET[@]}" --checkpoint-dir "$TEST_TMP/ws"
check_eq "world size 2 -> 3: the second run exits 0" 0 $?
check "world size 2 -> 3: resumed from the step-100 checkpoint" \
	grep -q 'resumed from .*ckpt-000000000100.dlck: step 100' "$TEST_TMP/ws2.log"
check_eq "world size 2 -> 3: same global batch, same 192 steps in all" 192 \
	"$(summary_field "$TEST_TMP/ws2.log" steps)"
check_eq "world size 2 -> 3: summary reports world size 3" 3 \
	"$(summary_field "$TEST_TMP/ws2.log" world_size)"
check_eq "world size 2 -> 3: global batch still 64" 64 \
	"$(summary_field "$TEST_TMP/ws2.log" global_batch)"
diff=$(ckpt_params_maxdiff "$ref" "$TEST_TMP/ws/ckpt-000000000192.dlck")
check "world size 2 -> 3: ends close to the 2-rank run (max diff $diff)" below "$diff" 1e-3

finish
