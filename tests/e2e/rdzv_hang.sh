#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rdzv_hang.sh - dlaunch-rdzv's hang diagnosis over real HTTP: POST /dump
# opens a trigger (one at a time), heartbeat and watch answers carry it, a
# parked watch wakes at once, members' node reports are stored (a newer
# one replaces), non-members and stale incarnations are refused, bodies
# over the bounds get 413, bad JSON 400 with nothing changed, GET /hang
# answers the analysis and text naming the stuck rank of crafted reports,
# the job detail carries the summary, metrics count, ended jobs answer
# 410, and the token guards it all.
#
# Alone for tests/run.sh -j (its requests must follow each other within the
# server's windows; beside other tests a second dump met a closed trigger
# (409)): nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch-rdzv

echo 'hang-token' >"$TEST_TMP/token"
rdzv_start "$TEST_TMP/rdzv.log" --token-file "$TEST_TMP/token" || { not_ok "server starts"; finish; }
check_eq "no token: 401 on dump" 401 "$(req POST /v1/jobs/j/dump '{}')"
check_eq "no token: 401 on hang" 401 "$(req GET /v1/jobs/j/hang)"
RDZV_CURL_ARGS=(-H 'Authorization: Bearer hang-token')
check_eq "dump of an unknown job: 404" 404 "$(req POST /v1/jobs/nojob/dump '{}')"
check_eq "hang of an unknown job: 404" 404 "$(req GET /v1/jobs/nojob/hang)"

JOB=hj
JOB_CONF='"min_nodes":2,"max_nodes":2,"max_restarts":1,"last_call_timeout":"5s","heartbeat_timeout":"30s","heartbeat_interval":"200ms"'
join_bg "$TEST_TMP/a" nA 2 '"addr":"127.0.0.1"'
join_bg "$TEST_TMP/b" nB 2 '"addr":"127.0.0.1"'
join_wait "$TEST_TMP/a" "$TEST_TMP/b" || not_ok "joins answered"
beat_bg nA
beat_bg nB
ROUND=$(jq -r .round "$TEST_TMP/a")
# node ranks decide the global ranks: node rank 0 has ranks 0-1
if [ "$(jq -r .node_rank "$TEST_TMP/a")" = 0 ]; then N0=nA N1=nB; else N0=nB N1=nA; fi

check_eq "no trigger yet: 200" 200 "$(req GET "/v1/jobs/$JOB/hang")"
check_eq "no trigger yet: trigger null" null "$(body_field .trigger)"
check_eq "no trigger yet: no hang in the job detail" "200 null" \
	"$(req GET "/v1/jobs/$JOB") $(body_field .hang)"
hb nA "$ROUND" >/dev/null
check_eq "a heartbeat carries no dump while none is open" null "$(body_field .dump)"

# --- bad requests change nothing ---
check_eq "dump with a bad kind: 400" 400 "$(req POST "/v1/jobs/$JOB/dump" '{"kind":"boom"}')"
check_eq "dump with bad JSON: 400" 400 "$(req POST "/v1/jobs/$JOB/dump" '{"kind":')"
check_eq "dump by a non-member: 409" 409 "$(req POST "/v1/jobs/$JOB/dump" '{"node_id":"nZ","kind":"stall"}')"
check_eq "dump by a stale incarnation: 409" 409 \
	"$(req POST "/v1/jobs/$JOB/dump" '{"node_id":"nA","incarnation":"old","kind":"stall"}')"
req GET "/v1/jobs/$JOB/hang" >/dev/null
check_eq "refused dumps opened no trigger" null "$(body_field .trigger)"

# --- a parked watch wakes as soon as a trigger opens ---
(curl -s -m 30 "${RDZV_CURL_ARGS[@]}" -o "$TEST_TMP/watch" \
	"$RDZV/v1/jobs/$JOB/watch?round=$ROUND&node_id=nA&incarnation=inc-nA&wait_ms=25000" &&
	touch "$TEST_TMP/watch.done") &
parked() { req GET /metrics >/dev/null && grep -qx 'dlaunch_rdzv_long_polls_parked{endpoint="watch"} 1' "$TEST_TMP/body"; }
check "the watch is parked" wait_for 10 parked
check_eq "dump opens a trigger: 200" 200 \
	"$(req POST "/v1/jobs/$JOB/dump" "{\"node_id\":\"nA\",\"incarnation\":\"inc-nA\",\"kind\":\"progress-timeout\"}")"
ID=$(body_field .id)
T=$(body_field .time_ms)
check_eq "the trigger is new" true "$(body_field .opened)"
check_eq "by defaults to the node" nA "$(body_field .by)"
check "the id is 1-64 characters of [A-Za-z0-9._:-]" \
	bash -c "[[ '$ID' =~ ^[A-Za-z0-9._:-]{1,64}$ ]]"
# the watch waits up to 25 s: an answer within 3 s is the wake-up
check "the parked watch answered at once" wait_for 3 test -e "$TEST_TMP/watch.done"
check_eq "the watch answer carries the trigger" "$ID progress-timeout nA" \
	"$(jq -r '"\(.dump.id) \(.dump.kind) \(.dump.by)"' "$TEST_TMP/watch")"
