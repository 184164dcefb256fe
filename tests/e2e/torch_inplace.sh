#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_inplace.sh - PyTorch scripts re-form in place with the dlaunch
# module (python/dlaunch/, issue 24), with Debian's torch and gloo, on
# loopback: three agents of one worker each against a real dlaunch-rdzv,
# running contrib/pytorch/elastic_inplace.py.
#
#   host lost: one agent and its worker killed (kill -9) mid-training; the
#     two survivors keep their processes, re-form at one step, continue
#     from it (no reload: there is no checkpoint), and end with the state
#     (the module's digest: parameters, optimizer state, position) of a
#     reference that ran 3 ranks to that step and 2 from its checkpoint;
#   host joining: two agents train, a third joins mid-run; the survivors
#     keep their processes, the new rank takes its state from a peer, and
#     the job ends with the state of 2 ranks to that step, then 3;
#   a teardown that hangs: that node restarts its worker within the
#     deadline, the job finishes;
#   a script without the module (progs/torch_plain_steps.py): restarted
#     by the agents, as under torchrun.
#
# Bit for bit: at a given world size gloo's ring all-reduce adds in a
# fixed order, so replicas at the same step and world size are identical.
#
# Alone for tests/run.sh -j (a restart that imports torch is checked against
# a 25 s deadline): nothing runs beside it.
# test: alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_torch.sh"
source "$(dirname "$0")/lib_elastic.sh"
torch_require dlaunch dlaunch-rdzv
export PYTHONPATH=$REPO/python
S=$EXAMPLES/elastic_inplace.py
ARGS=(--epochs 3 --samples 960 --global-batch 24 --step-ms 40 --log-every 5
	--reform-timeout 10)
CONF=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=1
DLAUNCH_BIN=$DLAUNCH
logs() { cat "$TEST_TMP/$JOB".n*.log 2>/dev/null; }
log_of() { echo "$TEST_TMP/$JOB.$1.log"; }

rdzv_start "$TEST_TMP/rdzv.log" || finish

# agent NAME JOB [ENV=VALUE...]: one agent of one worker running $S with
# "${ARGS[@]}" (--reform-timeout $RT); LAST_PID
RT=10
agent() {
	local name=$1 job=$2
	shift 2
	spawn_bg "$TEST_TMP/$job.$name.log" env DLAUNCH_NODE_ID="$name" "$@" \
		"$DLAUNCH" --nnodes 2:3 --nproc-per-node 1 \
		--rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id "$job" \
		--rdzv-conf "$CONF" --max-restarts 3 --shutdown-timeout 2 \
		--reform-timeout "$RT" "$S" "${ARGS[@]}"
}
all_exited() { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }
rcs_of() { local p r=""; for p in "$@"; do wait "$p" 2>/dev/null; r+=$?; done; echo "$r"; }

