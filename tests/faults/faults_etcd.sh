#!/bin/bash
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

TTL=3
NODES=(A B C)

# begin_case JOB [TTL]: a new case whose job JOB lives under a key prefix
# of its own (/fPID-JOB), so the checker reads only this case's job; its
# agents get CONF, with a lease TTL (and heartbeat timeout) of TTL seconds
# (default 3)
begin_case() {
	local ttl=${2:-$TTL}
	new_case
	JOB=$1
	PREFIX=/f$$-$1
	CONF=heartbeat_interval=0.5,heartbeat_timeout=$ttl,last_call_timeout=0.5,lease_ttl=$ttl,key_prefix=$PREFIX
	FAULTS_ETCD_CONF=key_prefix=$PREFIX
}

# etcd_agent_args JOB NNODES CONF: the dlaunch options of an agent (one
# worker; the worker command follows them)
etcd_agent_args() {
	echo "--nnodes=$2 --nproc-per-node=1 --rdzv-backend=etcd" \
		"--rdzv-endpoint=$ETCD_ENDPOINTS --rdzv-id=$1 --rdzv-conf=$3" \
		"--max-restarts=3 --shutdown-timeout=2"
}

# start_job: agents A, B, C of the case's job (on hosts 0, 1, 2 with
# NETNS_AGENTS=1)
start_job() {
	local i n
	for i in 0 1 2; do
		n=${NODES[i]}
		if [ "${NETNS_AGENTS:-0}" = 1 ]; then
			# shellcheck disable=SC2046
			start_agent "$n" --ns "$i" "$BIN/dlaunch" $(etcd_agent_args "$JOB" 2:3 "$CONF") \
				--local-addr "$(netns_addr "$i")" --no-python "$WORKER"
		else
			# shellcheck disable=SC2046
			start_agent "$n" "$BIN/dlaunch" $(etcd_agent_args "$JOB" 2:3 "$CONF") \
				--no-python "$WORKER"
		fi
	done
}

# latest_round_has N AFTER: the latest round the workers recorded is after
# AFTER and N workers started in it; LATEST is that round
latest_round_has() {
	LATEST=$(awk 'BEGIN {m = -1} $1 + 0 > m {m = $1 + 0} END {print m}' \
		"$TEST_TMP/ranks.log" 2>/dev/null)
	[ "${LATEST:--1}" -gt "$2" ] && [ "$(ranks_in_round "$LATEST")" -ge "$1" ]
}

# record_says WANT: the job record's "STATE ROUND MEMBERS" is WANT
record_says() {
	[ "$(job_json "$JOB" | jq -r '"\(.state) \(.round) \(.members | length)"')" = "$1" ]
}

# running_after AFTER N: a round after AFTER runs with N workers (the
# worker records, read first: cheap to poll), and the job record says it
# runs with N members; RUN is that round
running_after() {
	RUN=
	wait_for 30 latest_round_has "$2" "$1" &&
		wait_for 10 record_says "RUNNING $LATEST $2" || return 1
	RUN=$LATEST
}

# record: the job record's state, round, restart count and members (for a
# message)
record() { job_json "$JOB" | jq -c '[.state, .round, .restart_count, (.members | length)]'; }

# the_leader: the node id in the job's leader key
the_leader() { etcd_get "$PREFIX/$JOB/leader" | jq -r .node_id; }

# has_leader: the job's leader key names a node
has_leader() { [ -n "$(the_leader)" ]; }
# etcd_has_leader: a member up says it leads etcd
etcd_has_leader() { etcd_leader_index >/dev/null; }

agent_log() { echo "$TEST_TMP/agent.$1.log"; }

# workers_of ROUND: the worker pids recorded in ROUND
workers_of() { awk -v r="$1" '$1 == r {print $3}' "$TEST_TMP/ranks.log"; }
# nodes_of ROUND: the nodes with a worker in ROUND, sorted, one line
nodes_of() { awk -v r="$1" '$1 == r {print $4}' "$TEST_TMP/ranks.log" | sort -u | paste -sd ' '; }
# restarts_of ROUND: the restart counts the workers of ROUND were given
restarts_of() { awk -v r="$1" '$1 == r {print $7}' "$TEST_TMP/ranks.log" | sort -u | paste -sd ' '; }
# rounds_from R: the rounds from R on that any worker ran in, one line (a
# node that started late may have made the job grow from two to three
# before R)
rounds_from() { awk -v r="$1" '$1 >= r {print $1}' "$TEST_TMP/ranks.log" | sort -un | paste -sd ' '; }