check_eq "a second dump answers the open trigger" "200 $ID false" \
	"$(req POST "/v1/jobs/$JOB/dump" '{"kind":"dump"}') $(body_field .id) $(body_field .opened)"
hb nB "$ROUND" >/dev/null
check_eq "a heartbeat carries the open trigger" "$ID $T" "$(jq -r '"\(.dump.id) \(.dump.time_ms)"' "$TEST_TMP/body")"
check_eq "a watch that saw another trigger answers at once" "200 $ID" \
	"$(req GET "/v1/jobs/$JOB/watch?round=$ROUND&dump_seen=other&wait_ms=20000") $(body_field .dump.id)"

# --- node reports ---
# rank 2 (node rank 1's first worker) never entered all_reduce #41, which
# ranks 0, 1 and 3 entered 5 s before the trigger
worker() { # RANK OPEN(0/1)
	local open=""
	[ "$2" = 1 ] && open=",{\"seq\":41,\"op\":\"all_reduce\",\"bytes\":4096,\"state\":\"entered\",\"t_ms\":$((T - 5000)),\"step\":41}"
	printf '{"rank":%d,"local_rank":%d,"pid":%d,"state":"sleeping","proc_state":"S","wchan":"do_poll","cpu_ms":0,"interval_ms":1000,"threads":2,"step":40,"step_age_ms":5200,"python":"Thread 0x7f%02d (most recent call first):\\n  File \\"/job/train.py\\", line %d in step\\n","flight":[{"seq":40,"op":"all_reduce","bytes":4096,"state":"finished","t_ms":%d,"done_ms":%d,"step":40}%s]}' \
		"$1" "$(($1 % 2))" "$((500 + $1))" "$1" "$((30 + 10 * (1 - $2)))" "$((T - 6000))" "$((T - 5990))" "$open"
}
report() { # NODE HOST WORKERS_JSON
	printf '{"version":1,"job":"%s","node":"%s","host":"%s","round":%s,"trigger":{"id":"%s","kind":"progress-timeout","by":"nA","time_ms":%s},"time_ms":%s,"nproc":2,"workers":[%s]}' \
		"$JOB" "$1" "$2" "$ROUND" "$ID" "$T" "$((T + 800))" "$3"
}
R0=$(report "$N0" h0 "$(worker 0 1),$(worker 1 1)")
R1=$(report "$N1" h1 "$(worker 2 0),$(worker 3 1)")
inc() { echo "inc-$1"; }

check_eq "bad JSON: 400" 400 "$(req POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N0")" '{"version":1,')"
check_eq "no version: 400" 400 \
	"$(req POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N0")" "$(echo "$R0" | jq -c 'del(.version)')")"
check_eq "workers not an array: 400" 400 \
	"$(req POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N0")" "$(echo "$R0" | jq -c '.workers = 3')")"
check_eq "a non-member's report: 409" 409 \
	"$(req POST "/v1/jobs/$JOB/hang?incarnation=inc-nZ" "$(echo "$R0" | jq -c '.node = "nZ"')")"
check_eq "a stale incarnation's report: 409" 409 "$(req POST "/v1/jobs/$JOB/hang?incarnation=old" "$R0")"
check_eq "no incarnation: 409" 409 "$(req POST "/v1/jobs/$JOB/hang" "$R0")"
check_eq "a report for an unknown trigger: 404" 404 \
	"$(req POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N0")" "$(echo "$R0" | jq -c '.trigger.id = "nope-1"')")"
req GET "/v1/jobs/$JOB/hang" >/dev/null
check_eq "refused reports stored nothing" "0 null" "$(jq -r '"\(.reports | length) \(.analysis)"' "$TEST_TMP/body")"

# 413: a report over 512 KiB; any other body over --max-body (64 KiB)
head -c 600000 /dev/zero | tr '\0' 'x' >"$TEST_TMP/x600k"
head -c 300000 "$TEST_TMP/x600k" >"$TEST_TMP/x300k"
head -c 100000 "$TEST_TMP/x600k" >"$TEST_TMP/x100k"
echo "$R0" | jq -c --rawfile b "$TEST_TMP/x600k" '.workers[0].python = $b' >"$TEST_TMP/r600k"
check_eq "a report over 512 KiB: 413" 413 \
	"$(req_file POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N0")" "$TEST_TMP/r600k")"
jq -nc --rawfile b "$TEST_TMP/x100k" --argjson r "$ROUND" \
	'{node_id: "nA", incarnation: "inc-nA", round: $r, pad: $b}' >"$TEST_TMP/hb100k"
check_eq "a 100 KiB heartbeat: 413" 413 "$(req_file POST "/v1/jobs/$JOB/heartbeat" "$TEST_TMP/hb100k")"
check "the 413 says why" grep -q 'max-body' "$TEST_TMP/body"
echo "$R0" | jq -c --rawfile b "$TEST_TMP/x300k" '.workers[0].native = $b' >"$TEST_TMP/r300k"
check_eq "a 300 KiB report is taken" 200 \
	"$(req_file POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N0")" "$TEST_TMP/r300k")"
