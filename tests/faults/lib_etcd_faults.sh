# SPDX-License-Identifier: Apache-2.0
# lib_etcd_faults.sh - helpers of the etcd fault scripts (faults_etcd*.sh):
# a case's job under a key prefix of its own, three agents A, B, C with one
# worker each, and the checks on the workers' records, the job record in
# etcd and the agents' logs. Sourced after lib_faults.sh and lib_etcd.sh.

TTL=3
NODES=(A B C)

# begin_case JOB [TTL]: a new case whose job JOB lives under a key prefix
# of its own (/fPID-JOB), so the checker reads only this case's job; its
# agents get CONF, with a lease TTL (and heartbeat timeout) of TTL seconds
# (default 3); ETCD_CASE_CONF (etcd_rdzv_conf: the credentials), when
# set, goes to the agents and to the checker's `dlaunch status` too
begin_case() {
	local ttl=${2:-$TTL}
	new_case
	JOB=$1
	PREFIX=/f$$-$1
	CONF=heartbeat_interval=0.5,heartbeat_timeout=$ttl,last_call_timeout=0.5,lease_ttl=$ttl,key_prefix=$PREFIX${ETCD_CASE_CONF:+,$ETCD_CASE_CONF}
	FAULTS_ETCD_CONF=key_prefix=$PREFIX${ETCD_CASE_CONF:+,$ETCD_CASE_CONF}
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
