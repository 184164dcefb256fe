#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_worker.sh - worker faults: killed with SIGKILL, exiting 1, forking
# its own children, failing always, hung.
#
# Two agents ("A" and "B") with two test workers each (worker.sh) against
# one dlaunch-rdzv on loopback. After each fault the whole group restarts in
# a new round (every old worker gone, four new ones recorded), the job then
# succeeds, and the checker finds no process left and no rank held twice.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

# start_pair JOB [ENV...]: a fresh server and agents A and B on JOB (2x2);
# waits until four workers run in one round and sets ROUND0
start_pair() {
	local job=$1
	shift
	new_case
	start_rdzv || return 1
	# shellcheck disable=SC2046
	start_agent A env "$@" "$BIN/dlaunch" $(agent_args "$job" 2 2) \
		--no-python "$WORKER"
	# shellcheck disable=SC2046
	start_agent B env "$@" "$BIN/dlaunch" $(agent_args "$job" 2 2) \
		--no-python "$WORKER"
	if ! wait_for 30 job_running_with "$job" 2 ||
		! wait_for 20 round_complete "$(job_round "$job")" 4; then
		show_log "$TEST_TMP/agent.A.log"
		show_log "$RDZV_LOG"
		return 1
	fi
	ROUND0=$(job_round "$job")
}

# finish_pair WHAT JOB: let the workers succeed, expect both agents to exit
# 0 and the job SUCCEEDED, then run the checker and stop the server
finish_pair() {
	local what=$1 job=$2
	all_workers_done
	if wait_agent A 30 && wait_agent B 30; then
		check_eq "$what: both agents exit 0 after the job succeeds" \
			"0 0" "${AGENT_RC[A]} ${AGENT_RC[B]}"
	else
		not_ok "$what: agents still running 30 s after the workers finished"
	fi
	check_eq "$what: job state" SUCCEEDED "$(job_field "$job" .state)"
	check_case "$what"
	stop_rdzv
	AGENT_RC=()
}

# ---- worker kill -9 ------------------------------------------------------
what="worker kill -9"
if start_pair kill9; then
	old="$(worker_pid A 0) $(worker_pid A 1) $(worker_pid B 0) $(worker_pid B 1)"
	check_members kill9 "$what: before"
	kill -KILL "$(worker_pid A 1)"
	if wait_for 20 job_running_after kill9 "$ROUND0" 2 &&
		wait_for 20 round_complete "$(job_round kill9)" 4; then
		ok "$what: a new round with all four workers forms"
		# shellcheck disable=SC2086
		check "$what: every worker of the old round is gone" pids_dead $old
		check_eq "$what: one restart charged" 1 "$(job_field kill9 .restart_count)"
		check_eq "$what: the failure names the signal" SIGKILL \
			"$(job_field kill9 '.failures[0].signal')"
		check_members kill9 "$what: after"
	else
		not_ok "$what: no new round with four workers after the kill"
		show_log "$TEST_TMP/agent.A.log"
	fi
	finish_pair "$what" kill9
else
	abort_case "$what" "the job did not start"
fi

# ---- worker exit 1 -------------------------------------------------------
what="worker exit 1"
if start_pair exit1; then
	old="$(worker_pid A 0) $(worker_pid A 1) $(worker_pid B 0) $(worker_pid B 1)"
	worker_cmd B 0 "exit 1"
	if wait_for 20 job_running_after exit1 "$ROUND0" 2 &&
		wait_for 20 round_complete "$(job_round exit1)" 4; then
		ok "$what: a new round with all four workers forms"
		# shellcheck disable=SC2086
		check "$what: every worker of the old round is gone" pids_dead $old
		check_eq "$what: one restart charged" 1 "$(job_field exit1 .restart_count)"
		check_eq "$what: the failure's exit code" 1 \
			"$(job_field exit1 '.failures[0].exitcode')"
		check "$what: the failure carries the worker's stderr" \
			log_has <(job_field exit1 '.failures[0].message') "exiting with 1 as told"
	else
		not_ok "$what: no new round with four workers after the failure"
		show_log "$TEST_TMP/agent.B.log"
	fi
	finish_pair "$what" exit1
else
	abort_case "$what" "the job did not start"
