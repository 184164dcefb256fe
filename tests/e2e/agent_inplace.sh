#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_inplace.sh - the in-place re-form (issue 20, docs/worker-protocol.md)
# on loopback against a real dlaunch-rdzv, with workers that speak the
# worker side of the control channel (progs/control_worker.py):
#   - kill -9 of one node's processes: the survivors keep their PIDs and
#     get abort, then membership with the new ranks and world size;
#   - a worker killed: only it is a new process;
#   - a spare joining: the others keep theirs, its workers start fresh;
#   - the fallbacks: a worker that ignores abort, one that says hello and
#     hangs, one that crashes during the re-form: that node restarts its
#     workers within the deadline, and the job finishes;
#   - bad input (garbage, a huge line, a closed socket, another version):
#     logged once, that worker plain, the agent serving the others; the
#     node then restarts as a plain node does.
#
# Alone for tests/run.sh -j (its workers must start and step within a 4 s
# progress timeout, and a fallback is checked against an 8 s deadline):
# nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
DL=$BIN/dlaunch
CONF=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=0.5
need_bin dlaunch dlaunch-rdzv
command -v python3 >/dev/null || { skip "agent_inplace: no python3"; finish; }
INPLACE_BACKEND=http
FALLBACK_MODES="ignore_abort hang crash_reform"
BAD_MODES="garbage huge close version2"
source "$(dirname "$0")/lib_inplace.sh"

# -- a step on the channel is progress (--progress-timeout): quiet workers
#    that step run on; one that says hello and then nothing is hung
export CW_DIR=$TEST_TMP/progress
mkdir -p "$CW_DIR"
spawn_bg "$TEST_TMP/progress.log" env DLAUNCH_NODE_ID=p "$DL" --standalone \
	--nproc-per-node 2 --progress-timeout 4 --max-restarts 0 "$W"
pp=$LAST_PID
# 200 steps of 50 ms: two and a half times the timeout without a line of
# output. The timeout counts from the spawn, and a loaded machine took
# over 2 s to start python and its first step (the test failed so with 2)
check "progress: quiet workers that step for 10 s" \
	wait_for 60 at_least 2 '^step 200$' "p.*.log"
check "progress: ... are not taken as hung" \
	bash -c "! grep -q 'showed no progress' '$TEST_TMP/progress.log'"
touch "$CW_DIR/stop"
check "progress: the job succeeds" wait_for 30 dl_exited "$pp"
check_eq "progress: exit 0" 0 "$DL_RC"
export CW_DIR=$TEST_TMP/progress_hang
mkdir -p "$CW_DIR"
spawn_bg "$TEST_TMP/progress_hang.log" env DLAUNCH_NODE_ID=p CW_MODE_1=hang \
	"$DL" --standalone --nproc-per-node 2 --progress-timeout 2 \
	--max-restarts 0 "$W"
pp=$LAST_PID
check "progress: a worker with no step is taken as hung" wait_for 30 \
	file_has "$TEST_TMP/progress_hang.log" 'rank 1 .*showed no progress.*no step'
check "progress: the job fails" wait_for 30 dl_exited "$pp"
check_eq "progress: exit 1" 1 "$DL_RC"
# a hung worker is no reason to keep its node: stopped at once, as today,
# not after the re-form's deadline (30 s here)
export CW_DIR=$TEST_TMP/progress_hang2
mkdir -p "$CW_DIR"
spawn_bg "$TEST_TMP/progress_hang2.log" env DLAUNCH_NODE_ID=p CW_MODE_1=hang \
	"$DL" --standalone --nproc-per-node 2 --progress-timeout 2 \
	--max-restarts 1 --reform-timeout 30 "$W"
pp=$LAST_PID
check "progress: a node with a hung worker restarts both, without waiting for the deadline" \
	wait_for 15 procs_are p 4
check "progress: ... and then fails past its budget" wait_for 30 dl_exited "$pp"
check_eq "progress: exit 1" 1 "$DL_RC"
check "no process of the progress cases is left" wait_for 10 no_marked_left
finish
