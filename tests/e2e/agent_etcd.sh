#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_etcd.sh - dlaunch --rdzv-backend etcd against a real 3-member etcd
# cluster on loopback: the rendezvous scenarios of lib_scenarios.sh, as
# agent_rdzv.sh runs them against dlaunch-rdzv (ranks over 2 and 3 agents,
# a job-wide restart, the budget exhausted with the root-cause report and
# dlaunch status, a late joiner growing the job, a spare, kill -9 of the
# agent that leads and the takeover, SIGTERM leaving), and what only etcd
# has: what joining costs etcd (its request counts), bad input (a wrong
# endpoint, a server that is not etcd), TLS with client certificates and
# etcd's authentication.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_etcd.sh"
need_bin dlaunch
if ! etcd_available; then
	skip "etcd backend: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 3; then
	not_ok "a 3-member etcd cluster starts"
	finish
fi
SCEN_BACKEND=etcd
source "$(dirname "$0")/lib_scenarios.sh"

scen_ranks 2 2
scen_ranks 3 2:3

# -- what joining costs etcd: N agents started together make one
# transaction each to join (their key, the campaign, the reads of their
# inbox and the leader key in one), never a read apart, never a herd of
# campaigns; counted by etcd itself (its gRPC counters, which the JSON
# gateway's requests go through), summed over the members
# etcd_calls METHOD: the members' count of unary calls of METHOD, summed
etcd_calls() {
	etcd_metric_sum 'index($0, "grpc_server_started_total{") == 1 && index($0, m) {s += $2} END {printf "%d", s}' \
		-v m="grpc_method=\"$1\""
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

scen_fail_once
# over etcd the round that ended is re-formed without a write per
# survivor: the leader joins them from their keys, but for the master of
# that round (node rank 0), whose workers held its store: it rejoins by
# itself. The failed node may write its own rejoin before its inbox
# says so; the third, rank 2, never writes one
rank_of() { grep -o 'node rank [0-9]*' "$TEST_TMP/agent.once.$1.log" | head -1 | awk '{print $3}'; }
prejoined() { grep -q 'the leader joined it to the next round' "$TEST_TMP/agent.once.$1.log"; }
for n in a b c; do
	case $(rank_of "$n") in
	0) check "fail once: the master (node $n) rejoined by itself" not prejoined "$n" ;;
	2) check "fail once: rank 2 (node $n) was joined by the leader, wrote no rejoin" prejoined "$n" ;;
	esac
done
check "fail once: the leader said so" \
	grep -q 'survivors joined to the next one from their keys; its master .* rejoins by itself' \
	"$TEST_TMP"/agent.once.[abc].log
scen_budget
scen_grow

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
