#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_progress.sh - --progress-timeout: a worker that stops itself
# (SIGSTOP) is taken as hung and the group restarts, in static mode and
# with a rendezvous (--standalone); touching DLAUNCH_PROGRESS_FILE counts as
# progress; with no restart left the report names the hang; without the
# option a silent worker runs on.
#
# Alone for tests/run.sh -j (workers must show progress within 1 to 3 s of
# their start): nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
DL=$BIN/dlaunch
need_bin dlaunch
W=$PROGS/agent_progress_worker.sh

# restarted_ranks DIR: the ranks started with restart count 1
restarted_ranks() { awk '$2 == 1 {print $1}' "$1/starts" | sort -n | tr '\n' ' ' | sed 's/ $//'; }

# -- a worker stopped with SIGSTOP: detected, the group restarts, success
for mode in static standalone; do
	d=$TEST_TMP/stop-$mode
	mkdir -p "$d"
	extra=()
	[ "$mode" = standalone ] && extra=(--standalone)
	timeout 60 "$DL" "${extra[@]}" --nproc-per-node 2 --max-restarts 1 \
		--progress-timeout 1s --shutdown-timeout 2 \
		"$W" stop-once "$d" >"$d/out" 2>&1
	check_eq "$mode: a stopped worker's group restarts, the job succeeds" 0 $?
	check_eq "$mode: both ranks started again with TORCHELASTIC_RESTART_COUNT=1" \
		"0 1" "$(restarted_ranks "$d")"
	check "$mode: the agent names the hung rank" \
		grep -Eq 'rank 1 \(pid [0-9]+\) showed no progress for 1 s' "$d/out"
	check "$mode: the stopped worker and the others are gone" \
		wait_for 5 no_marked_left
	[ "$FAILED" -gt 0 ] && sed 's/^/# /' "$d/out"
done

# -- no restart left: the job fails and the report names the hang
d=$TEST_TMP/fail
mkdir -p "$d"
timeout 60 "$DL" --standalone --nproc-per-node 2 --progress-timeout 0.5 \
	--shutdown-timeout 2 "$W" stop "$d" >"$d/out" 2>&1
check_eq "no restart left: the job fails" 1 $?
check "no restart left: the report says rank 0 made no progress, exit code -1" \
	bash -c "grep -Eq 'rank +: 0 ' '$d/out' && grep -Eq 'exitcode +: -1\$' '$d/out' && grep -q 'no progress for 0.5 s (hung?)' '$d/out'"
check "no restart left: the report keeps the worker's last stderr" \
	grep -q 'rank 0 about to stop itself' "$d/out"
check "no restart left: nothing left behind" wait_for 5 no_marked_left

# -- touching DLAUNCH_PROGRESS_FILE is progress: a silent worker that
#    touches it for 2 s is not stopped by a 0.5 s timeout
d=$TEST_TMP/touch
mkdir -p "$d"
timeout 60 "$DL" --nproc-per-node 2 --progress-timeout 0.5 \
	--log-dir "$d/logs" "$W" touch "$d" >"$d/out" 2>&1
check_eq "progress file: the job succeeds" 0 $?
check_eq "progress file: no restart (two starts)" 2 "$(wc -l <"$d/starts")"
check_eq "progress file: DLAUNCH_PROGRESS_FILE is in the attempt's log dir" \
	"$d/logs/attempt_0/rank_1/progress" "$(cat "$d/file.1" 2>/dev/null)"

# -- without the option a silent worker runs on: alive after 2 s, then
#    told to finish
d=$TEST_TMP/silent
mkdir -p "$d"
spawn_bg "$d/out" "$DL" --nproc-per-node 1 "$W" silent "$d"
dl=$LAST_PID
check "no option: the silent worker started" wait_for 20 test -s "$d/t0.0"
wpid=$(awk '{print $3}' "$d/starts")
# two_seconds_or_gone: the worker has run silent for 2 s, or is gone
two_seconds_or_gone() {
	! alive "$wpid" ||
		[ $((($(date +%s%N) - $(cat "$d/t0.0")) / 1000000)) -ge 2000 ]
}
wait_for 10 two_seconds_or_gone
check "no option: still running after 2 s without output" alive "$wpid"
touch "$d/stop"
check "no option: dlaunch exits once the worker is told to" \
	wait_for 20 dl_exited "$dl"
check_eq "no option: the job succeeds" 0 "${DL_RC:-running}"

# -- dlaunch-train's quiet ranks: only rank 0 prints, the others show their
# steps (the progress file; with the channel also `step` messages); a
# healthy job must not be taken as hung, with or without the channel
if [ -x "$BIN/dlaunch-train" ]; then
	for how in channel plain; do
		d=$TEST_TMP/train-$how
		mkdir -p "$d"
		plain=()
		[ "$how" = plain ] && plain=(env -u DLAUNCH_CONTROL_FD)
		timeout 120 "$DL" --standalone --nproc-per-node 3 --max-restarts 0 \
			--progress-timeout 3s --no-python "${plain[@]}" \
			"$BIN/dlaunch-train" --data synthetic:8192 --model 256-512-10 \
			--epochs 20 --global-batch 64 --log-every 100000 >"$d/out" 2>&1
		check_eq "dlaunch-train ($how): a healthy job with quiet ranks succeeds under --progress-timeout 3s" 0 $?
		check "dlaunch-train ($how): no rank taken as hung" \
			bash -c '! grep -q "showed no progress" "$1"' _ "$d/out"
		# it proves something only if the ranks were quiet for longer
		# than the timeout: the training ran for several seconds
		check "dlaunch-train ($how): the job outlasted the timeout (train_seconds >= 3)" \
			awk -v t="$(grep -o '"train_seconds": [0-9.]*' "$d/out" | awk '{print $2}')" \
			'BEGIN {exit !(t >= 3)}'
		[ "$FAILED" -gt 0 ] && tail -n 20 "$d/out" | sed 's/^/# /'
	done
else
	not_ok "dlaunch-train is not built (make all)"
fi

check "no process of the test left" wait_for 5 no_marked_left
finish
