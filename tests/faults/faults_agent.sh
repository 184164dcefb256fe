#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_agent.sh - agent faults against dlaunch-rdzv: SIGKILL, SIGTERM,
# SIGSTOP shorter and longer than the heartbeat timeout
# (lib_agent_faults.sh, which faults_agent_etcd.sh runs over etcd); here
# the stopped agent's calls go through http_tap.py, so what it learned
# from the server when it resumed is read from what it got.
#
# Three agents (A, B, C; one test worker each, --nnodes=2:3) on loopback.
# The faulty agent is always A. The checker runs after every case.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch
FAULTS_BACKEND=http
# shellcheck source=lib_agent_faults.sh
source "$FAULTS_DIR/lib_agent_faults.sh"
finish
