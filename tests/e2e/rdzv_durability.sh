#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rdzv_durability.sh - dlaunch-rdzv with --state-dir: kill -9 and restart
# on the same directory keeps jobs, rounds, members, restart counts and
# KV values; a torn journal tail is ignored with a warning; the journal
# is compacted instead of growing without bound; a second server cannot
# share the directory.
#
# Alone for tests/run.sh -j (its background heartbeats must keep two nodes
# alive; beside other tests the round restarted): nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch-rdzv

STATE=$TEST_TMP/state
rdzv_start "$TEST_TMP/rdzv1.log" --state-dir "$STATE" || { not_ok "server starts"; finish; }
JOB=dur1
JOB_CONF='"min_nodes":2,"max_nodes":2,"max_restarts":3,"heartbeat_timeout":"5s"'
join_bg "$TEST_TMP/a" nodeA 2 '"addr":"127.0.0.10","master_port":29600'
join_bg "$TEST_TMP/b" nodeB 3 '"addr":"127.0.0.11"'
join_wait "$TEST_TMP/a" "$TEST_TMP/b"
req POST "/v1/jobs/$JOB/report" '{"node_id":"nodeB","incarnation":"inc-nodeB","round":1,"status":"failed","failures":[{"rank":3,"exitcode":2,"message":"oops"}]}' >/dev/null
join_bg "$TEST_TMP/a2" nodeA 2 '"addr":"127.0.0.10","master_port":29600'
join_bg "$TEST_TMP/b2" nodeB 3 '"addr":"127.0.0.11"'
join_wait "$TEST_TMP/a2" "$TEST_TMP/b2"
check_eq "round 2 formed" 2 "$(jq -r .round "$TEST_TMP/a2")"
req PUT "/v1/jobs/$JOB/kv/bootstrap" 'id-0123456789' >/dev/null
JOB=wait1
JOB_CONF='"min_nodes":3,"max_nodes":3,"max_restarts":0'
check_eq "a waiting job" 202 "$(req POST /v1/jobs/wait1/join "{\"node_id\":\"w1\",\"incarnation\":\"i\",\"nproc\":1,\"wait_ms\":0,$JOB_CONF}")"
req GET /v1/jobs/dur1 >/dev/null
before=$(body_field '[.state, .round, .restart_count, ([.members[] | "\(.node_id)/\(.node_rank)/\(.rank_offset)"] | join(",")), .master_port, (.failures[0].message)] | join(" ")')

kill -KILL "$RDZV_PID"; wait "$RDZV_PID" 2>/dev/null
rdzv_start "$TEST_TMP/rdzv2.log" --state-dir "$STATE" || { not_ok "server restarts"; finish; }
ok "server restarts on the same state dir after kill -9"
req GET /v1/jobs/dur1 >/dev/null
after=$(body_field '[.state, .round, .restart_count, ([.members[] | "\(.node_id)/\(.node_rank)/\(.rank_offset)"] | join(",")), .master_port, (.failures[0].message)] | join(" ")')
check_eq "job, round, members, ranks, restarts and failures survive" "$before" "$after"
check_eq "which is RUNNING round 2 with both members" "RUNNING 2 1 nodeA,nodeB oops" \
	"$(body_field '[.state, .round, .restart_count, ([.members[].node_id] | sort | join(",")), .failures[0].message] | join(" ")')"
check_eq "KV survives" 200 "$(req GET /v1/jobs/dur1/kv/bootstrap)"
check_eq "KV value intact" id-0123456789 "$(cat "$TEST_TMP/body")"
req GET /v1/jobs/wait1 >/dev/null
check_eq "the waiting node survives" w1 "$(body_field '.waiting[0].node_id')"
JOB=dur1
check_eq "members carry on with the recovered round" 200 "$(hb nodeA 2)"
check_eq "old rounds are still fenced" 409 "$(hb nodeA 1)"

# a torn tail (a crash mid-append) and a flipped bit are cut off
rdzv_stop
check_eq "SIGTERM: exit 0" 0 "$RDZV_RC"
printf 'RDZJ\x40\x00\x00\x00garbage' >>"$STATE/journal"
rdzv_start "$TEST_TMP/rdzv3.log" --state-dir "$STATE" || { not_ok "server starts over a torn journal"; finish; }
ok "server starts over a torn journal"
check "the torn tail is reported" grep -q "torn or damaged record" "$TEST_TMP/rdzv3.log"
req GET /v1/jobs/dur1 >/dev/null
check_eq "state before the torn tail is kept" "RUNNING 2" "$(body_field '"\(.state) \(.round)"')"
req POST "/v1/jobs/dur1/leave" '{"node_id":"nodeB","incarnation":"inc-nodeB"}' >/dev/null
check_eq "a change after the repair" RESTARTING "$(body_field .state)"
kill -KILL "$RDZV_PID"; wait "$RDZV_PID" 2>/dev/null
rdzv_start "$TEST_TMP/rdzv4.log" --state-dir "$STATE" || { not_ok "server restarts"; finish; }
req GET /v1/jobs/dur1 >/dev/null
check_eq "records appended after the repair are replayed" "RESTARTING 3" "$(body_field '"\(.state) \(.round)"')"
check "no damage reported this time" bash -c "! grep -q 'torn or damaged' '$TEST_TMP/rdzv4.log'"

# a second server on the same directory is refused
"$BIN/dlaunch-rdzv" --listen 127.0.0.1:0 --state-dir "$STATE" >"$TEST_TMP/second.log" 2>&1
check_eq "a second server on the same state dir exits 1" 1 $?
check "and says the dir is in use" grep -q "in use" "$TEST_TMP/second.log"

