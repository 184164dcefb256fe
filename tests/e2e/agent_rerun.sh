#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_rerun.sh - a job id whose run has ended, against a real
# dlaunch-rdzv (docs/http-api.md, "Ended jobs"): a node late for the run
# that just ended runs nothing and exits 1 with a message saying why; the
# same command again after --rerun-after is a new run of the id that
# trains again (the ended run kept for status, across a server restart).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_rdzv.sh"
DL=$BIN/dlaunch
CONF=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=0.5
need_bin dlaunch dlaunch-rdzv

STATE=$TEST_TMP/state
rdzv_start "$TEST_TMP/rdzv.log" --state-dir "$STATE" --rerun-after 1s ||
	{ not_ok "dlaunch-rdzv starts"; finish; }
EP=${RDZV#http://}
export AGENT_OUT=$TEST_TMP/ranks.rec

# agent NAME: one dlaunch of job rr (2 nodes) in the background
agent() {
	spawn_bg "$TEST_TMP/agent.$1.$2.log" env DLAUNCH_NODE_ID="$1" \
		"$DL" --nnodes 2 --nproc-per-node 1 --rdzv-endpoint "$EP" \
		--rdzv-id rr --rdzv-conf "$CONF" --shutdown-timeout 2 \
		"$PROGS/agent_env.sh"
}
exited() { ! kill -0 "$1" 2>/dev/null; }
rc_of() { wait "$1" 2>/dev/null; echo $?; }

# -- run 1
agent n1 run1; p1=$LAST_PID
agent n2 run1; p2=$LAST_PID
check "run 1: both agents exit" wait_for 60 bash -c "! kill -0 $p1 && ! kill -0 $p2"
check_eq "run 1: both exit 0" "0 0" "$(rc_of "$p1") $(rc_of "$p2")"
check_eq "run 1: two workers ran" 2 "$(wc -l <"$AGENT_OUT")"

# -- a node late for run 1: its peers are gone, it must not start a run
agent n3 late; p3=$LAST_PID
check "late node: exits" wait_for 30 exited "$p3"
check_eq "late node: exits 1, nothing ran is no success" 1 "$(rc_of "$p3")"
check "late node: the server's reason is in its log" \
	grep -q "late for run 1" "$TEST_TMP/agent.n3.late.log"
check "late node: says nothing ran" \
	grep -q "nothing ran here" "$TEST_TMP/agent.n3.late.log"
check_eq "late node: no worker ran" 2 "$(wc -l <"$AGENT_OUT")"
req GET /v1/jobs/rr >/dev/null
check_eq "late node: run 1 stays SUCCEEDED" "1 SUCCEEDED" \
	"$(body_field '"\(.run) \(.state)"')"

# -- the same command once --rerun-after has passed: run 2
ended_long_enough() {
	req GET /v1/jobs/rr >/dev/null
	[ "$(body_field '.ended_ms_ago // 0')" -ge 1000 ]
}
check "rerun: the end is --rerun-after old" wait_for 20 ended_long_enough
agent n1 run2; p1=$LAST_PID
agent n2 run2; p2=$LAST_PID
check "rerun: both agents exit" wait_for 60 bash -c "! kill -0 $p1 && ! kill -0 $p2"
check_eq "rerun: both exit 0" "0 0" "$(rc_of "$p1") $(rc_of "$p2")"
check_eq "rerun: the workers ran again" 4 "$(wc -l <"$AGENT_OUT")"
req GET /v1/jobs/rr >/dev/null
check_eq "rerun: run 2 succeeded, run 1 kept" "2 SUCCEEDED 1:SUCCEEDED" \
	"$(body_field '"\(.run) \(.state) \(.runs | map("\(.run):\(.state)") | join(","))"')"
"$DL" status --rdzv-endpoint "$EP" --rdzv-id rr >"$TEST_TMP/status.out" 2>&1
check "rerun: dlaunch status shows run 2 and run 1 kept" \
	grep -q '^run 2; earlier runs: 1 SUCCEEDED (round 1, restarts 0)$' "$TEST_TMP/status.out"

# -- the runs survive a restart of the server
rdzv_stop
rdzv_start "$TEST_TMP/rdzv2.log" --state-dir "$STATE" --rerun-after 1s ||
	not_ok "dlaunch-rdzv restarts"
req GET /v1/jobs/rr >/dev/null
check_eq "restart: run 2 and run 1 recovered" "2 SUCCEEDED 1" \
	"$(body_field '"\(.run) \(.state) \(.runs | length)"')"
rdzv_stop
check_eq "server exits 0 on SIGTERM" 0 "$RDZV_RC"
finish
