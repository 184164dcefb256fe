# SPDX-License-Identifier: Apache-2.0
# lib_scenarios.sh - the rendezvous scenarios of the agent, written once
# and run against each backend they apply to: dlaunch-rdzv (HTTP) by
# agent_rdzv.sh and agent_rerun.sh, etcd by agent_etcd.sh and
# agent_etcd_ended.sh. Each scenario is a function; the scripts call the
# ones they want and keep their backend's own cases.
#
#   scen_ranks N NNODES     N agents of 2/3/2... workers: ranks once each
#   scen_fail_once          a worker fails once: job-wide restart, success
#   scen_budget             always failing: the budget ends the job, with
#                           the root-cause report and `dlaunch status`
#   scen_grow               a late joiner grows the job, a fourth is a
#                           spare, kill -9 of an agent (etcd: the one that
#                           leads), SIGTERM: the node leaves
#   scen_ended              an ended job: a late node runs nothing; after
#                           rerun_after the same command is run 2
#   scen_never_rerun        rerun_after 0: an ended id is never run again
#
# Sourced after lib.sh and lib_agent.sh, with SCEN_BACKEND set:
#   http  lib_rdzv.sh sourced; scen_start_server starts dlaunch-rdzv
#         (with SCEN_SERVER_ARGS, e.g. --state-dir, --rerun-after)
#   etcd  lib_etcd.sh sourced and a cluster up (etcd_cluster_start)
# What differs between the backends is here, once: how agents reach the
# rendezvous (RDZV_OPTS, CONF), how `dlaunch status` reaches it
# (STATUS_OPTS), where the rendezvous logs its events (event_logs: the
# server's log, or the agents' logs where the leader runs the state
# machine), and a few reads of the job beside `dlaunch status` (the time
# it ended; over etcd its leader key). A check that only one backend can
# make says so where it is.
DL=$BIN/dlaunch

case "$SCEN_BACKEND" in
http)
	CONF=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=0.5
	# the line the server logs when a silent node is evicted
	EVICTED_HOW=silent_ms=
	# what `dlaunch status` says of a job it does not know
	NO_JOB_SAYS='answered 404: no job nosuchjob'
	;;
etcd)
	CONF=heartbeat_interval=0.2,heartbeat_timeout=2,last_call_timeout=0.5,lease_ttl=2,key_prefix=/t$$
	RDZV_OPTS=(--rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS")
	STATUS_OPTS=("${RDZV_OPTS[@]}" --rdzv-conf "key_prefix=/t$$")
	EVICTED_HOW=reason=lease_expired
	NO_JOB_SAYS="no job nosuchjob in etcd at .* under /t$$"
	;;
*)
	not_ok "lib_scenarios.sh: SCEN_BACKEND is '${SCEN_BACKEND:-}' (http or etcd)"
	finish
	;;
esac

