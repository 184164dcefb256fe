#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rdzv_metrics.sh - /metrics of a live dlaunch-rdzv as Prometheus takes
# it (promtool check metrics), with the per-job, parked-poll and journal
# figures it must show; the alert rules of contrib/prometheus/ (promtool
# check rules, and their unit tests firing each alert); the Grafana
# dashboard of contrib/grafana/ (valid JSON); and every metric the rules
# and the dashboard name is one the server exports.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch-rdzv
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v promtool >/dev/null; then
	skip "metrics and alert rules: promtool not installed (contrib/install-deps.sh installs Debian's prometheus)"
	finish
fi

rdzv_start "$TEST_TMP/rdzv.log" --state-dir "$TEST_TMP/state" ||
	{ not_ok "dlaunch-rdzv starts"; finish; }
JOB=m1
JOB_CONF='"min_nodes":2,"max_nodes":2,"max_restarts":4,"heartbeat_timeout":"30s"'
join_bg "$TEST_TMP/j1" n1 2
join_bg "$TEST_TMP/j2" n2 2
join_wait "$TEST_TMP/j1" "$TEST_TMP/j2"
check_eq "a 2-node job forms" "200 200" "$(cat "$TEST_TMP/j1.code") $(cat "$TEST_TMP/j2.code")"
check_eq "a heartbeat" 200 "$(hb n1 1)"
check_eq "a failure report" 200 "$(req POST "/v1/jobs/$JOB/report" '{"node_id":"n2","incarnation":"inc-n2","round":1,"status":"failed","failures":[{"rank":2,"exitcode":1}]}')"
check_eq "the status page" 200 "$(req GET "/jobs/$JOB")"
# a watch and a KV get held open while /metrics is read
curl -s -m 30 -o /dev/null "$RDZV/v1/jobs/$JOB/watch?round=2&wait_ms=20000" &
W=$!
curl -s -m 30 -o /dev/null "$RDZV/v1/jobs/$JOB/kv/later?wait_ms=20000" &
K=$!
parked() { req GET /metrics >/dev/null && grep -qx 'dlaunch_rdzv_long_polls_parked{endpoint="watch"} 1' "$TEST_TMP/body" && grep -qx 'dlaunch_rdzv_long_polls_parked{endpoint="kv"} 1' "$TEST_TMP/body"; }
check "the parked watch and KV get are counted by endpoint" wait_for 10 parked
cp "$TEST_TMP/body" "$TEST_TMP/metrics"
check "promtool check metrics finds nothing to say about a live /metrics" \
	bash -c "promtool check metrics <'$TEST_TMP/metrics' >'$TEST_TMP/promtool.out' 2>&1 && ! [ -s '$TEST_TMP/promtool.out' ]"
sed 's/^/# /' "$TEST_TMP/promtool.out"
has() { grep -qx -- "$1" "$TEST_TMP/metrics"; }
check "the job's state" has "dlaunch_rdzv_job_state{rdzv_id=\"m1\",state=\"RESTARTING\"} 1"
check "... and only one" has "dlaunch_rdzv_job_state{rdzv_id=\"m1\",state=\"RUNNING\"} 0"
check "the job's round" has 'dlaunch_rdzv_job_round{rdzv_id="m1"} 2'
check "restarts used and the budget" \
	bash -c "grep -qx 'dlaunch_rdzv_job_restarts{rdzv_id=\"m1\"} 1' '$TEST_TMP/metrics' && grep -qx 'dlaunch_rdzv_job_max_restarts{rdzv_id=\"m1\"} 4' '$TEST_TMP/metrics'"
check "the journal is writable, no write failed" \
	bash -c "grep -qx 'dlaunch_rdzv_journal_writable 1' '$TEST_TMP/metrics' && grep -qx 'dlaunch_rdzv_journal_write_failures_total 0' '$TEST_TMP/metrics'"
check "the journal has bytes" grep -Eqx 'dlaunch_rdzv_journal_bytes [1-9][0-9]*' "$TEST_TMP/metrics"
check "page requests are counted under their own endpoint" has 'dlaunch_rdzv_requests_total{endpoint="page",code="200"} 1'
check "counters end in _total, durations in _seconds" \
	bash -c "! grep -E '^# TYPE' '$TEST_TMP/metrics' | awk '(\$4 == \"counter\" && \$3 !~ /_total\$/) || (\$3 ~ /(duration|age|time)/ && \$3 !~ /_seconds\$/)' | grep -q ."
age_of() { sed -n 's/^dlaunch_rdzv_job_round_age_seconds{rdzv_id="m1"} //p' "$TEST_TMP/body"; }
A1=$(age_of)
older() { req GET /metrics >/dev/null && awk -v a="$(age_of)" -v b="$A1" 'BEGIN { exit !(a > b) }'; }
check "the time since the job's round changed grows ($A1 s, then later)" wait_for 10 older
kill "$W" "$K" 2>/dev/null
wait "$W" "$K" 2>/dev/null

# the alert rules and their unit tests
check "promtool check rules contrib/prometheus/alerts.yml" \
	bash -c "promtool check rules '$ROOT/contrib/prometheus/alerts.yml' >/dev/null"
(cd "$ROOT/contrib/prometheus" && promtool test rules alerts_test.yml) >"$TEST_TMP/rules.out" 2>&1
check "promtool test rules: every alert fires from its sample series" grep -q SUCCESS "$TEST_TMP/rules.out" ||
	sed 's/^/# /' "$TEST_TMP/rules.out"
for a in DlaunchRdzvDown DlaunchJobFailed DlaunchRestartsNearBudget DlaunchRepeatedEvictions DlaunchJournalNotWritable; do
	check "the unit tests fire $a" grep -q "alertname: $a$" "$ROOT/contrib/prometheus/alerts_test.yml"
done
dashboard_ok() { jq -e '(.panels | length) > 0 and all(.panels[]; .targets | length > 0)' "$ROOT/contrib/grafana/dlaunch-rdzv.json" >/dev/null; }
check "the Grafana dashboard is valid JSON with panels" dashboard_ok

# every dlaunch_rdzv_* name the rules and the dashboard use is exported
grep -o '^# TYPE [a-z_]*' "$TEST_TMP/metrics" | awk '{print $3}' >"$TEST_TMP/names"
sed -n 's/^\(dlaunch_rdzv_request_duration_seconds\)_.*/\1_bucket/p' "$TEST_TMP/metrics" | sort -u >>"$TEST_TMP/names"
missing=$( { grep -oh 'dlaunch_rdzv_[a-z_]*' "$ROOT/contrib/prometheus/alerts.yml"; \
	jq -r '.panels[].targets[].expr' "$ROOT/contrib/grafana/dlaunch-rdzv.json" | grep -o 'dlaunch_rdzv_[a-z_]*'; } |
	sort -u | grep -vxF -f "$TEST_TMP/names")
check_eq "the rules and the dashboard name only metrics the server exports" "" "$missing"
rdzv_stop
finish
