#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_partition.sh - a host partitioned from the others and healed.
#
# Three hosts made with network namespaces (lib_netns.sh): h0 runs
# dlaunch-rdzv, h1 and h2 run one agent each (--nnodes=1:2, one worker).
# h2's agent talks to the server through http_tap.py on its own host, which
# logs every exchange of that agent (what it sent, what it got back). h2's
# link is taken down: the server evicts it after the heartbeat timeout and
# h1 goes on alone in a new round. Then the link comes back:
#
#   short partition: the server's answer to h2's parked watch (the round is
#     over), held in TCP retransmission, or the 409 to one of h2's stale
#     calls, whichever reaches h2 first, tells it that its round ended;
#   long partition: the server's connections to h2 are gone by the time it
#     returns (ss -K on h0 while the link is down, what TCP giving up or a
#     middlebox does to a partition that lasts): the answer to the parked
#     watch is lost with them, so h2 learns only from its own next call, a
#     heartbeat naming the old round, which must be fenced with 409.
#
# Either way h2 stops its stale worker, joins again as a new node (a new
# round with it as a member), and the job grows back to two and succeeds.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

if ! netns_available; then
	skip "host partitioned and healed: $NETNS_WHY"
	finish
fi
if ! netns_setup 3; then
	not_ok "host partitioned and healed: could not build the three hosts"
	finish
fi

# partition_case WHAT JOB DROP: the case; DROP=1 drops the server's
# connections to h2 while it is cut off (the long partition)
partition_case() {
	local what=$1 job=$2 drop=$3 round0 round1 wb n0 res how joined killed
	new_case
	if ! start_rdzv --ns 0; then
		not_ok "$what: dlaunch-rdzv did not start on h0"
		return
	fi
	if ! start_tap "$job" 2; then
		not_ok "$what: http_tap.py did not start on h2"
		check_case "$what" --no-workers
		stop_rdzv
		return
	fi
	# shellcheck disable=SC2046
	start_agent h1 --ns 1 "$BIN/dlaunch" $(agent_args "$job" 1:2 1) \
		--local-addr "$(netns_addr 1)" --no-python "$WORKER"
	# shellcheck disable=SC2046
	start_agent h2 --ns 2 "$BIN/dlaunch" $(tap_args "$job" 1:2 1) \
		--local-addr "$(netns_addr 2)" --no-python "$WORKER"
	if wait_for 30 job_running_with "$job" 2 &&
		wait_for 20 round_complete "$(job_round "$job")" 2; then
		round0=$(job_round "$job")
		check_members "$job" "$what: before"
		wb=$(worker_pid h2 0)
		netns_cut 2
		if wait_for 20 job_running_after "$job" "$round0" 1 &&
			wait_for 20 round_complete "$(job_round "$job")" 1; then
			ok "$what: h2 is evicted and h1 goes on alone"
		else
			not_ok "$what: no round without h2 after its link went down"
			show_log "$RDZV_LOG"
		fi
		round1=$(job_round "$job")
		if [ "$drop" = 1 ]; then
			killed=$(netns_exec 0 ss -K -tnH dst "$(netns_addr 2)" 2>&1 | grep -c ESTAB)
			check "$what: the server's $killed connections to h2 are dropped while it is away" \
				test "$killed" -ge 1
		fi
		# what the tap logs from here on is h2 back on the network
		n0=$(wc -l <"$TEST_TMP/tap.$job.log")
		netns_heal 2
		check "$what: back on the network, h2 stops its stale worker" \
			wait_for 20 pids_dead "$wb"
		if wait_for 30 job_running_after "$job" "$round1" 2 &&
			wait_for 20 round_complete "$(job_round "$job")" 2; then
			ok "$what: h2 rejoins and the job grows back to two (round $(job_round "$job"))"
			check_members "$job" "$what: after"
		else
			not_ok "$what: h2 did not rejoin ($(job_field "$job" '[.state, .round, (.members | length)]' | tr -d '\n '))"
			show_log "$TEST_TMP/agent.h2.log"
		fi
		res=$(tap_learned_then_joined "$TEST_TMP/tap.$job.log" "$n0" "$round0" "$round1")
		how=${res%%|*}
		joined=${res#*|}
		if [ "$drop" = 1 ]; then
			check_eq "$what: h2's own heartbeat naming round $round0 is fenced (409) and tells it the round is over" \
				"POST /v1/jobs/$job/heartbeat -> 409" "$how"
		else
			check "$what: an answer to h2's own call about round $round0 tells it the round is over (${how:-none})" \
				bash -c "[[ '$how' =~ ^(GET\ /v1/jobs/$job/watch\ -\>\ 200|POST\ /v1/jobs/$job/(heartbeat|report)\ -\>\ 409)$ ]]"
		fi
		check "$what: then h2 joins again as a new node (its join answered 200, round ${joined:-none})" \
			test -n "$joined"
		check "$what: h2's agent says its round $round0 ended" \
			log_has "$TEST_TMP/agent.h2.log" "round $round0 ended"
		if [ "$drop" != 1 ]; then
			# the server's side of fencing, from h2's host, with a call
			# forged by the test (incarnation "old") naming round0
			code=$(netns_exec 2 curl -s -o /dev/null -w '%{http_code}' -m 10 \
				-X POST --data-binary \
				"{\"node_id\":\"h2\",\"incarnation\":\"old\",\"round\":$round0}" \
				"$RDZV_URL/v1/jobs/$job/heartbeat")
			check_eq "$what: a heartbeat forged from h2's host naming round $round0 and an old incarnation is fenced" 409 "$code"
		fi
		check "$what: the workers' master is a host address ($(tail -n 1 "$TEST_TMP/ranks.log" | awk '{print $8}'))" \
			bash -c "tail -n 1 '$TEST_TMP/ranks.log' | awk '{print \$8}' | grep -q '^10\.213\.0\.[23]:'"
		all_workers_done
		if wait_agent h1 30 && wait_agent h2 30; then
			check_eq "$what: both agents exit 0" "0 0" "${AGENT_RC[h1]} ${AGENT_RC[h2]}"
		else
			not_ok "$what: agents still running 30 s after the workers finished"
		fi
		check_eq "$what: job state" SUCCEEDED "$(job_field "$job" .state)"
	else
		not_ok "$what: the job did not start on two hosts"
		show_log "$TEST_TMP/agent.h1.log"
		show_log "$RDZV_LOG"
	fi
	stop_tap
	check_case "$what"
	stop_rdzv
}

partition_case "host partitioned and healed (short partition)" part 0
if netns_exec 0 ss -K -tnH dst 10.213.0.99 >/dev/null 2>&1; then
	partition_case "host partitioned and healed (long partition: connections lost)" partlong 1
else
	skip "host partitioned and healed (long partition): ss -K cannot drop sockets here (kernel without CONFIG_INET_DIAG_DESTROY)"
fi
finish
