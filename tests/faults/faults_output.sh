#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_output.sh - a worker printing 100 MB.
#
# Agent A's two workers each print 100 MiB of 200-byte lines as fast as they
# can while agent B's workers are quiet, with a 1 s heartbeat timeout. The
# agent reads the pipes on its event loop: it must keep beating (no
# eviction, no restart), not grow its memory with the output, pass every
# line on with its rank prefix, and finish the job.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

what="worker printing 100 MB"
mb=100
# peak_rss PID: sample VmRSS (kB) of PID into $TEST_TMP/rss until it exits
sample_rss() {
	local pid=$1 peak=0 v
	while kill -0 "$pid" 2>/dev/null; do
		v=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		[ -n "$v" ] && [ "$v" -gt "$peak" ] && peak=$v && echo "$peak" >"$TEST_TMP/rss"
		sleep 0.1
	done
}

if start_rdzv; then
	# shellcheck disable=SC2046
	start_agent A env FAULT_SPEW_MB=$mb "$BIN/dlaunch" $(agent_args spew 2 2) \
		--no-python "$WORKER"
	sample_rss "${AGENT_PID[A]}" &
	sampler=$!
	# shellcheck disable=SC2046
	start_agent B "$BIN/dlaunch" $(agent_args spew 2 2) --no-python "$WORKER"
	if wait_for 30 job_running_with spew 2; then
		round0=$(job_round spew)
		# both of A's workers say "spew done" once their 100 MiB are out
		if wait_for 120 bash -c "[ \$(grep -c 'spew done' '$TEST_TMP/agent.A.log') -ge 2 ]"; then
			ok "$what: 2 x $mb MiB passed through the agent"
		else
			not_ok "$what: the output did not get through in 120 s"
		fi
		check_eq "$what: no eviction while printing (same round)" "$round0" "$(job_round spew)"
		check_eq "$what: no restart" 0 "$(job_field spew .restart_count)"
		all_workers_done
		wait_agent A 30 && wait_agent B 30
		check_eq "$what: both agents exit 0" "0 0" "${AGENT_RC[A]:-running} ${AGENT_RC[B]:-running}"
		lines=$(grep -c '^\[rank[0-9]*\]: 0000' "$TEST_TMP/agent.A.log")
		want=$((2 * mb * 1048576 / 200))
		check "$what: every line arrives with its rank prefix ($lines of $want)" \
			test "$lines" -ge "$want"
		peak=$(cat "$TEST_TMP/rss" 2>/dev/null || echo 0)
		if grep -q __asan_init "$BIN/dlaunch"; then
			skip "$what: the agent's memory stays bounded: not measurable under AddressSanitizer, whose quarantine keeps freed memory (peak RSS $((peak / 1024)) MiB)"
		else
			check "$what: the agent's memory stays bounded (peak RSS $((peak / 1024)) MiB)" \
				test "$peak" -lt $((64 * 1024))
		fi
	else
		not_ok "$what: the job did not start"
		show_log "$RDZV_LOG"
	fi
	wait "$sampler" 2>/dev/null
	# 200 MiB of worker lines are not kept; the agent's own lines are, a
	# sanitizer report among them, for check_sanitizer_logs in finish
	grep -av '^\[rank[0-9]*\]: 0000' "$TEST_TMP/agent.A.log" >"$TEST_TMP/agent.A.own"
	mv -f "$TEST_TMP/agent.A.own" "$TEST_TMP/agent.A.log"
	check_case "$what"
else
	not_ok "$what: dlaunch-rdzv did not start"
fi
finish
