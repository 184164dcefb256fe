#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_keeper.sh - nothing of a worker outlives its agent, however the
# agent dies (docs/reliability.md, "What outlives an agent").
#
# An agent killed with SIGKILL: its workers die by their parent-death
# signal, but what they forked does not; the agent's keeper (a small
# process it forks at start) ends it. The cases kill the agent while its
# workers run with children and orphaned grandchildren, while it waits out
# the grace period of a stop, and while it is starting a round's workers;
# then agent and keeper together, so that the next agent of the job must
# end what they left before it spawns. Each case that can runs twice: with
# the workers' cgroup (where this machine lets dlaunch make one) and with
# process groups only (DLAUNCH_CGROUP=0). The checker runs after every
# case.
#
# Alone for tests/run.sh -j (workers must be gone within 5 s): nothing runs
# beside it.
# test: alone
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch dlaunch-keeper

# pids_gone PID...: none of them runs (a zombie waiting for init counts
# as gone); false without a pid
pids_gone() {
	local p s
	[ $# -gt 0 ] || return 1
	for p in "$@"; do
		[[ "$p" =~ ^[0-9]+$ ]] || return 1
		s=$(awk '{sub(/.*\) /, ""); print $1}' "/proc/$p/stat" 2>/dev/null)
		[ -n "$s" ] && [ "$s" != Z ] && return 1
	done
	return 0
}
# pids_running PID...: every one of them runs
pids_running() {
	local p
	[ $# -gt 0 ] || return 1
	for p in "$@"; do
		pids_gone "$p" && return 1
	done
	return 0
}
# keeper_of NAME: the pid of agent NAME's keeper
keeper_of() {
	ps -o pid=,comm= --ppid "${AGENT_PID[$1]}" 2>/dev/null |
		awk '$2 == "dlaunch-keeper" {print $1; exit}'
}
# lines FILE N: FILE has at least N lines
lines() { [ "$(cat "$1" 2>/dev/null | wc -l)" -ge "$2" ]; }
# workers_of NAME: the pids of agent NAME's current workers
workers_of() { cat "$TEST_TMP"/pid."$1".* 2>/dev/null | tr '\n' ' '; }

CG_VARIANTS=("" 0)
cgroup_name() { [ "$1" = 0 ] && echo "process groups only" || echo "default: cgroup where one can be made"; }

# ---- agent kill -9 while its workers run with children ------------------
# A third variant runs a copy of dlaunch with no dlaunch-keeper beside it:
# its keeper is then a forked copy of the agent.
for cg in "${CG_VARIANTS[@]}" alone; do
	dl=$BIN/dlaunch
	if [ "$cg" = alone ]; then
		mkdir -p "$TEST_TMP/alone"
		cp "$BIN/dlaunch" "$TEST_TMP/alone/dlaunch"
		dl=$TEST_TMP/alone/dlaunch
		what="agent kill -9, workers with children and orphaned grandchildren (no dlaunch-keeper program: a forked keeper)"
		cg=
		job=kkillalone
	else
		what="agent kill -9, workers with children and orphaned grandchildren ($(cgroup_name "$cg"))"
		job=kkill$cg
	fi
	new_case
	if ! start_rdzv; then
		abort_case "$what" "dlaunch-rdzv did not start"
		continue
	fi
	for n in A B; do
		# shellcheck disable=SC2046
		start_agent "$n" env FAULT_GRANDCHILDREN=1 ${cg:+DLAUNCH_CGROUP=$cg} \
			"$dl" $(agent_args "$job" 1:2 2) --no-python "$WORKER"
	done
	if ! wait_for 30 job_running_with "$job" 2 ||
		! wait_for 20 round_complete "$(job_round "$job")" 4 ||
		! wait_for 10 lines "$TEST_TMP/grandchildren.A" 4; then
		show_log "$TEST_TMP/agent.A.log"
		abort_case "$what" "the job did not start"
		continue
	fi
	round0=$(job_round "$job")
	# shellcheck disable=SC2046
	set -- $(workers_of A) $(cat "$TEST_TMP/grandchildren.A")
	keeper=$(keeper_of A)
	check "$what: A has a keeper" test -n "$keeper"
	if [ "$dl" = "$BIN/dlaunch" ]; then
		check_eq "$what: the keeper is the dlaunch-keeper program" \
			"$BIN/dlaunch-keeper" "$(readlink "/proc/$keeper/exe" 2>/dev/null)"
	else
		check_eq "$what: the keeper is a copy of the agent" \
			"$dl" "$(readlink "/proc/$keeper/exe" 2>/dev/null)"
	fi
	check "$what: A's 2 workers and their 4 children and grandchildren run" pids_running "$@"
	kill -KILL "${AGENT_PID[A]}"
	check "$what: A's workers, their children and grandchildren are gone within 5 s" \
		wait_for 5 pids_gone "$@"
	check "$what: A's keeper exits once it has ended them" wait_for 5 pids_gone "$keeper"
	if wait_for 20 job_running_after "$job" "$round0" 1; then
		ok "$what: B goes on alone"
	else
		not_ok "$what: B did not go on alone"
		show_log "$RDZV_LOG"
	fi
	all_workers_done
	if wait_agent B 30; then
		check_eq "$what: B exits 0" 0 "${AGENT_RC[B]}"
	else
		not_ok "$what: B still running 30 s after its workers were told to finish"
	fi
	check_case "$what"
	stop_rdzv
done

# ---- agent kill -9 during a stop's grace period ---------------------------
# B's worker fails, so the round ends and A stops its worker: SIGTERM,
# which it and its children ignore, then a 60 s grace period. A is killed
# in it; nothing may wait for the 60 s.
for cg in "${CG_VARIANTS[@]}"; do
	what="agent kill -9 during a stop's grace period ($(cgroup_name "$cg"))"
	job=kstop$cg
	new_case
	if ! start_rdzv; then
		abort_case "$what" "dlaunch-rdzv did not start"
		continue
	fi
	# shellcheck disable=SC2046
	start_agent A env FAULT_GRANDCHILDREN=1 FAULT_IGNORE_TERM=1 ${cg:+DLAUNCH_CGROUP=$cg} \
		"$BIN/dlaunch" $(agent_args "$job" 1:2 1) --shutdown-timeout 60 \
		--no-python "$WORKER"
	# shellcheck disable=SC2046
	start_agent B "$BIN/dlaunch" $(agent_args "$job" 1:2 1) --no-python "$WORKER"
	if ! wait_for 30 job_running_with "$job" 2 ||
		! wait_for 20 round_complete "$(job_round "$job")" 2 ||
		! wait_for 10 lines "$TEST_TMP/grandchildren.A" 2; then
		show_log "$TEST_TMP/agent.A.log"
		abort_case "$what" "the job did not start"
		continue
	fi
	# shellcheck disable=SC2046
	set -- $(workers_of A) $(cat "$TEST_TMP/grandchildren.A")
	keeper=$(keeper_of A)
	worker_cmd B 0 "exit 1"
	if wait_for 15 log_has "$TEST_TMP/agent.A.log" "ignoring SIGTERM"; then
		ok "$what: A stopped its worker, which ignores SIGTERM"
	else
		not_ok "$what: A's worker never got a SIGTERM"
		show_log "$TEST_TMP/agent.A.log"
	fi
	check "$what: in the grace period A's worker and its children still run" pids_running "$@"
	kill -KILL "${AGENT_PID[A]}"
	check "$what: A's worker, its children and grandchildren are gone within 5 s (the grace period is 60 s)" \
		wait_for 5 pids_gone "$@"
	check "$what: A's keeper exits once it has ended them" wait_for 5 pids_gone "$keeper"
	all_workers_done
	if wait_agent B 30; then
		check_eq "$what: B exits 0" 0 "${AGENT_RC[B]}"
	else
		not_ok "$what: B still running 30 s after its workers were told to finish"
	fi
	check_case "$what"
	stop_rdzv
done

# ---- agent kill -9 while it starts a round's workers -----------------------
# slow_spawn.so holds the agent's third start of a worker forever: five of
# the six workers are started by its other spawning threads (and fork
# their children), the third never is, and the agent waits for it. Only the
# process-group variant: with a cgroup the starts are clone3 calls that a
# preloaded library cannot hold (nor need they: a child is in the cgroup
# from its first instruction).
what="agent kill -9 while starting its workers (process groups only)"
job=kspawn
so=$TEST_TMP/slow_spawn.so
new_case
if ! ${CC:-cc} -shared -fPIC -o "$so" "$FAULTS_DIR/slow_spawn.c" -ldl 2>"$TEST_TMP/cc.log"; then
	not_ok "$what: cannot build slow_spawn.so: $(head -c 300 "$TEST_TMP/cc.log")"
elif ! start_rdzv; then
	abort_case "$what" "dlaunch-rdzv did not start"
else
	# shellcheck disable=SC2046
	start_agent A env FAULT_GRANDCHILDREN=1 DLAUNCH_CGROUP=0 LD_PRELOAD="$so" \
		SLOW_SPAWN_AT=3 SLOW_SPAWN_FILE="$TEST_TMP/spawning" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$BIN/dlaunch" $(agent_args "$job" 1:1 6) --no-python "$WORKER"
	if wait_for 30 test -e "$TEST_TMP/spawning" &&
		wait_for 20 workers_started 5 &&
		wait_for 10 lines "$TEST_TMP/grandchildren.A" 10; then
		# shellcheck disable=SC2046
		set -- $(workers_of A) $(cat "$TEST_TMP/grandchildren.A")
		keeper=$(keeper_of A)
		check_eq "$what: A is caught starting: 5 of its 6 workers started" 5 \
			"$(wc -l <"$TEST_TMP/ranks.log")"
		check "$what: they and their 10 children and grandchildren run" pids_running "$@"
		kill -KILL "${AGENT_PID[A]}"
		check "$what: the started workers, their children and grandchildren are gone within 5 s" \
			wait_for 5 pids_gone "$@"
		check "$what: A's keeper exits once it has ended them" wait_for 5 pids_gone "$keeper"
	else
		not_ok "$what: A was not caught starting its workers (held: $(test -e "$TEST_TMP/spawning" && echo yes || echo no), $(cat "$TEST_TMP/ranks.log" 2>/dev/null | wc -l) workers started, $(cat "$TEST_TMP/grandchildren.A" 2>/dev/null | wc -l) children)"
		show_log "$TEST_TMP/agent.A.log"
	fi
	check_case "$what"
	stop_rdzv
fi

# ---- agent and keeper killed together; the next agent ends what they left ----
for cg in "${CG_VARIANTS[@]}"; do
	what="agent and keeper kill -9, then a new agent of the job ($(cgroup_name "$cg"))"
	job=krestart$cg
	new_case
	if ! start_rdzv; then
		abort_case "$what" "dlaunch-rdzv did not start"
		continue
	fi
	# shellcheck disable=SC2046
	args=$(agent_args "$job" 1:1 2)
	# shellcheck disable=SC2086
	start_agent A env FAULT_GRANDCHILDREN=1 ${cg:+DLAUNCH_CGROUP=$cg} \
		"$BIN/dlaunch" $args --no-python "$WORKER"
	if ! wait_for 30 job_running_with "$job" 1 ||
		! wait_for 20 round_complete "$(job_round "$job")" 2 ||
		! wait_for 10 lines "$TEST_TMP/grandchildren.A" 4; then
		show_log "$TEST_TMP/agent.A.log"
		abort_case "$what" "the job did not start"
		continue
	fi
	gc=$(tr '\n' ' ' <"$TEST_TMP/grandchildren.A")
	keeper=$(keeper_of A)
	# the agent leads its own process group (spawn_bg), its keeper is in it
	kill -KILL -- "-${AGENT_PID[A]}"
	# shellcheck disable=SC2086
	if wait_for 5 pids_gone "${AGENT_PID[A]}" "$keeper"; then
		check "$what: with agent and keeper gone, the workers' children and grandchildren live on" \
			pids_running $gc
	else
		not_ok "$what: agent or keeper still running after kill -9 of both"
	fi
	rm -f "$TEST_TMP/ranks.log"
	# the same node again, a new incarnation
	# shellcheck disable=SC2086
	start_agent A env ${cg:+DLAUNCH_CGROUP=$cg} "$BIN/dlaunch" $args \
		--no-python "$WORKER"
	if wait_for 30 workers_started 2; then
		# its workers recorded themselves: it spawned, so it has ended
		# the leftovers first
		# shellcheck disable=SC2086
		check "$what: before it spawned, the new agent ended its predecessor's 4 children and grandchildren" \
			pids_gone $gc
		check "$what: and said so" log_has "$TEST_TMP/agent.A.log" \
			"ended [0-9]+ process\(es\) left by an earlier agent of job $job"
	else
		not_ok "$what: the new agent's workers did not start"
		show_log "$TEST_TMP/agent.A.log"
	fi
	all_workers_done
	if wait_agent A 30; then
		check_eq "$what: the new agent exits 0" 0 "${AGENT_RC[A]}"
	else
		not_ok "$what: the new agent still running 30 s after its workers were told to finish"
	fi
	check_case "$what"
	stop_rdzv
done

finish