check_eq "one node reported: not complete" false "$(body_field .complete)"

check_eq "the newer report of a node replaces its older one" 200 \
	"$(req POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N0")" "$R0")"
req GET "/v1/jobs/$JOB/hang" >/dev/null
check_eq "one report kept, the newer" "1 null" \
	"$(jq -r '"\(.reports | length) \(.reports[0].workers[0].native)"' "$TEST_TMP/body")"
check_eq "half the nodes: incomplete, the other node missing" "incomplete $N1 true" \
	"$(jq -r '"\(.analysis.verdict) \(.analysis.missing_nodes | join(",")) \(.trigger.open)"' "$TEST_TMP/body")"

check_eq "the second node's report: 200" 200 "$(req POST "/v1/jobs/$JOB/hang?incarnation=$(inc "$N1")" "$R1")"
check_eq "every node reported: complete" true "$(body_field .complete)"
check_eq "GET /hang: 200" 200 "$(req GET "/v1/jobs/$JOB/hang")"
check_eq "the analysis names rank 2" "hang [2] missing-from-collective" \
	"$(jq -r '"\(.analysis.verdict) \(.analysis.stuck | tojson) \(.analysis.rule)"' "$TEST_TMP/body")"
check "the reason names rank 2 and its node" \
	grep -q "rank 2 (node $N1) never entered collective #41" "$TEST_TMP/body"
check "the text has the verdict" \
	bash -c "jq -r .text '$TEST_TMP/body' | grep -q '^verdict: hang (rule missing-from-collective)'"
check "the text folds identical stacks" \
	bash -c "jq -r .text '$TEST_TMP/body' | grep -q 'ranks 1,3: same as rank 0'"
check_eq "complete and closed" "true false 2" \
	"$(jq -r '"\(.complete) \(.trigger.open) \(.reports | length)"' "$TEST_TMP/body")"
check_eq "?id= answers that trigger" "200 $ID" "$(req GET "/v1/jobs/$JOB/hang?id=$ID") $(body_field .trigger.id)"
check_eq "?id= of an unknown trigger: 404" 404 "$(req GET "/v1/jobs/$JOB/hang?id=nope-1")"
check_eq "?id= malformed: 400" 400 "$(req GET "/v1/jobs/$JOB/hang?id=a%20b")"
req GET "/v1/jobs/$JOB" >/dev/null
check_eq "the job detail carries the verdict, not the stacks" "hang [2] $ID null" \
	"$(jq -r '"\(.hang.analysis.verdict) \(.hang.analysis.stuck | tojson) \(.hang.trigger.id) \(.hang.reports)"' "$TEST_TMP/body")"
hb nA "$ROUND" >/dev/null
check_eq "a closed trigger is no longer in heartbeats" null "$(body_field .dump)"
check_eq "the next dump opens a new trigger" "200 true" \
	"$(req POST "/v1/jobs/$JOB/dump" '{}') $(body_field .opened)"
ID2=$(body_field .id)
check "its id differs" test "$ID2" != "$ID"
check_eq "by defaults to cli" cli "$(body_field .by)"
check_eq "the old trigger is still answerable" "200 hang" \
	"$(req GET "/v1/jobs/$JOB/hang?id=$ID") $(body_field .analysis.verdict)"

# --- metrics ---
req GET /metrics >/dev/null
check "triggers counted by kind" grep -qx 'dlaunch_rdzv_hang_triggers_total{kind="progress-timeout"} 1' "$TEST_TMP/body"
check "the cli dump counted" grep -qx 'dlaunch_rdzv_hang_triggers_total{kind="dump"} 1' "$TEST_TMP/body"
check "reports counted" grep -qx 'dlaunch_rdzv_hang_reports_total 3' "$TEST_TMP/body"
check "stuck ranks of the last analysis" grep -qx 'dlaunch_rdzv_hang_stuck_ranks 1' "$TEST_TMP/body"
check "requests counted under their endpoints" grep -q 'dlaunch_rdzv_requests_total{endpoint="hang",code="200"}' "$TEST_TMP/body"

# --- an ended job: 410 ---
JOB=ended
JOB_CONF='"min_nodes":1,"max_nodes":1,"max_restarts":0,"last_call_timeout":"1s"'
join_bg "$TEST_TMP/e" nE 1 '"addr":"127.0.0.1"'
join_wait "$TEST_TMP/e"
check_eq "the job succeeds" 200 "$(req POST "/v1/jobs/$JOB/report" "{\"node_id\":\"nE\",\"incarnation\":\"inc-nE\",\"round\":$(jq -r .round "$TEST_TMP/e"),\"status\":\"succeeded\"}")"
check_eq "dump of an ended job: 410" 410 "$(req POST "/v1/jobs/$JOB/dump" '{}')"
check_eq "its hang is still readable" "200 null" "$(req GET "/v1/jobs/$JOB/hang") $(body_field .trigger)"

check "the server is still up" alive "$RDZV_PID"
rdzv_stop
check_eq "clean exit" 0 "$RDZV_RC"
finish
