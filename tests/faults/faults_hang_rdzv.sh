#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_hang_rdzv.sh - hang diagnosis through dlaunch-rdzv on network
# namespace hosts (docs/hangs.md, issue 21):
#
#   dlaunch-train, 2 hosts x 2 ranks, rank k hangs before an all-reduce
#     (DLAUNCH_DIST_FAULT=CALL:sleep, and :loop for one k): with
#     --progress-timeout every node's output names rank k and its node
#     within 10 s of the timeout, from the reports of both nodes (the
#     collective flight records say it never entered the all-reduce the
#     others wait in); the job's detail and `dlaunch status` carry the
#     verdict; then the usual restart;
#   a PyTorch gloo script, 2 hosts x 1 rank, rank 1 sleeps before its
#     all_reduce: the report names rank 1 and its Python stack shows the
#     line it sleeps on, rank 0's is inside torch.distributed;
#   `dlaunch dump` of a healthy dlaunch-train job: every rank's flight
#     record and native stack, and training goes on (steps keep coming).
# The 20-of-20 trials and 16 ranks on 4 hosts are bench/bench.py hang's.
#
# Heavy for tests/run.sh -j (four dlaunch-train ranks train flat out): never
# run beside another heavy test.
# test: heavy
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch dlaunch-rdzv dlaunch-train
faults_require_hosts "hang diagnosis through dlaunch-rdzv"
if ! netns_setup 3 || ! start_rdzv --ns 2; then
	not_ok "hang diagnosis through dlaunch-rdzv: hosts or server did not start"
	finish
fi
EP=$RDZV_HOST:$RDZV_PORT
TRAIN=("$BIN/dlaunch-train" --device cpu --threads 1 --data synthetic:4096
	--model 64-128-4 --global-batch 64 --epochs 1000 --max-steps 100000
	--timeout 120s --log-every 50)

# agents JOB NPROC PT ARGS...: one agent per host (0, 1) for job JOB.
# --shutdown-timeout 600: after a hang's verdict the agent kills the
# workers at once (SIGKILL): ranks stuck in a collective never end on
# SIGTERM (dlaunch-train takes it as a preemption notice and waits for a
# step boundary), so a restart that waited for this grace would come ten
# minutes late, past every deadline here.
# --preempt-grace 0: stop_agents' SIGTERM stops the healthy round 2's
# workers at once
agents() {
	local job=$1 nproc=$2 pt=$3 h
	shift 3
	for h in 0 1; do
		start_agent "$job.$h" --ns "$h" "$BIN/dlaunch" --nnodes=2 \
			--nproc-per-node="$nproc" --rdzv-backend=c10d \
			--rdzv-endpoint="$EP" --rdzv-id="$job" --rdzv-conf="$HB_CONF" \
			--max-restarts=1 --shutdown-timeout=600 --preempt-grace=0 $pt \
			--log-dir "$TEST_TMP/$job.$h" "$@"
	done
}
agent_log() { echo "$TEST_TMP/agent.$1.log"; }
# rank0_log JOB: the log of JOB's agent whose node holds rank 0 (node
# ranks follow the order of the joins); empty until one says so
rank0_log() {
	local h
	for h in 0 1; do
		if grep -q "node rank 0 of" "$(agent_log "$1.$h")" 2>/dev/null; then
			agent_log "$1.$h"
			return 0
		fi
	done
	return 1
}
stop_agents() {
	local h
	for h in 0 1; do
		kill -TERM "${AGENT_PID[$1.$h]}" 2>/dev/null
		wait_agent "$1.$h" 60 || not_ok "$1: agent $1.$h still running"
	done
}