# -- host lost
JOB=lost
agent n1 $JOB; p1=$LAST_PID
agent n2 $JOB; p2=$LAST_PID
agent n3 $JOB; p3=$LAST_PID
if wait_for 90 past_step 15; then
	before="$(pids_of n1 start)$(pids_of n2 start)"
	w3=$(pids_of n3 start)
	t0=${EPOCHREALTIME//[.,]/}
	kill_tree "$p3"
	for p in $w3; do kill -KILL "$p" 2>/dev/null; done
	check "$JOB: the two survivors re-form in place" wait_for 60 n_reformed 2
	t1=${EPOCHREALTIME//[.,]/}
	echo "# kill of n3 to both survivors re-formed: $(((t1 - t0) / 1000)) ms (heartbeat timeout 1.5 s); the module's own part: $(logs | sed -n 's/.*re-formed in place .* in \([0-9]*\) ms.*/\1/p' | tr '\n' ' ')ms"
	s=$(resume_steps)
	check "$JOB: ... at one step ($s)" test "$(echo "$s" | wc -w)" = 1
	check "$JOB: the job finishes" wait_for 120 all_exited "$p1" "$p2"
	check_eq "$JOB: n1 and n2 exit 0" 00 "$(rcs_of "$p1" "$p2")"
	check_eq "$JOB: the survivors are the processes that started" "$before" \
		"$(pids_of n1 done)$(pids_of n2 done)"
	check_eq "$JOB: world size 2 at the end, one re-form each" 2 \
		"$(logs | grep -c 'inplace done .*world=2 .*reforms=1 ')"
	# the first step rank 0 prints at world size 2 is the next multiple of
	# 5 after the resume step: it went on from there, not from 0
	first=$(logs | sed -n 's/.*inplace step=\([0-9]*\) rank=0 world=2 .*/\1/p' | head -n 1)
	check_eq "$JOB: rank 0 goes on from step ${s% }" \
		$(((${s% } / 5 + 1) * 5)) "$first"
	check_eq "$JOB: no worker started again" 0 \
		"$(logs | grep -c 'inplace start .*step=0' | awk '{print $1 - 3}')"
	if ref=$(reference 3 "${s% }" 2); then
		check_eq "$JOB: final state equals 3 ranks to step ${s% }, then 2 from its checkpoint" \
			"$ref" "$(digests)"
	else
		not_ok "$JOB: the reference run failed"
	fi
else
	not_ok "$JOB: training did not start"
	show_log "$TEST_TMP/$JOB.n1.log" 30
fi

# -- host joining
JOB=join
agent n1 $JOB; p1=$LAST_PID
agent n2 $JOB; p2=$LAST_PID
if wait_for 90 past_step 15; then
	before="$(pids_of n1 start)$(pids_of n2 start)"
	agent n3 $JOB; p3=$LAST_PID
	check "$JOB: the two first ranks re-form in place" wait_for 60 n_reformed 2
	s=$(resume_steps)
	check "$JOB: ... at one step ($s)" test "$(echo "$s" | wc -w)" = 1
	check "$JOB: the job finishes" wait_for 120 all_exited "$p1" "$p2" "$p3"
	check_eq "$JOB: every node exits 0" 000 "$(rcs_of "$p1" "$p2" "$p3")"
	check_eq "$JOB: n1 and n2 keep their processes" "$before" \
		"$(pids_of n1 done)$(pids_of n2 done)"
	check "$JOB: the new rank took its state from a peer" \
		file_has "$TEST_TMP/$JOB.n3.log" "took the state of step ${s% } from rank"
	check_eq "$JOB: three ranks of world size 3 at the end" 3 \
		"$(logs | grep -c 'inplace done .*world=3 ')"
	if ref=$(reference 2 "${s% }" 3); then
		check_eq "$JOB: final state equals 2 ranks to step ${s% }, then 3 from its checkpoint" \
			"$ref" "$(digests)"
	else
		not_ok "$JOB: the reference run failed"
	fi
else
	not_ok "$JOB: training did not start"
	show_log "$TEST_TMP/$JOB.n1.log" 30
fi

# -- a worker whose teardown of the old group hangs (the torch 1.13
#    deadlock; DLAUNCH_TEST_TEARDOWN_HANG): its node falls back to a
#    restart within the deadline, the other survivor re-forms in place
#    (its own bound, the script's --reform-timeout 3 s: it exits 1; the
#    agents' deadline stays 10 s, time for the new worker to import torch
#    and join the survivor's group)
JOB=hang
ARGS+=(--reform-timeout 3)
agent n1 $JOB; p1=$LAST_PID
agent n2 $JOB DLAUNCH_TEST_TEARDOWN_HANG=1; p2=$LAST_PID
agent n3 $JOB; p3=$LAST_PID
n2_workers() { [ "$(grep -c 'inplace start' "$TEST_TMP/$JOB.n2.log")" -ge "$1" ]; }
if wait_for 90 past_step 15; then
	before=$(pids_of n1 start)
	w3=$(pids_of n3 start)
	t0=${EPOCHREALTIME//[.,]/}
	kill_tree "$p3"
	for p in $w3; do kill -KILL "$p" 2>/dev/null; done
	check "$JOB: n2 starts its worker again" wait_for 60 n2_workers 2
	t1=${EPOCHREALTIME//[.,]/}
	# heartbeat timeout 1.5 s, the worker's bound 3 s, the round, and
	# torch's import (about 5 s on a loaded 2-core machine)
	check "$JOB: ... within the deadline ($(((t1 - t0) / 1000)) ms)" \
		test $((t1 - t0)) -lt 25000000
	check "$JOB: n2's agent says its re-form failed" \
		file_has "$TEST_TMP/$JOB.n2.log" "in-place re-form of round [0-9]+ failed"
	check "$JOB: ... after its worker said the teardown hung" \
		file_has "$TEST_TMP/$JOB.n2.log" "did not shut down in 3.0 s"
	check "$JOB: the job finishes" wait_for 120 all_exited "$p1" "$p2"
	check_eq "$JOB: n1 and n2 exit 0" 00 "$(rcs_of "$p1" "$p2")"
	check_eq "$JOB: n1's worker re-formed in place, the same process" \
		"$before" "$(pids_of n1 done)"
	check "$JOB: n2's new worker took its state from a peer" \
		file_has "$TEST_TMP/$JOB.n2.log" "took the state of step [0-9]+ from rank"
else
	not_ok "$JOB: training did not start"
	show_log "$TEST_TMP/$JOB.n1.log" 30
fi

# -- a script without the module: restarted, as under torchrun
JOB=plain
S=$PROGS/torch_plain_steps.py
ARGS=("$TEST_TMP/plain.state" 150 40)
agent n1 $JOB; p1=$LAST_PID
agent n2 $JOB; p2=$LAST_PID
agent n3 $JOB; p3=$LAST_PID
plain_past() {
	local s
	s=$(logs | sed -n 's/.*plain step=\([0-9]*\) rank=0 .*/\1/p' | sort -n | tail -n 1)
	[ -n "$s" ] && [ "$s" -ge "$1" ]
}
if wait_for 90 plain_past 20; then
	w3=$(sed -n 's/.*plain start .*pid=\([0-9]*\).*/\1/p' "$TEST_TMP/$JOB.n3.log")
	kill_tree "$p3"
	kill -KILL "$w3" 2>/dev/null
	check "$JOB: the job finishes" wait_for 120 all_exited "$p1" "$p2"
	check_eq "$JOB: n1 and n2 exit 0" 00 "$(rcs_of "$p1" "$p2")"
	check "$JOB: the agents restarted the workers (no in-place path)" \
		file_has "$TEST_TMP/$JOB.n1.log" 'recovery=restarted why="not every worker declared abort and membership"'
	check_eq "$JOB: two new processes of world size 2, resuming past step 20" 2 \
		"$(logs | grep -E 'plain start rank=[01] world=2 .* step=([2-9][0-9]|1[0-9][0-9])$' | wc -l)"
	check_eq "$JOB: they finish" 2 "$(logs | grep -c 'plain done .*world=2 .*step=150')"
else
	not_ok "$JOB: the plain job did not start"
	show_log "$TEST_TMP/$JOB.n1.log" 30
fi

kill -TERM "$RDZV_PID"
check "no process of the test is left" wait_for 20 no_marked_left
finish
