#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_membership.sh - membership changes against dlaunch-rdzv (the
# cases of lib_membership.sh, which faults_membership_etcd.sh runs over
# etcd): a node joining a running job, and fewer than min nodes left (or
# ever there).
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch
FAULTS_BACKEND=http
# shellcheck source=lib_membership.sh
source "$FAULTS_DIR/lib_membership.sh"
finish
