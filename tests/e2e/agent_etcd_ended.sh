#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_etcd_ended.sh - a job id whose run has ended, with the etcd
# backend (docs/etcd.md, "Ended jobs"): the scenarios of lib_scenarios.sh
# that agent_rerun.sh runs against dlaunch-rdzv (a node joining sooner
# than rerun_after after the end runs nothing and exits 1 with
# dlaunch-rdzv's message; later the same command is run 2 of the id and
# trains again, run 1 kept in the job's status; with rerun_after=0 an
# ended id is never run again), and what only etcd has: rerun_after is
# each join's --rdzv-conf, and a bad value is refused before anything
# runs.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_etcd.sh"
need_bin dlaunch
if ! etcd_available; then
	skip "etcd backend, ended job: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 1; then
	not_ok "an etcd member starts"
	finish
fi
SCEN_BACKEND=etcd
source "$(dirname "$0")/lib_scenarios.sh"

# the late node's own rerun_after (1 h) judges its join: it leads, run
# 1's agents have gone
scen_ended 3 3600000
scen_never_rerun

# -- etcd only: a bad rerun_after is refused before anything runs
DLAUNCH_NODE_ID=n9 timeout 60 "$DL" "${RDZV_OPTS[@]}" --nnodes 1 \
	--rdzv-id ended --rdzv-conf "$CONF,rerun_after=soon" \
	"$PROGS/agent_env.sh" >"$TEST_TMP/bad.log" 2>&1
check_eq "rerun_after=soon is refused (exit 2)" 2 $?
check "it says what rerun_after takes" grep -q "rerun_after='soon' is not a duration" "$TEST_TMP/bad.log"
etcd_cluster_destroy
check "no process of the test left" wait_for 10 no_marked_left
finish
