#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_etcd.sh - dlaunch --rdzv-backend etcd against a real 3-member etcd
# cluster on loopback: the multi-agent cases of agent_rdzv.sh (ranks,
# job-wide restart, budget exhausted with the root-cause report, a late
# joiner growing the job, a spare, completion), the takeover when the
# agent that leads is killed, dlaunch status, and bad input (a wrong
# endpoint, a server that is not etcd).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_etcd.sh"
DL=$BIN/dlaunch
need_bin dlaunch
if ! etcd_available; then
	skip "etcd backend: $ETCD_WHY"
	finish
fi
CONF=heartbeat_interval=0.2,heartbeat_timeout=2,last_call_timeout=0.5,lease_ttl=2,key_prefix=/t$$

if ! etcd_cluster_start 3; then
	not_ok "a 3-member etcd cluster starts"
	finish
fi

# agent NAME JOB NNODES NPROC "OPTIONS" PROG ARGS...: one agent in the
# background; LAST_PID is its pid
agent() {
	local name=$1 job=$2 nnodes=$3 nproc=$4 opts=$5
	shift 5
	# shellcheck disable=SC2086
	spawn_bg "$TEST_TMP/agent.$job.$name.log" env DLAUNCH_NODE_ID="$name" \
		"$DL" --rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS" \
		--nnodes "$nnodes" --nproc-per-node "$nproc" --rdzv-id "$job" \
		--rdzv-conf "$CONF" --shutdown-timeout 2 $opts "$@"
}
all_exited() { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }
rc_of() { wait "$1" 2>/dev/null; echo $?; }
# record_state JOB: the job's state number in its record in etcd
record_state() { etcd_get "/t$$/$1/state" | jq -r .state; }

# -- three agents, 2-3 nodes, 2/3/2 workers: one round, ranks once each
export AGENT_OUT=$TEST_TMP/ranks.rec
pids=()
for i in 1 2 3; do
	nproc=2
	[ "$i" = 2 ] && nproc=3
	agent "n$i" ranks 2:3 "$nproc" "" "$PROGS/agent_env.sh"
	pids+=("$LAST_PID")
done
check "ranks: all three agents exit" wait_for 60 all_exited "${pids[@]}"
check_eq "ranks: every agent exits 0" "000" \
	"$(rc_of "${pids[0]}")$(rc_of "${pids[1]}")$(rc_of "${pids[2]}")"
check_eq "ranks: global ranks 0..6 once each" "0 1 2 3 4 5 6" \
	"$(awk '{print $1}' "$AGENT_OUT" | sort -n | tr '\n' ' ' | sed 's/ $//')"
check_eq "ranks: one world size" 7 "$(awk '{print $3}' "$AGENT_OUT" | sort -u)"
check_eq "ranks: one master everywhere" 1 \
	"$(awk '{print $4":"$5}' "$AGENT_OUT" | sort -u | wc -l)"
check "ranks: each node's ranks contiguous" \
	bash -c "sort -k7,7 -k1,1n '$AGENT_OUT' | awk '\$7 == prev && \$1 != last + 1 {bad = 1} {prev = \$7; last = \$1} END {exit bad}'"
check_eq "ranks: exactly one agent led the job" 1 \
	"$(grep -l 'leading job ranks through etcd' "$TEST_TMP"/agent.ranks.*.log | wc -l)"
check_eq "ranks: the job record in etcd says SUCCEEDED (3)" 3 "$(record_state ranks)"

# -- what joining costs etcd: N agents started together make one
# transaction each to join (their key, the campaign, the reads of their
# inbox and the leader key in one), never a read apart, never a herd of
# campaigns; counted by etcd itself (its gRPC counters, which the JSON
# gateway's requests go through), summed over the members
# etcd_calls METHOD: the member's count of unary calls of METHOD, summed
etcd_calls() {
	local port sum=0 n
	for port in "${ETCD_CLIENT_PORTS[@]}"; do
		n=$(curl -s -m 5 "http://127.0.0.1:$port/metrics" |
			awk -v m="grpc_method=\"$1\"" 'index($0, "grpc_server_started_total{") == 1 && index($0, m) {s += $2} END {printf "%d", s}')
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
}
unset AGENT_OUT
txn0=$(etcd_calls Txn) range0=$(etcd_calls Range) grant0=$(etcd_calls LeaseGrant)
pids=()
for i in 1 2 3 4 5 6; do
	agent "c$i" cost 6 1 "" "$PROGS/agent_env.sh"
	pids+=("$LAST_PID")
