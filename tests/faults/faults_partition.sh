#!/bin/bash
# faults_partition.sh - a host partitioned from the others and healed.
#
# Three hosts made with network namespaces (lib_netns.sh): h0 runs
# dlaunch-rdzv, h1 and h2 run one agent each (--nnodes=1:2, one worker).
# h2's link is taken down: the server evicts it after the heartbeat timeout
# and h1 goes on alone in a new round. The link comes back: calls from h2 that name
# the round that is over are fenced (409), h2 learns the round ended, stops its stale
# worker, joins as a new node, and the job grows back to two.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

what="host partitioned and healed"
if ! netns_available; then
	skip "$what: $NETNS_WHY"
	finish
fi
if ! netns_setup 3; then
	not_ok "$what: could not build the three hosts"
	finish
fi

if start_rdzv --ns 0; then
	for i in 1 2; do
		# shellcheck disable=SC2046
		start_agent "h$i" --ns "$i" "$BIN/dlaunch" \
			$(agent_args part 1:2 1) --local-addr "$(netns_addr "$i")" \
			--no-python "$WORKER"
	done
	if wait_for 30 job_running_with part 2 &&
		wait_for 20 round_complete "$(job_round part)" 2; then
		round0=$(job_round part)
		check_members part "$what: before"
		wb=$(worker_pid h2 0)
		netns_cut 2
		if wait_for 20 job_running_after part "$round0" 1 &&
			wait_for 20 round_complete "$(job_round part)" 1; then
			ok "$what: h2 is evicted and h1 goes on alone"
		else
			not_ok "$what: no round without h2 after its link went down"
			show_log "$RDZV_LOG"
		fi
		round1=$(job_round part)
		netns_heal 2
		# h2's agent may learn that its round ended from the answer to its
		# parked watch (held in TCP retransmission while cut off) before
		# it makes any stale call of its own, so fencing is shown with a
		# call from h2 that names the old round
		code=$(netns_exec 2 curl -s -o /dev/null -w '%{http_code}' -m 10 \
			-X POST --data-binary \
			"{\"node_id\":\"h2\",\"incarnation\":\"old\",\"round\":$round0}" \
			"$RDZV_URL/v1/jobs/part/heartbeat")
		check_eq "$what: back on the network, h2's call naming round $round0 is fenced" 409 "$code"
		check "$what: back on the network, h2 stops its stale worker" \
			wait_for 20 pids_dead "$wb"
		if wait_for 30 job_running_after part "$round1" 2 &&
			wait_for 20 round_complete "$(job_round part)" 2; then
			ok "$what: h2 rejoins as a new node and the job grows back to two"
			check_members part "$what: after"
		else
			not_ok "$what: h2 did not rejoin ($(job_field part '[.state, .round, (.members | length)]' | tr -d '\n '))"
			show_log "$TEST_TMP/agent.h2.log"
		fi
		check "$what: the workers' master is a host address ($(tail -n 1 "$TEST_TMP/ranks.log" | awk '{print $8}'))" \
			bash -c "tail -n 1 '$TEST_TMP/ranks.log' | awk '{print \$8}' | grep -q '^10\.213\.0\.[23]:'"
		all_workers_done
		if wait_agent h1 30 && wait_agent h2 30; then
			check_eq "$what: both agents exit 0" "0 0" "${AGENT_RC[h1]} ${AGENT_RC[h2]}"
		else
			not_ok "$what: agents still running 30 s after the workers finished"
		fi
		check_eq "$what: job state" SUCCEEDED "$(job_field part .state)"
	else
		not_ok "$what: the job did not start on two hosts"
		show_log "$TEST_TMP/agent.h1.log"
		show_log "$RDZV_LOG"
	fi
	check_case "$what"
else
	not_ok "$what: dlaunch-rdzv did not start on h0"
fi
finish
