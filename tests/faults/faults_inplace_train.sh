#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_inplace_train.sh - dlaunch-train keeps its process, parameters and
# optimizer state through a membership change (issue 20, the worker side of
# docs/worker-protocol.md). inplace_harness.py plays the agent over socket
# pairs; each case ends with the final parameters compared, bit for bit
# (ckpt_tool.py digests of rank 0's last checkpoint, and the trainer's own
# state digest), with a reference run that followed the same membership
# schedule by checkpoint and restart:
#
#   abort        abort at step 3, re-form with the same 3 ranks
#   shrink       kill -9 of rank 1 at step 4: the 2 others re-form
#   respawn      kill -9 of rank 2 at step 4: a new process takes rank 2
#                with its checkpoint directory removed, and gets the state
#                from a peer
#   double       a worker dies during the re-form: a second abort reaches
#                the others inside the new group's bootstrap
#   grow         a new process joins as a third rank, with no checkpoint
#                directory: it gets the state from a peer
#   fault        a rank fails in the middle of the gradient all-reduce at
#                every stage of the ring (DLAUNCH_DIST_FAULT), some ranks
#                having finished it and others not: the survivors agree on
#                the step and parameters, 20 of 20 trials
#   batch norm   the same faults with --batch-norm: the running statistics
#                the dropped step updated are put back
#   diverged     two ranks at the same step with different states (seeds):
#                an error on every rank, not a silent choice
#   garbage      a line that is not JSON on the channel: that worker goes
#                on as a plain one, the job ends normally
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-train

CK="$PY $FAULTS_DIR/ckpt_tool.py"
HARNESS="$PY $FAULTS_DIR/inplace_harness.py --train $BIN/dlaunch-train"
# the last layer's bucket goes through the ring (256x256 > 64 KiB), so a
# fault in it strikes the last collective of a step
ARGS=(--data synthetic:2048 --model 256-256-10 --global-batch 96 --seed 7
	--max-steps 12 --log-every 4)