done
check "cost: six agents started together all exit" \
	wait_for 60 all_exited "${pids[@]}"
rcs=""
for p in "${pids[@]}"; do rcs+=$(rc_of "$p"); done
check_eq "cost: ... with exit status 0" "000000" "$rcs"
txn=$(($(etcd_calls Txn) - txn0)) range=$(($(etcd_calls Range) - range0))
check_eq "cost: one lease per agent" 6 $(($(etcd_calls LeaseGrant) - grant0))
# 6 joins; the leader's writes: the round's assignments, the record and
# the job's end (a few transactions, each many keys)
check "cost: one transaction per join, plus the leader's few writes ($txn)" \
	test "$txn" -ge 6 -a "$txn" -le 12
# the leader's own reads when it starts (the record, the node keys)
check "cost: no agent reads apart from its join ($range reads)" \
	test "$range" -le 2

# -- a worker fails once: job-wide restart with count 1, then success
export AGENT_OUT=$TEST_TMP/once.rec AGENT_SLEEP=0.5
agent a once 2:3 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
pa=$LAST_PID
agent b once 2:3 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
pb=$LAST_PID
agent c once 2:3 1 "--max-restarts 2" "$PROGS/agent_fail.sh" once
pc=$LAST_PID
check "fail once: all agents exit" wait_for 60 all_exited "$pa" "$pb" "$pc"
check_eq "fail once: the job succeeds on every node" "0 0 0" \
	"$(rc_of "$pa") $(rc_of "$pb") $(rc_of "$pc")"
check "fail once: ranks 0, 1, 2 ran again with restart count 1" \
	bash -c "grep -q '^0 1 ' '$AGENT_OUT' && grep -q '^1 1 ' '$AGENT_OUT' && grep -q '^2 1 ' '$AGENT_OUT'"
check "fail once: every node kept its node rank across the restart" \
	bash -c "for n in a b c; do grep -o 'node rank [0-9]' '$TEST_TMP/agent.once.'\$n.log | sort -u | wc -l | grep -qx 1 || exit 1; done"

# -- always failing: the job ends after --max-restarts, exit 1, report
export AGENT_OUT=$TEST_TMP/always.rec AGENT_SLEEP=30
agent a always 2 1 "--max-restarts 1" "$PROGS/agent_fail.sh" always
pa=$LAST_PID
agent b always 2 1 "--max-restarts 1" "$PROGS/agent_fail.sh" always
pb=$LAST_PID
check "always fails: both agents exit" wait_for 60 all_exited "$pa" "$pb"
check_eq "always fails: both agents exit 1" "1 1" "$(rc_of "$pa") $(rc_of "$pb")"
check_eq "always fails: rank 1 ran max-restarts+1 times" 2 \
	"$(awk '$1 == 1' "$AGENT_OUT" | wc -l)"
for n in a b; do
	log=$TEST_TMP/agent.always.$n.log
	check "always fails: node $n prints the report naming rank 1 and its error" \
		bash -c "grep -q 'job always FAILED' '$log' && grep -Eq 'rank +: 1 ' '$log' && grep -Eq 'exitcode +: 7' '$log' && grep -q 'ValueError: rank one is broken' '$log'"
