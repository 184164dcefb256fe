#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_rdzv.sh - dlaunch against a real dlaunch-rdzv on loopback and
# --standalone: rank assignment over 2 and 3 agents, job-wide restarts,
# bounded failure with the root-cause report, kill -9 of an agent,
# SIGTERM leaving the rendezvous, dlaunch status.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
DL=$BIN/dlaunch
CONF=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=0.5
need_bin dlaunch dlaunch-rdzv

spawn_bg "$TEST_TMP/rdzv.log" "$BIN/dlaunch-rdzv" --listen 127.0.0.1:0
RDZV_PID=$LAST_PID
rdzv_port() { sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TEST_TMP/rdzv.log" | head -n 1; }
wait_for 20 bash -c "[ -n \"\$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' '$TEST_TMP/rdzv.log')\" ]" ||
	sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TEST_TMP/rdzv.log" >/dev/null
PORT=$(rdzv_port)
[ -n "$PORT" ] || PORT=$(sed -n 's/.*addr=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$TEST_TMP/rdzv.log" | head -n 1)
check "rendezvous server listening" test -n "$PORT"
EP=127.0.0.1:$PORT

# agent NAME JOB NNODES NPROC "OPTIONS" PROG ARGS...: start one agent in
# the background (OPTIONS are split into words); LAST_PID is its pid
agent() {
	local name=$1 job=$2 nnodes=$3 nproc=$4 opts=$5
	shift 5
	# shellcheck disable=SC2086
	spawn_bg "$TEST_TMP/agent.$job.$name.log" env DLAUNCH_NODE_ID="$name" \
		"$DL" --nnodes "$nnodes" --nproc-per-node "$nproc" \
		--rdzv-endpoint "$EP" --rdzv-id "$job" --rdzv-conf "$CONF" \
		--shutdown-timeout 2 $opts "$@"
}
all_exited() { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }
# dead_or_zombie PID: gone, or exited and only waiting to be reaped by
# whoever inherited it
dead_or_zombie() {
	[ -n "$1" ] || return 1
	! kill -0 "$1" 2>/dev/null || grep -qs '^State:.*Z' "/proc/$1/status"
}
rc_of() { wait "$1" 2>/dev/null; echo $?; }

# -- two agents, then three, with different worker counts
for n in 2 3; do
	job=ranks$n
	export AGENT_OUT=$TEST_TMP/$job.rec
	pids=()
	for i in $(seq 1 $n); do
		nproc=2
		[ "$i" = 2 ] && nproc=3
		agent "n$i" "$job" "$n" "$nproc" "" "$PROGS/agent_env.sh"
		pids+=("$LAST_PID")
	done
	check "$n agents: all exit" wait_for 60 all_exited "${pids[@]}"
	rcs=""
	for p in "${pids[@]}"; do rcs="$rcs$(rc_of "$p")"; done
	check_eq "$n agents: every agent exits 0" "$(printf '0%.0s' $(seq 1 $n))" "$rcs"
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
done

# -- a worker that fails once: every node restarts with count 1, success
export AGENT_OUT=$TEST_TMP/once.rec AGENT_SLEEP=0.5
agent a once 2 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
pa=$LAST_PID
agent b once 2 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
pb=$LAST_PID
check "fail once: both agents exit" wait_for 60 all_exited "$pa" "$pb"
check_eq "fail once: job succeeds on both nodes" "0 0" "$(rc_of "$pa") $(rc_of "$pb")"
check "fail once: ranks 0 and 1 ran again with restart count 1" \
	bash -c "grep -q '^0 1 ' '$AGENT_OUT' && grep -q '^1 1 ' '$AGENT_OUT'"

# -- always failing: the job ends after --max-restarts, exit 1, report
export AGENT_OUT=$TEST_TMP/always.rec AGENT_SLEEP=30
agent a always 2 1 "--max-restarts 1" "$PROGS/agent_fail.sh" always
pa=$LAST_PID
agent b always 2 1 "--max-restarts 1" "$PROGS/agent_fail.sh" always
pb=$LAST_PID
check "always fails: both agents exit" wait_for 60 all_exited "$pa" "$pb"
check_eq "always fails: both agents exit 1" "1 1" "$(rc_of "$pa") $(rc_of "$pb")"
check_eq "always fails: rank 1 ran max-restarts+1 times" 2 "$(awk '$1 == 1' "$AGENT_OUT" | wc -l)"
for n in a b; do
	log=$TEST_TMP/agent.always.$n.log
	check "always fails: node $n prints the report naming rank 1 and its error" \
		bash -c "grep -q 'job always FAILED' '$log' && grep -Eq 'rank +: 1 ' '$log' && grep -Eq 'exitcode +: 7' '$log' && grep -q 'ValueError: rank one is broken' '$log'"
done
check "status: job table lists the failed job" \
	bash -c "'$DL' status --rdzv-endpoint '$EP' | grep -Eq '^always +FAILED'"
check "status: one job shows members and the root cause" \
	bash -c "'$DL' status --rdzv-endpoint '$EP' --rdzv-id always | grep -q 'rank 1 exit 7'"

# -- kill -9 of one agent: its workers die, the others restart
mkdir -p "$TEST_TMP/k9"
unset AGENT_OUT AGENT_SLEEP
agent a k9 1:2 1 "--max-restarts 3" "$PROGS/agent_trap.sh" "$TEST_TMP/k9"
pa=$LAST_PID
agent b k9 1:2 1 "--max-restarts 3" "$PROGS/agent_trap.sh" "$TEST_TMP/k9"
pb=$LAST_PID
check "kill -9: both workers running" wait_for 30 bash -c "[ -e '$TEST_TMP/k9/ready.0' ] && [ -e '$TEST_TMP/k9/ready.1' ]"
victim_worker=$(pgrep -P "$pb" -f agent_trap.sh | head -n 1)
rm -f "$TEST_TMP/k9"/ready.*
kill -KILL "$pb"
check "kill -9: the killed agent's worker is gone within a second" \
	wait_for 1 dead_or_zombie "${victim_worker:-}"
check "kill -9: the survivor's worker restarted as rank 0 of 1 in a new round" \
	wait_for 30 bash -c "[ -e '$TEST_TMP/k9/ready.0' ] && grep -q 'round [2-9].*node rank 0 of 1' '$TEST_TMP/agent.k9.a.log'"

# -- SIGTERM to dlaunch: workers get it, non-zero exit, the node leaves
kill -TERM "$pa"
check "sigterm: dlaunch exits" wait_for 20 bash -c "! kill -0 $pa 2>/dev/null"
rc=$(rc_of "$pa")
check "sigterm: exit status non-zero ($rc)" test "$rc" -ne 0
check "sigterm: the worker received SIGTERM" test -s "$TEST_TMP/k9/got.0"
check "sigterm: the node left the rendezvous" \
	grep -q 'left job k9' "$TEST_TMP/agent.k9.a.log"

# -- standalone: 4 workers, every variable right
timeout 30 "$DL" --standalone --nproc-per-node 4 "$PROGS/agent_env.sh" >"$TEST_TMP/sa.out" 2>&1
check_eq "standalone: exit 0" 0 $?
check_eq "standalone: ranks 0..3 exactly once" "0 1 2 3" \
	"$(grep -o '^\[rank[0-9]*\]: ENV RANK=[0-9]*' "$TEST_TMP/sa.out" | sed 's/.*RANK=//' | sort -n | tr '\n' ' ' | sed 's/ $//')"
# every variable of DESIGN section 1, per rank: LOCAL_RANK and ROLE_RANK
# equal RANK on one node, ports and ids non-empty
for r in 0 1 2 3; do
	check "standalone: rank $r's environment" grep -Eq "^\[rank$r\]: ENV RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 GROUP_RANK=0 GROUP_WORLD_SIZE=1 ROLE_RANK=$r ROLE_NAME=default ROLE_WORLD_SIZE=4 MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=[1-9][0-9]* TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 TORCHELASTIC_RUN_ID=standalone-[0-9a-f]+ TORCHELASTIC_USE_AGENT_STORE=False TORCH_NCCL_ASYNC_ERROR_HANDLING=1 OMP_NUM_THREADS=1 DLAUNCH_JOB_ID=standalone-[0-9a-f]+ DLAUNCH_ROUND=[1-9][0-9]* DLAUNCH_NODE_ID=[^ ]+ ERRFILE=set\$" "$TEST_TMP/sa.out"
done
check_eq "standalone: one run id, master port and node id on every rank" 1 \
	"$(grep -o 'MASTER_PORT=[0-9]* .*RUN_ID=[^ ]* .*DLAUNCH_NODE_ID=[^ ]*' "$TEST_TMP/sa.out" | sed 's/TORCHELASTIC_RESTART.*TORCHELASTIC_RUN_ID/RUN_ID/; s/TORCHELASTIC_USE.*DLAUNCH_NODE_ID/NODE/' | sort -u | wc -l)"

kill -TERM "$RDZV_PID"
check "no process of the test left" wait_for 10 no_marked_left
finish
