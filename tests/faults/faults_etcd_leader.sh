#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_etcd_leader.sh - faults of the agent that leads a job over etcd
# (--rdzv-backend etcd), against one real etcd member (tests/e2e/lib_etcd.sh).
#
#   leader killed right after a worker failure: the round ends, the record
#     lists the leader among the survivors expected back, and the leader is
#     killed (-9) before it rejoins (the workers ignore SIGTERM, so every
#     agent takes 3 s to stop its worker before it rejoins). The new
#     leader, reading the record and the node keys, finds the old leader's
#     key gone and drops it from the survivors at once: the two others are
#     then all that is expected back and re-form within a lease TTL or so,
#     not after the heartbeat timeout or the last call (30 s each here, the
#     lease TTL 3 s).
#   (two agents with the same node id: written once for both backends
#     in lib_membership.sh, run over etcd by faults_membership_etcd.sh)
#   a second agent A with another configuration: the rendezvous would
#     refuse it; it exits 1 saying so and puts A's key back, so the first
#     agent A keeps its key and the job its round (its leave used to delete
#     A's key, and the job waited again).
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch

if ! etcd_available; then
	skip "etcd leader faults: $ETCD_WHY"
	finish
fi

TTL=3
NODES=(A B C A2)

# begin_case JOB HBT LAST: a new case whose job JOB lives under a key
# prefix of its own; lease TTL $TTL, heartbeat timeout HBT seconds, last
# call LAST seconds
begin_case() {
	new_case
	JOB=$1
	PREFIX=/l$$-$1
	CONF=heartbeat_interval=0.5,heartbeat_timeout=$2,last_call_timeout=$3,lease_ttl=$TTL,key_prefix=$PREFIX
	FAULTS_ETCD_CONF=key_prefix=$PREFIX
}

# start_node NAME [CONF]: agent NAME of the case's job (one worker, which
# ignores SIGTERM with IGNORE_TERM=1: its agent then takes the shutdown
# timeout, 3 s, to stop it)
start_node() {
	start_agent "$1" env FAULT_IGNORE_TERM="${IGNORE_TERM:-0}" \
		"$BIN/dlaunch" --nnodes=2:3 --nproc-per-node=1 \
		--rdzv-backend=etcd --rdzv-endpoint="$ETCD_ENDPOINTS" \
		--rdzv-id="$JOB" --rdzv-conf="${2:-$CONF}" --max-restarts=3 \
		--shutdown-timeout=3 --no-python "$WORKER"
}

agent_log() { echo "$TEST_TMP/agent.$1.log"; }
# state_key: the job record as etcd holds it (no agent in between)
state_key() { etcd_get "$PREFIX/$JOB/state"; }
the_leader() { etcd_get "$PREFIX/$JOB/leader" | jq -r .node_id; }
has_leader() { [ -n "$(the_leader)" ]; }
record() { job_json "$JOB" | jq -c '[.state, .round, .restart_count, (.members | length)]'; }
nodes_of() { awk -v r="$1" '$1 == r {print $4}' "$TEST_TMP/ranks.log" | sort -u | paste -sd ' '; }

# latest_round_has N AFTER: the latest round the workers recorded is after
# AFTER and N workers started in it; LATEST is that round
latest_round_has() {
	LATEST=$(awk 'BEGIN {m = -1} $1 + 0 > m {m = $1 + 0} END {print m}' \
		"$TEST_TMP/ranks.log" 2>/dev/null)
	[ "${LATEST:--1}" -gt "$2" ] && [ "$(ranks_in_round "$LATEST")" -ge "$1" ]
}
record_says() {
	[ "$(job_json "$JOB" | jq -r '"\(.state) \(.round) \(.members | length)"')" = "$1" ]
}
# running_after AFTER N [SECS]: a round after AFTER runs with N workers
# within SECS (30) seconds and the record says so; RUN is that round
running_after() {
	RUN=
	wait_for "${3:-30}" latest_round_has "$2" "$1" &&
		wait_for 10 record_says "RUNNING $LATEST $2" || return 1
	RUN=$LATEST
}

# expected_back ID: the record in etcd lists ID among the survivors of a
# round over and not among the waiters (it has not rejoined)
expected_back() {
	state_key | jq -e --arg id "$1" \
		'(.survivors | index($id)) != null and
		 ([.waiters[]?.node_id] | index($id)) == null' >/dev/null
}
# prejoined NODE: the record has NODE, a survivor, joined to the open
# round by the leader (docs/etcd.md, "Survivors come back without a
# write"): a leader that was not the master of the round that ended is
# one as soon as the round ends
prejoined() {
	state_key | jq -e --arg id "$1" \
		'.state == 2 and (.survivors | index($id)) != null and
		 ([.waiters[]?.node_id] | index($id)) != null' >/dev/null
}
back_or_joined() { expected_back "$1" || prejoined "$1"; }

# end_case WHAT: the checker; agent logs kept under the job's name
end_case() {
	local n
	check_case "$1"
	for n in "${NODES[@]}"; do
		[ -e "$(agent_log "$n")" ] || continue
		mv -f "$(agent_log "$n")" "$TEST_TMP/agent-$JOB.$n.log" 2>/dev/null
	done
}