# pids_alive PID...: every one of them runs (false without any)
pids_alive() {
	local p
	[ $# -gt 0 ] || return 1
	for p in "$@"; do
		[[ "$p" =~ ^[0-9]+$ ]] && alive "$p" || return 1
	done
}

# holds_for SECS CMD...: CMD stays true for SECS seconds (checked every
# 0.2 s; 1 as soon as it is not). For what must not happen during a time
# the case is about (a lease TTL, an outage).
holds_for() {
	local secs=$1
	shift
	local deadline=$((${EPOCHREALTIME//[.,]/} + secs * 1000000))
	while [ "${EPOCHREALTIME//[.,]/}" -lt "$deadline" ]; do
		"$@" || return 1
		sleep 0.2
	done
	"$@"
}

# undisturbed ROUND PID...: the job record says RUNNING in ROUND with three
# members and no restart charged, and the workers PID... run
undisturbed() {
	local round=$1
	shift
	pids_alive "$@" || return 1
	[ "$(job_json "$JOB" | jq -r '"\(.state) \(.round) \(.restart_count) \(.members | length)"')" = \
		"RUNNING $round 0 3" ]
}

# logs_say REGEX NAME...: every named agent's log matches REGEX
logs_say() {
	local n
	local re=$1
	shift
	for n in "$@"; do
		log_has "$(agent_log "$n")" "$re" || return 1
	done
}

# no_round_ended_from R: no agent said that round R or a later one ended
no_round_ended_from() {
	! cat "$(agent_log A)" "$(agent_log B)" "$(agent_log C)" 2>/dev/null |
		grep -o 'round [0-9]* ended' | awk -v r="$1" '$2 >= r {f = 1} END {exit !f}'
}

# restarted_everywhere WHAT AFTER COUNT: after a worker failure in round
# AFTER, the next round runs on every node with restart count COUNT; RUN is
# that round
restarted_everywhere() {
	local what=$1 after=$2 count=$3
	if running_after "$after" 3; then
		check_eq "$what: one round later, the workers of every node start again with restart count $count" \
			"$((after + 1)) A B C $count" "$RUN $(nodes_of "$RUN") $(restarts_of "$RUN")"
		check_eq "$what: the job record charges restart $count" "$count" \
			"$(job_field "$JOB" .restart_count)"
		return 0
	fi
	not_ok "$what: no round of three after the worker failure (record: $(record))"
	show_log "$(agent_log A)"
	return 1
}

# finish_job WHAT: the workers end; every agent exits 0, the job record
# says SUCCEEDED
finish_job() {
	local n rcs=''
	all_workers_done
	for n in "${NODES[@]}"; do
		wait_agent "$n" 30
		rcs+="${AGENT_RC[$n]:-running} "
	done
	check_eq "$1: every agent exits 0 when the workers finish" "0 0 0" "${rcs% }"
	check_eq "$1: the job record says SUCCEEDED" SUCCEEDED "$(job_field "$JOB" .state)"
}

# end_case WHAT: the checker; then the agents' logs are renamed after the
# job, so the next case's agents (named A, B, C again) keep them
end_case() {
	local n
	check_case "$1"
	for n in "${NODES[@]}"; do
		mv -f "$(agent_log "$n")" "$TEST_TMP/agent-$JOB.$n.log" 2>/dev/null
	done
}

# etcd_back WHAT: every member of the cluster answers again
etcd_back() {
	etcd_cluster_restart_all
	etcd_wait_healthy 30 || not_ok "$1: the etcd cluster did not come back"
}

if ! etcd_cluster_start 3; then
	not_ok "etcd faults: the 3-member etcd cluster did not start"
	finish
fi
FAULTS_ETCD=$ETCD_ENDPOINTS

# ---- kill -9 of etcd's leader member mid-job -------------------------------
# leads_etcd I: member I says it leads etcd
leads_etcd() { [ "$(etcd_leader_index)" = "$1" ]; }

# make_leader I: etcd's leadership moved to member I (asked of the leader)
make_leader() {
	local li id
	li=$(etcd_leader_index) || return 1
	[ "$li" = "$1" ] && return 0
	id=$(etcd_post /v3/maintenance/status '{}' "$1" | jq -r .header.member_id) &&
		etcd_post /v3/maintenance/transfer-leadership "{\"targetID\":\"$id\"}" "$li" >/dev/null &&
		wait_for 10 leads_etcd "$1"
}

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
