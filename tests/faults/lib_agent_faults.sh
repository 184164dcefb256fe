# SPDX-License-Identifier: Apache-2.0
# lib_agent_faults.sh - agent faults written once and run against
# dlaunch-rdzv by faults_agent.sh and against etcd by faults_agent_etcd.sh:
# SIGKILL, SIGTERM, SIGSTOP shorter and longer than the heartbeat timeout
# (over etcd: the lease TTL, which is the heartbeat timeout rounded up, at
# least 2 s): a stale node fenced.
#
# Three agents (A, B, C; one test worker each, --nnodes=2:3) on loopback.
# The faulty agent is always A. The checker runs after every case.
# Sourced after lib_faults.sh (and, for etcd, lib_etcd.sh with a cluster
# up) with FAULTS_BACKEND set.

# start_three JOB CONF [tap]: the case's rendezvous + agents A, B, C;
# waits for a round of three. With "tap" (dlaunch-rdzv only), A talks to
# the server through http_tap.py, whose log $TEST_TMP/tap.JOB.log shows
# A's own calls and the answers it got.
start_three() {
	local job=$1 conf=$2 n
	new_case
	case_rdzv_start "$job" || return 1
	if [ "${3:-}" = tap ]; then
		start_tap "$job" || return 1
	fi
	for n in A B C; do
		if [ "$n" = A ] && [ "${3:-}" = tap ]; then
			# shellcheck disable=SC2046
			start_agent A "$BIN/dlaunch" $(tap_args "$job" 2:3 1 "$conf") \
				--no-python "$WORKER"
			continue
		fi
		# shellcheck disable=SC2046
		start_agent "$n" "$BIN/dlaunch" $(agent_args "$job" 2:3 1 "$conf") \
			--no-python "$WORKER"
	done
	if ! wait_for 30 job_running_with "$job" 3 ||
		! wait_for 20 round_complete "$(job_round "$job")" 3; then
		show_log "$TEST_TMP/agent.A.log"
		show_log "$RDZV_LOG"
		return 1
	fi
	ROUND0=$(job_round "$job")
}

# end_case WHAT JOB AGENTS...: workers finish, the named agents exit 0, the
# job SUCCEEDED, then the checker
end_case() {
	local what=$1 job=$2 n rcs='' want=''
	shift 2
	all_workers_done
	for n in "$@"; do
		if wait_agent "$n" 30; then
			rcs+=" ${AGENT_RC[$n]}"
		else
			rcs+=" running"
		fi
		want+=" 0"
	done
	check_eq "$what: the remaining agents exit 0" "$want" "$rcs"
	check_eq "$what: job state" SUCCEEDED "$(job_field "$job" .state)"
	stop_tap
	check_case "$what"
	stop_rdzv
}

# ---- agent kill -9 ---------------------------------------------------------
what="agent kill -9"
if start_three akill "$HB_CONF"; then
	wa=$(worker_pid A 0)
	rc0=$(job_field akill .restart_count)
	kill -KILL "${AGENT_PID[A]}"
	check "$what: its worker dies with it (PR_SET_PDEATHSIG)" wait_for 10 pids_dead "$wa"
	if wait_for 20 job_running_after akill "$ROUND0" 2 &&
		wait_for 20 round_complete "$(job_round akill)" 2; then
		ok "$what: it is evicted and B and C re-form a round of two"
		check_eq "$what: eviction charges no restart" "$rc0" \
			"$(job_field akill .restart_count)"
		check_members akill "$what: after"
	else
		not_ok "$what: no round of two after the agent was killed"
		show_log "$RDZV_LOG"
	fi
	end_case "$what" akill B C
else
	abort_case "$what" "the job did not start"
fi

