#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_env.sh - the environment-equivalence test: for the same program
# (contrib/pytorch/dump_env.py) and the same options, the workers started by
# dlaunch get the same torch/elastic variables with the same values as those
# started by torchrun (tests/torchrun/torchrun, Debian's torch 1.13), rank by
# rank. tests/torchrun/env_compare.py does the comparison; the variables that
# must differ (ports, run ids chosen at random, error-file paths, the host
# name torchrun announces where dlaunch announces an address, dlaunch's
# DLAUNCH_* extras) are listed there, each with its reason, and checked
# another way.
#
# Cases: one node x 2 workers (torchrun's --standalone spelled out with a
# free port: torchrun 1.13 fixes --standalone's store at port 29400, which
# another test may hold; dlaunch gets --standalone itself); two nodes x 2
# workers against a rendezvous (--rdzv-backend c10d --rdzv-endpoint
# --rdzv-id --role --max-restarts, with OMP_NUM_THREADS and
# NCCL_ASYNC_ERROR_HANDLING preset); static mode (--node-rank --master-addr
# --master-port, two nodes x 1 worker).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_torch.sh"
torch_require dlaunch dlaunch-rdzv
DUMP=$EXAMPLES/dump_env.py
COMPARE=$REPO/tests/torchrun/env_compare.py

# parent_env FILE: the environment the launchers are started with, as JSON
parent_env() {
	"$TORCH_PY" -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], "w"))' "$1"
}

# compare WHAT WORLD TDIR DDIR ARGS...: run env_compare and report
compare() {
	local what=$1 world=$2 tdir=$3 ddir=$4 out
	shift 4
	out=$TEST_TMP/compare.$JOB_SEQ.log
	if "$TORCH_PY" "$COMPARE" --parent "$TEST_TMP/parent.json" --torchrun "$tdir" \
		--dlaunch "$ddir" --world "$world" "$@" >"$out" 2>&1; then
		ok "$what: worker environments match torchrun's ($(sed -n 's/.*compared=//p' "$out"))"
	else
		not_ok "$what: worker environments differ from torchrun's"
		grep -v '^# excluded' "$out" | sed 's/^/#   /'
	fi
}

# dumped DIR WORLD: every rank wrote its file
dumped() {
	local r
	for ((r = 0; r < $2; r++)); do
		[ -s "$1/env.$r.json" ] || return 1
	done
}

# ---- 1. one node, two workers; a stale RANK in the launcher's environment
#         must be replaced, OMP_NUM_THREADS defaults to 1 ----
stale=(env -u OMP_NUM_THREADS -u NCCL_ASYNC_ERROR_HANDLING RANK=99 LOCAL_RANK=7)
"${stale[@]}" "$TORCH_PY" -c 'import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], "w"))' \
	"$TEST_TMP/parent.json"
port=$(free_port)
run_job "$TEST_TMP/t1.log" 90 "${stale[@]}" "$TORCHRUN" --nnodes 1 --nproc_per_node 2 \
	--rdzv_backend c10d --rdzv_endpoint "localhost:$port" \
	--rdzv_id "$(cat /proc/sys/kernel/random/uuid)" "$DUMP" "$TEST_TMP/t1"
run_job "$TEST_TMP/d1.log" 90 "${stale[@]}" "$DLAUNCH" --standalone --nproc-per-node 2 \
	"$DUMP" "$TEST_TMP/d1"
check_eq "standalone: dlaunch exits 0" 0 "$JOB_RC"
check "standalone: torchrun ran dump_env on 2 ranks" dumped "$TEST_TMP/t1" 2
if dumped "$TEST_TMP/d1" 2; then
	compare "standalone, 1 node x 2" 2 "$TEST_TMP/t1" "$TEST_TMP/d1"
else
	not_ok "standalone: dlaunch ran dump_env on 2 ranks"
	show_log "$TEST_TMP/d1.log"
fi

# ---- 2. two nodes x 2 workers against a rendezvous ----
rdzv_start "$TEST_TMP/rdzv.log" || finish
export OMP_NUM_THREADS=3 NCCL_ASYNC_ERROR_HANDLING=0
parent_env "$TEST_TMP/parent.json"
common=(--nnodes 2 --max_restarts 2 --role trainer --rdzv_backend c10d --rdzv_id eqjob)
port=$(free_port)
for node in 0 1; do
	start_job "$TEST_TMP/t2.$node.log" "$TORCHRUN" "${common[@]}" --nproc_per_node 2 \
		--rdzv_endpoint "127.0.0.1:$port" "$DUMP" "$TEST_TMP/t2"
	eval "tpid$node=$LAST_PID"
done
wait_job "$tpid0" 90
wait_job "$tpid1" 30
check "rdzv: torchrun ran dump_env on 4 ranks" dumped "$TEST_TMP/t2" 4
for node in nodeA nodeB; do
	start_job "$TEST_TMP/d2.$node.log" "$DLAUNCH" "${common[@]}" --nproc-per-node 2 \
		--rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-conf node_id=$node "$DUMP" "$TEST_TMP/d2"
	eval "dpid_$node=$LAST_PID"
done
wait_job "$dpid_nodeA" 90
rc=$JOB_RC
wait_job "$dpid_nodeB" 30
check_eq "rdzv: both dlaunch agents exit 0" "0 0" "$rc $JOB_RC"
if dumped "$TEST_TMP/d2" 4; then
	compare "rdzv, 2 nodes x 2, --role trainer --max-restarts 2" 4 "$TEST_TMP/t2" "$TEST_TMP/d2" --run-id-given
else
	not_ok "rdzv: dlaunch ran dump_env on 4 ranks"
	show_log "$TEST_TMP/d2.nodeA.log"
	show_log "$TEST_TMP/d2.nodeB.log"
fi
unset OMP_NUM_THREADS NCCL_ASYNC_ERROR_HANDLING

# ---- 3. static mode: no rendezvous server, the user names the master ----
parent_env "$TEST_TMP/parent.json"
port=$(free_port)
for node in 0 1; do
	start_job "$TEST_TMP/t3.$node.log" "$TORCHRUN" --nnodes 2 --nproc_per_node 1 \
		--node_rank $node --master_addr 127.0.0.1 --master_port "$port" --rdzv_id eqstatic \
		"$DUMP" "$TEST_TMP/t3"
	eval "tpid$node=$LAST_PID"
done
wait_job "$tpid0" 90
wait_job "$tpid1" 30
check "static: torchrun ran dump_env on 2 ranks" dumped "$TEST_TMP/t3" 2
# the same port again: torchrun's agents are gone and it is free
for node in 0 1; do
	start_job "$TEST_TMP/d3.$node.log" "$DLAUNCH" --nnodes 2 --nproc-per-node 1 \
		--node-rank $node --master-addr 127.0.0.1 --master-port "$port" --rdzv-id eqstatic \
		"$DUMP" "$TEST_TMP/d3"
	eval "dpid$node=$LAST_PID"
done
wait_job "$dpid0" 90
rc=$JOB_RC
wait_job "$dpid1" 30
check_eq "static: both dlaunch agents exit 0" "0 0" "$rc $JOB_RC"
if dumped "$TEST_TMP/d3" 2; then
	compare "static, 2 nodes x 1, --master-addr/--master-port" 2 "$TEST_TMP/t3" "$TEST_TMP/d3" \
		--run-id-given --static
else
	not_ok "static: dlaunch ran dump_env on 2 ranks"
	show_log "$TEST_TMP/d3.0.log"
	show_log "$TEST_TMP/d3.1.log"
fi
check_no_leftovers "environment equivalence"
finish
