#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_slurm.sh - contrib/slurm/train.sbatch as shipped, under a real
# Slurm (lib_slurm.sh: slurmctld and three slurmd, each node its own
# network namespace and host name):
#
#   as shipped it trains on three CPU nodes and the job completes with exit
#     0, no step killed or cancelled, the rendezvous server drained and its
#     state dir and token removed;
#   every process of one node killed mid-run (slurmd too): the two others
#     go on from the checkpoint and the job completes with exit 0;
#   Slurm reuses an ended job's id: the new job trains;
#   scancel mid-run: nothing of the job is left on any node;
#   scancel --signal=TERM mid-run (a preemption): dlaunch-train stops
#     after one step on every node, saves it, the job COMPLETED with 0;
#   a PyTorch DDP job over gloo on two nodes whose names do not resolve (so
#     gloo would bind loopback), no interface variable set: dlaunch gives
#     the workers eth0 and the job completes.
#
# Heavy for tests/run.sh -j (six dlaunch-train ranks under Slurm train flat
# out): never run beside another heavy test.
# test: heavy
source "$(dirname "$0")/lib_faults.sh"
source "$(dirname "$0")/lib_slurm.sh"
faults_require dlaunch-rdzv dlaunch dlaunch-train

what="contrib/slurm/train.sbatch under Slurm"
if ! slurm_available; then
	skip "$what: $SLURM_WHY"
	finish
fi
trap 'slurm_stop; faults_cleanup' EXIT
if ! slurm_start 3; then
	skip "$what: Slurm could not start here: $SLURM_WHY"
	finish
fi
SBATCH=$(cd "$FAULTS_DIR/../../contrib/slurm" && pwd)/train.sbatch
JOBDIR=$TEST_TMP/job
mkdir -p "$JOBDIR"
chmod 755 "$JOBDIR"

job_done() {
	case "$(slurm_job_field "$1" JobState)" in
	COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return 0 ;;
	esac
	return 1
}

# -- the example as shipped: 3 CPU nodes, --nproc-per-node auto
id=$(slurm_cmd env PATH="$BIN:$PATH" sbatch --parsable --nodes=3 \
	-D "$JOBDIR" -o "$JOBDIR/out.%j" "$SBATCH" --no-python \
	"$BIN/dlaunch-train" --data synthetic:3000 --model 16-16-3 --epochs 2 \
	--device cpu --backend tcp 2>"$JOBDIR/sbatch.err")
check "sbatch accepts the script as shipped" test -n "$id"
check "the job ends" wait_for 120 job_done "$id"
check_eq "the job COMPLETED with exit 0" "COMPLETED 0:0" \
	"$(slurm_job_field "$id" JobState) $(slurm_job_field "$id" ExitCode)"
out=$JOBDIR/out.$id
check "it trained (a final accuracy)" grep -qi "accuracy" "$out"
check "three nodes took part (ranks on n1, n2, n3)" \
	bash -c "grep -o 'node rank [0-9] of 3' '$out' | sort -u | wc -l | grep -qx 3"
check "no step was killed or cancelled" \
	bash -c "! grep -Eq 'Killed|CANCELLED|STEP .* CANCELLED' '$out'"
check "no token file left" bash -c "! ls '$JOBDIR'/.dlaunch-token-* 2>/dev/null"
check "no server state dir left" bash -c "! ls -d /tmp/dlaunch-rdzv-$id.* 2>/dev/null"
check "the node ids are Slurm's node names" grep -q "node=n2" "$out"
[ "$FAILED" -gt 0 ] && sed 's/^/#   /' "$out" | tail -n 40

# -- Slurm reuses a job id (slurmctld's state lost, so its ids start over):
# the job with the ended job's id trains as the first did, it does not
# find that job ended (the server is the job's own, its state removed)
first=$id
check "reuse: slurmctld restarted with its state cleared" \
	slurm_restart_ctld 3
id=$(slurm_cmd env PATH="$BIN:$PATH" sbatch --parsable --nodes=3 \
	-D "$JOBDIR" -o "$JOBDIR/reuse.%j" "$SBATCH" --no-python \
	"$BIN/dlaunch-train" --data synthetic:3000 --model 16-16-3 --epochs 2 \
	--device cpu --backend tcp 2>"$JOBDIR/sbatch.err")
check_eq "reuse: Slurm gave the new job the ended job's id" "$first" "$id"
check "reuse: the job ends" wait_for 120 job_done "$id"
check_eq "reuse: the job COMPLETED with exit 0" "COMPLETED 0:0" \
	"$(slurm_job_field "$id" JobState) $(slurm_job_field "$id" ExitCode)"