# finish_nodes WHAT NAME...: the workers end; the named agents exit 0
finish_nodes() {
	local what=$1 n rcs='' want=''
	shift
	all_workers_done
	for n in "$@"; do
		wait_agent "$n" 30
		rcs+="${AGENT_RC[$n]:-running} "
		want+="0 "
	done
	check_eq "$what: the agents $* exit 0 when the workers finish" "${want% }" "${rcs% }"
	check_eq "$what: the job record says SUCCEEDED" SUCCEEDED "$(job_field "$JOB" .state)"
}

if ! etcd_cluster_start 1; then
	not_ok "etcd leader faults: the etcd member did not start"
	finish
fi
FAULTS_ETCD=$ETCD_ENDPOINTS

# ---- the leader killed right after a worker failure ------------------------
what="leader killed right after a worker failure"
begin_case lkill 30 30
# the workers ignore SIGTERM: every agent, the leader too, takes 3 s to
# stop its worker before it rejoins, long enough to catch the leader
# expected back and not yet rejoined
IGNORE_TERM=1
for n in A B C; do start_node "$n"; done
IGNORE_TERM=0
if running_after 0 3 && wait_for 10 has_leader; then
	R0=$RUN
	L=$(the_leader)
	for F in C B A; do [ "$F" != "$L" ] && break; done
	others=$(printf '%s\n' A B C | grep -vx "$L" | paste -sd ' ')
	worker_cmd "$F" 0 "exit 3"
	# stop the leader as soon as its record says its round is over, so
	# that it cannot rejoin (the master of the round: expected back) or
	# start its next round (any other: joined by itself); then kill it
	if wait_for 10 back_or_joined "$L" && kill -STOP "${AGENT_PID[$L]}" &&
		back_or_joined "$L"; then
		kill -KILL "${AGENT_PID[$L]}"
		how="expects it back"
		prejoined "$L" && how="has it joined to the next round"
		ok "$what: $F's worker failed in round $R0; $L, the leader, killed while the record $how"
		# the lease TTL (3 s) for the leader key to go, then the
		# takeover; the heartbeat timeout is 30 s
		if running_after "$R0" 2 15; then
			new=$(the_leader)
			ok "$what: $others re-form round $RUN within 15 s (heartbeat timeout and last call 30 s)"
			check_eq "$what: round $RUN runs on $others" "$others" "$(nodes_of "$RUN")"
			check "$what: the new leader ($new) took over from the record" \
				bash -c "[ -n '$new' ] && [ '$new' != '$L' ] && grep -q 'took over job $JOB' '$(agent_log "$new")'"
			check "$what: $new dropped $L, whose key was gone, at the takeover" \
				log_has "$(agent_log "$new")" "node $L, expected back, has no key|event=node_(left|evicted) node=$L reason=lease_expired"
		else
			not_ok "$what: $others did not re-form within 15 s (record: $(record))"
			show_log "$(agent_log B)" 20
		fi
		wait_agent "$L" 10
		finish_nodes "$what" $others
	else
		kill -CONT "${AGENT_PID[$L]}" 2>/dev/null
		not_ok "$what: the record never listed $L as expected back or joined, before it rejoined"
		finish_nodes "$what" A B C
	fi
else
	not_ok "$what: the job did not start on three nodes with a leader (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"

# ---- a second agent A with another configuration --------------------------------
what="agent A again, another configuration"
begin_case dupconf 3 0.5
for n in A B C; do start_node "$n"; done
if running_after 0 3; then
	R0=$RUN
	INC_A=$(etcd_get "$PREFIX/$JOB/nodes/A" | jq -r .incarnation)
	# the same node id, another --max-restarts: the rendezvous would
	# refuse it
	start_agent A2 env DLAUNCH_NODE_ID=A FAULT_NODE=A "$BIN/dlaunch" --nnodes=2:3 \
		--nproc-per-node=1 --rdzv-backend=etcd \
		--rdzv-endpoint="$ETCD_ENDPOINTS" --rdzv-id="$JOB" \
		--rdzv-conf="$CONF" --max-restarts=2 --shutdown-timeout=3 \
		--no-python "$WORKER"
	if wait_agent A2 20; then
		check_eq "$what: the second agent A exits 1" 1 "${AGENT_RC[A2]}"
		check "$what: it says the node id is held by an agent whose configuration differs" \
			log_has "$(agent_log A2)" "node id A is held by another agent .* whose configuration differs \\(field 'max_restarts'\\)"
	else
		not_ok "$what: the second agent A still runs 20 s after it started"
		show_log "$(agent_log A2)" 20
	fi
	check_eq "$what: A's key in etcd is still the first agent's" "$INC_A" \
		"$(etcd_get "$PREFIX/$JOB/nodes/A" | jq -r .incarnation)"
	check "$what: the first agent A still runs" kill -0 "${AGENT_PID[A]}"
	check "$what: round $R0 still runs on three nodes" record_says "RUNNING $R0 3"
	finish_nodes "$what" A B C
	check_eq "$what: no round after $R0" "$R0" \
		"$(awk 'BEGIN {m = -1} $1 + 0 > m {m = $1 + 0} END {print m}' "$TEST_TMP/ranks.log")"
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"

etcd_cluster_destroy
finish
