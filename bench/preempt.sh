#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# preempt.sh - the preemption trials of issue 24 at full count: SIGTERM to
# every agent of a dlaunch-train job on three namespace hosts, TRIALS times
# per backend (default 20), each trial asserting that every rank stopped
# after the step the rendezvous picked, that rank 0's newest checkpoint is
# of that step, that no rank passed it and that every agent exited 0
# (tests/faults/faults_preempt.sh, which runs 2 in the suite), and as
# many trials of a PyTorch script with the dlaunch module (dlaunch-rdzv).
# Prints the script's lines and one summary line per backend:
#
#   preempt http: 20 of 20 trials stopped every rank at one step, saved, exit 0
#
#   bench/preempt.sh [BUILD_DIR] [TRIALS] [BACKENDS]   (as root: namespaces)
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
trials=${2:-20}
backends=${3:-http etcd}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
DLAUNCH_BUILD=$build DLAUNCH_BIN=$build/bin PREEMPT_TRIALS=$trials \
	PREEMPT_TORCH_TRIALS=$trials PREEMPT_BACKENDS=$backends \
	bash "$here/../tests/faults/faults_preempt.sh" | tee "$out"
for b in $backends; do
	# a trial is good when none of its checks failed and its
	# "stopped after it" check passed
	good=0
	for ((t = 1; t <= trials; t++)); do
		job="all$b$t"
		if grep -q "^ok - .*: $job: the three ranks stopped after it" "$out" &&
			! grep -q "^not ok - .*: $job: " "$out"; then
			good=$((good + 1))
		fi
	done
	echo "preempt $b: $good of $trials trials stopped every rank at one step, saved, exit 0"
done
good=0
for ((t = 1; t <= trials; t++)); do
	if grep -q "^ok - .*: torch$t: the loop ended after the stop step" "$out" &&
		! grep -q "^not ok - .*: torch$t: " "$out"; then
		good=$((good + 1))
	fi
done
echo "preempt torch (http): $good of $trials trials stopped every rank at one step, saved, exit 0"