fi

# ---- worker with grandchildren --------------------------------------------
what="worker with grandchildren"
# grandchildren_recorded N: N pids in the grandchildren file (each of the
# four workers records its child and its orphaned grandchild)
grandchildren_recorded() {
	[ "$(grep -c '^[0-9][0-9]*$' "$TEST_TMP/grandchildren" 2>/dev/null)" -ge "$1" ]
}
if start_pair grandkids FAULT_GRANDCHILDREN=1; then
	if wait_for 10 grandchildren_recorded 8; then
		gc0=$(head -n 8 "$TEST_TMP/grandchildren" | tr '\n' ' ')
		check "$what: the 8 children and grandchildren of the 4 workers run before the kill" \
			bash -c "for p in $gc0; do kill -0 \$p || exit 1; done"
		kill -KILL "$(worker_pid A 0)"
		if wait_for 20 job_running_after grandkids "$ROUND0" 2 &&
			wait_for 20 round_complete "$(job_round grandkids)" 4; then
			ok "$what: a new round forms after one worker is killed"
			# shellcheck disable=SC2086
			if wait_for 10 pids_dead $gc0; then
				ok "$what: the old round's 8 children and orphaned grandchildren are gone"
			else
				# shellcheck disable=SC2086
				not_ok "$what: children of the old round's workers survive the restart: $(describe_pids $(for p in $gc0; do alive "$p" && echo "$p"; done))"
			fi
		else
			not_ok "$what: no new round after the kill"
		fi
	else
		not_ok "$what: the workers did not record 8 children and grandchildren in 10 s (got $(wc -l <"$TEST_TMP/grandchildren" 2>/dev/null || echo 0))"
	fi
	finish_pair "$what" grandkids
else
	abort_case "$what" "the job did not start"
fi

# ---- repeated worker kills, heartbeats in flight ---------------------------------
# Heartbeats every 20 ms keep one in flight almost always, also while an
# agent stops its failed group and rejoins: an answer to a heartbeat of the
# old round (409, "restart") that arrives after the agent has joined the new
# round must not stop the new round's workers. 16 kills; after each, every
# rank must be started once in the new round.
what="repeated worker kills with heartbeats in flight"
new_case
if start_rdzv; then
	conf=heartbeat_interval=0.02,heartbeat_timeout=2,last_call_timeout=0.5
	for n in A B; do
		# shellcheck disable=SC2046
		start_agent "$n" "$BIN/dlaunch" $(agent_args storm 2 2 "$conf") \
			--max-restarts=20 --no-python "$WORKER"
	done
	kills=0
	if wait_for 30 job_running_with storm 2; then
		for i in $(seq 1 16); do
			r=$(job_round storm)
			wait_for 10 round_complete "$r" 4 || break
			kill -KILL "$(worker_pid A 1)" && kills=$((kills + 1))
			wait_for 10 job_running_after storm "$r" 2 || break
		done
		wait_for 10 round_complete "$(job_round storm)" 4
		check_eq "$what: $kills kills, $kills restarts" "$kills" \
			"$(job_field storm .restart_count)"
		spurious=$(grep -h 'ended (job RUNNING)' "$TEST_TMP"/agent.*.log | head -n 1)
		problems=$(ranks_problems)
		if [ -z "$problems" ] && [ -z "$spurious" ]; then
			ok "$what: every rank started once per round ($(wc -l <"$TEST_TMP/ranks.log") starts)"
		else
			not_ok "$what: a round's workers were restarted while the job stayed in that round: ${problems%%$'\n'*}; agent says: ${spurious#*info: }"
		fi
	else
		not_ok "$what: the job did not start"
	fi
	all_workers_done
	wait_agent A 30 && wait_agent B 30
	check_eq "$what: both agents exit 0" "0 0" "${AGENT_RC[A]:-running} ${AGENT_RC[B]:-running}"
	check_case "$what"
	stop_rdzv
else
	not_ok "$what: dlaunch-rdzv did not start"
fi

