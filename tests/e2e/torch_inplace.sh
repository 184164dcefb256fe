#!/bin/bash
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
#     the job ends with the state of 2 ranks to that step, then 3.
#
# Bit for bit: at a given world size gloo's ring all-reduce adds in a
# fixed order, so replicas at the same step and world size are identical.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_torch.sh"
torch_require dlaunch dlaunch-rdzv
export PYTHONPATH=$REPO/python
S=$EXAMPLES/elastic_inplace.py
ARGS=(--epochs 3 --samples 960 --global-batch 24 --step-ms 40 --log-every 5
	--reform-timeout 10)
CONF=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=1

rdzv_start "$TEST_TMP/rdzv.log" || finish

# agent NAME JOB: one agent of one worker; LAST_PID
agent() {
	spawn_bg "$TEST_TMP/$2.$1.log" env DLAUNCH_NODE_ID="$1" "$DLAUNCH" \
		--nnodes 2:3 --nproc-per-node 1 --rdzv-endpoint "$RDZV_ENDPOINT" \
		--rdzv-id "$2" --rdzv-conf "$CONF" --max-restarts 3 \
		--shutdown-timeout 2 --reform-timeout 10 "$S" "${ARGS[@]}"
}
logs() { cat "$TEST_TMP/$JOB".n*.log 2>/dev/null; }
# rank0_step: the highest step rank 0 has printed
rank0_step() {
	logs | sed -n 's/.*inplace step=\([0-9]*\) rank=0 .*/\1/p' | sort -n | tail -n 1
}
past_step() { local s; s=$(rank0_step); [ -n "$s" ] && [ "$s" -ge "$1" ]; }
n_reformed() { [ "$(logs | grep -c 're-formed in place for round')" -ge "$1" ]; }
resume_steps() {
	logs | sed -n 's/.*re-formed in place .*resuming after step \([0-9]*\).*/\1/p' |
		sort -u | tr '\n' ' '
}
# pids_of NODE WHAT: the pids of the worker's "inplace WHAT" lines
pids_of() {
	sed -n "s/.*inplace $2 .*pid=\([0-9]*\).*/\1/p" "$TEST_TMP/$JOB.$1.log" | sort -u | tr '\n' ' '
}
digests() {
	logs | sed -n 's/.*inplace done .*digest=\([0-9a-f]*\).*/\1/p' | sort -u | tr '\n' ' '
}
# reference W1 STEP W2: the digest after W1 ranks train to STEP and W2
# ranks resume from that checkpoint to the end
reference() {
	local d=$TEST_TMP/ref.$1.$2.$3
	mkdir -p "$d"
	run_job "$d/a.log" 120 "$DLAUNCH" --standalone --nproc-per-node "$1" \
		"$S" "${ARGS[@]}" --step-ms 0 --max-steps "$2" --checkpoint "$d/ck.pt"
	[ "$JOB_RC" = 0 ] || return 1
	run_job "$d/b.log" 120 "$DLAUNCH" --standalone --nproc-per-node "$3" \
		"$S" "${ARGS[@]}" --step-ms 0 --checkpoint "$d/ck.pt"
	[ "$JOB_RC" = 0 ] || return 1
	sed -n 's/.*inplace done .*digest=\([0-9a-f]*\).*/\1/p' "$d/b.log" | sort -u | tr '\n' ' '
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
	kill_tree "$p3"
	for p in $w3; do kill -KILL "$p" 2>/dev/null; done
	check "$JOB: the two survivors re-form in place" wait_for 60 n_reformed 2
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

kill -TERM "$RDZV_PID"
check "no process of the test is left" wait_for 20 no_marked_left
finish
