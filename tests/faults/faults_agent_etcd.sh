#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_agent_etcd.sh - agent faults with --rdzv-backend etcd against a
# real etcd member (the cases of lib_agent_faults.sh, which faults_agent.sh
# runs against dlaunch-rdzv): SIGKILL (evicted when its lease expires),
# SIGTERM (the others re-form at once, long before its lease would
# expire), SIGSTOP shorter than the lease TTL (nothing happens), SIGSTOP
# past it (evicted; resumed, it finds its lease expired, stops its stale
# worker and rejoins). faults_etcd.sh's "leading agent paused" is the last
# with the agent that leads, on three members, and what it wrote.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch
if ! etcd_available; then
	skip "etcd agent faults: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 1; then
	not_ok "etcd agent faults: an etcd member did not start"
	finish
fi
FAULTS_BACKEND=etcd
# shellcheck source=lib_agent_faults.sh
source "$FAULTS_DIR/lib_agent_faults.sh"
etcd_cluster_destroy
finish
