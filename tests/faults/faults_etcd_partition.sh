#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_etcd_partition.sh - an etcd member cut off from its peers (issue
# 23, case 3).
#
# Six network-namespace hosts: agents A, B, C on hosts 0-2, etcd members
# 0-2 on hosts 3-5. The members have two networks: clients reach them
# over the first (the agents' too), they talk to each other over a second
# one of their own. Member 0, the one the agents talk to, loses its peer
# link only: it still answers TCP and HTTP, but has no leader (a follower
# cut off) or soon none (the leader cut off steps down), so it serves no
# new data: its watches go silent, its calls wait for a leader.
#
# What etcd 3.4's gateway does with the require-leader metadata the
# agents send (Grpc-Metadata-hasleader: true) is checked on the real
# member too: a read is refused at once ("no leader", code 14), and a
# watch opened with it before the cut is ended with that error.
#
# Then an agent that does not lead is stopped (SIGSTOP) past its lease:
# etcd (members 1 and 2) deletes its key. Every agent must leave member 0
# for another member, watches resumed from their revision, in time: the
# leader hears of the expired lease and the two others re-form within the
# lease TTL and a few seconds; the leader keeps its own node. Resumed, the
# stopped agent rejoins; healed, the job finishes.
#
# Run once with member 0 a follower when cut, once with it etcd's leader.
#
# Then with a long lease (60 s: keep-alives every 20 s), member 0 cut off
# again and, once it has no leader, a worker fails: the job must hear of
# it in seconds, not at the next keep-alive. The agents ask etcd to
# require a leader (the gateway's Grpc-Metadata-hasleader header): the
# member ends their watches three election timeouts (3 s) after it lost
# its leader, and they resume on another member. Without that, only the
# next keep-alive (up to 20 s later, and 7 s before the member answers it
# "no leader") would move them: the job was deaf meanwhile.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=lib_netns.sh
source "$FAULTS_DIR/lib_netns.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch

if ! etcd_available; then
	skip "etcd partition faults: $ETCD_WHY"
	finish
fi
if ! netns_available; then
	skip "etcd partition faults: $NETNS_WHY"
	finish
fi

# shellcheck source=lib_etcd_faults.sh
source "$FAULTS_DIR/lib_etcd_faults.sh"

if ! netns_setup 6 || ! etcd_cluster_start_netns 3 4 5 --peer-net; then
	not_ok "etcd partition faults: could not build six hosts with etcd members on hosts 3-5 (peers on a network of their own)"
	finish
fi
# the checker asks members 1 and 2, which keep their quorum
FAULTS_ETCD=${ETCD_HOSTS[1]}:2379,${ETCD_HOSTS[2]}:2379
FAULTS_ETCD_NS=4
NETNS_AGENTS=1

# kept_own_node LEADER: the leader's node was never dropped from the job
# (its lease expired, or it evicted itself)
kept_own_node() {
	! grep -Eq "lease [0-9a-f]* expired|event=node_evicted node=$1 " "$(agent_log "$1")"
}

# member_leaderless I: member I says it has no leader (asked in its host)
member_leaderless() {
	local ans
	ans=$(ETCD_CURL_TIMEOUT=2 _etcd_raw_curl "$1" /v3/maintenance/status '{}') || return 1
	[ "$(jq -r '.leader // "0"' <<<"$ans")" = 0 ]
}

# refuses_without_leader I: member I, asked for a read with etcd's
# require-leader metadata (the header the agents send), answers at once
# "no leader" (code 14): etcd's gateway passes the header on
refuses_without_leader() {
	local ans
	ans=$(netns_exec "${ETCD_NETNS[$1]}" curl -sS --max-time 2 -X POST \
		-H 'Grpc-Metadata-hasleader: true' -d '{"key":"AA=="}' \
		"${ETCD_URLS[$1]}/v3/kv/range") || return 1
	[ "$(etcd_error_code <<<"$ans")" = 14 ] && grep -q 'no leader' <<<"$ans"
}

# open_watch I LOG: a watch on member I with the require-leader metadata,
# its stream in LOG, from inside the member's host (WATCH_PID)
open_watch() {
	netns_spawn "${ETCD_NETNS[$1]}" "$2" curl -sSN -X POST \
		-H 'Grpc-Metadata-hasleader: true' \
		-d '{"create_request":{"key":"AA==","range_end":"AA=="}}' \
		"${ETCD_URLS[$1]}/v3/watch"
	WATCH_PID=$LAST_PID
}

