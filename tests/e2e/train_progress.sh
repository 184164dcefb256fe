#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# train_progress.sh - a healthy dlaunch-train job is not taken as hung:
# every rank touches DLAUNCH_PROGRESS_FILE as it steps, so ranks that print
# nothing (all but rank 0; rank 0 too with a long --log-every) keep their
# agent's --progress-timeout clock running. 2 nodes x 2 workers (two static
# agents on this host), a 3 s timeout, a silent run of several seconds.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_train.sh"
source "$(dirname "$0")/lib_agent.sh"

need_bin dlaunch-train dlaunch
DL=$BIN/dlaunch
port=$(free_port)
# silent: no progress line (--log-every past the run), 3200 steps (1.7 to 3 ms
# each on machines of this kind); several
# seconds of training on this machine, far more than the timeout
ARGS=(--device cpu --timeout 20s --data synthetic:16384 --model 64-256-256-4
	--global-batch 64 --log-every 100000 --epochs 20 --max-steps 3200)
pids=()
for node in 0 1; do
	OMP_NUM_THREADS=1 timeout -k 5 120 "$DL" --nnodes 2 --node-rank $node \
		--nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$port" \
		--max-restarts 0 --progress-timeout 3s --shutdown-timeout 2 \
		--log-dir "$TEST_TMP/logs$node" --no-python "$TRAIN" "${ARGS[@]}" \
		>"$TEST_TMP/node$node.log" 2>&1 &
	pids+=($!)
done
rcs=()
for p in "${pids[@]}"; do
	wait "$p"
	rcs+=($?)
done
check_eq "2 nodes x 2 workers, --progress-timeout 3s: both agents exit 0" \
	"0 0" "${rcs[*]}"
check "no worker was taken as hung" \
	bash -c "! grep -q 'no progress' '$TEST_TMP/node0.log' '$TEST_TMP/node1.log'"
check_eq "training ran its 3200 steps" 3200 \
	"$(summary_field "$TEST_TMP/node0.log" steps)"
secs=$(grep -o '"train_seconds": [0-9.]*' "$TEST_TMP/node0.log" | awk '{print $2}')
check "the run lasted longer than the timeout (${secs:-?} s of training)" \
	below 3 "${secs:-0}"
for node in 0 1; do
	for r in $((2 * node)) $((2 * node + 1)); do
		check "node $node rank $r created its progress file" \
			test -e "$TEST_TMP/logs$node/attempt_0/rank_$r/progress"
	done
done
check "no process of the test left" wait_for 5 no_marked_left
[ "$FAILED" -gt 0 ] && tail -n 20 "$TEST_TMP"/node*.log | sed 's/^/# /'
finish
