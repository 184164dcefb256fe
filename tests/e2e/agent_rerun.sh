#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_rerun.sh - a job id whose run has ended, against a real
# dlaunch-rdzv (docs/http-api.md, "Ended jobs"): the scenarios of
# lib_scenarios.sh that agent_etcd_ended.sh runs over etcd (a node late
# for the run that just ended runs nothing and exits 1 with the server's
# reason; the same command again after --rerun-after is run 2 of the id,
# which trains again, run 1 kept for status; with --rerun-after 0 an ended
# id is never run again), and what only the server has: the runs survive
# a restart of the server (its --state-dir).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch dlaunch-rdzv
STATE=$TEST_TMP/state
SCEN_BACKEND=http
SCEN_SERVER_ARGS=(--state-dir "$STATE" --rerun-after 5s)
source "$(dirname "$0")/lib_scenarios.sh"
scen_start_server

# the server judges the late join: 5 s after the end, as it was started
# (a loaded machine may take a second or two to start the late node)
scen_ended 5 5000

# -- HTTP only: the runs survive a restart of the server
scen_start_server
req GET /v1/jobs/rr >/dev/null
check_eq "restart: run 2 and run 1 recovered" "2 SUCCEEDED 1:SUCCEEDED" \
	"$(body_field '"\(.run) \(.state) \(.runs | map("\(.run):\(.state)") | join(","))"')"

SCEN_SERVER_ARGS=(--state-dir "$STATE" --rerun-after 0)
scen_start_server
scen_never_rerun

rdzv_stop
check_eq "server exits 0 on SIGTERM" 0 "$RDZV_RC"
check "no process of the test left" wait_for 10 no_marked_left
finish