# ---- agent SIGTERM -----------------------------------------------------------
# A long heartbeat timeout (20 s) shows that the others re-form because A
# left, not because it went silent.
what="agent SIGTERM"
conf=heartbeat_interval=0.2,heartbeat_timeout=20,last_call_timeout=0.5
if start_three aterm "$conf"; then
	wa=$(worker_pid A 0)
	start=$SECONDS
	kill -TERM "${AGENT_PID[A]}"
	check "$what: it forwards the signal to its worker" wait_for 10 pids_dead "$wa"
	if wait_agent A 15; then
		check_eq "$what: it exits 143 (128 + SIGTERM)" 143 "${AGENT_RC[A]}"
	else
		not_ok "$what: still running 15 s after SIGTERM"
	fi
	if wait_for 10 job_running_after aterm "$ROUND0" 2; then
		check "$what: B and C re-form at once ($((SECONDS - start)) s, the heartbeat timeout is 20 s)" \
			test $((SECONDS - start)) -lt 10
		check_eq "$what: leaving charges no restart" 0 "$(job_field aterm .restart_count)"
		wait_for 10 round_complete "$(job_round aterm)" 2
		check_members aterm "$what: after"
	else
		not_ok "$what: no round of two within 10 s of SIGTERM (heartbeat timeout is 20 s)"
		show_log "$RDZV_LOG"
	fi
	end_case "$what" aterm B C
else
	abort_case "$what" "the job did not start"
fi

# ---- agent SIGSTOP shorter than the heartbeat timeout -------------------------
what="agent SIGSTOP 1 s (heartbeat timeout 3 s)"
conf=heartbeat_interval=0.2,heartbeat_timeout=3,last_call_timeout=0.5
if start_three astop1 "$conf"; then
	pids="$(worker_pid A 0) $(worker_pid B 0) $(worker_pid C 0)"
	kill -STOP "${AGENT_PID[A]}"
	sleep 1 # the fault's duration, not a synchronisation
	kill -CONT "${AGENT_PID[A]}"
	sleep 3 # let a full heartbeat timeout pass: an eviction would show now
	check_eq "$what: the round goes on (no eviction)" "$ROUND0" "$(job_round astop1)"
	check_eq "$what: all three still members" 3 "$(job_field astop1 '.members | length')"
	# shellcheck disable=SC2086
	check "$what: no worker was restarted" bash -c "for p in $pids; do kill -0 \$p || exit 1; done"
	end_case "$what" astop1 A B C
else
	abort_case "$what" "the job did not start"
fi

# ---- agent SIGSTOP longer than the heartbeat timeout ----------------------------
# A stale node fenced: while A is stopped it is evicted and B and C
# re-form; back, A must learn that its round is over, stop its old worker
# and join again. Over dlaunch-rdzv the server answers A's parked watch
# at the eviction (the round is over); the answer waits in A's socket. On
# SIGCONT A's event loop reads it before its heartbeat timer runs, so that
# answer, not a fenced (409) call, is how A learns its round ended
# (faults_partition shows the 409, where the answer to the watch is lost).
# A's calls go through http_tap.py there (tap_* below, dlaunch-rdzv only),
# so this is read from what A itself got. Over etcd A's lease (TTL 2 s
# here) expires while it is stopped, and its keep-alive says so when it
# resumes (A may be the job's leader: then another takes over).
what="agent SIGSTOP past the heartbeat timeout (1 s)"
tap=
[ "$FAULTS_BACKEND" = http ] && tap=tap
if start_three astop2 "$HB_CONF" $tap; then
	wa=$(worker_pid A 0)
	[ -n "$tap" ] && n0=$(wc -l <"$TEST_TMP/tap.astop2.log")
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
	if [ -n "$tap" ]; then
		res=$(tap_learned_then_joined "$TEST_TMP/tap.astop2.log" "$n0" "$ROUND0" "$round1")
		check_eq "$what: back, the answer to A's parked watch for round $ROUND0 tells it the round is over" \
			"GET /v1/jobs/astop2/watch -> 200" "${res%%|*}"
		joined=${res#*|}
		check "$what: then A joins again (its join answered 200, round ${joined:-none})" \
			test -n "$joined"
	else
		check "$what: back, A finds its lease expired (fenced)" \
			log_has "$TEST_TMP/agent.A.log" 'expired: this node was away'
	fi
	check "$what: A's log says its round $ROUND0 ended" \
		log_has "$TEST_TMP/agent.A.log" "round $ROUND0 ended"
	end_case "$what" astop2 A B C
else
	abort_case "$what" "the job did not start"
fi