# scen_start_server: (http) start dlaunch-rdzv with SCEN_SERVER_ARGS, or
# start it again (a running one is stopped first: its state stays with
# it only through a --state-dir); sets EP, RDZV_OPTS, STATUS_OPTS
scen_start_server() {
	[ -n "${RDZV_PID:-}" ] && alive "$RDZV_PID" && rdzv_stop
	if ! rdzv_start "$TEST_TMP/rdzv.$((${SCEN_STARTS:-0} + 1)).log" \
		"${SCEN_SERVER_ARGS[@]}"; then
		not_ok "dlaunch-rdzv starts"
		finish
	fi
	SCEN_STARTS=$((${SCEN_STARTS:-0} + 1))
	EP=${RDZV#http://}
	ok "dlaunch-rdzv listening on $EP (${SCEN_SERVER_ARGS[*]})"
	RDZV_OPTS=(--rdzv-endpoint "$EP")
	STATUS_OPTS=("${RDZV_OPTS[@]}")
}

# event_logs: the files the rendezvous' state machine logs its events to
# (event=node_joined, node_evicted, round_ended, run_started)
event_logs() {
	if [ "$SCEN_BACKEND" = http ]; then
		ls "$TEST_TMP"/rdzv.*.log 2>/dev/null
	else
		ls "$TEST_TMP"/agent.*.log 2>/dev/null
	fi
}
# events_have REGEX: some event log has a line matching REGEX
# (false without a log: a check that nothing was logged must not pass
# for want of a log to read)
events_have() {
	local logs
	mapfile -t logs < <(event_logs)
	[ ${#logs[@]} -gt 0 ] || return 2
	grep -Eq -- "$1" "${logs[@]}" </dev/null 2>/dev/null
}

# agent NAME JOB NNODES NPROC "OPTIONS" PROG ARGS...: one agent in the
# background (OPTIONS are split into words), its log
# $TEST_TMP/agent.JOB.NAME.log; LAST_PID is its pid. SCEN_EXTRA_CONF is
# added to its --rdzv-conf.
agent() {
	local name=$1 job=$2 nnodes=$3 nproc=$4 opts=$5
	shift 5
	# shellcheck disable=SC2086
	spawn_bg "$TEST_TMP/agent.$job.$name.log" env DLAUNCH_NODE_ID="$name" \
		"$DL" "${RDZV_OPTS[@]}" --nnodes "$nnodes" --nproc-per-node "$nproc" \
		--rdzv-id "$job" --rdzv-conf "$CONF${SCEN_EXTRA_CONF:-}" \
		--shutdown-timeout 2 $opts "$@"
}
all_exited() { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }
rc_of() { wait "$1" 2>/dev/null; echo $?; }
# rcs_of PID...: their exit statuses, one digit each (waits for none)
rcs_of() { local p out=""; for p in "$@"; do out+=$(rc_of "$p"); done; echo "$out"; }
zeros() { printf '0%.0s' $(seq 1 "$1"); }
# dead_or_zombie PID: gone, or exited and only waiting to be reaped by
# whoever inherited it
dead_or_zombie() {
	[ -n "$1" ] || return 1
	! kill -0 "$1" 2>/dev/null || grep -qs '^State:.*Z' "/proc/$1/status"
}
# not CMD...: CMD ran and said no (status 1); an error (2) is no answer
not() {
	"$@"
	[ $? = 1 ]
}
# scen_status ARGS...: dlaunch status against the backend (10 s at most)
scen_status() { timeout 10 "$DL" status "${STATUS_OPTS[@]}" "$@"; }
# leader_of JOB: (etcd) the node its leader key names
leader_of() { etcd_get "/t$$/$1/leader" | jq -r '.node_id // empty'; }
# ended_ms_ago JOB: how long ago JOB ended, as the backend keeps it (the
# server's detail; the job record in etcd); empty when it does not say
ended_ms_ago() {
	local t
	if [ "$SCEN_BACKEND" = http ]; then
		curl -sf -m 10 "$RDZV/v1/jobs/$1" | jq -r '.ended_ms_ago // empty'
	else
		t=$(etcd_get "/t$$/$1/state" | jq -r '.ended_unix_ms // empty')
		[[ "$t" =~ ^[0-9]+$ ]] && echo $((${EPOCHREALTIME//[.,]/} / 1000 - t))
	fi
}

# scen_ranks N NNODES: N agents (2, 3, 2... workers) of a job with
# --nnodes NNODES, started together: one round, every rank once, one
# world size and master, each node's ranks contiguous, the job SUCCEEDED
scen_ranks() {
	local n=$1 job=ranks$1 i nproc world pids=()
	export AGENT_OUT=$TEST_TMP/$job.rec
	for i in $(seq 1 "$n"); do
		nproc=2
		[ "$i" = 2 ] && nproc=3
		agent "n$i" "$job" "$2" "$nproc" "" "$PROGS/agent_env.sh"
		pids+=("$LAST_PID")
	done
	check "$n agents: all exit" wait_for 60 all_exited "${pids[@]}"
	check_eq "$n agents: every agent exits 0" "$(zeros "$n")" "$(rcs_of "${pids[@]}")"
	world=$((2 * n + 1))
	check_eq "$n agents: global ranks 0..$((world - 1)) once each" \
		"$(seq -s ' ' 0 $((world - 1)))" \
		"$(awk '{print $1}' "$AGENT_OUT" | sort -n | tr '\n' ' ' | sed 's/ $//')"
	check_eq "$n agents: one world size everywhere" "$world" \
		"$(awk '{print $3}' "$AGENT_OUT" | sort -u | tr '\n' ' ' | sed 's/ $//')"
	check_eq "$n agents: one master everywhere" 1 \
		"$(awk '{print $4":"$5}' "$AGENT_OUT" | sort -u | wc -l)"
	check_eq "$n agents: distinct node ids" "$n" \
		"$(awk '{print $7}' "$AGENT_OUT" | sort -u | wc -l)"
	# each node's ranks are contiguous: max - min + 1 == count
	check "$n agents: each node's ranks contiguous" \
		bash -c "sort -k7,7 -k1,1n '$AGENT_OUT' | awk '\$7 == prev && \$1 != last + 1 {bad = 1} {prev = \$7; last = \$1} END {exit bad}'"
	check "$n agents: dlaunch status says the job SUCCEEDED in round 1, world size $world" \
		bash -c "'$DL' status ${STATUS_OPTS[*]} --rdzv-id $job | grep -q '^job $job: SUCCEEDED, round 1, restarts 0/0, .*world size $world,'"
	if [ "$SCEN_BACKEND" = etcd ]; then
		# etcd only: one agent leads, and the record it wrote says so
		check_eq "$n agents: exactly one agent led the job" 1 \
			"$(grep -l "leading job $job through etcd" "$TEST_TMP"/agent."$job".*.log | wc -l)"
		check_eq "$n agents: the job record in etcd says SUCCEEDED (3)" 3 \
			"$(etcd_get "/t$$/$job/state" | jq -r .state)"
	fi
	unset AGENT_OUT
}

# scen_fail_once: rank 1 fails in its first attempt; every node restarts
# with count 1, keeps its node rank, and the job succeeds
scen_fail_once() {
	local pa pb pc n
	export AGENT_OUT=$TEST_TMP/once.rec AGENT_SLEEP=0.5
	agent a once 2:3 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
	pa=$LAST_PID
	agent b once 2:3 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
	pb=$LAST_PID
	agent c once 2:3 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
	pc=$LAST_PID
	check "fail once: all agents exit" wait_for 60 all_exited "$pa" "$pb" "$pc"
	check_eq "fail once: the job succeeds on every node" "000" "$(rcs_of "$pa" "$pb" "$pc")"
	check "fail once: ranks 0, 1, 2 ran again with restart count 1" \
		bash -c "grep -q '^0 1 ' '$AGENT_OUT' && grep -q '^1 1 ' '$AGENT_OUT' && grep -q '^2 1 ' '$AGENT_OUT'"
	for n in a b c; do
		check_eq "fail once: node $n kept its node rank across the restart" 1 \
			"$(grep -o 'node rank [0-9]*' "$TEST_TMP/agent.once.$n.log" | sort -u | wc -l)"
	done
	check "fail once: dlaunch status says SUCCEEDED after one restart" \
		bash -c "'$DL' status ${STATUS_OPTS[*]} --rdzv-id once | grep -q '^job once: SUCCEEDED, round [2-9], restarts 1/2,'"
	unset AGENT_OUT AGENT_SLEEP
}

# scen_budget: rank 1 always fails: the job ends after --max-restarts,
# every agent exits 1 and prints the report naming the root cause, and
# `dlaunch status` shows it
scen_budget() {
	local pa pb n log
	export AGENT_OUT=$TEST_TMP/always.rec AGENT_SLEEP=30
	agent a always 2 1 "--max-restarts 1" "$PROGS/agent_fail.sh" always
	pa=$LAST_PID
	agent b always 2 1 "--max-restarts 1" "$PROGS/agent_fail.sh" always
	pb=$LAST_PID
	check "always fails: both agents exit" wait_for 60 all_exited "$pa" "$pb"
	check_eq "always fails: both agents exit 1" "11" "$(rcs_of "$pa" "$pb")"
	check_eq "always fails: rank 1 ran max-restarts+1 times" 2 \
		"$(awk '$1 == 1' "$AGENT_OUT" | wc -l)"
	for n in a b; do
		log=$TEST_TMP/agent.always.$n.log
		check "always fails: node $n prints the report naming rank 1 and its error" \
			bash -c "grep -q 'job always FAILED' '$log' && grep -Eq 'rank +: 1 ' '$log' && grep -Eq 'exitcode +: 7' '$log' && grep -q 'ValueError: rank one is broken' '$log'"
	done
	check "status: the job table lists the failed job" \
		bash -c "'$DL' status ${STATUS_OPTS[*]} | grep -Eq '^always +FAILED +[0-9]+ +2 +2 +1/1 *$'"
	scen_status --rdzv-id always >"$TEST_TMP/st.always" 2>&1
	check "status: one job shows its members" \
		bash -c "grep -q '^job always: FAILED, .*restarts 1/1' '$TEST_TMP/st.always' && [ \$(grep -Ec '^[01] +[ab] ' '$TEST_TMP/st.always') = 2 ]"
	check "status: ... and the root cause first, with its message" \
		bash -c "grep -A1 '^failures (first is the root cause):' '$TEST_TMP/st.always' | grep -q 'rank 1 exit 7: ValueError: rank one is broken'"
	scen_status --rdzv-id nosuchjob >"$TEST_TMP/st.out" 2>&1
	check_eq "status: an unknown job exits 1" 1 $?
	check "status: ... and says there is no such job" grep -Eq "$NO_JOB_SAYS" "$TEST_TMP/st.out"
	unset AGENT_OUT AGENT_SLEEP
}

# status_shows_spare: job grow runs round 2 on three nodes, d waiting
status_shows_spare() {
	scen_status --rdzv-id grow >"$TEST_TMP/st.grow" 2>&1 &&
		grep -q '^job grow: RUNNING, round 2, restarts 0/0, nodes 2-3, world size 3,' "$TEST_TMP/st.grow" &&
		[ "$(grep -Ec '^[0-2] +[a-d] ' "$TEST_TMP/st.grow")" = 3 ] &&
		grep -qx 'waiting: d' "$TEST_TMP/st.grow"
}

# scen_grow: a job of 2:3 nodes runs on two; a third joins and the job
# grows at once (no restart charged); a fourth waits as a spare while the
# round goes on; kill -9 of an agent (over etcd the one that leads: the
# others take over): its worker dies with it, it is evicted, and the
# survivors with the spare run a new round of three; SIGTERM to one of
# them: its worker gets it, it exits non-zero and leaves the rendezvous
scen_grow() {
	local d=$TEST_TMP/grow pa pb pc pd victim vworker survivor rank n rc
	local -A pid_of
	mkdir -p "$d"
	agent a grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$d"
	pa=$LAST_PID
	agent b grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$d"
	pb=$LAST_PID
	check "grow: round 1 runs with two nodes" \
		wait_for 30 bash -c "[ -e '$d/ready.0' ] && [ -e '$d/ready.1' ] && grep -q 'round 1: node rank . of 2' '$TEST_TMP/agent.grow.a.log'"
	rm -f "$d"/ready.*
	agent c grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$d"
	pc=$LAST_PID
	check "grow: a third node joins and round 2 runs with three" \
		wait_for 30 bash -c "[ -e '$d/ready.0' ] && [ -e '$d/ready.1' ] && [ -e '$d/ready.2' ] && grep -q 'round 2: node rank . of 3' '$TEST_TMP/agent.grow.c.log'"
	check "grow: the scale-up charged no restart" \
		grep -q 'round 2: .*restart 0' "$TEST_TMP/agent.grow.a.log"
	agent d grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$d"
	pd=$LAST_PID
	# the rendezvous has taken its join once it logged it; only then
	# does the absence of a scale-up say something
	check "spare: the rendezvous takes a fourth node's join as a spare" \
		wait_for 20 events_have 'event=node_joined node=d .*waiting=1'
	check "spare: the running round goes on with three nodes (no scale-up for it)" \
		bash -c "! grep -q 'round 3' '$TEST_TMP/agent.grow.a.log'"
	check "spare: ... and the rendezvous ended no round for it" \
		not events_have 'event=round_ended reason=scale_up node=d'

	# (over etcd the leader writes the job record a moment after it
	# took the join: the status is polled)
	check "spare: dlaunch status lists three members and d waiting" \
		wait_for 10 status_shows_spare

	# -- kill -9 of one agent; over etcd, the one that leads the job
	pid_of=([a]=$pa [b]=$pb [c]=$pc [d]=$pd)
	victim=b
	if [ "$SCEN_BACKEND" = etcd ]; then
		victim=$(leader_of grow)
		check "kill -9: one agent leads job grow" test -n "$victim"
		[ -n "$victim" ] || victim=b
	fi
	survivor=a
	[ "$victim" = a ] && survivor=c
	vworker=$(pgrep -P "${pid_of[$victim]}" -f agent_trap.sh | head -n 1)
	rm -f "$d"/ready.*
	kill -KILL "${pid_of[$victim]}"
	check "kill -9: the killed agent's worker is gone within a second" \
		wait_for 1 dead_or_zombie "${vworker:-}"
	if [ "$SCEN_BACKEND" = etcd ]; then
		# etcd only: the leader's key goes with its lease; another takes over
		check "kill -9: another agent leads within a few lease TTLs" \
			wait_for 20 bash -c "grep -l 'took over job grow' '$TEST_TMP'/agent.grow.*.log | grep -qv 'agent.grow.$victim.log'"
	fi
	check "kill -9: the dead agent is evicted when it goes silent" \
		wait_for 20 events_have "event=node_evicted node=$victim $EVICTED_HOW"
	check "kill -9: the survivors (with the spare) run a new round of three" \
		wait_for 30 bash -c "[ -e '$d/ready.0' ] && [ -e '$d/ready.1' ] && [ -e '$d/ready.2' ] && grep -q 'round [3-9]: node rank . of 3' '$TEST_TMP/agent.grow.$survivor.log'"

	# -- SIGTERM to one: its worker gets it, it exits non-zero and leaves
	rank=$(sed -n 's/.*round [3-9][0-9]*: node rank \([0-9]*\) of 3.*/\1/p' \
		"$TEST_TMP/agent.grow.$survivor.log" | tail -n 1)
	rm -f "$d"/got.*
	kill -TERM "${pid_of[$survivor]}"
	check "sigterm: dlaunch exits" wait_for 20 bash -c "! kill -0 ${pid_of[$survivor]} 2>/dev/null"
	rc=$(rc_of "${pid_of[$survivor]}")
	check "sigterm: exit status non-zero ($rc)" test "$rc" -ne 0
	# one worker per node: the node's worker is the rank of its node rank
	check_eq "sigterm: the worker (rank ${rank:-none}) received SIGTERM" TERM \
		"$(cat "$d/got.${rank:-none}" 2>/dev/null)"
	check "sigterm: the node left the rendezvous" \
		grep -q "left job grow" "$TEST_TMP/agent.grow.$survivor.log"
	for n in a b c d; do
		[ "$n" = "$victim" ] || [ "$n" = "$survivor" ] && continue
		kill -TERM "${pid_of[$n]}"
	done
	check "stop: every agent exits" wait_for 30 all_exited "$pa" "$pb" "$pc" "$pd"
}

# scen_ended RERUN_AFTER_S LATE_AFTER_MS: job rr of two nodes runs and
# succeeds; a node late for it runs nothing and exits 1, with the
# rendezvous' reason; once RERUN_AFTER_S seconds have passed since the
# end, the same command is run 2 (round 2), run 1 kept in the status.
# Over HTTP the server's --rerun-after (SCEN_SERVER_ARGS) decides and
# must be RERUN_AFTER_S; over etcd each join's rerun_after does, the
# leader's (the late node's own: 1 h, so that a slow start here cannot
# make it later than that). LATE_AFTER_MS is the one the late join meets.
scen_ended() {
	local p1 p2 p3 ms after=$1 late_ms=$2
	export AGENT_OUT=$TEST_TMP/ended.rec
	[ "$SCEN_BACKEND" = etcd ] && SCEN_EXTRA_CONF=,rerun_after=${after}s
	agent n1 rr 2 1 "" "$PROGS/agent_env.sh"; p1=$LAST_PID
	agent n2 rr 2 1 "" "$PROGS/agent_env.sh"; p2=$LAST_PID
	check "run 1: both agents exit" wait_for 60 all_exited "$p1" "$p2"
	check_eq "run 1: both exit 0" "00" "$(rcs_of "$p1" "$p2")"
	check_eq "run 1: two workers ran" 2 "$(wc -l <"$AGENT_OUT")"
	ms=$(ended_ms_ago rr)
	check "run 1: the rendezvous keeps when the job ended (${ms:-nothing} ms ago)" \
		bash -c "[[ '$ms' =~ ^[0-9]+\$ ]]"

	# -- a node late for run 1: its peers are gone, it must not start one
	[ "$SCEN_BACKEND" = etcd ] && SCEN_EXTRA_CONF=,rerun_after=1h
	agent n3 rr 2 1 "" "$PROGS/agent_env.sh"; p3=$LAST_PID
	check "late node: exits" wait_for 30 all_exited "$p3"
	check_eq "late node: exits 1, nothing ran is no success" 1 "$(rc_of "$p3")"
	check "late node: it names the run it is late for, in the rendezvous' words" \
		grep -Eq "job rr has already ended \(SUCCEEDED\): job rr has ended \(SUCCEEDED\) [0-9]+ ms ago: this node is late for run 1; a join from $late_ms ms after the end starts a new run \(or use another job id\)" \
		"$TEST_TMP/agent.rr.n3.log"
	check "late node: says nothing ran" grep -q "nothing ran here" "$TEST_TMP/agent.rr.n3.log"
	check_eq "late node: no worker ran" 2 "$(wc -l <"$AGENT_OUT")"
	check "late node: run 1 stays SUCCEEDED, the only run" \
		bash -c "'$DL' status ${STATUS_OPTS[*]} --rdzv-id rr >'$TEST_TMP/st.rr1' && grep -q '^job rr: SUCCEEDED, round 1,' '$TEST_TMP/st.rr1' && ! grep -q 'earlier runs' '$TEST_TMP/st.rr1'"

	# -- the same command once rerun_after has passed: run 2
	[ "$SCEN_BACKEND" = etcd ] && SCEN_EXTRA_CONF=,rerun_after=${after}s
	ended_long_enough() { ms=$(ended_ms_ago rr); [ "${ms:-0}" -ge $((after * 1000)) ]; }
	check "rerun: the end is rerun_after old" wait_for $((after + 20)) ended_long_enough
	agent n1 rr 2 1 "" "$PROGS/agent_env.sh"; p1=$LAST_PID
	agent n2 rr 2 1 "" "$PROGS/agent_env.sh"; p2=$LAST_PID
	check "rerun: both agents exit" wait_for 60 all_exited "$p1" "$p2"
	check_eq "rerun: both exit 0" "00" "$(rcs_of "$p1" "$p2")"
	check_eq "rerun: the workers ran again" 4 "$(wc -l <"$AGENT_OUT")"
	check "rerun: their workers run in round 2 (the round after run 1's)" \
		bash -c "grep -q 'DLAUNCH_ROUND=2 ' '$TEST_TMP/agent.rr.n1.log' && grep -q 'DLAUNCH_ROUND=2 ' '$TEST_TMP/agent.rr.n2.log'"
	check "rerun: the rendezvous says run 2 started after the SUCCEEDED one" \
		events_have "job=rr run=2 round=2 event=run_started previous=SUCCEEDED"
	scen_status --rdzv-id rr >"$TEST_TMP/st.rr2" 2>&1
	check "rerun: dlaunch status shows run 2 SUCCEEDED and run 1 kept" \
		bash -c "grep -q '^job rr: SUCCEEDED, round 2,' '$TEST_TMP/st.rr2' && grep -qx 'run 2; earlier runs: 1 SUCCEEDED (round 1, restarts 0)' '$TEST_TMP/st.rr2'"
	unset AGENT_OUT SCEN_EXTRA_CONF
}

# scen_never_rerun: with rerun_after 0 (over HTTP the server's
# --rerun-after 0, in SCEN_SERVER_ARGS) a job id that ended is never run
# again: a join after the end is refused, in the rendezvous' words
scen_never_rerun() {
	export AGENT_OUT=$TEST_TMP/never.rec
	[ "$SCEN_BACKEND" = etcd ] && SCEN_EXTRA_CONF=,rerun_after=0
	agent n1 never 1 1 "" "$PROGS/agent_env.sh"
	check "rerun_after=0: the run succeeds" wait_for 60 dl_exited "$LAST_PID"
	check_eq "rerun_after=0: ... exit 0" 0 "$DL_RC"
	agent n2 never 1 1 "" "$PROGS/agent_env.sh"
	check "rerun_after=0: a join after the end exits" wait_for 30 dl_exited "$LAST_PID"
	check_eq "rerun_after=0: ... with 1" 1 "$DL_RC"
	check "rerun_after=0: it is told reruns are off, in the rendezvous' words" \
		grep -q "job never has ended (SUCCEEDED); this server does not rerun ended jobs: use another job id" \
		"$TEST_TMP/agent.never.n2.log"
	check_eq "rerun_after=0: no worker ran for the join" 1 "$(wc -l <"$AGENT_OUT")"
	unset AGENT_OUT SCEN_EXTRA_CONF
}