# ---- dlaunch-train, rank k hangs ----------------------------------------------
# train_case K KIND DETECT: rank K hangs by KIND in round 1 only (the
# restart's workers, TORCHELASTIC_RESTART_COUNT 1, have no fault, so that
# stop_agents' SIGTERM ends them), found by DETECT (--progress-timeout,
# or --hang-timeout: a stall)
train_case() {
	local k=$1 kind=$2 detect=$3 job=tr$1$2 h n t0 stuck
	what="dlaunch-train on two hosts, rank $k hangs ($kind) before an all-reduce, ${detect%%=*}"
	new_case
	agents "$job" 2 "$detect" --no-python sh -c \
		'[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && export DLAUNCH_DIST_FAULT="$0"; exec "$@"' \
		"40:$kind" env DLAUNCH_DIST_FAULT_RANK="$k" "${TRAIN[@]}"
	if ! wait_for 90 log_has "$(agent_log "$job.0")" "event=hang_diagnosed"; then
		not_ok "$what: no diagnosis on node $job.0 within 90 s"
		show_log "$(agent_log "$job.0")" 30
		stop_agents "$job"
		check_case "$what" --no-workers
		return
	fi
	t0=$SECONDS
	for h in 0 1; do
		n=$job.$h
		if wait_for 10 log_has "$(agent_log "$n")" "stuck +: $k$"; then
			ok "$what: node $n names rank $k (within $((SECONDS - t0)) s of the first verdict)"
			check "$what: node $n's reason names the node of rank $k" \
				log_has "$(agent_log "$n")" "reason .*rank $k .*node $job\\.[01]"
			check_eq "$what: node $n analysed both nodes' reports" 2 \
				"$(jq '.reports | length' "$TEST_TMP/$n/hang-report.json")"
			check "$what: node $n's report has rank $k's flight record" \
				test "$(jq "[.reports[].workers[] | select(.rank == $k) | .flight | length] | add" "$TEST_TMP/$n/hang-report.json")" -gt 0
		else
			not_ok "$what: node $n did not name rank $k"
			show_log "$(agent_log "$n")" 30
		fi
	done
	check_eq "$what: the job's detail carries the verdict" "[$k]" \
		"$(job_field "$job" '.hang.analysis.stuck' | jq -c .)"
	netns_exec 0 "$BIN/dlaunch" status --rdzv-endpoint "$EP" --rdzv-id "$job" \
		>"$TEST_TMP/status.$job" 2>&1
	check "$what: dlaunch status shows the verdict" \
		grep -q "verdict hang: .*rank $k" "$TEST_TMP/status.$job"
	# the stuck rank ignores SIGTERM: only the kill after the verdict
	# ends it, and the restart comes long before --shutdown-timeout
	check "$what: then the workers restart (round 2), well before the 600 s grace" \
		wait_for 90 log_has "$(agent_log "$job.0")" "round 2:"
	stuck=$(sed -n "s/.*reason .*rank $k (node \($job\.[01]\)).*/\1/p" \
		"$(agent_log "$job.0")" | head -n 1)
	check "$what: node ${stuck:-?} killed rank $k after the verdict (SIGKILL, no grace)" \
		log_has "$(agent_log "${stuck:-none}")" "rank $k \\(pid [0-9]+\\) killed by SIGKILL"
	check "$what: node ${stuck:-?} says why it killed at once" \
		log_has "$(agent_log "${stuck:-none}")" "stopping this node's workers with SIGKILL: the hang diagnosis|hang diagnosis .* is done: killing"
	# one hang, one diagnosis: a node that heard the other's trigger and
	# then found the same hang itself starts no second one (which would
	# collect from workers being killed and name them)
	for h in 0 1; do
		check_eq "$what: node $job.$h collected for one diagnosis in round 1" 1 \
			"$(sed -n '/round 2:/q;p' "$(agent_log "$job.$h")" | grep -c 'collecting the stacks')"
	done
	case $detect in
	--hang-timeout*)
		# a stalled node's stuck rank would never answer an abort: no
		# in-place re-form is tried there (its workers get no abort)
		check "$what: node ${stuck:-?} tried no in-place re-form with its stuck rank" \
			bash -c "! grep -q 'control channel: abort of round 1: a worker of this node failed' '$(agent_log "${stuck:-none}")'"
		;;
	esac
	stop_agents "$job"
	check_case "$what" --no-workers
}
train_case 1 sleep --progress-timeout=8
train_case 2 sleep --progress-timeout=8
train_case 3 loop --hang-timeout=5