# compaction: many changes leave a bounded journal
JOB=churn
JOB_CONF='"min_nodes":1,"max_nodes":1,"max_restarts":1000000,"heartbeat_timeout":"30s"'
big=$(head -c 60000 /dev/zero | tr '\0' x)
for i in $(seq 1 90); do
	req PUT /v1/jobs/dur1/kv/k$((i % 3)) "$big" >/dev/null
done
check "the journal was compacted" grep -q "event=journal_compacted" "$TEST_TMP/rdzv4.log"
size=$(stat -c %s "$STATE/journal")
check "the journal stays bounded ($size bytes)" test "$size" -lt 5000000
kill -KILL "$RDZV_PID"; wait "$RDZV_PID" 2>/dev/null
rdzv_start "$TEST_TMP/rdzv5.log" --state-dir "$STATE" || { not_ok "server restarts after compaction"; finish; }
check_eq "state survives compaction" 200 "$(req GET /v1/jobs/dur1/kv/k2)"
check_eq "with the last value" 60000 "$(wc -c <"$TEST_TMP/body")"
req GET /v1/jobs/dur1 >/dev/null
check_eq "and the job" "RESTARTING 3" "$(body_field '"\(.state) \(.round)"')"
rdzv_stop

# a full disk: a change the journal cannot take is not acknowledged (503,
# /healthz 503) and the server keeps serving; once there is room again the
# retried request succeeds and the change survives a kill -9
FULL=$TEST_TMP/full
mkdir -p "$FULL"
if ! mount -t tmpfs -o size=2m tmpfs "$FULL" 2>/dev/null; then
	skip "full disk: cannot mount a small tmpfs here (needs root)"
	finish
fi
trap 'umount -l "$FULL" 2>/dev/null; cleanup' EXIT
rdzv_start "$TEST_TMP/rdzv6.log" --state-dir "$FULL/state" || { not_ok "server starts on the tmpfs"; finish; }
JOB=disk
JOB_CONF='"min_nodes":1,"max_nodes":1,"max_restarts":3,"heartbeat_timeout":"30s"'
check_eq "full disk: a job forms while there is room" 200 \
	"$(req POST /v1/jobs/disk/join "{\"node_id\":\"d1\",\"incarnation\":\"inc-d1\",\"nproc\":1,\"wait_ms\":0,$JOB_CONF}")"
dd if=/dev/zero of="$FULL/filler" bs=4k status=none 2>/dev/null # to ENOSPC
# values larger than a page: the journal's last page cannot take them
v1=$(head -c 20000 /dev/zero | tr '\0' 1)
v2=$(head -c 20000 /dev/zero | tr '\0' 2)
check_eq "full disk: heartbeats are still served" 200 "$(hb d1 1)"
check_eq "full disk: a KV put is refused with 503" 503 "$(req PUT /v1/jobs/disk/kv/key "$v1")"
check "full disk: the answer says why" grep -q "cannot journal state changes" "$TEST_TMP/body"
check_eq "full disk: a failure report is refused with 503" 503 \
	"$(req POST /v1/jobs/disk/report '{"node_id":"d1","incarnation":"inc-d1","round":1,"status":"failed","failures":[{"rank":0,"exitcode":3}]}')"
check_eq "full disk: /healthz says 503" 503 "$(req GET /healthz)"
check_eq "full disk: reads are still served" 200 "$(req GET /v1/jobs/disk)"
check "full disk: the server logs the failed append" grep -q "cannot append to journal" "$TEST_TMP/rdzv6.log"
req GET /metrics >/dev/null
check "full disk: /metrics says the journal is not writable" grep -qx 'dlaunch_rdzv_journal_writable 0' "$TEST_TMP/body"
check "full disk: /metrics counts the failed writes" grep -Eqx 'dlaunch_rdzv_journal_write_failures_total [1-9][0-9]*' "$TEST_TMP/body"
rm -f "$FULL/filler"
# the next attempt rewrites the whole state (at most once a second)
put_v2() { [ "$(req PUT /v1/jobs/disk/kv/key "$v2")" = 200 ]; }
check "room again: the retried KV put succeeds" wait_for 10 put_v2
check_eq "room again: /healthz says 200" 200 "$(req GET /healthz)"
check "room again: the server logs its recovery" grep -q "event=journal_recovered" "$TEST_TMP/rdzv6.log"
req GET /metrics >/dev/null
check "room again: /metrics says the journal is writable" grep -qx 'dlaunch_rdzv_journal_writable 1' "$TEST_TMP/body"
req GET /v1/jobs/disk >/dev/null
before=$(body_field '"\(.state) \(.round) \(.restart_count)"')
check_eq "room again: the refused report had been kept in memory" "RESTARTING 2 1" "$before"
kill -KILL "$RDZV_PID"; wait "$RDZV_PID" 2>/dev/null
rdzv_start "$TEST_TMP/rdzv7.log" --state-dir "$FULL/state" || { not_ok "server restarts on the tmpfs"; finish; }
req GET /v1/jobs/disk >/dev/null
check_eq "after kill -9: the job as it was" "$before" \
	"$(body_field '"\(.state) \(.round) \(.restart_count)"')"
check_eq "after kill -9: the KV value acknowledged last" 200 "$(req GET /v1/jobs/disk/kv/key)"
check_eq "after kill -9: which is v2" "$v2" "$(cat "$TEST_TMP/body")"
rdzv_stop
finish
