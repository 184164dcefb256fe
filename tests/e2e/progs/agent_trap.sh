#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_trap.sh DIR: records the signal it receives in DIR, then exits 143.
trap 'echo TERM >"$1/got.$RANK"; exit 143' TERM
trap 'echo INT >"$1/got.$RANK"; exit 130' INT
echo ready >"$1/ready.$RANK"
while :; do sleep 0.1; done
