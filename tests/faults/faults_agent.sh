#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_agent.sh - agent faults against dlaunch-rdzv: SIGKILL, SIGTERM,
# SIGSTOP shorter than the heartbeat timeout (lib_agent_faults.sh, which
# faults_agent_etcd.sh runs over etcd), and, dlaunch-rdzv only, SIGSTOP
# longer than it, read from the agent's own exchanges with the server.
#
# Three agents (A, B, C; one test worker each, --nnodes=2:3) on loopback.
# The faulty agent is always A. The checker runs after every case.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch
FAULTS_BACKEND=http
# shellcheck source=lib_agent_faults.sh
source "$FAULTS_DIR/lib_agent_faults.sh"

# ---- agent SIGSTOP longer than the heartbeat timeout ----------------------------
# While A is stopped the server evicts it and answers its parked watch (the
# round is over); the answer waits in A's socket. On SIGCONT A's event loop
# reads it before its heartbeat timer runs, so that answer, not a fenced
# (409) call, is how A learns its round ended (faults_partition shows the
# 409, where the answer to the watch is lost). A's calls go through
# http_tap.py, so this is read from what A itself got.
what="agent SIGSTOP past the heartbeat timeout (1 s)"
if start_three astop2 "$HB_CONF" tap; then
	wa=$(worker_pid A 0)
	n0=$(wc -l <"$TEST_TMP/tap.astop2.log")
	kill -STOP "${AGENT_PID[A]}"
	if wait_for 20 job_running_after astop2 "$ROUND0" 2; then
		ok "$what: the stopped agent is evicted, B and C re-form"
	else
		not_ok "$what: no eviction while A is stopped"
	fi
	round1=$(job_round astop2)
	kill -CONT "${AGENT_PID[A]}"
	# back, A must learn that its round is over, stop its old worker and
	# join again, and the job grows back to three at the next round
	check "$what: A stops its stale worker after it resumes" wait_for 15 pids_dead "$wa"
	if wait_for 30 job_running_after astop2 "$round1" 3 &&
		wait_for 20 round_complete "$(job_round astop2)" 3; then
		ok "$what: A rejoins and a round of three forms"
		check_members astop2 "$what: after rejoining"
	else
		not_ok "$what: A did not rejoin ($(job_field astop2 '[.state, .round, (.members | length)]' | tr -d '\n '))"
		show_log "$TEST_TMP/agent.A.log"
	fi
	res=$(tap_learned_then_joined "$TEST_TMP/tap.astop2.log" "$n0" "$ROUND0" "$round1")
	check_eq "$what: back, the answer to A's parked watch for round $ROUND0 tells it the round is over" \
		"GET /v1/jobs/astop2/watch -> 200" "${res%%|*}"
	joined=${res#*|}
	check "$what: then A joins again (its join answered 200, round ${joined:-none})" \
		test -n "$joined"
	check "$what: A's log says its round $ROUND0 ended" \
		log_has "$TEST_TMP/agent.A.log" "round $ROUND0 ended"
	end_case "$what" astop2 A B C
else
	abort_case "$what" "the job did not start"
fi

finish
