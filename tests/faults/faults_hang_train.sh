#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_hang_train.sh - dlaunch-train tells where it is when one rank
# hangs (issue 21, the worker's side): its collective flight recorder and
# its answer to the control channel's `dump` (docs/worker-protocol.md).
# hang_harness.py plays the agent over socket pairs for ranks laid out as
# nodes of 2 (LOCAL_RANK), and dumps every rank:
#
#   injected   rank k hangs before an all-reduce (DLAUNCH_DIST_FAULT
#              CALL:sleep, :loop, :read), k over every position of a
#              2 x 2 job, and in 2 x 1 and 4 x 2 jobs: every rank answers
#              the dump, the hung one included (its main thread is stuck,
#              the channel's reader answers); its last entered collective
#              is below every other rank's, and all others are inside the
#              next one; every rank gives each sequence number the same
#              collective
#   stopped    rank k SIGSTOPped: it cannot answer, the others do, each
#              inside a collective
#   healthy    a dump of a running job: every rank answers, and the job
#              runs to its end
#   entries    DLAUNCH_FLIGHT_ENTRIES: 3 keeps 3 entries, 0 none (the dump
#              still answers), a bad value is refused at start
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-train

HARNESS="$PY $FAULTS_DIR/hang_harness.py --train $BIN/dlaunch-train"
# a job that would run for minutes: the hang comes first
ARGS=(--data synthetic:2048 --model 64-64-10 --global-batch 96 --seed 7
	--max-steps 100000 --log-every 4)

# harness NAME ARGS...: one harness run, its JSON in $TEST_TMP/NAME.json
harness() {
	local name=$1
	shift
	marked timeout -k 5 90 $HARNESS --log "$TEST_TMP/$name" "$@" -- \
		"${ARGS[@]}" >"$TEST_TMP/$name.json" 2>"$TEST_TMP/$name.err"
}

# injected KIND WORLD VICTIM CALL
injected() {
	local kind=$1 world=$2 victim=$3 call=$4 name j
	name=$kind.w$world.r$victim
	j=$TEST_TMP/$name.json
	if DLAUNCH_DIST_FAULT=$call:$kind DLAUNCH_DIST_FAULT_RANK=$victim \
		harness "$name" --mode hang --world "$world" \
		--nproc-per-node 2 --victim "$victim"; then
		ok "$kind, rank $victim of $world: it answered the dump; its" \
			"last collective $(field "$j" last_entered "$victim")," \
			"the others inside seq $(field "$j" stuck_seq)" \
			"(answers in $(field "$j" dump_ms) ms)"
	else
		not_ok "$kind, rank $victim of $world: $(cat "$j") $(tail -n 3 "$TEST_TMP/$name.err")"
	fi
}

# --- injected hangs, every rank position of a 2 x 2 job; the hang
# strikes at different points of a step (gradient buckets, the loss
# report) as CALL varies
for kind in sleep loop read; do
	for victim in 0 1 2 3; do
		injected "$kind" 4 "$victim" $((17 + 3 * victim))
	done
done
injected read 2 1 9
injected loop 8 5 23

# --- SIGSTOP: the stopped rank cannot answer; the others can
for victim in 0 3; do
	name=stop.r$victim
	j=$TEST_TMP/$name.json
	if harness "$name" --mode hang --stop --at-step 5 --world 4 \
		--nproc-per-node 2 --victim "$victim"; then
		ok "stopped rank $victim: no answer from it, the others answered" \
			"inside a collective ($(field "$j" dump_ms) ms)"
	else
		not_ok "stopped rank $victim: $(cat "$j")"
	fi
done

# --- a healthy job: dumped at step 60, then on to its end (2000 steps:
# a second or more, so that no rank has finished when the dump comes)
ARGS=(--data synthetic:2048 --model 64-64-10 --global-batch 96 --seed 7
	--max-steps 2000 --log-every 4)
j=$TEST_TMP/healthy.json
if harness healthy --mode dump --at-step 60 --world 4 --nproc-per-node 2; then
	ok "healthy: every rank answered the dump and the job ran to step" \
		"$(field "$j" summary steps)"
	check_eq "healthy: 64 entries kept by default (more than 64 run)" \
		'{"0": 64, "1": 64, "2": 64, "3": 64}' "$(field "$j" entries)"
else
	not_ok "healthy: $(cat "$j")"
fi
j=$TEST_TMP/three.json
if DLAUNCH_FLIGHT_ENTRIES=3 harness three --mode dump --at-step 10 --world 2; then
	check_eq "DLAUNCH_FLIGHT_ENTRIES=3: 3 entries in each dump" \
		'{"0": 3, "1": 3}' "$(field "$j" entries)"
else
	not_ok "DLAUNCH_FLIGHT_ENTRIES=3: $(cat "$j")"
fi
j=$TEST_TMP/off.json
if DLAUNCH_FLIGHT_ENTRIES=0 harness off --mode dump --at-step 10 --world 2; then
	check_eq "DLAUNCH_FLIGHT_ENTRIES=0: the dump answers, with no flight" \
		'{"0": 0, "1": 0}' "$(field "$j" entries)"
else
	not_ok "DLAUNCH_FLIGHT_ENTRIES=0: $(cat "$j")"
fi
DLAUNCH_FLIGHT_ENTRIES=lots marked timeout 30 "$BIN/dlaunch-train" \
	--device cpu "${ARGS[@]}" >"$TEST_TMP/bad.log" 2>&1
rc=$?
check_eq "DLAUNCH_FLIGHT_ENTRIES=lots: refused at start (exit 2)" 2 "$rc"
check "DLAUNCH_FLIGHT_ENTRIES=lots: the message names the variable" \
	grep -q "DLAUNCH_FLIGHT_ENTRIES='lots' is not an integer" "$TEST_TMP/bad.log"
finish