# ---- always-failing worker --------------------------------------------------
what="always-failing worker"
new_case
if start_rdzv; then
	MAX_RESTARTS=2
	# shellcheck disable=SC2046
	start_agent A env FAULT_ALWAYS_EXIT=3 "$BIN/dlaunch" \
		$(agent_args alwaysfail 2 2) --no-python "$WORKER"
	# shellcheck disable=SC2046
	start_agent B env FAULT_ALWAYS_EXIT=3 "$BIN/dlaunch" \
		$(agent_args alwaysfail 2 2) --no-python "$WORKER"
	unset MAX_RESTARTS
	if wait_agent A 60 && wait_agent B 30; then
		check_eq "$what: both agents exit 1" "1 1" "${AGENT_RC[A]} ${AGENT_RC[B]}"
		check_eq "$what: job state" FAILED "$(job_field alwaysfail .state)"
		check_eq "$what: restarts stop at --max-restarts" 2 \
			"$(job_field alwaysfail .restart_count)"
		starts=$(wc -l <"$TEST_TMP/ranks.log")
		check "$what: no restart storm ($starts worker starts, at most 3 rounds x 4)" \
			test "$starts" -le 12
		check "$what: both agents print the root cause (exit code 3)" \
			bash -c "grep -q 'failing on purpose with 3' '$TEST_TMP/agent.A.log' && grep -q 'failing on purpose with 3' '$TEST_TMP/agent.B.log'"
	else
		not_ok "$what: agents still running 60 s after start"
		show_log "$TEST_TMP/agent.A.log"
	fi
	check_case "$what"
	stop_rdzv
	AGENT_RC=()
else
	not_ok "$what: dlaunch-rdzv did not start"
fi

# ---- worker hang -------------------------------------------------------------
# A stopped (SIGSTOP) worker makes no progress but does not exit; only the
# agent's --progress-timeout notices (torchrun notices exits only, unless
# the program arms PyTorch's elastic timers; faults_trainer covers
# dlaunch-train's own collective timeout). The generic worker prints
# nothing, so here it shows progress by touching $DLAUNCH_PROGRESS_FILE
# every 100 ms; the stopped one no longer does: it is reported as hung, its
# group is stopped (SIGTERM and SIGCONT, which a stopped process needs to
# see it) and the job restarts.
what="worker hang"
new_case
if start_rdzv; then
	# shellcheck disable=SC2016 # expanded by the worker, not here
	ticker='while [ ! -e "$FAULT_DIR/done" ]; do touch "$DLAUNCH_PROGRESS_FILE"; sleep 0.1; done'
	for n in A B; do
		# shellcheck disable=SC2046
		start_agent "$n" "$BIN/dlaunch" $(agent_args hang 2 2) \
			--progress-timeout 1 --shutdown-timeout 5 --no-python \
			"$WORKER" bash -c "$ticker"
	done
	if wait_for 30 job_running_with hang 2 &&
		wait_for 20 round_complete "$(job_round hang)" 4; then
		ROUND0=$(job_round hang)
		old="$(worker_pid A 0) $(worker_pid A 1) $(worker_pid B 0) $(worker_pid B 1)"
		kill -STOP "$(worker_pid A 1)"
		if wait_for 20 job_running_after hang "$ROUND0" 2 &&
			wait_for 20 round_complete "$(job_round hang)" 4; then
			ok "$what: the stopped worker is detected and a new round with all four workers forms"
			# shellcheck disable=SC2086
			check "$what: every worker of the old round is gone, the stopped one too" \
				wait_for 10 pids_dead $old
			check_eq "$what: one restart charged" 1 "$(job_field hang .restart_count)"
			check_eq "$what: the failure is A's local rank 1, exit code -1, no signal" \
				"A 1 -1 null" "$(job_field hang '.failures[0] | "\(.node_id) \(.local_rank) \(.exitcode) \(.signal)"')"
			check "$what: the failure says no progress for 1 s" \
				log_has <(job_field hang '.failures[0].message') '^no progress for 1 s \(hung\?\)'
			check_members hang "$what: after"
		else
			not_ok "$what: no new round with four workers after the worker was stopped"
			show_log "$TEST_TMP/agent.A.log"
		fi
	else
		not_ok "$what: the job did not start"
		show_log "$TEST_TMP/agent.A.log"
	fi
	finish_pair "$what" hang
else
	not_ok "$what: dlaunch-rdzv did not start"
fi

finish
