#!/bin/bash
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
finish