# ---- a PyTorch gloo script ------------------------------------------------------
what="PyTorch gloo on two hosts, rank 1 sleeps before its all_reduce"
if "$PY" -c "import torch.distributed" 2>/dev/null; then
	cat >"$TEST_TMP/gloo_hang.py" <<'EOF'
import os, time
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
for step in range(1000000):
    if rank == 1 and step == 20:
        time.sleep(3600)  # GLOO-HANG-LINE
    dist.all_reduce(t)
    print("step", step, flush=True)
    time.sleep(0.05)
EOF
	line=$(grep -n GLOO-HANG-LINE "$TEST_TMP/gloo_hang.py" | cut -d: -f1)
	new_case
	# torch's import takes seconds on a loaded machine: a timeout well
	# beyond it, so that the diagnosis finds the hang and not the start
	agents gl 1 --progress-timeout=30 --python "$PY" "$TEST_TMP/gloo_hang.py"
	if wait_for 180 log_has "$(agent_log gl.1)" "stuck +: 1$"; then
		j=$TEST_TMP/gl.1/hang-report.json
		check "$what: node gl.0 names rank 1 too" \
			wait_for 10 log_has "$(agent_log gl.0)" "stuck +: 1$"
		check "$what: rank 1's Python stack shows the line it sleeps on" \
			bash -c "jq -r '.reports[].workers[] | select(.rank == 1) | .python' '$j' | grep -q 'gloo_hang.py\", line $line'"
		check "$what: rank 0's Python stack is inside torch.distributed" \
			bash -c "jq -r '.reports[].workers[] | select(.rank == 0) | .python' '$j' | grep -q 'torch/distributed/'"
	else
		not_ok "$what: rank 1 not named within 180 s"
		show_log "$(agent_log gl.1)" 30
	fi
	stop_agents gl
	check_case "$what" --no-workers
else
	skip "$what: $PY has no torch.distributed"
fi

# ---- dlaunch dump of a healthy job ------------------------------------------------
what="dlaunch dump of a healthy dlaunch-train job"
new_case
agents dd 2 "" --no-python "${TRAIN[@]}"
wait_for 60 rank0_log dd >/dev/null
l0=$(rank0_log dd || agent_log dd.0)
if wait_for 90 log_has "$l0" "step +100"; then
	t0=$(date +%s%N)
	netns_exec 0 "$BIN/dlaunch" dump --rdzv-endpoint "$EP" --rdzv-id dd \
		--json --timeout 20 >"$TEST_TMP/dd.json" 2>"$TEST_TMP/dd.err"
	rc=$?
	took=$((($(date +%s%N) - t0) / 1000000))
	check_eq "$what: exit 0 (every node reported; $took ms)" 0 "$rc"
	check_eq "$what: four ranks" "0 1 2 3" \
		"$(jq -r '[.reports[].workers[].rank] | sort | map(tostring) | join(" ")' "$TEST_TMP/dd.json")"
	check_eq "$what: every rank's flight record came" 4 \
		"$(jq '[.reports[].workers[] | select((.flight // []) | length > 0)] | length' "$TEST_TMP/dd.json")"
	check_eq "$what: every rank's native stack came" 4 \
		"$(jq '[.reports[].workers[] | select((.native // "") | test("TID"))] | length' "$TEST_TMP/dd.json")"
	check "$what: the verdict is not a hang" \
		bash -c "[ \"\$(jq -r .analysis.verdict '$TEST_TMP/dd.json')\" != hang ]"
	s0=$(grep -c "step " "$l0")
	check "$what: training goes on after the dump" \
		wait_for 20 bash -c "[ \$(grep -c 'step ' '$l0') -gt $s0 ]"
	check "$what: no restart" bash -c "! grep -q 'round 2:' '$l0'"
else
	not_ok "$what: training did not reach step 100"
	show_log "$l0" 30
fi
stop_agents dd
check_case "$what" --no-workers
finish
