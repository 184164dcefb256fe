#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_stubborn.sh DIR: a worker that ignores SIGTERM and leaves children
# behind: one in its process group, one in its own session (a daemon).
trap '' TERM
sleep 1000 &
setsid sleep 1001 &
echo "$RANK" >"$1/ready.$RANK.$$"
while :; do sleep 1; done
