#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_programs.sh - the contrib/pytorch example programs (all-reduce,
# point-to-point, collectives, elastic resume) run unchanged under dlaunch:
# standalone on one node, and as two agents on loopback against a
# dlaunch-rdzv server. Each program checks its own results per rank; this
# script checks that every rank said "ok", the ranks and reduced values, the
# resume point after a restart, and that nothing is left running.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_torch.sh"
torch_require dlaunch dlaunch-rdzv

# ---- standalone: one node, two workers ----
for prog in allreduce p2p collectives; do
	log=$TEST_TMP/$prog-standalone.log
	run_job "$log" 90 "$DLAUNCH" --standalone --nproc-per-node 2 "$EXAMPLES/$prog.py"
	check_eq "$prog standalone: dlaunch exits 0" 0 "$JOB_RC"
	check_ranks "$prog standalone" "$log" "$prog" 2
done
log=$TEST_TMP/allreduce-standalone.log
check "allreduce standalone: the sum over 2 ranks is 3" \
	test "$(count "$log" 'allreduce ok rank=[01] world=2 sum=3 ')" = 2

# ---- elastic: rank 1 fails at step 7 of the first attempt; one restart ----
log=$TEST_TMP/elastic-standalone.log
run_job "$log" 120 "$DLAUNCH" --standalone --nproc-per-node 2 --max-restarts 1 \
	"$EXAMPLES/elastic.py" --state "$TEST_TMP/elastic.state" --steps 20 \
	--fail-rank 1 --fail-step 7
check_eq "elastic standalone: dlaunch exits 0 after one restart" 0 "$JOB_RC"
check "elastic standalone: first attempt starts at step 0 with restart_count=0 max_restarts=1" \
	test "$(count "$log" 'elastic start rank=[01] restart_count=0 max_restarts=1 resume_step=0$')" = 2
check "elastic standalone: the injected failure happened" \
	test "$(count "$log" 'elastic injected failure rank=1 step=7')" = 1
check "elastic standalone: second attempt resumes at step 7 with restart_count=1" \
	test "$(count "$log" 'elastic start rank=[01] restart_count=1 max_restarts=1 resume_step=7$')" = 2
check_ranks "elastic standalone" "$log" elastic 2 "restart_count=1 steps=20 total=60"
check_no_leftovers "standalone programs"

# ---- the same failure with no restart budget: the job fails ----
log=$TEST_TMP/elastic-norestart.log
run_job "$log" 90 "$DLAUNCH" --standalone --nproc-per-node 2 --max-restarts 0 \
	"$EXAMPLES/elastic.py" --state "$TEST_TMP/elastic0.state" --steps 20 \
	--fail-rank 1 --fail-step 3
check_eq "elastic without restarts: dlaunch exits 1" 1 "$JOB_RC"
check "elastic without restarts: no second attempt" \
	test "$(count "$log" 'restart_count=1')" = 0
# root_cause LOG: the root-cause block of dlaunch's failure report
root_cause() { sed -n '/root cause/,/^=====/p' "$1"; }
check "elastic without restarts: the root-cause report names rank 1" \
	grep -Eq '^ *rank *: *1( |$)' <(root_cause "$log")
check "elastic without restarts: the root-cause report names exit code 3" \
	grep -Eq '^ *exit ?code *: *3( |$)' <(root_cause "$log")

# ---- two agents on loopback against dlaunch-rdzv ----
rdzv_start "$TEST_TMP/rdzv.log" || finish

# two_nodes NAME NPROC LIMIT PROGRAM ARGS...: run PROGRAM as job NAME on two
# agents with NPROC workers each (node ids nodeA and nodeB, or with
# DEFAULT_IDS=1 dlaunch's own HOST-PID ids); the console output of both goes
# to $TEST_TMP/NAME.log; sets RC_A, RC_B.
DEFAULT_IDS=0
two_nodes() {
	local name=$1 nproc=$2 limit=$3 pa pb ida=(--rdzv-conf node_id=nodeA) idb=(--rdzv-conf node_id=nodeB)
	shift 3
	[ "$DEFAULT_IDS" = 1 ] && ida=() idb=()
	start_job "$TEST_TMP/$name.A.log" "$DLAUNCH" --nnodes 2 --nproc-per-node "$nproc" \
		--rdzv-backend c10d --rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id "$name" \
		"${ida[@]}" "$@"
	pa=$LAST_PID
	start_job "$TEST_TMP/$name.B.log" "$DLAUNCH" --nnodes 2 --nproc-per-node "$nproc" \
		--rdzv-backend c10d --rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id "$name" \
		"${idb[@]}" "$@"
	pb=$LAST_PID
	wait_job "$pa" "$limit"
	RC_A=$JOB_RC
	wait_job "$pb" 15
	RC_B=$JOB_RC
	cat "$TEST_TMP/$name.A.log" "$TEST_TMP/$name.B.log" >"$TEST_TMP/$name.log"
}

two_nodes allreduce2 2 120 "$EXAMPLES/allreduce.py"
log=$TEST_TMP/allreduce2.log
check_eq "allreduce 2 nodes x 2: both agents exit 0" "0 0" "$RC_A $RC_B"
check_ranks "allreduce 2 nodes x 2" "$log" allreduce 4 "sum=10 "
# ranks 0,1 are one node's, 2,3 the other's, whichever node got node rank 0
for r in 0 1 2 3; do
	check "allreduce 2 nodes x 2: rank $r has local_rank $((r % 2)) group_rank $((r / 2))" \
		test "$(count "$log" "allreduce ok rank=$r world=4 sum=10 local_rank=$((r % 2)) group_rank=$((r / 2))$")" = 1
done

# two agents on one host without node ids: each gets its own (HOST-PID)
DEFAULT_IDS=1
for prog in p2p collectives; do
	two_nodes ${prog}2 1 120 "$EXAMPLES/$prog.py"
	check_eq "$prog 2 nodes x 1: both agents exit 0" "0 0" "$RC_A $RC_B"
	check_ranks "$prog 2 nodes x 1" "$TEST_TMP/${prog}2.log" "$prog" 2
done

DEFAULT_IDS=0
two_nodes elastic2 1 150 --max-restarts 1 "$EXAMPLES/elastic.py" \
	--state "$TEST_TMP/elastic2.state" --steps 20 --fail-rank 1 --fail-step 5
log=$TEST_TMP/elastic2.log
check_eq "elastic 2 nodes: both agents exit 0 after one job-wide restart" "0 0" "$RC_A $RC_B"
check "elastic 2 nodes: both ranks resume at step 5 with restart_count=1" \
	test "$(count "$log" 'elastic start rank=[01] restart_count=1 max_restarts=1 resume_step=5$')" = 2
check_ranks "elastic 2 nodes" "$log" elastic 2 "restart_count=1 steps=20 total=60"
check_no_leftovers "two-node programs"
finish
