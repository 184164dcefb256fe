#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_rdzv.sh - dlaunch against a real dlaunch-rdzv on loopback: the
# rendezvous scenarios of lib_scenarios.sh (ranks over 2 and 3 agents, a
# job-wide restart, the budget exhausted with the root-cause report and
# dlaunch status, a late joiner growing the job, a spare, kill -9 of an
# agent, SIGTERM leaving the rendezvous), as agent_etcd.sh runs them over
# etcd; and --standalone, which needs no rendezvous at all.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch dlaunch-rdzv
SCEN_BACKEND=http
SCEN_SERVER_ARGS=()
source "$(dirname "$0")/lib_scenarios.sh"
scen_start_server

scen_ranks 2 2
scen_ranks 3 2:3
scen_fail_once
scen_budget
scen_grow

# -- standalone (no rendezvous server: the agent is its own): 4 workers,
#    every variable right
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

rdzv_stop
check_eq "the server exits 0 on SIGTERM" 0 "$RDZV_RC"
check "no process of the test left" wait_for 10 no_marked_left
finish
