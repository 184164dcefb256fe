#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_etcd_members.sh - an etcd member that hangs (issue 23, cases 4 and 3).
#
# Three agents (--nnodes=2:3, one worker each, lease TTL 3 s) on a real
# 3-member etcd. The member the agents talk to, a follower, is paused
# (SIGSTOP) for more than two lease TTLs: its kernel still takes the
# connections, etcd answers nothing. Every agent's keep-alive gives up on
# it within a quarter of the TTL and reaches another member in time: no
# lease expires, no node is evicted, no restart is charged, no worker is
# disturbed. Resumed, a worker failure restarts every node once and the
# job succeeds.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch

if ! etcd_available; then
	skip "etcd member faults: $ETCD_WHY"
	finish
fi

# shellcheck source=lib_etcd_faults.sh
source "$FAULTS_DIR/lib_etcd_faults.sh"

if ! etcd_cluster_start 3; then
	not_ok "etcd member faults: the 3-member etcd cluster did not start"
	finish
fi
FAULTS_ETCD=$ETCD_ENDPOINTS

# no_lease_lost: no agent says its lease expired or that a node was evicted
no_lease_lost() {
	! cat "$(agent_log A)" "$(agent_log B)" "$(agent_log C)" 2>/dev/null |
		grep -Eq 'lease [0-9a-f]* expired|node_evicted'
}

what="etcd member paused"
begin_case hung
start_job
if running_after 0 3; then
	R0=$RUN
	mapfile -t pids < <(workers_of "$R0")
	# the agents talk to member 0: made a follower, then paused
	if make_leader 1 && etcd_member_kill 0 STOP; then
		ok "$what: member 0, a follower and the agents' member, paused (SIGSTOP) in round $R0"
		check "$what: for more than two lease TTLs the workers run on in round $R0, no restart charged" \
			holds_for $((2 * TTL + 1)) undisturbed "$R0" "${pids[@]}"
		check "$what: no lease expired, no node evicted" no_lease_lost
		check "$what: every agent's keep-alive moved on to another member" \
			logs_say "etcd at ${ETCD_URLS[0]} did not answer lease keep-alive" A B C
		check "$what: no agent said etcd was unreachable" \
			bash -c "! grep -h 'etcd unreachable' '$(agent_log A)' '$(agent_log B)' '$(agent_log C)'"
		etcd_member_kill 0 CONT
		worker_cmd A 0 "exit 3"
		restarted_everywhere "$what: resumed, then a worker fails" "$R0" 1
	else
		not_ok "$what: could not make member 0 a follower and pause it"
		etcd_member_kill 0 CONT
	fi
	finish_job "$what"
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"

# ---- watches leave a hung member (issue 23, case 3) ------------------------
# The agents' member paused again, then an agent that does not lead
# stopped past its lease: etcd deletes its key, but a watch on the paused
# member hears nothing (its kernel keeps the stream open). Each agent's
# keep-alive times out there within a third plus a quarter of the TTL and
# moves every watch, from its revision, to another member: the leader
# hears of the expired lease and the two others re-form in time.
what="watches on a paused etcd member"
begin_case hungw
start_job
if running_after 0 3 && wait_for 10 has_leader; then
	R0=$RUN
	L=$(the_leader)
	X=$(printf '%s\n' A B C | grep -vx "$L" | head -1)
	if make_leader 1 && etcd_member_kill 0 STOP; then
		kill -STOP "${AGENT_PID[$X]}"
		ok "$what: member 0 paused, then agent $X (not leading) stopped in round $R0"
		if wait_for $((2 * TTL + 4)) latest_round_has 2 "$R0"; then
			ok "$what: the two others re-formed within $((2 * TTL + 4)) s (two lease TTLs and 4 s)"
			check "$what: $L evicted $X when its lease expired" \
				wait_for 5 log_has "$(agent_log "$L")" "event=node_evicted node=$X reason=lease_expired"
		else
			not_ok "$what: no new round without $X within $((2 * TTL + 4)) s (record: $(record))"
			show_log "$(agent_log "$L")"
		fi
		r1=${LATEST:-$R0}
		etcd_member_kill 0 CONT
		kill -CONT "${AGENT_PID[$X]}"
		if running_after "$r1" 3; then
			ok "$what: resumed, $X rejoins in round $RUN"
		else
			not_ok "$what: resumed, $X did not rejoin (record: $(record))"
		fi
	else
		not_ok "$what: could not make member 0 a follower and pause it"
		etcd_member_kill 0 CONT
	fi
	finish_job "$what"
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"
etcd_cluster_destroy
finish
