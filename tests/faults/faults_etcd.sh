#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_etcd.sh - faults of the etcd control plane (--rdzv-backend etcd).
#
# Three agents (--nnodes=2:3, one worker each) against a real 3-member
# etcd cluster (tests/e2e/lib_etcd.sh), with short timings (lease TTL 3 s):
#
#   etcd leader member killed: the member the agents talk to is made etcd's
#     leader, then killed (-9) mid-job: the agents move to another member
#     through the election, no restart is charged, no worker is disturbed;
#     a worker failure afterwards is a job-wide restart as usual (restart
#     count 1);
#   etcd down for 20 s: every member killed, started again 20 s later
#     (lease TTL 5 s here): the workers run on, nothing is charged, the job
#     finishes;
#   leading agent paused: SIGSTOP on the agent that leads the job, past its
#     lease; another agent takes over and the survivors re-form; resumed,
#     the old leader's first write fails (its leader key is gone; when its
#     lease's expiry reaches it before that write's answer, it stops
#     leading at once and a skip line says the failed write was not seen),
#     it goes on as a follower, is told its round is over, and rejoins;
#   compaction and defrag: once with the watches connected, then with the
#     member that carries them killed after the compaction, so that every
#     watch resumes from a revision etcd no longer has; each time a worker
#     failure restarts every node;
#   host cut from etcd (network namespaces: agents on hosts 0-2, members on
#     3-5): the cut agent is evicted when its lease expires, the others go
#     on; healed, it finds its lease gone, is fenced, and rejoins.
#
# Each case's job has a key prefix of its own. The checker reads the job
# records in etcd through `dlaunch status` (FAULTS_ETCD, lib_faults.sh) and
# checks them, the workers' ranks and that no process is left, after every
# case.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch

if ! etcd_available; then
	skip "etcd faults: $ETCD_WHY"
	finish
fi

# shellcheck source=lib_etcd_faults.sh
source "$FAULTS_DIR/lib_etcd_faults.sh"

if ! etcd_cluster_start 3; then
	not_ok "etcd faults: the 3-member etcd cluster did not start"
	finish
fi
FAULTS_ETCD=$ETCD_ENDPOINTS

# ---- kill -9 of etcd's leader member mid-job -------------------------------
what="etcd leader member killed"
begin_case eleader
start_job
if running_after 0 3; then
	R0=$RUN
	mapfile -t pids < <(workers_of "$R0")
	# the agents talk to the first member: it leads etcd when it dies, so
	# they go through the election and move to another member at once
	if make_leader 0 && etcd_member_kill 0 KILL; then
		ok "$what: member 0, etcd's leader and the agents' member, killed (-9) in round $R0"
		check "$what: the two others elect a new leader" \
			wait_for 15 etcd_has_leader
		check "$what: every agent moves on to another member" \
			wait_for 15 logs_say "etcd at ${ETCD_URLS[0]} did not answer .*; trying" A B C
		check "$what: for two lease TTLs the workers run on in round $R0, no restart charged" \
			holds_for $((2 * TTL)) undisturbed "$R0" "${pids[@]}"
		check "$what: no agent's round $R0 ended" no_round_ended_from "$R0"
		worker_cmd B 0 "exit 3"
		restarted_everywhere "$what: then a worker fails" "$R0" 1
		check_eq "$what: the workers ran in two rounds" "$R0 $((R0 + 1))" "$(rounds_from "$R0")"
	else
		not_ok "$what: could not make member 0 etcd's leader and kill it"
	fi
	finish_job "$what"
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"
etcd_back "$what"

# ---- every etcd member down for 20 s ----------------------------------------
what="etcd down for 20 s"
begin_case outage 5
start_job
if running_after 0 3; then
	R0=$RUN
	mapfile -t pids < <(workers_of "$R0")
	etcd_cluster_stop_all KILL
	t0=$SECONDS
	check "$what: every agent says etcd is unreachable and the workers keep running" \
		wait_for 15 logs_say 'etcd unreachable .*workers keep running' A B C
	check "$what: the workers run on for the 20 s without etcd" \
		holds_for $((20 - (SECONDS - t0))) pids_alive "${pids[@]}"
	etcd_back "$what"
	check "$what: every agent says etcd is reachable again" \
		wait_for 20 logs_say 'etcd reachable again' A B C
	check "$what: for a lease TTL after, the job is in round $R0 with its workers, no restart charged" \
		holds_for 6 undisturbed "$R0" "${pids[@]}"
	check "$what: no agent's round $R0 ended" no_round_ended_from "$R0"
	check_eq "$what: the workers ran in one round" "$R0" "$(rounds_from "$R0")"
	finish_job "$what"
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"

