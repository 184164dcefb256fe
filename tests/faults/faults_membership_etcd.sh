#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_membership_etcd.sh - membership changes with --rdzv-backend etcd
# against a real etcd member (the cases of lib_membership.sh, which
# faults_membership.sh runs against dlaunch-rdzv): a node joining a
# running job, and fewer than min nodes left (or ever there). The checker
# reads each case's job record through `dlaunch status`.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch
if ! etcd_available; then
	skip "etcd membership faults: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 1; then
	not_ok "etcd membership faults: an etcd member did not start"
	finish
fi
FAULTS_BACKEND=etcd
# shellcheck source=lib_membership.sh
source "$FAULTS_DIR/lib_membership.sh"
etcd_cluster_destroy
finish
