#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_etcd_ended.sh - a job id whose run has ended, with the etcd
# backend (docs/etcd.md): it never starts a new run; a node joining it
# after the end runs nothing and exits 1 saying so.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_etcd.sh"
need_bin dlaunch
if ! etcd_available; then
	skip "etcd backend, ended job: $ETCD_WHY"
	finish
fi
CONF=heartbeat_interval=0.2,heartbeat_timeout=2,last_call_timeout=0.5,lease_ttl=2,key_prefix=/t$$
if ! etcd_cluster_start 1; then
	not_ok "an etcd member starts"
	finish
fi
export AGENT_OUT=$TEST_TMP/ranks.rec
run() {
	timeout 60 env DLAUNCH_NODE_ID="$1" "$BIN/dlaunch" --rdzv-backend etcd \
		--rdzv-endpoint "$ETCD_ENDPOINTS" --nnodes 1 --nproc-per-node 1 \
		--rdzv-id ended --rdzv-conf "$CONF" "$PROGS/agent_env.sh" \
		>"$TEST_TMP/$1.log" 2>&1
}
run n1
check_eq "the run succeeds" 0 $?
check_eq "its worker ran" 1 "$(wc -l <"$AGENT_OUT")"
run n2
check_eq "a join after the end exits 1" 1 $?
check "it says nothing ran" grep -q "nothing ran here" "$TEST_TMP/n2.log"
check_eq "no worker ran again" 1 "$(wc -l <"$AGENT_OUT")"
finish