# ---- the agent that leads the job paused past its lease --------------------
what="leading agent paused (SIGSTOP) and resumed"
begin_case pause
start_job
if running_after 0 3 && wait_for 10 has_leader; then
	R0=$RUN
	L=$(the_leader)
	lpid=${AGENT_PID[$L]}
	lworker=$(worker_pid "$L" 0)
	kill -STOP "$lpid"
	ok "$what: $L, the agent that leads, stopped in round $R0"
	new=
	r1=$R0
	if running_after "$R0" 2; then
		r1=$RUN
		new=$(the_leader)
		check "$what: another agent ($new) took over from the job record" \
			bash -c "[ -n '$new' ] && [ '$new' != '$L' ] && grep -q 'took over job pause' '$(agent_log "$new")'"
		check "$what: $new evicted $L when its lease expired" \
			log_has "$(agent_log "$new")" "event=node_evicted node=$L reason=lease_expired"
		check_eq "$what: the two others run round $r1" \
			"$(printf '%s\n' A B C | grep -vx "$L" | paste -sd ' ')" "$(nodes_of "$r1")"
	else
		not_ok "$what: the others did not re-form without $L (record: $(record))"
		show_log "$(agent_log A)"
	fi
	check "$what: $L's worker ran on while its agent was stopped" pids_alive "$lworker"
	kill -CONT "$lpid"
	check "$what: resumed, $L finds its lease expired" \
		wait_for 15 log_has "$(agent_log "$L")" 'expired: this node was away'
	check "$what: $L stops its stale worker of round $R0" wait_for 20 pids_dead "$lworker"
	# On resume the old leader applies the node events etcd kept for its
	# watch and writes, while its lease's keep-alive goes out: when the
	# write's answer comes first it fails (the leader key is another's);
	# when the keep-alive's does, the agent stops leading at once and the
	# write's answer is dropped unseen. Either way nothing it wrote took,
	# and it says which.
	check "$what: $L stops leading after the resume: its write failed or its lease had expired" \
		bash -c "grep -Eq 'job pause has another leader now; this agent stops leading|lease expired, its leader key with it; it stops leading job pause' '$(agent_log "$L")'"
	if running_after "$r1" 3; then
		ok "$what: $L rejoins and round $RUN runs on three nodes"
		check "$what: $L follows: $(the_leader) leads, $L led once" \
			bash -c "[ '$(the_leader)' != '$L' ] && [ \$(grep -c 'leading job pause through etcd' '$(agent_log "$L")') = 1 ]"
		check "$what: the new leader (${new:-none}) was never deposed" \
			bash -c "[ -n '$new' ] && [ '$(the_leader)' = '$new' ] && ! grep -q 'another leader now' '$(agent_log "${new:-none}")'"
	else
		not_ok "$what: $L did not rejoin (record: $(record))"
		show_log "$(agent_log "$L")" 25
	fi
	finish_job "$what"
else
	not_ok "$what: the job did not start on three nodes with a leader (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"

# ---- compaction and defragmentation during a job ---------------------------
# members_of_agents: the members the agents hold connections to
members_of_agents() {
	local n i out
	out=$(ss -tnpH state established 2>/dev/null)
	for n in "${NODES[@]}"; do
		for ((i = 0; i < ETCD_N; i++)); do
			grep "pid=${AGENT_PID[$n]}," <<<"$out" |
				grep -q ":${ETCD_CLIENT_PORTS[i]} " && echo "$i"
		done
	done | sort -u | paste -sd ' '
}

# pad N: N writes beside the job's keys: the store's revision moves past
# what any watch of the job has seen
pad() {
	local i
	for ((i = 0; i < $1; i++)); do
		etcd_put "$PREFIX-pad" "$i" || return 1
	done
}

