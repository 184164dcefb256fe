#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rdzv_rounds.sh - dlaunch-rdzv over real HTTP: a round of three nodes,
# eviction of a silent node, failure reports and the restart budget, a late
# joiner, stale-round fencing, job listing, metrics, clean SIGTERM.
#
# Alone for tests/run.sh -j (three background joins must meet within a 5 s
# last call, heartbeats within 4 s; beside other tests the ranks came out
# wrong): nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch-rdzv

check "--help documents --listen and --state-dir" \
	bash -c "'$BIN/dlaunch-rdzv' --help | grep -q -- --state-dir"
"$BIN/dlaunch-rdzv" --max-body nonsense >/dev/null 2>&1
check_eq "a bad option value exits 2" 2 $?

rdzv_start "$TEST_TMP/rdzv.log" || { not_ok "server starts"; finish; }
ok "server starts and prints its port"
check_eq "healthz" 200 "$(req GET /healthz)"

JOB=job42
JOB_CONF='"min_nodes":2,"max_nodes":3,"max_restarts":1,"last_call_timeout":"5s","heartbeat_timeout":"4s","heartbeat_interval":"200ms"'

# --- three nodes, min 2 max 3: one round, ranks 0..2 ---
join_bg "$TEST_TMP/a" nodeA 2 '"addr":"127.0.0.10","master_port":29501'
join_bg "$TEST_TMP/b" nodeB 4 '"addr":"127.0.0.11","master_port":29502'
join_bg "$TEST_TMP/c" nodeC 2 '"addr":"127.0.0.12","master_port":29503'
join_wait "$TEST_TMP/a" "$TEST_TMP/b" "$TEST_TMP/c" || not_ok "joins answered"
# nodes A and B beat from now on; C stays silent
beat_bg nodeA; BEAT_A=$LAST_PID
beat_bg nodeB; BEAT_B=$LAST_PID
codes=$(cat "$TEST_TMP"/{a,b,c}.code | tr -d '\n')
check_eq "three joins answered 200" 200200200 "$codes"
ranks=$(jq -r .node_rank "$TEST_TMP"/{a,b,c} | sort | tr '\n' ' ')
check_eq "distinct node ranks 0..2" "0 1 2 " "$ranks"
check_eq "one world size" "8" "$(jq -r .world_size "$TEST_TMP"/{a,b,c} | sort -u | tr -d '\n')"
check_eq "one master" "1" "$(jq -r '"\(.master_addr):\(.master_port)"' "$TEST_TMP"/{a,b,c} | sort -u | wc -l)"
check_eq "one round" "1" "$(jq -r .round "$TEST_TMP"/{a,b,c} | sort -u | tr -d '\n')"
# rank offsets: the sum of the nproc of lower node ranks (the join answer
# carries no member list, which would make n joins cost O(n^2): the job
# detail has it)
req GET "/v1/jobs/$JOB" >/dev/null
cp "$TEST_TMP/body" "$TEST_TMP/detail"
check_eq "a join answer carries no member list" null "$(jq -r .members "$TEST_TMP/a")"
offsets_ok=1
for f in a b c; do
	r=$(jq -r .node_rank "$TEST_TMP/$f")
	want=$(jq -r "[.members[] | select(.node_rank < $r) | .nproc] | add // 0" "$TEST_TMP/detail")
	[ "$(jq -r .rank_offset "$TEST_TMP/$f")" = "$want" ] || offsets_ok=0
done
check_eq "rank offsets are sums of lower nproc" 1 "$offsets_ok"
master=$(jq -r '.members[] | select(.node_rank == 0) | "\(.addr):29\(.addr | split(".")[3] | tonumber + 491)"' "$TEST_TMP/detail")
check_eq "master is node rank 0's address and port" "$master" \
	"$(jq -r '"\(.master_addr):\(.master_port)"' "$TEST_TMP/a")"
ROUND=$(jq -r .round "$TEST_TMP/a")

# --- a silent node is evicted; the others are told to restart ---
rank_of() { jq -r ".members[] | select(.node_id == \"$1\") | .node_rank" "$TEST_TMP/detail"; }
curl -s -m 30 -o "$TEST_TMP/watch" "$RDZV/v1/jobs/$JOB/watch?round=$ROUND&node_id=nodeA&incarnation=inc-nodeA&wait_ms=20000" &
WATCH=$!
wait_for 20 grep -q "event=round_ended reason=heartbeat_timeout" "$TEST_TMP/rdzv.log"
check "the silent node is evicted" grep -q "event=node_evicted node=nodeC" "$TEST_TMP/rdzv.log"
check_eq "only the silent node is evicted" 1 "$(grep -c event=node_evicted "$TEST_TMP/rdzv.log")"
check_eq "a survivor's heartbeat is fenced (409)" 409 "$(hb nodeA "$ROUND")"
check_eq "409 says restart" restart "$(body_field .action)"
wait $WATCH
check_eq "the pending watch was told restart at once" restart "$(jq -r .action "$TEST_TMP/watch")"
check_eq "eviction charged no restart" 0 "$(jq -r .restart_count "$TEST_TMP/watch")"
req GET "/v1/jobs/$JOB" >/dev/null
check_eq "job is RESTARTING" RESTARTING "$(body_field .state)"

