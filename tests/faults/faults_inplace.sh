#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_inplace.sh - the in-place re-form (issue 20) across hosts made with
# network namespaces (lib_netns.sh): three hosts of two workers each, the
# server on h0. The workers speak the worker side of the control channel
# (tests/e2e/progs/control_worker.py).
#
#   every process of h2 killed (kill -9 of all the host's pids): the
#     survivors on h0 and h1 keep their processes, get abort then
#     membership with world size 4 and ranks 0-3 once each, and the job
#     finishes; the time from the kill to the last membership is printed;
#   a worker on h1 killed: only it starts again (a new process), the other
#     five stay.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch
what="in-place re-form across hosts"
faults_require_hosts "$what"
if ! netns_setup 3; then
	not_ok "$what: could not build the three hosts"
	finish
fi
CW=$FAULTS_DIR/../e2e/progs/control_worker.py

# procs NODE: worker processes NODE has had (one log file each)
procs() { ls "$CW_DIR" | grep -c "^$1\."; }
procs_are() { [ "$(procs "$1")" = "$2" ]; }
lines_at_least() { [ "$(cat "$CW_DIR"/$2 2>/dev/null | grep -c -- "$3")" -ge "$1" ]; }
pid_of() { awk 'NR == 1 {print $2}' "$1"; }

# start_job JOB: agents A, B, C on h0, h1, h2, nodes 2:3, 2 workers each
start_job() {
	local i n
	export CW_DIR=$TEST_TMP/$1
	mkdir -p "$CW_DIR"
	for i in 0 1 2; do
		n=$(echo ABC | cut -c$((i + 1)))
		# shellcheck disable=SC2046
		start_agent "$n" --ns "$i" env CW_DIR="$CW_DIR" "$BIN/dlaunch" \
			$(agent_args "$1" 2:3 2) --shutdown-timeout=2 \
			--reform-timeout=5 "$CW"
	done
}

# ---- every process of one host killed ---------------------------------
case_what="$what: host lost"
new_case
if ! start_rdzv --ns 0; then
	not_ok "$case_what: dlaunch-rdzv did not start on h0"
	finish
fi
start_job lost
if wait_for 60 lines_at_least 6 "*.log" '^welcome'; then
	t0=${EPOCHREALTIME//[.,]/}
	for p in $(ip netns pids "$(netns_host 2)"); do kill -KILL "$p"; done
	if wait_for 30 lines_at_least 4 "[AB].*.log" '^membership'; then
		t1=${EPOCHREALTIME//[.,]/}
		echo "# kill of h2 to the last survivor's membership: $(((t1 - t0) / 1000)) ms (heartbeat timeout 1 s)"
		check_eq "$case_what: no survivor is a new process" "2 2" "$(procs A) $(procs B)"
		for f in "$CW_DIR"/[AB].*.log; do
			check "$case_what: $(basename "$f") still runs" alive "$(pid_of "$f")"
		done
		check_eq "$case_what: ranks 0-3 once each of world size 4, 2 nodes" \
			"0 4 2|1 4 2|2 4 2|3 4 2|" \
			"$(grep -h '^membership' "$CW_DIR"/[AB].*.log | awk '{print $3, $4, $7}' | sort -n | tr '\n' '|')"
		check_eq "$case_what: the master is a host's address, one for all" 1 \
			"$(grep -h '^membership' "$CW_DIR"/[AB].*.log | awk '{print $9}' | grep -c '^10\.213\.0\.' | sort -u | wc -l)"
	else
		not_ok "$case_what: the survivors were not re-formed"
	fi
	all_workers_done
	touch "$CW_DIR/stop"
	wait_agent A 30 && wait_agent B 30
	check_eq "$case_what: the job finishes (A, B exit 0)" "0 0" \
		"${AGENT_RC[A]:-running} ${AGENT_RC[B]:-running}"
else
	not_ok "$case_what: the job did not start"
fi
check_case "$case_what"
stop_rdzv

# ---- one worker killed ----------------------------------------------------
case_what="$what: worker killed"
new_case
start_rdzv --ns 0
start_job crash
if wait_for 60 lines_at_least 6 "*.log" '^welcome'; then
	victim=$(ls "$CW_DIR"/B.1.*.log)
	kill -KILL "$(pid_of "$victim")"
	check "$case_what: the five others re-form" \
		wait_for 30 lines_at_least 5 "*.log" '^membership'
	check "$case_what: the killed worker starts again" wait_for 30 procs_are B.1 2
	check_eq "$case_what: every other worker is the same process" "2 1 2" \
		"$(procs A) $(procs B.0) $(procs C)"
	touch "$CW_DIR/stop"
	wait_agent A 30 && wait_agent B 30 && wait_agent C 30
	check_eq "$case_what: the job finishes" "0 0 0" \
		"${AGENT_RC[A]:-running} ${AGENT_RC[B]:-running} ${AGENT_RC[C]:-running}"
else
	not_ok "$case_what: the job did not start"
fi
check_case "$case_what"
stop_rdzv
finish
