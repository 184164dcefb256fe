#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_server.sh - the rendezvous server killed and restarted during a
# running job, and its journal damaged at the tail.
#
#   server kill -9 and restart: dlaunch-rdzv --state-dir is killed while two
#     agents' workers run; they keep running (same pids, the agents retry),
#     the restarted server recovers the job from the journal in the same
#     round without evicting anyone, a later worker failure restarts the
#     group as usual, and the job succeeds; then the checker replays the
#     journal once more and compares the job (check_case does that for
#     every server started with --state-dir).
#   torn / bit-flipped journal tail: a partial record appended (a write cut
#     by a crash) or a bit flipped in the last record: the server starts,
#     warns, keeps every record before the damage, and what it journals
#     afterwards survives the next restart (the bad tail was cut off, not
#     left in front of new records).
#
# Alone for tests/run.sh -j (agents must be seen beating again within 1 s):
# nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

state=$TEST_TMP/state

# ---- server kill -9 and restart during a running job ------------------------
what="server kill -9 and restart"
new_case
if start_rdzv --state-dir "$state"; then
	port=$RDZV_PORT
	for n in A B; do
		# shellcheck disable=SC2046
		start_agent "$n" "$BIN/dlaunch" $(agent_args srv 2 2) --no-python "$WORKER"
	done
	if wait_for 30 job_running_with srv 2 &&
		wait_for 20 round_complete "$(job_round srv)" 4; then
		r0=$(job_round srv)
		before=$(job_json srv | journal_digest)
		pids="$(worker_pid A 0) $(worker_pid A 1) $(worker_pid B 0) $(worker_pid B 1)"
		kill -KILL "$RDZV_PID"
		# the server stays down for six heartbeat timeouts: the fault's
		# duration, during which the agents must keep their workers; long
		# enough that a retry schedule not capped at the heartbeat
		# interval pauses seconds, past heartbeat_timeout, after the return
		sleep 6
		# shellcheck disable=SC2086
		check "$what: the workers keep running while the server is down" \
			bash -c "for p in $pids; do kill -0 \$p || exit 1; done"
		check "$what: the agents keep running while the server is down" \
			bash -c "kill -0 ${AGENT_PID[A]} && kill -0 ${AGENT_PID[B]}"
		if start_rdzv --port "$port" --state-dir "$state"; then
			ok "$what: the server starts again from its state dir on the same port"
			check_eq "$what: it recovers the job as it was" "$before" \
				"$(job_json srv | journal_digest)"
			# three heartbeat timeouts pass: the fault's aftermath, an
			# eviction of an agent that did not reconnect would show now
			sleep 3
			check_eq "$what: the job goes on in the same round" "$r0" "$(job_round srv)"
			check_eq "$what: no restart charged" 0 "$(job_field srv .restart_count)"
			# shellcheck disable=SC2086
			check "$what: no worker was restarted" \
				bash -c "for p in $pids; do kill -0 \$p || exit 1; done"
			check "$what: both agents beat again (seen within 1 s)" \
				test "$(job_field srv '[.members[].last_seen_ms_ago] | max')" -lt 1000
			worker_cmd A 0 "exit 1"
			if wait_for 20 job_running_after srv "$r0" 2 &&
				wait_for 20 round_complete "$(job_round srv)" 4; then
				ok "$what: a failure after the restart starts a new round as usual"
				check_eq "$what: one restart charged" 1 "$(job_field srv .restart_count)"
			else
				not_ok "$what: no new round after a failure on the restarted server"
				show_log "$RDZV_LOG"
			fi
			all_workers_done
			wait_agent A 30 && wait_agent B 30
			check_eq "$what: both agents exit 0" "0 0" \
				"${AGENT_RC[A]:-running} ${AGENT_RC[B]:-running}"
			check_eq "$what: job state" SUCCEEDED "$(job_field srv .state)"
		else
			not_ok "$what: the server does not start again on port $port"
		fi
	else
		not_ok "$what: the job did not start"
		show_log "$RDZV_LOG"
	fi
	check_case "$what"
	stop_rdzv
else
	not_ok "$what: dlaunch-rdzv --state-dir did not start"
fi

# ---- damaged journal tail ---------------------------------------------------
# api JOB ENDPOINT BODY: one POST, the answer's JSON
api() { rdzv_curl "/v1/jobs/$1/$2" -X POST -H 'Content-Type: application/json' -d "$3"; }
# one_node_job JOB: a one-node job through the API, joined and succeeded
one_node_job() {
	local r
	r=$(api "$1" join "{\"node_id\":\"n1\",\"incarnation\":\"i1\",\"nproc\":1,\"min_nodes\":1,\"max_nodes\":1,\"max_restarts\":0}" | jq -r .round)
	api "$1" report "{\"node_id\":\"n1\",\"incarnation\":\"i1\",\"round\":$r,\"status\":\"succeeded\"}" >/dev/null
}

journal_case() { # WHAT DAMAGE J2_STATE_AFTER
	local what=$1 damage=$2 want_j2=$3 dir=$TEST_TMP/jstate.$RANDOM
	new_case
	if ! start_rdzv --state-dir "$dir"; then
		not_ok "$what: dlaunch-rdzv --state-dir did not start"
		return
	fi
	one_node_job j1
	one_node_job j2
	check_eq "$what: two jobs journaled" "SUCCEEDED SUCCEEDED" \
		"$(job_field j1 .state) $(job_field j2 .state)"
	kill -KILL "$RDZV_PID"
	wait_for 5 bash -c "! kill -0 $RDZV_PID"
	if [ ! -s "$dir/journal" ]; then
		not_ok "$what: no journal file at $dir/journal ($(ls "$dir" | tr '\n' ' '))"
		check_case "$what" --no-workers
		return
	fi
	$damage "$dir/journal"
	if start_rdzv --state-dir "$dir"; then
		ok "$what: the server starts on the damaged journal"
		check "$what: it warns about the damaged tail" \
			log_has "$RDZV_LOG" 'warn.*(torn|damaged|corrupt|checksum|crc)'
		check_eq "$what: the first job is intact" SUCCEEDED "$(job_field j1 .state)"
		check_eq "$what: the second job is as its last good record says" \
			"$want_j2" "$(job_field j2 .state)"
		one_node_job j3
		kill -KILL "$RDZV_PID"
		wait_for 5 bash -c "! kill -0 $RDZV_PID"
		if start_rdzv --state-dir "$dir"; then
			check_eq "$what: a job journaled after the repair survives the next restart" \
				"SUCCEEDED SUCCEEDED" "$(job_field j1 .state) $(job_field j3 .state)"
		else
			not_ok "$what: the server does not start after the repair"
		fi
	else
		not_ok "$what: the server refuses to start on a journal with a damaged tail"
		show_log "$RDZV_LOG"
	fi
	# no agent here: the jobs are made through the API, no worker starts
	check_case "$what" --no-workers
	stop_rdzv
}

# a crash in the middle of an append: a record header announcing 1000
# bytes, and only part of them
torn_tail() { printf 'RDZJ\350\003\000\000\001\002\003\004{"job":"j' >>"$1"; }
# a bit flipped 10 bytes before the end, inside the last record's payload
flip_tail() {
	local off=$(($(stat -c %s "$1") - 10)) b
	b=$(od -An -tu1 -j "$off" -N 1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $((b ^ 4)))" |
		dd of="$1" bs=1 seek="$off" count=1 conv=notrunc status=none
}
journal_case "torn journal tail" torn_tail SUCCEEDED
# the flipped record is j2's success: j2 is back in its round, RUNNING
journal_case "bit-flipped journal tail" flip_tail RUNNING

finish