done
ST=(--rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS" --rdzv-conf "key_prefix=/t$$")
check "status: the job table lists the failed job" \
	bash -c "'$DL' status ${ST[*]} | grep -Eq '^always +FAILED'"
check "status: one job shows its members and the root cause" \
	bash -c "'$DL' status ${ST[*]} --rdzv-id always | grep -q 'rank 1 exit 7'"
"$DL" status "${ST[@]}" --rdzv-id nosuchjob >"$TEST_TMP/st.out" 2>&1
check_eq "status: an unknown job exits 1" 1 $?
check "status: ... and says there is no such job" grep -q 'no job nosuchjob in etcd' "$TEST_TMP/st.out"

# -- a late joiner grows a running job (2 -> 3), a fourth is a spare
mkdir -p "$TEST_TMP/grow"
unset AGENT_OUT AGENT_SLEEP
agent a grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$TEST_TMP/grow"
pa=$LAST_PID
agent b grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$TEST_TMP/grow"
pb=$LAST_PID
check "grow: round 1 runs with two nodes" \
	wait_for 30 bash -c "[ -e '$TEST_TMP/grow/ready.0' ] && [ -e '$TEST_TMP/grow/ready.1' ] && grep -q 'round 1: node rank . of 2' '$TEST_TMP/agent.grow.a.log'"
rm -f "$TEST_TMP/grow"/ready.*
agent c grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$TEST_TMP/grow"
pc=$LAST_PID
check "grow: a third node joins and round 2 runs with three" \
	wait_for 30 bash -c "[ -e '$TEST_TMP/grow/ready.2' ] && grep -q 'round 2: node rank . of 3' '$TEST_TMP/agent.grow.c.log'"
check "grow: the scale-up charged no restart" \
	bash -c "grep -q 'round 2: .*restart 0' '$TEST_TMP/agent.grow.a.log'"
agent d grow 2:3 1 "--max-restarts 0" "$PROGS/agent_trap.sh" "$TEST_TMP/grow"
pd=$LAST_PID
# the leader has taken its join once it logged it; only then does the
# absence of a scale-up say something
check "spare: the leader takes a fourth node's join as a spare" \
	wait_for 20 bash -c "grep -q 'event=node_joined node=d .*waiting=1' '$TEST_TMP'/agent.grow.*.log"
check "spare: the running round goes on with three nodes (no scale-up for it)" \
	bash -c "! grep -q 'event=round_ended reason=scale_up node=d' '$TEST_TMP'/agent.grow.*.log && ! grep -q 'round 3' '$TEST_TMP/agent.grow.a.log'"

# -- kill -9 of the agent that leads: another leads, the survivors re-form
leader=$(grep -l 'leading job grow through etcd' "$TEST_TMP"/agent.grow.*.log | head -n 1)
leader=${leader##*agent.grow.}
leader=${leader%.log}
check "takeover: one agent leads job grow" test -n "$leader"
declare -A pid_of=([a]=$pa [b]=$pb [c]=$pc [d]=$pd)
kill -KILL "${pid_of[$leader]}"
survivor=a
[ "$leader" = a ] && survivor=b
check "takeover: another agent leads within a few lease TTLs" \
	wait_for 20 bash -c "grep -l 'took over job grow' '$TEST_TMP'/agent.grow.*.log | grep -qv 'agent.grow.$leader.log'"
check "takeover: the dead leader was evicted as its lease expired" \
	bash -c "grep -q 'event=node_evicted node=$leader reason=lease_expired' '$TEST_TMP'/agent.grow.*.log"
check "takeover: the survivors (with the spare) run a new round" \
	wait_for 30 bash -c "grep -q 'round [3-9]: node rank . of 3' '$TEST_TMP/agent.grow.$survivor.log'"

# -- SIGTERM: every agent leaves
for n in a b c d; do
	[ "$n" = "$leader" ] && continue
	kill -TERM "${pid_of[$n]}"
done
check "stop: every agent exits" wait_for 30 all_exited "$pa" "$pb" "$pc" "$pd"

# -- bad input: one clear line within seconds, nothing written
start=$(date +%s)
DLAUNCH_NODE_ID=x "$DL" --rdzv-backend etcd --rdzv-endpoint 127.0.0.1:1,127.0.0.1:2 \
	--rdzv-id bad --nnodes 1 --no-python /bin/true >"$TEST_TMP/bad1.out" 2>&1
check_eq "bad endpoint: exit 1" 1 $?
check "bad endpoint: within 10 s" test $(($(date +%s) - start)) -le 10
check "bad endpoint: one line names the endpoints" \
	grep -q 'error: cannot join job bad through etcd: no etcd answered at http://127.0.0.1:1,http://127.0.0.1:2' "$TEST_TMP/bad1.out"
python3 -m http.server 0 --bind 127.0.0.1 >"$TEST_TMP/http.log" 2>&1 &
HTTP_PID=$!
check "a plain HTTP server runs" wait_for 10 grep -q 'port [0-9]' "$TEST_TMP/http.log"
HPORT=$(sed -n 's/.*port \([0-9]*\).*/\1/p' "$TEST_TMP/http.log" | head -n 1)
DLAUNCH_NODE_ID=x "$DL" --rdzv-backend etcd --rdzv-endpoint "127.0.0.1:$HPORT" \
	--rdzv-id bad --nnodes 1 --no-python /bin/true >"$TEST_TMP/bad2.out" 2>&1
check_eq "not etcd: exit 1" 1 $?
check "not etcd: says it is not etcd's gateway" \
	grep -q "is not an answer of etcd's v3 gateway" "$TEST_TMP/bad2.out"
kill "$HTTP_PID" 2>/dev/null
wait "$HTTP_PID" 2>/dev/null
check_eq "nothing outside the key prefix was written" "" \
	"$(etcd_get_prefix "" | cut -f1 | grep -v "^/t$$/")"

etcd_cluster_destroy

# -- TLS with client certificates and etcd's authentication (a role
# limited to the key prefix): works; each bad credential is refused
# with one clear line
etcd_make_certs "$TEST_TMP/pki"
etcd_make_certs "$TEST_TMP/pki2" # another CA
etcd_cluster_start 1 --tls "$TEST_TMP/pki" --client-cert-auth
etcd_enable_auth "/s$$/" dl secret-$$
SEC=$(etcd_rdzv_conf)
check "secure: the agent's conf has https, CA, client cert and user" \
	bash -c "echo '$SEC' | grep -q 'protocol=https' && echo '$SEC' | grep -q cacert= && echo '$SEC' | grep -q username=dl"
# one_node JOB CONF: a one-node job through the secure cluster; its exit
# status, its output in $TEST_TMP/JOB.out
one_node() {
	DLAUNCH_NODE_ID=s timeout 60 "$DL" --rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS" \
		--rdzv-id "$1" --nnodes 1 --rdzv-conf "$2" --no-python /bin/echo hello \
		>"$TEST_TMP/$1.out" 2>&1
}
one_node sgood "$SEC,key_prefix=/s$$,lease_ttl=2"
check_eq "secure: a job through TLS and auth succeeds" 0 $?
check "secure: its worker ran" grep -q 'hello' "$TEST_TMP/sgood.out"
echo wrong >"$TEST_TMP/wrong.pw"
one_node sbadpw "$(echo "$SEC" | sed "s|password_file=[^,]*|password_file=$TEST_TMP/wrong.pw|"),key_prefix=/s$$"
check_eq "secure: a wrong password ends the join (exit 1)" 1 $?
check "secure: ... saying etcd refused the login" \
	grep -q 'etcd refused the login of user dl' "$TEST_TMP/sbadpw.out"
one_node sprefix "$SEC,key_prefix=/elsewhere"
check_eq "secure: a key prefix outside the role ends the join (exit 1)" 1 $?
check "secure: ... saying permission denied" grep -q 'permission denied' "$TEST_TMP/sprefix.out"
one_node sca "$(echo "$SEC" | sed "s|cacert=[^,]*|cacert=$TEST_TMP/pki2/ca.pem|"),key_prefix=/s$$"
check_eq "secure: a wrong CA ends the join (exit 1)" 1 $?
check "secure: ... naming the certificate check" \
	grep -Eiq 'certificate|SSL' "$TEST_TMP/sca.out"
one_node snocert "$(echo "$SEC" | sed "s|,cert=[^,]*||; s|,key=[^,]*||"),key_prefix=/s$$"
check_eq "secure: no client certificate ends the join (exit 1)" 1 $?
etcd_cluster_destroy

check "no process of the test left" wait_for 10 no_marked_left
finish
