#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_delay.sh - a slow, lossy network between the agents and the server:
# 200 ms delay each way and 20% loss.
#
# This kernel has no sch_netem (`tc qdisc add ... netem` says "Specified
# qdisc kind is unknown"), so netem_proxy.py does it in user space between
# the agents and dlaunch-rdzv: every chunk arrives 200 ms late in each
# direction, 20% of chunks another retransmission timeout later (repeatedly,
# as lost retransmissions do), and 30% of connections are reset within their
# first 3 s (the agents keep connections alive, so this hits live calls).
# With a 4 s heartbeat timeout the round must still form, nobody may be
# evicted while the job runs, and the job must succeed.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

what="200 ms delay with 20% loss"
if start_rdzv; then
	spawn_bg "$TEST_TMP/proxy.log" env DLAUNCH_TEST_MARK="$MARK" "$PY" \
		"$FAULTS_DIR/netem_proxy.py" --target "127.0.0.1:$RDZV_PORT" \
		--delay-ms 200 --loss 0.2 --reset 0.3 --seed "${FAULT_SEED:-1}"
	proxy_pid=$LAST_PID
	if wait_for 10 log_has "$TEST_TMP/proxy.log" '^listening on [0-9]+'; then
		proxy_port=$(awk '/^listening on/ {print $3; exit}' "$TEST_TMP/proxy.log")
		conf=heartbeat_interval=0.5,heartbeat_timeout=4,last_call_timeout=1
		for n in A B; do
			# shellcheck disable=SC2046
			start_agent "$n" "$BIN/dlaunch" --nnodes=2 --nproc-per-node=1 \
				--rdzv-endpoint="127.0.0.1:$proxy_port" --rdzv-id=slow \
				--rdzv-conf="$conf" --max-restarts=3 \
				--no-python "$WORKER"
		done
		if wait_for 60 job_running_with slow 2 &&
			wait_for 30 round_complete "$(job_round slow)" 2; then
			ok "$what: the round forms"
			round0=$(job_round slow)
			# let the job run through several heartbeat timeouts on the bad
			# network: the fault's duration; an eviction would end the round
			sleep 10
			check_eq "$what: no false eviction (same round after 10 s)" \
				"$round0" "$(job_round slow)"
			check_eq "$what: both nodes still members" 2 \
				"$(job_field slow '.members | length')"
			check_eq "$what: no restart charged" 0 "$(job_field slow .restart_count)"
			all_workers_done
			if wait_agent A 60 && wait_agent B 60; then
				check_eq "$what: both agents exit 0" "0 0" "${AGENT_RC[A]} ${AGENT_RC[B]}"
			else
				not_ok "$what: agents still running 60 s after the workers finished"
			fi
			check_eq "$what: job state" SUCCEEDED "$(job_field slow .state)"
		else
			not_ok "$what: no round formed through the proxy in 60 s"
			show_log "$TEST_TMP/agent.A.log"
		fi
		kill -TERM "$proxy_pid"
		wait_for 5 bash -c "! kill -0 $proxy_pid"
		echo "# $(tail -n 1 "$TEST_TMP/proxy.log")"
	else
		not_ok "$what: the proxy did not start"
	fi
	check_case "$what"
else
	not_ok "$what: dlaunch-rdzv did not start"
fi
finish