check "reuse: it trained (a final accuracy)" grep -qi "accuracy" \
	"$JOBDIR/reuse.$id"
check "reuse: ... in a first round of three nodes, not an ended job" \
	bash -c "grep -q 'round 1: node rank . of 3' '$JOBDIR/reuse.$id' && ! grep -q 'already ended' '$JOBDIR/reuse.$id'"
[ "$FAILED" -gt 0 ] && sed 's/^/#   /' "$JOBDIR/reuse.$id" | tail -n 20

# -- PyTorch DDP over gloo, two nodes, no GLOO_/NCCL_SOCKET_IFNAME set: the
# nodes' names (n1, n2) resolve to nothing, where gloo falls back to
# loopback; the agents name the interface of their announced address
failed_before=$FAILED
id=$(slurm_cmd env -u GLOO_SOCKET_IFNAME -u NCCL_SOCKET_IFNAME \
	PATH="$BIN:$PATH" DLAUNCH_NPROC=1 sbatch --parsable --nodes=2 \
	-D "$JOBDIR" -o "$JOBDIR/out.%j" "$SBATCH" --python "$PY" \
	"$FAULTS_DIR/ddp_gloo.py" 4 0.1 2>"$JOBDIR/sbatch.err")
check "gloo: sbatch accepts the DDP job" test -n "$id"
check "gloo: the job ends" wait_for 120 job_done "$id"
check_eq "gloo: the job COMPLETED with exit 0" "COMPLETED 0:0" \
	"$(slurm_job_field "$id" JobState) $(slurm_job_field "$id" ExitCode)"
out=$JOBDIR/out.$id
check "gloo: both ranks trained over eth0 and agree" bash -c \
	"grep -c 'ddp ok rank=[01] world=2 steps=4' '$out' | grep -qx 2 &&
	 grep -q 'ddp start rank=1 world=2 gloo_if=eth0 nccl_if=eth0' '$out'"
check "gloo: the agents say why" grep -q \
	"workers get GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME=eth0, the interface of this node's address .*: host name n[12] does not resolve" \
	"$out"
[ "$FAILED" -gt "$failed_before" ] && sed 's/^/#   /' "$out" | tail -n 40

# -- scancel --signal=TERM, as a preemption sends (to every process of the
# job's step: the agents and their workers): dlaunch-train on the three
# nodes stops after one step the rendezvous picked, rank 0 saves that step,
# the agents exit 0 and Slurm records the job COMPLETED (--preempt-grace is
# on by default; the workers take their own SIGTERM as a notice)
# PREEMPT_SLURM_TRIALS times (default 1; 20 by hand for the issue's count)
for ((t = 1; t <= ${PREEMPT_SLURM_TRIALS:-1}; t++)); do
	failed_before=$FAILED
	ckpt=$JOBDIR/preempt.$t
	id=$(slurm_cmd env PATH="$BIN:$PATH" sbatch --parsable --nodes=3 \
		-D "$JOBDIR" -o "$JOBDIR/out.%j" "$SBATCH" --no-python \
		"$BIN/dlaunch-train" --data synthetic:20000 --model 64-64-10 \
		--epochs 1000 --device cpu --backend tcp --checkpoint-dir "$ckpt" \
		--log-every 200 2>"$JOBDIR/sbatch.err")
	out=$JOBDIR/out.$id
	check "preempt $t: the job trains on three nodes" wait_for 120 bash -c \
		"[ \$(grep -c 'epoch .* step [0-9]' '$out') -ge 2 ]"
	slurm_cmd scancel --signal=TERM "$id"
	check "preempt $t: the job ends" wait_for 120 job_done "$id"
	check_eq "preempt $t: the job COMPLETED with exit 0" "COMPLETED 0:0" \
		"$(slurm_job_field "$id" JobState) $(slurm_job_field "$id" ExitCode)"
	n=$(sed -n 's/.*event=preempted .*stop_step=\([0-9]*\).*/\1/p' "$out" | sort -u | tr '\n' ' ')
	n=${n% }
	check "preempt $t: the rendezvous picked one stop step ($n)" \
		test -n "$n" -a "$(echo "$n" | wc -w)" = 1
	check "preempt $t: the agents got the SIGTERM" bash -c \
		"[ \$(grep -c 'received SIGTERM' '$out') -ge 3 ]"
	world=$(grep -o 'ranks [0-9]*-[0-9]* of [0-9]*' "$out" | head -n 1 | awk '{print $NF}')
	check_eq "preempt $t: the $world ranks stopped after it" "${world}x$n" \
		"$(sed -n 's/.*rank [0-9]*: preempted: stopped after step \([0-9]*\).*/\1/p' "$out" | sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' ' | sed 's/ $//')"
	check "preempt $t: no rank passed it" bash -c "! grep -q 'past the stop step' '$out'"
	check_eq "preempt $t: rank 0's newest checkpoint is of that step" "$n" \
		"$("$PY" "$FAULTS_DIR/ckpt_tool.py" digest "$("$PY" "$FAULTS_DIR/ckpt_tool.py" newest "$ckpt" 2>/dev/null)" 2>/dev/null | sed -n 's/^step=\([0-9]*\) .*/\1/p')"
	check "preempt $t: the job ended PREEMPTED" grep -q 'event=job_preempted' "$out"
	[ "$FAILED" -gt "$failed_before" ] && sed 's/^/#   /' "$out" | grep -v 'epoch' | tail -n 40