# survivors rejoin: the round closes as soon as both are back
join_bg "$TEST_TMP/a2" nodeA 2 '"addr":"127.0.0.10","master_port":29501'
join_bg "$TEST_TMP/b2" nodeB 4 '"addr":"127.0.0.11","master_port":29502'
join_wait "$TEST_TMP/a2" "$TEST_TMP/b2"
check_eq "survivors get a new round" "$((ROUND + 1))" "$(jq -r .round "$TEST_TMP/a2")"
check_eq "survivors keep their relative order" \
	"$( [ "$(rank_of nodeA)" -lt "$(rank_of nodeB)" ] && echo 01 || echo 10)" \
	"$(jq -r .node_rank "$TEST_TMP/a2")$(jq -r .node_rank "$TEST_TMP/b2")"
check_eq "two nodes now" 2 "$(jq -r .nnodes "$TEST_TMP/b2")"
ROUND=$((ROUND + 1))

# --- stale rounds are fenced ---
check_eq "heartbeat for an old round gets 409" 409 "$(hb nodeA $((ROUND - 1)))"
check_eq "409 names the stale round" 1 "$(body_field '.error | test("stale round")' | grep -c true)"

# --- a late joiner grows the job without charging a restart ---
join_bg "$TEST_TMP/d" nodeD 1 '"addr":"127.0.0.13"'
wait_for 10 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary '{\"node_id\":\"nodeA\",\"incarnation\":\"inc-nodeA\",\"round\":$ROUND}' $RDZV/v1/jobs/$JOB/heartbeat)\" = 409 ]"
check "members are told to restart when a node joins a running job" test $? -eq 0
join_bg "$TEST_TMP/a3" nodeA 2 '"addr":"127.0.0.10","master_port":29501'
join_bg "$TEST_TMP/b3" nodeB 4 '"addr":"127.0.0.11","master_port":29502'
join_wait "$TEST_TMP/a3" "$TEST_TMP/b3" "$TEST_TMP/d"
beat_bg nodeD; BEAT_D=$LAST_PID
check_eq "the job grew to three nodes" 3 "$(jq -r .nnodes "$TEST_TMP/d")"
check_eq "the late joiner takes the last rank" 2 "$(jq -r .node_rank "$TEST_TMP/d")"
check_eq "growth charged no restart" 0 "$(jq -r .restart_count "$TEST_TMP/d")"
ROUND=$(jq -r .round "$TEST_TMP/d")

# --- a failure report bumps the round and the restart count ---
fail='"status":"failed","failures":[{"rank":7,"local_rank":0,"pid":4242,"exitcode":1,"signal":null,"time_ms":1763726400123,"message":"Traceback: boom"}]'
code=$(req POST "/v1/jobs/$JOB/report" "{\"node_id\":\"nodeD\",\"incarnation\":\"inc-nodeD\",\"round\":$ROUND,$fail}")
check_eq "failure report accepted" 200 "$code"
check_eq "failure bumps the round" "$((ROUND + 1))" "$(body_field .round)"
check_eq "failure counts one restart" 1 "$(body_field .restart_count)"
check_eq "reporter is told restart" restart "$(body_field .action)"
code=$(req POST "/v1/jobs/$JOB/report" "{\"node_id\":\"nodeA\",\"incarnation\":\"inc-nodeA\",\"round\":$ROUND,$fail}")
check_eq "a report for the ended round is fenced (409)" 409 "$code"
for n in A B D; do join_bg "$TEST_TMP/r$n" node$n 1 '"addr":"127.0.0.1'$n'"' ; done 2>/dev/null
# (addr 127.0.0.1A is invalid: those joins must be refused cleanly)
join_wait "$TEST_TMP/rA" "$TEST_TMP/rB" "$TEST_TMP/rD"
check_eq "an invalid addr is 400" 400 "$(cat "$TEST_TMP/rA.code")"
join_bg "$TEST_TMP/a4" nodeA 2 '"addr":"127.0.0.10","master_port":29501'
join_bg "$TEST_TMP/b4" nodeB 4 '"addr":"127.0.0.11","master_port":29502'
join_bg "$TEST_TMP/d4" nodeD 1 '"addr":"127.0.0.13"'
join_wait "$TEST_TMP/a4" "$TEST_TMP/b4" "$TEST_TMP/d4"
ROUND=$(jq -r .round "$TEST_TMP/a4")
check_eq "restart count is job-wide in the new round" "1 1 1 " \
	"$(jq -r .restart_count "$TEST_TMP"/{a4,b4,d4} | tr '\n' ' ')"

