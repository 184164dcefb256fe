# SPDX-License-Identifier: Apache-2.0
# lib_membership.sh - the membership faults, written once and run against
# dlaunch-rdzv by faults_membership.sh and against etcd by
# faults_membership_etcd.sh: a node joining a running job (it grows at
# the next round, the others keep their ranks), fewer than min nodes
# left (or ever there): the job fails after the join timeout, saying why;
# and two agents given one node id: the later one takes the id, the
# first says so and exits 1 (it does not join again and take it back:
# over dlaunch-rdzv the two used to end each other's rounds in turn),
# and the job runs on with the newcomer.
#
# Sourced after lib_faults.sh (and, for etcd, lib_etcd.sh with a cluster
# up) with FAULTS_BACKEND set (lib_faults.sh: a case's rendezvous is a
# server of its own, or a key prefix of its own in etcd, through
# case_rdzv_start and agent_args).

# rank_of NODE ROUND: the global rank NODE's worker held in ROUND (1 worker)
rank_of() { awk -v n="$1" -v r="$2" '$4 == n && $1 == r {print $2}' "$TEST_TMP/ranks.log" | tail -n 1; }

start_agents() { # JOB NNODES CONF NAME...
	local job=$1 nn=$2 conf=$3 n
	shift 3
	for n in "$@"; do
		# shellcheck disable=SC2046
		start_agent "$n" "$BIN/dlaunch" $(agent_args "$job" "$nn" 1 "$conf") \
			--no-python "$WORKER"
	done
}

# ---- node joining mid-run -------------------------------------------------
what="node joining mid-run"
new_case
if case_rdzv_start grow; then
	start_agents grow 2:3 "$HB_CONF" A B
	if wait_for 30 job_running_with grow 2 &&
		wait_for 20 round_complete "$(job_round grow)" 2; then
		r0=$(job_round grow)
		ra=$(rank_of A "$r0")
		rb=$(rank_of B "$r0")
		start_agents grow 2:3 "$HB_CONF" C
		if wait_for 30 job_running_after grow "$r0" 3 &&
			wait_for 20 round_complete "$(job_round grow)" 3; then
			r1=$(job_round grow)
			ok "$what: the job grows to three at the next round"
			check_eq "$what: growing charges no restart" 0 "$(job_field grow .restart_count)"
			check_eq "$what: A and B keep their ranks, C comes last" \
				"$ra $rb 2" "$(rank_of A "$r1") $(rank_of B "$r1") $(rank_of C "$r1")"
			check_members grow "$what"
		else
			not_ok "$what: no round of three after C joined"
			show_log "$RDZV_LOG"
		fi
		all_workers_done
		wait_agent A 30 && wait_agent B 30 && wait_agent C 30
		check_eq "$what: all agents exit 0" "0 0 0" \
			"${AGENT_RC[A]:-running} ${AGENT_RC[B]:-running} ${AGENT_RC[C]:-running}"
		check_eq "$what: job state" SUCCEEDED "$(job_field grow .state)"
	else
		not_ok "$what: the job did not start"
	fi
	check_case "$what"
	stop_rdzv
else
	not_ok "$what: $(case_rdzv_name) did not start"
fi

# ---- fewer than min nodes left ----------------------------------------------
what="fewer than min nodes left"
new_case
conf=$HB_CONF,join_timeout=4
if case_rdzv_start few; then
	start_agents few 2 "$conf" A B
	if wait_for 30 job_running_with few 2; then
		kill -KILL "${AGENT_PID[B]}"
		t0=$SECONDS
		# the heartbeat timeout (1 s) evicts B; the job then waits up to the
		# join timeout (4 s) for another node before it fails
		if wait_agent A 30; then
			took=$((SECONDS - t0))
			check_eq "$what: the remaining agent exits 1" 1 "${AGENT_RC[A]}"
			check "$what: it fails after the join timeout, not before and not long after ($took s)" \
				test "$took" -ge 4 -a "$took" -le 15
			check_eq "$what: job state" FAILED "$(job_field few .state)"
			check "$what: the agent says why (too few nodes / join timeout)" \
				log_has "$TEST_TMP/agent.A.log" '([Tt]oo few|min(imum)?[ _]nodes|join[ _]timeout|not enough)'
		else
			not_ok "$what: the remaining agent still runs 30 s after the other was killed"
			show_log "$TEST_TMP/agent.A.log"
		fi
	else
		not_ok "$what: the job did not start"
	fi
	check_case "$what"
	stop_rdzv