done

# -- every process of one node killed mid-run (slurmd included, as when a
# machine dies): the agents left go on from the checkpoint and the job
# completes; Slurm keeps the allocation (--no-kill)
ckpt=$JOBDIR/ckpt
id=$(slurm_cmd env PATH="$BIN:$PATH" sbatch --parsable --nodes=3 \
	-D "$JOBDIR" -o "$JOBDIR/out.%j" "$SBATCH" --no-python \
	"$BIN/dlaunch-train" --data synthetic:40000 --model 16-1024-1024-3 \
	--epochs 4 --device cpu --backend tcp --checkpoint-dir "$ckpt" \
	--checkpoint-every 20 --log-every 20 2>"$JOBDIR/sbatch.err")
out=$JOBDIR/out.$id
check "node lost: the job starts" test -n "$id"
check "node lost: training is past its first checkpoint" \
	wait_for 120 bash -c "ls '$ckpt' 2>/dev/null | grep -q . && grep -q 'step' '$out'"
for p in $(ip netns pids "$(netns_host 3)"); do kill -KILL "$p" 2>/dev/null; done
# the job must outlive Slurm's verdict on n3 (srun used to force-terminate
# the whole step then)
n3_down_job_running() {
	slurm_cmd sinfo -h -n n3 -o %t 2>/dev/null | grep -q down &&
		[ "$(slurm_job_field "$id" JobState)" = RUNNING ]
}
check "node lost: Slurm marks n3 down while the job runs" \
	wait_for 90 n3_down_job_running
check "node lost: the job ends" wait_for 180 job_done "$id"
check_eq "node lost: the job COMPLETED with exit 0" "COMPLETED 0:0" \
	"$(slurm_job_field "$id" JobState) $(slurm_job_field "$id" ExitCode)"
check "node lost: the others went on without it" \
	grep -q "event=round_closed nnodes=2" "$out"
check "node lost: resumed from the checkpoint" grep -q "resum" "$out"
check "node lost: finished the training" grep -q '"summary"' "$out"
[ "$FAILED" -gt 0 ] && sed 's/^/#   /' "$out" | tail -n 60

# -- scancel mid-run (on the two nodes left): nothing of the job is left
# on any node, only the slurmd
# job_procs I: the processes of host I that are not its slurmd
job_procs() {
	local p
	for p in $(ip netns pids "$(netns_host "$1")"); do
		case "$(cat "/proc/$p/comm" 2>/dev/null)" in
		slurmd | "") ;;
		*) echo "$p" ;;
		esac
	done
}
no_job_procs() { [ -z "$(job_procs 1)$(job_procs 2)" ]; }
id=$(slurm_cmd env PATH="$BIN:$PATH" sbatch --parsable --nodes=2 \
	-D "$JOBDIR" -o "$JOBDIR/out.%j" "$SBATCH" --no-python \
	"$BIN/dlaunch-train" --data synthetic:40000 --model 16-1024-1024-3 \
	--epochs 3 --device cpu --backend tcp --log-every 20 \
	2>"$JOBDIR/sbatch.err")
out=$JOBDIR/out.$id
check "scancel: the job trains" \
	wait_for 120 bash -c "grep -q 'step [0-9]*/' '$out'"
slurm_cmd scancel "$id"
check "scancel: the job is CANCELLED" wait_for 60 job_done "$id"
check_eq "scancel: state" CANCELLED "$(slurm_job_field "$id" JobState)"
check "scancel: nothing of the job is left on any node" wait_for 30 no_job_procs
# shellcheck disable=SC2046 # one pid a word
[ "$FAILED" -gt 0 ] && echo "# left: $(describe_pids $(job_procs 1) $(job_procs 2))"
check "scancel: no token file left" \
	bash -c "! ls '$JOBDIR'/.dlaunch-token-$id 2>/dev/null"
finish