# --- the budget exhausted fails the job ---
code=$(req POST "/v1/jobs/$JOB/report" "{\"node_id\":\"nodeB\",\"incarnation\":\"inc-nodeB\",\"round\":$ROUND,$fail}")
check_eq "second failure past max_restarts=1 fails the job" FAILED "$(body_field .state)"
check_eq "and says stop" stop "$(body_field .action)"
check_eq "a member's heartbeat after the end says stop" 200 "$(hb nodeA "$ROUND")"
check_eq "stop" stop "$(body_field .action)"
code=$(req POST "/v1/jobs/$JOB/join" "{\"node_id\":\"nodeZ\",\"incarnation\":\"z\",\"nproc\":1,$JOB_CONF}")
check_eq "joining an ended job is 410" 410 "$code"
req GET "/v1/jobs/$JOB" >/dev/null
check_eq "job detail keeps the root cause first" "nodeD Traceback: boom" \
	"$(body_field '.failures[0] | "\(.node_id) \(.message)"')"
check_eq "job detail lists both failures" 2 "$(body_field '.failures | length')"

kill_tree "$BEAT_A"; kill_tree "$BEAT_B"; kill_tree "$BEAT_D"

# --- completion ---
JOB=done1
JOB_CONF='"min_nodes":2,"max_nodes":2,"max_restarts":0,"heartbeat_timeout":"5s"'
join_bg "$TEST_TMP/s1" n1 1 '"addr":"127.0.0.1"'
join_bg "$TEST_TMP/s2" n2 1 '"addr":"127.0.0.1"'
join_wait "$TEST_TMP/s1" "$TEST_TMP/s2"
req POST "/v1/jobs/$JOB/report" '{"node_id":"n1","incarnation":"inc-n1","round":1,"status":"succeeded"}' >/dev/null
check_eq "first success: keep waiting" continue "$(body_field .action)"
curl -s -m 30 -o "$TEST_TMP/w1" "$RDZV/v1/jobs/$JOB/watch?round=1&node_id=n1&wait_ms=20000" &
W1=$!
req POST "/v1/jobs/$JOB/report" '{"node_id":"n2","incarnation":"inc-n2","round":1,"status":"succeeded"}' >/dev/null
check_eq "all succeeded: the job SUCCEEDED" SUCCEEDED "$(body_field .state)"
wait $W1
check_eq "the waiting node's watch says stop" stop "$(jq -r .action "$TEST_TMP/w1")"

# --- listing, KV and metrics ---
req GET /v1/jobs >/dev/null
check_eq "job list has both jobs" "done1 job42" "$(body_field '[.jobs[].job] | sort | join(" ")')"
curl -s -m 30 -o "$TEST_TMP/kv" -w '%{http_code}' "$RDZV/v1/jobs/done1/kv/nccl-id?wait_ms=20000" >"$TEST_TMP/kv.code" &
KV=$!
check_eq "kv put" 200 "$(req PUT /v1/jobs/done1/kv/nccl-id 'opaque bytes')"
wait $KV
check_eq "waiting kv read gets the value" "opaque bytes" "$(cat "$TEST_TMP/kv")"
check_eq "kv get of a missing key is 404" 404 "$(req GET /v1/jobs/done1/kv/nope)"
check_eq "kv put to an unknown job is 404" 404 "$(req PUT /v1/jobs/nojob/kv/k v)"
req GET /metrics >/dev/null
check "metrics count heartbeats" grep -q '^dlaunch_rdzv_heartbeats_total [1-9]' "$TEST_TMP/body"
check "metrics count restarts" grep -q '^dlaunch_rdzv_restarts_total 1' "$TEST_TMP/body"
check "metrics have jobs by state" grep -q '^dlaunch_rdzv_jobs{state="FAILED"} 1' "$TEST_TMP/body"
check "metrics count requests by endpoint and code" grep -q 'dlaunch_rdzv_requests_total{endpoint="join",code="200"}' "$TEST_TMP/body"
check "metrics have latency histograms" grep -q 'dlaunch_rdzv_request_duration_seconds_bucket{endpoint="heartbeat",le="+Inf"}' "$TEST_TMP/body"
check "state changes are logged as structured lines" grep -q 'job=job42 round=1 event=round_closed nnodes=3 world_size=8' "$TEST_TMP/rdzv.log"

cp "$TEST_TMP/rdzv.log" /tmp/rdzv_rounds_server.log 2>/dev/null
rdzv_stop
check_eq "SIGTERM: exit 0" 0 "$RDZV_RC"
finish