else
	not_ok "$what: $(case_rdzv_name) did not start"
fi

# ---- fewer than min nodes from the start --------------------------------------
what="fewer than min nodes from the start"
new_case
if case_rdzv_start lonely; then
	start_agents lonely 2 "$HB_CONF,join_timeout=3" A
	t0=$SECONDS
	if wait_agent A 20; then
		check_eq "$what: the agent exits 1" 1 "${AGENT_RC[A]}"
		check "$what: after the join timeout ($((SECONDS - t0)) s)" \
			test $((SECONDS - t0)) -ge 3
		check "$what: the agent says why" \
			log_has "$TEST_TMP/agent.A.log" '([Tt]oo few|min(imum)?[ _]nodes|join[ _]timeout|not enough)'
	else
		not_ok "$what: the agent still waits 20 s later (join timeout 3 s)"
	fi
	# the round never formed: no worker was meant to start
	check_case "$what" --no-workers
	stop_rdzv
else
	not_ok "$what: $(case_rdzv_name) did not start"
fi

# ---- two agents with one node id ----------------------------------------------
what="two agents with node id A"
new_case
# a_is_newcomers: node A's latest worker is a child of the second agent A
a_is_newcomers() { ps -o ppid= -p "$(worker_pid A 0)" 2>/dev/null | grep -qw "${AGENT_PID[A2]}"; }
if case_rdzv_start dup; then
	start_agents dup 2:3 "$HB_CONF" A B C
	if wait_for 30 job_running_with dup 3; then
		r0=$(job_round dup)
		# agent A2 runs as node A too (its workers record themselves as A)
		# shellcheck disable=SC2046
		start_agent A2 env FAULT_NODE=A DLAUNCH_NODE_ID=A "$BIN/dlaunch" \
			$(agent_args dup 2:3 1 "$HB_CONF") --no-python "$WORKER"
		if wait_agent A 20; then
			check_eq "$what: the first agent A, displaced, exits 1" 1 "${AGENT_RC[A]}"
			check "$what: it says its node id was taken by another agent" \
				log_has "$TEST_TMP/agent.A.log" "node id A was taken: another agent"
		else
			not_ok "$what: the first agent A still runs 20 s after another agent took its id"
			show_log "$TEST_TMP/agent.A.log" 20
		fi
		if wait_for 30 job_running_after dup "$r0" 3; then
			ok "$what: the job runs again on three nodes"
			check "$what: node A's worker is the newcomer's" wait_for 20 a_is_newcomers
			# one change of round, the newcomer's join: the first A
			# never took the id back (each taking ends a round)
			check_eq "$what: the job is in round $((r0 + 1)), the one after the newcomer's join" \
				"$((r0 + 1))" "$(job_round dup)"
		else
			not_ok "$what: no round of three with the newcomer"
			show_log "$TEST_TMP/agent.A2.log" 20
		fi
		all_workers_done
		wait_agent A2 30 && wait_agent B 30 && wait_agent C 30
		check_eq "$what: the newcomer, B and C exit 0" "0 0 0" \
			"${AGENT_RC[A2]:-running} ${AGENT_RC[B]:-running} ${AGENT_RC[C]:-running}"
		check_eq "$what: job state" SUCCEEDED "$(job_field dup .state)"
	else
		not_ok "$what: the job did not start on three nodes"
	fi
	check_case "$what"
	stop_rdzv
else
	not_ok "$what: $(case_rdzv_name) did not start"
fi
