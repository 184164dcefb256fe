#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_torch_inplace.sh - a PyTorch DDP script (gloo, Debian's torch) with
# the dlaunch module re-forms in place on three namespace hosts of one
# worker each (issue 24), the rendezvous on a fourth:
#
#   host lost: every process of h2 killed (kill -9) mid-training; the two
#     survivors keep their processes, re-form at one step and go on from
#     it, and the job ends with the state (the module's digest of
#     parameters, optimizer state and position) of a reference that trained
#     3 ranks to that step and 2 from its checkpoint, bit for bit (gloo's
#     ring all-reduce adds in a fixed order at a given world size);
#   host joining: h0 and h1 train, h2 joins mid-run; the two keep their
#     processes and re-form at one step, the new rank takes the state of
#     that step from rank 0 over the network (no checkpoint exists), and
#     the job ends with the state of 2 ranks to that step, then 3.
source "$(dirname "$0")/lib_faults.sh"
source "$(dirname "$0")/../e2e/lib_elastic.sh"
faults_require dlaunch-rdzv dlaunch
what="PyTorch in place on namespace hosts"
faults_require_hosts "$what"
if ! "$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' \
	>/dev/null 2>&1; then
	not_ok "$what: python3-torch with gloo importable by $PY (run contrib/install-deps.sh)"
	finish
fi
if ! netns_setup 4; then
	not_ok "$what: could not build the four hosts"
	finish
fi
REPO=$(cd "$FAULTS_DIR/../.." && pwd)
export PYTHON_EXEC=$PY PYTHONPATH=$REPO/python
S=$REPO/contrib/pytorch/elastic_inplace.py
ARGS=(--epochs 3 --samples 960 --global-batch 24 --step-ms 40 --log-every 5
	--reform-timeout 10)

# the agents of a case are named $P0, $P1, $P2 (on hosts 0, 1, 2)
logs() { cat "$TEST_TMP/agent.$P"*.log 2>/dev/null; }
log_of() { echo "$TEST_TMP/agent.$1.log"; }
DLAUNCH_BIN=$BIN/dlaunch

case_what="$what: host lost"
P=h
new_case
if ! start_rdzv --ns 3; then
	not_ok "$case_what: the rendezvous did not start"
	finish
fi
for i in 0 1 2; do
	start_agent "h$i" --ns "$i" "$BIN/dlaunch" --nnodes 2:3 \
		--nproc-per-node 1 --rdzv-endpoint "$RDZV_HOST:$RDZV_PORT" \
		--rdzv-id torchlost --rdzv-conf "$HB_CONF,last_call_timeout=1" \
		--max-restarts 3 --shutdown-timeout 2 --reform-timeout 10 \
		"$S" "${ARGS[@]}"
done
if wait_for 120 past_step 15; then
	before="$(pids_of h0 start)$(pids_of h1 start)"
	for p in $(ip netns pids "$(netns_host 2)"); do kill -KILL "$p"; done
	check "$case_what: the two survivors re-form in place" wait_for 60 n_reformed 2
	s=$(resume_steps)
	check "$case_what: ... at one step ($s)" test "$(echo "$s" | wc -w)" = 1
	check "$case_what: h0 finishes" wait_agent h0 120
	check "$case_what: h1 finishes" wait_agent h1 120
	check_eq "$case_what: both exit 0" 00 "${AGENT_RC[h0]:-}${AGENT_RC[h1]:-}"
	check_eq "$case_what: the survivors are the processes that started" \
		"$before" "$(pids_of h0 done)$(pids_of h1 done)"
	first=$(logs | sed -n 's/.*inplace step=\([0-9]*\) rank=0 world=2 .*/\1/p' | head -n 1)
	check_eq "$case_what: rank 0 goes on from step ${s% } (no reload)" \
		$(((${s% } / 5 + 1) * 5)) "$first"
	if ref=$(reference 3 "${s% }" 2); then
		check_eq "$case_what: final state equals 3 ranks to step ${s% }, then 2 from its checkpoint" \
			"$ref" "$(digests)"
	else
		not_ok "$case_what: the reference run failed"
	fi
else
	not_ok "$case_what: training did not start"
	show_log "$TEST_TMP/agent.h0.log" 30
fi
check_case "$case_what" --no-workers

case_what="$what: host joining"
P=j
new_case
for i in 0 1; do
	start_agent "j$i" --ns "$i" "$BIN/dlaunch" --nnodes 2:3 \
		--nproc-per-node 1 --rdzv-endpoint "$RDZV_HOST:$RDZV_PORT" \
		--rdzv-id torchjoin --rdzv-conf "$HB_CONF,last_call_timeout=1" \
		--max-restarts 3 --shutdown-timeout 2 --reform-timeout 10 \
		"$S" "${ARGS[@]}"
done
if wait_for 120 past_step 15; then
	before="$(pids_of j0 start)$(pids_of j1 start)"
	start_agent j2 --ns 2 "$BIN/dlaunch" --nnodes 2:3 \
		--nproc-per-node 1 --rdzv-endpoint "$RDZV_HOST:$RDZV_PORT" \
		--rdzv-id torchjoin --rdzv-conf "$HB_CONF,last_call_timeout=1" \
		--max-restarts 3 --shutdown-timeout 2 --reform-timeout 10 \
		"$S" "${ARGS[@]}"
	check "$case_what: the two first ranks re-form in place" wait_for 60 n_reformed 2
	s=$(resume_steps)
	check "$case_what: ... at one step ($s)" test "$(echo "$s" | wc -w)" = 1
	for n in j0 j1 j2; do
		check "$case_what: $n finishes" wait_agent "$n" 120
	done
	check_eq "$case_what: all three exit 0" 000 \
		"${AGENT_RC[j0]:-}${AGENT_RC[j1]:-}${AGENT_RC[j2]:-}"
	check_eq "$case_what: j0 and j1 keep their processes" \
		"$before" "$(pids_of j0 done)$(pids_of j1 done)"
	check "$case_what: the new host's rank took the state of step ${s% } from rank 0, over the network" \
		grep -q "took the state of step ${s% } from rank 0" "$(log_of j2)"
	check_eq "$case_what: three ranks of world size 3 at the end" 3 \
		"$(logs | grep -c 'inplace done .*world=3 ')"
	if ref=$(reference 2 "${s% }" 3); then
		check_eq "$case_what: final state equals 2 ranks to step ${s% }, then 3 from its checkpoint" \
			"$ref" "$(digests)"
	else
		not_ok "$case_what: the reference run failed"
	fi
else
	not_ok "$case_what: training did not start"
	show_log "$(log_of j0)" 30
fi
check_case "$case_what" --no-workers
stop_rdzv
finish