digest() { $CK digest "$($CK newest "$1")" 2>/dev/null | sed 's/.*params=//'; }
below() { $PY -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"; }

# ref N DIR LOG ARGS...: N plain ranks (no channel) with checkpoints in DIR
ref() {
	local n=$1 dir=$2 log=$3 port r rc=0 pids=()
	shift 3
	port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	: >"$log"
	for ((r = 0; r < n; r++)); do
		RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n \
			MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
			marked timeout -k 5 60 "$BIN/dlaunch-train" --device cpu \
			--timeout 10s --checkpoint-dir "$dir" "${ARGS[@]}" "$@" \
			>>"$log" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do wait "$r" || rc=1; done
	return $rc
}

# harness NAME ARGS...: one harness run, its JSON in $TEST_TMP/NAME.json
harness() {
	local name=$1
	shift
	marked timeout -k 5 90 $HARNESS --log "$TEST_TMP/$name" \
		--ckpt-dir "$TEST_TMP/$name.ck" "$@" -- "${ARGS[@]}" ${EXTRA:-} \
		>"$TEST_TMP/$name.json" 2>"$TEST_TMP/$name.err"
}

# the plain run every same-world case must match
ref 3 "$TEST_TMP/plain" "$TEST_TMP/plain.log" ||
	not_ok "the reference run failed: $(tail -n 3 "$TEST_TMP/plain.log")"
plain=$(digest "$TEST_TMP/plain")
check "the reference run wrote its final checkpoint" test -n "$plain"

# --- abort, same ranks: the harness aborts when it sees step 3, so the
# run is long enough (80 steps) for it to be there well before the end
ref 3 "$TEST_TMP/plain80" "$TEST_TMP/plain80.log" --max-steps 80 ||
	not_ok "the 80-step reference run failed"
if EXTRA="--max-steps 80" harness abort --mode abort --world 3 --at-step 3; then
	j=$TEST_TMP/abort.json
	ok "abort: the job ran to its end through the abort"
	check_eq "abort: every rank answered aborted for round 1" \
		"[1, 1, 1]" "$(field "$j" aborted_rounds)"
	# one step for every rank: 3, or a later one when the ranks finished
	# another step before the abort reached them
	steps=$(field "$j" reformed_steps)
	check "abort: every rank re-formed for round 2 at one step ($steps)" \
		bash -c '[[ $1 =~ ^\[([0-9]+)\]$ ]] && [ "${BASH_REMATCH[1]}" -ge 3 ]' _ "$steps"
	check_eq "abort: no new process" 0 "$(field "$j" new_processes)"
	check_eq "abort: final parameters equal the uninterrupted run's" \
		"$(digest "$TEST_TMP/plain80")" \
		"$(digest "$TEST_TMP/abort.ck.rank0")"
	check "abort: the trainer's state digest agrees" \
		grep -qF "$(grep -o '"state_digest": "[0-9a-f]*"' \
			"$TEST_TMP/plain80.log")" "$TEST_TMP/abort.rank0.1"
else
	not_ok "abort: $(cat "$TEST_TMP/abort.json")"
fi

# --- shrink: rank 1 killed, 2 ranks go on; the reference switches world
# size by checkpoint and restart at the step the survivors resumed at
if DLAUNCH_DIST_FAULT=4:0:kill DLAUNCH_DIST_FAULT_RANK=1 \
	harness shrink --mode shrink --world 3 --victim 1 --trigger fault; then
	j=$TEST_TMP/shrink.json
	at=$(field "$j" reformed_steps 0)
	ok "shrink: the two survivors finished the job (resumed at step $at)"
	check_eq "shrink: world size 2 after the re-form" 2 \
		"$(field "$j" summary world_size)"
	check_eq "shrink: both survivors kept their processes" 2 \
		"$($PY -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["survivor_pids_kept"]))' "$j")"
	ref 3 "$TEST_TMP/shrink_ref" "$TEST_TMP/shrink_ref1.log" \
		--max-steps "$at" &&
		ref 2 "$TEST_TMP/shrink_ref" "$TEST_TMP/shrink_ref2.log" ||
		not_ok "shrink: the reference run failed"
	check_eq "shrink: final parameters equal the checkpoint-and-restart run's" \
		"$(digest "$TEST_TMP/shrink_ref")" \
		"$(digest "$TEST_TMP/shrink.ck.rank0")"
else
	not_ok "shrink: $(cat "$TEST_TMP/shrink.json")"
fi

# --- respawn: rank 2 killed and started again without a checkpoint
if DLAUNCH_DIST_FAULT=4:0:kill DLAUNCH_DIST_FAULT_RANK=2 \
	harness respawn --mode respawn --world 3 --victim 2 --trigger fault; then
	j=$TEST_TMP/respawn.json
	ok "respawn: the job ran to its end with a new rank 2"
	check_eq "respawn: one new process" 1 "$(field "$j" new_processes)"
	check "respawn: the new rank 2 took the state from a peer" \
		grep -q "rank 2: took the state of step" "$TEST_TMP/respawn.rank2.2"
	check "respawn: its checkpoint directory was never there" \
		test ! -e "$TEST_TMP/respawn.ck.rank2"
	check_eq "respawn: final parameters equal the uninterrupted run's" \
		"$plain" "$(digest "$TEST_TMP/respawn.ck.rank0")"
else
	not_ok "respawn: $(cat "$TEST_TMP/respawn.json")"
fi

# --- double: a worker dies while the others form the new group; the
# second abort must reach them inside the bootstrap (their --timeout is
# 30 s: waiting it out fails the check), and they re-form without it
if DLAUNCH_DIST_FAULT=3:0 DLAUNCH_DIST_FAULT_RANK=0 \
	harness double --mode double --world 3 --victim 2 --trigger fault \
	--timeout 30; then
	j=$TEST_TMP/double.json
	at=$(field "$j" reformed_steps 0)
	ok "double: the two others finished the job (resumed at step $at)"
	check_eq "double: they answered the second abort (round 2)" "[2, 2]" \
		"$(field "$j" aborted_rounds)"
	check "double: the second abort cut the bootstrap short ($(field "$j" second_abort_to_reformed_ms) ms)" \
		below "$(field "$j" second_abort_to_reformed_ms)" 10000
	ref 3 "$TEST_TMP/double_ref" "$TEST_TMP/double_ref1.log" \
		--max-steps "$at" &&
		ref 2 "$TEST_TMP/double_ref" "$TEST_TMP/double_ref2.log" ||
		not_ok "double: the reference run failed"
	check_eq "double: final parameters equal the checkpoint-and-restart run's" \
		"$(digest "$TEST_TMP/double_ref")" \
		"$(digest "$TEST_TMP/double.ck.rank0")"
else
	not_ok "double: $(cat "$TEST_TMP/double.json")"
fi

# --- grow: a new process joins as rank 2 of 3, with no checkpoint at all
if DLAUNCH_DIST_FAULT=4:0 DLAUNCH_DIST_FAULT_RANK=0 \
	harness grow --mode grow --world 2 --trigger fault; then
	j=$TEST_TMP/grow.json
	at=$(field "$j" reformed_steps 0)
	ok "grow: the job ran to its end with a third rank (joined at step $at)"
	check_eq "grow: world size 3 after the re-form" 3 \
		"$(field "$j" summary world_size)"
	check "grow: the new rank took the state from a peer" \
		grep -q "rank 2: took the state of step $at" "$TEST_TMP/grow.rank2.2"
	ref 2 "$TEST_TMP/grow_ref" "$TEST_TMP/grow_ref1.log" \
		--max-steps "$at" &&
		ref 3 "$TEST_TMP/grow_ref" "$TEST_TMP/grow_ref2.log" ||
		not_ok "grow: the reference run failed"
	check_eq "grow: final parameters equal the checkpoint-and-restart run's" \
		"$(digest "$TEST_TMP/grow_ref")" \
		"$(digest "$TEST_TMP/grow.ck.rank0")"
else
	not_ok "grow: $(cat "$TEST_TMP/grow.json")"
fi

# --- fault in the all-reduce at every stage: 3 ranks, one ring all-reduce
# per step, plan steps 0-1 reduce-scatter and 2-3 all-gather; the failing
# rank and the step of training vary too
good=0 mixed=0 trials=20
for ((i = 0; i < trials; i++)); do
	call=$((3 + i % 5)) stage=$((i % 4)) who=$((i % 3))
	name=fault$i
	if ! DLAUNCH_DIST_FAULT=$call:$stage DLAUNCH_DIST_FAULT_RANK=$who \
		harness "$name" --mode fault --world 3; then
		echo "# trial $i (call $call stage $stage rank $who): $(cat "$TEST_TMP/$name.json")"
		continue
	fi
	verdict=$($PY - "$TEST_TMP/$name.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
a, r = d["aborted_steps"], d["reformed_steps"]
ok = len(r) == 1 and r[0] == max(a) and max(a) - min(a) <= 1
print("ok" if ok else "bad", "mixed" if min(a) != max(a) else "same")
PY
)
	if [ "${verdict% *}" = ok ] &&
		[ "$(digest "$TEST_TMP/$name.ck.rank0")" = "$plain" ]; then
		good=$((good + 1))
	else
		echo "# trial $i: $verdict $(cat "$TEST_TMP/$name.json")"
	fi
	[ "${verdict#* }" = mixed ] && mixed=$((mixed + 1))
done
check_eq "fault: survivors agreed on step and parameters in every trial" \
	"$trials of $trials" "$good of $trials"
check "fault: some trials struck when ranks had finished the step and others not ($mixed)" \
	test "$mixed" -gt 0

# --- batch norm: the forward pass of the dropped step has updated the
# running statistics on some ranks; they are put back, so the replicas still
# agree, bit for bit with an uninterrupted run
ref 3 "$TEST_TMP/bn_plain" "$TEST_TMP/bn_plain.log" --batch-norm ||
	not_ok "batch norm: the reference run failed"
bn_plain=$(digest "$TEST_TMP/bn_plain")
good=0
for stage in 0 1 2 3; do
	name=bn$stage
	if EXTRA=--batch-norm DLAUNCH_DIST_FAULT=4:$stage \
		DLAUNCH_DIST_FAULT_RANK=$((stage % 3)) \
		harness "$name" --mode fault --world 3 &&
		[ "$(digest "$TEST_TMP/$name.ck.rank0")" = "$bn_plain" ]; then
		good=$((good + 1))
	else
		echo "# batch norm, stage $stage: $(cat "$TEST_TMP/$name.json")"
	fi
done
check_eq "batch norm: a fault at every stage, the replicas agree and match the uninterrupted run" \
	"4 of 4" "$good of 4"

# --- replicas that differ at the same step are an error, never merged:
# two ranks started with different seeds both stand at step 0
port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for r in 0 1; do
	RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
		MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
		marked timeout -k 5 60 "$BIN/dlaunch-train" --device cpu \
		--timeout 10s --data synthetic:512 --model 16-16-4 \
		--max-steps 2 --seed $((r + 1)) >"$TEST_TMP/diverged$r.log" 2>&1 &
	pids+=($!)
done
codes=""
for p in "${pids[@]}"; do
	wait "$p"
	codes="$codes $?"
done
check_eq "diverged replicas: both ranks exit with status 1" " 1 1" "$codes"
check "diverged replicas: the message says the replicas diverged" \
	grep -q "replicas diverged" "$TEST_TMP/diverged0.log"

# --- garbage on the channel
if EXTRA="--max-steps 80" harness garbage --mode garbage --world 2 \
	--victim 1 --at-step 2; then
	ok "garbage: the job ended normally"
	check "garbage: the worker said once that it carries on without the channel" \
		test "$(grep -c 'carrying on without it' "$TEST_TMP/garbage.rank1.1")" -eq 1
else
	not_ok "garbage: $(cat "$TEST_TMP/garbage.json")"
fi

finish
