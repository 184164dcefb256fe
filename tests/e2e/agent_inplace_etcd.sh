#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_inplace_etcd.sh - the in-place re-form (tests/e2e/lib_inplace.sh)
# with --rdzv-backend etcd against a real 3-member etcd cluster on
# loopback: node loss, a worker crash, a fallback, bad input.
#
# Alone for tests/run.sh -j (a fallback is checked against an 8 s deadline):
# nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_etcd.sh"
DL=$BIN/dlaunch
CONF=heartbeat_interval=0.2,heartbeat_timeout=2,last_call_timeout=0.5
need_bin dlaunch
command -v python3 >/dev/null || { skip "agent_inplace_etcd: no python3"; finish; }
if ! etcd_available; then
	skip "agent_inplace_etcd: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 3; then
	not_ok "a 3-member etcd cluster starts"
	finish
fi
INPLACE_BACKEND=etcd
FALLBACK_MODES="ignore_abort"
BAD_MODES="garbage"
source "$(dirname "$0")/lib_inplace.sh"
finish