# partition_case NAME ROLE: member 0 (follower or leader, ROLE) cut from
# its peers, then a node stopped past its lease
partition_case() {
	local name=$1 role=$2 R0 L X r1
	what="etcd member cut from its peers ($role)"
	begin_case "$name"
	start_job
	if ! running_after 0 3 || ! wait_for 10 has_leader; then
		not_ok "$what: the job did not start on three nodes (record: $(record))"
		show_log "$(agent_log A)"
		end_case "$what"
		return
	fi
	R0=$RUN
	L=$(the_leader)
	X=$(printf '%s\n' C B A | grep -vx "$L" | head -1)
	open_watch 0 "$TEST_TMP/watch-$name.log"
	if ! wait_for 5 log_has "$TEST_TMP/watch-$name.log" '"created":true'; then
		not_ok "$what: a watch on member 0 was not created"
	fi
	if ! cut_member0 "$role"; then
		not_ok "$what: etcd's leadership could not be moved, or member 0's peer link cut"
		etcd_member_heal_peers 0
		finish_job "$what"
		end_case "$what"
		return
	fi
	ok "$what: member 0, the agents' member, cut from its peers in round $R0 (clients still reach it)"
	check "$what: member 0 answers, without a leader" wait_for 10 member_leaderless 0
	check "$what: member 0 refuses a read that requires a leader at once (Grpc-Metadata-hasleader)" \
		refuses_without_leader 0
	check "$what: etcd ends a watch open on member 0 with 'no leader' (three election timeouts after the leader loss)" \
		wait_for 10 log_has "$TEST_TMP/watch-$name.log" '"grpc_code":14.*no leader'
	kill_tree "$WATCH_PID"
	kill -STOP "${AGENT_PID[$X]}"
	ok "$what: agent $X (not leading) stopped"
	# the lease TTL for its key to go, then the re-form (last call 0.5 s)
	if wait_for $((TTL + 4)) latest_round_has 2 "$R0"; then
		ok "$what: the two others re-formed within $((TTL + 4)) s (the lease TTL and 4 s)"
		check "$what: $L evicted $X when its lease expired" \
			wait_for 5 log_has "$(agent_log "$L")" "event=node_evicted node=$X reason=lease_expired"
		check_eq "$what: the new round runs on the two others" \
			"$(printf '%s\n' A B C | grep -vx "$X" | paste -sd ' ')" "$(nodes_of "$LATEST")"
	else
		not_ok "$what: no new round without $X within $((TTL + 4)) s (record: $(record))"
		show_log "$(agent_log "$L")" 25
	fi
	check "$what: the leader ($L) kept its own node" kept_own_node "$L"
	check "$what: the agents left member 0" \
		logs_say "etcd at ${ETCD_URLS[0]} (did not answer|has no leader)" "$L"
	r1=${LATEST:-$R0}
	kill -CONT "${AGENT_PID[$X]}"
	if running_after "$r1" 3; then
		ok "$what: resumed, $X rejoins in round $RUN"
	else
		not_ok "$what: resumed, $X did not rejoin (record: $(record))"
		show_log "$(agent_log "$X")" 20
	fi
	etcd_member_heal_peers 0
	etcd_wait_healthy 30 || not_ok "$what: healed, the etcd cluster is not healthy"
	finish_job "$what"
	end_case "$what"
}

# cut_member0 ROLE: etcd's leadership moved (member 0 a follower, or the
# leader), then member 0 cut from its peers; 1 when either failed
cut_member0() {
	if [ "$1" = leader ]; then make_leader 0; else make_leader 1; fi &&
		etcd_member_cut_peers 0
}

partition_case pfollow follower
partition_case pleader leader

# ---- a long lease: a worker fails while the agents' member is cut off -------
what="worker failure, etcd member cut off, lease TTL 60 s"
begin_case plong 60
start_job
if running_after 0 3 && wait_for 10 has_leader; then
	R0=$RUN
	L=$(the_leader)
	F=$(printf '%s\n' C B A | grep -vx "$L" | head -1)
	if cut_member0 follower && wait_for 10 member_leaderless 0; then
		ok "$what: member 0, the agents' member, cut from its peers and without a leader"
		worker_cmd "$F" 0 "exit 3"
		t0=${EPOCHREALTIME//[.,]/}
		# etcd ends the watches 3 election timeouts after the leader
		# loss; then the failure report, the round's end, the re-form
		if wait_for 8 latest_round_has 3 "$R0"; then
			ok "$what: $F's worker failed; every node restarted in round $LATEST after $(((${EPOCHREALTIME//[.,]/} - t0) / 1000)) ms (within 8 s; the next keep-alive is up to 20 s away)"
		else
			not_ok "$what: $F's worker failed; no new round of three within 8 s (record: $(record))"
			show_log "$(agent_log "$L")" 20
		fi
		check "$what: the leader ($L) says member 0 has no leader and leaves it" \
			log_has "$(agent_log "$L")" "etcd at ${ETCD_URLS[0]} has no leader"
		restarted_everywhere "$what" "$R0" 1
		check "$what: the leader ($L) kept its own node" kept_own_node "$L"
	else
		not_ok "$what: member 0 could not be cut from its peers"
	fi
	etcd_member_heal_peers 0
	etcd_wait_healthy 30 || not_ok "$what: healed, the etcd cluster is not healthy"
	finish_job "$what"
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"
etcd_cluster_destroy
finish