what="compaction and defrag"
begin_case compact
start_job
if running_after 0 3; then
	R0=$RUN
	L=$(the_leader)
	if pad 2 && etcd_compact_defrag; then
		ok "$what: etcd compacted at revision $ETCD_COMPACT_REV and defragmented in round $R0"
	else
		not_ok "$what: compaction or defragmentation failed"
	fi
	worker_cmd C 0 "exit 3"
	restarted_everywhere "$what: a worker fails after it" "$R0" 1
	r1=${RUN:-$R0}
	# the agents talk to the first member; kill it after a compaction
	# and every watch resumes on another member from a compacted revision
	check_eq "$what: the agents' connections are all to member 0" 0 "$(members_of_agents)"
	if pad 2 && etcd_compact_defrag && etcd_member_kill 0 KILL; then
		ok "$what: compacted again at revision $ETCD_COMPACT_REV, then member 0 killed"
		check "$what: the leader ($L) finds its node watch compacted and reads the nodes again" \
			wait_for 20 log_has "$(agent_log "$L")" 'node watch compacted; reading again'
		worker_cmd A 0 "exit 3"
		restarted_everywhere "$what: a worker fails after the watches resumed" "$r1" 2
	else
		not_ok "$what: the second compaction, or member 0's kill, failed"
	fi
	check_eq "$what: the workers ran in three rounds" "$R0 $((R0 + 1)) $((R0 + 2))" "$(rounds_from "$R0")"
	finish_job "$what"
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"
etcd_back "$what"
etcd_cluster_destroy

# ---- one agent's host cut from etcd -------------------------------------------
what="host cut from etcd"
if ! netns_available; then
	skip "$what: $NETNS_WHY"
	finish
fi
if ! netns_setup 6 || ! etcd_cluster_start_netns 3 4 5; then
	not_ok "$what: could not build six hosts with etcd members on hosts 3-5"
	finish
fi
FAULTS_ETCD=$ETCD_ENDPOINTS
FAULTS_ETCD_NS=3
NETNS_AGENTS=1
begin_case cut
start_job
if running_after 0 3; then
	R0=$RUN
	L=$(the_leader)
	# cut a node that does not lead: its eviction is the leader's doing
	for v in C B A; do [ "$v" != "$L" ] && break; done
	vi=$(printf '%s\n' "${NODES[@]}" | grep -nx "$v" | cut -d: -f1)
	vi=$((vi - 1))
	vworker=$(worker_pid "$v" 0)
	netns_cut "$vi"
	r1=$R0
	if running_after "$R0" 2; then
		r1=$RUN
		ok "$what: $v (host $vi) cut off; the two others go on in round $r1"
		check "$what: the leader ($L) evicted $v when its lease expired" \
			log_has "$(agent_log "$L")" "event=node_evicted node=$v reason=lease_expired"
	else
		not_ok "$what: no round without $v after its host was cut (record: $(record))"
		show_log "$(agent_log "$L")"
	fi
	# its requests time out (5 s each): it moves on to the next member,
	# and says etcd is unreachable once every member failed in a row
	check "$what: cut off, $v says etcd does not answer" \
		wait_for 20 log_has "$(agent_log "$v")" 'etcd at .* did not answer|etcd unreachable'
	check "$what: $v's worker runs on while its host is cut off" pids_alive "$vworker"
	netns_heal "$vi"
	check "$what: back, $v finds its lease expired (fenced)" \
		wait_for 20 log_has "$(agent_log "$v")" 'expired: this node was away'
	check "$what: $v stops its stale worker of round $R0" wait_for 20 pids_dead "$vworker"
	if running_after "$r1" 3; then
		ok "$what: $v rejoins and round $RUN runs on three nodes"
		check "$what: the workers' master is a host address ($(awk -v r="$RUN" '$1 == r {print $8; exit}' "$TEST_TMP/ranks.log"))" \
			bash -c "awk -v r='$RUN' '\$1 == r {print \$8}' '$TEST_TMP/ranks.log' | grep -q '^10\.213\.0\.[123]:'"
	else
		not_ok "$what: $v did not rejoin (record: $(record))"
		show_log "$(agent_log "$v")" 25
	fi
	finish_job "$what"
else
	not_ok "$what: the job did not start on three hosts (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"
etcd_cluster_destroy
finish
