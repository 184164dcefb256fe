#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_options.sh - every torchrun option a user passes is accepted by
# dlaunch in both spellings and means the same thing, checked through what
# the workers see (contrib/pytorch/dump_env.py, which needs no torch, so
# these runs are quick) or what the launcher does; an option dlaunch does
# not support is refused with a message naming it (exit status 2).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_torch.sh"
torch_require dlaunch dlaunch-rdzv
DUMP=$EXAMPLES/dump_env.py

# dl NAME ARGS...: dlaunch ARGS... DUMP OUT(NAME) under a deadline; log in
# $TEST_TMP/NAME.log, dumps in $TEST_TMP/NAME/
dl() {
	local name=$1
	shift
	run_job "$TEST_TMP/$name.log" 60 "$DLAUNCH" "$@" "$DUMP" "$TEST_TMP/$name"
}
# var NAME RANK VARIABLE: that variable in that rank's environment
var() {
	"$TORCH_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["env"].get(sys.argv[2], "<unset>"))' \
		"$TEST_TMP/$1/env.$2.json" "$3" 2>/dev/null || echo "<no dump>"
}
# ran NAME WORLD: dlaunch exited 0 and ranks 0..WORLD-1 (only those) dumped
ran() {
	local r
	[ "$JOB_RC" = 0 ] || return 1
	for ((r = 0; r < $2; r++)); do [ -s "$TEST_TMP/$1/env.$r.json" ] || return 1; done
	[ ! -e "$TEST_TMP/$1/env.$2.json" ]
}
# check_ran WHAT NAME WORLD
check_ran() {
	if ran "$2" "$3"; then ok "$1"; else
		not_ok "$1 (exit $JOB_RC)"
		show_log "$TEST_TMP/$2.log" 10
	fi
}
# refused WHAT EXPECTED_REGEX ARGS...: dlaunch exits 2 and names it
refused() {
	local what=$1 text=$2
	shift 2
	run_job "$TEST_TMP/refused.log" 20 "$DLAUNCH" "$@"
	if [ "$JOB_RC" = 2 ] && grep -qE -- "$text" "$TEST_TMP/refused.log"; then
		ok "$what is refused naming '$text'"
	else
		not_ok "$what is refused naming '$text' (exit $JOB_RC)"
		show_log "$TEST_TMP/refused.log" 5
	fi
}

# ---- --standalone, --nproc-per-node in both spellings, PET_* ----
dl np1 --standalone --nproc-per-node 2 --no-python "$TORCH_PY"
check_ran "--standalone --nproc-per-node 2 starts 2 workers" np1 2
check_eq "--nproc-per-node 2: WORLD_SIZE" 2 "$(var np1 1 WORLD_SIZE)"
dl np2 --standalone --nproc_per_node=3 --no_python "$TORCH_PY"
check_ran "--nproc_per_node=3 --no_python starts 3 workers" np2 3
check_eq "--nproc_per_node=3: LOCAL_WORLD_SIZE" 3 "$(var np2 2 LOCAL_WORLD_SIZE)"
run_job "$TEST_TMP/pet.log" 60 env PET_NPROC_PER_NODE=2 "$DLAUNCH" --standalone \
	--no-python "$TORCH_PY" "$DUMP" "$TEST_TMP/pet"
check_ran "PET_NPROC_PER_NODE=2 (torchrun's environment form) starts 2 workers" pet 2
dl npcpu --standalone --nproc-per-node cpu --no-python "$TORCH_PY"
check_ran "--nproc-per-node cpu starts one worker per CPU ($(nproc))" npcpu "$(nproc)"
if [ ! -e /dev/nvidia0 ]; then
	dl npauto --standalone --nproc-per-node auto --no-python "$TORCH_PY"
	check_ran "--nproc-per-node auto without GPUs starts one worker per CPU" npauto "$(nproc)"
fi

# ---- python selection: *.py runs under PYTHON_EXEC, -m runs a module ----
dl py --standalone --nproc-per-node 1
check_ran "a .py script runs with PYTHON_EXEC" py 1
check "the worker's interpreter is PYTHON_EXEC with -u" grep -q "dump_env ok rank=0" "$TEST_TMP/py.log"
run_job "$TEST_TMP/mod.log" 60 env PYTHONPATH="$EXAMPLES" "$DLAUNCH" --standalone \
	--nproc-per-node 2 -m dump_env "$TEST_TMP/mod"
check_ran "-m dump_env runs the module on 2 workers" mod 2
run_job "$TEST_TMP/mod2.log" 60 env PYTHONPATH="$EXAMPLES" "$DLAUNCH" --standalone \
	--nproc-per-node 1 --module dump_env "$TEST_TMP/mod2"
check_ran "--module dump_env" mod2 1

# ---- --role, --max-restarts, --rdzv-id, --monitor-interval, --start-method ----
dl role --standalone --nproc-per-node 2 --role trainer --max-restarts 3 \
	--monitor-interval 0.5 --start-method spawn --no-python "$TORCH_PY"
check_ran "--role --max-restarts --monitor-interval --start-method are accepted" role 2
check_eq "--role trainer: ROLE_NAME" trainer "$(var role 0 ROLE_NAME)"
check_eq "--max-restarts 3: TORCHELASTIC_MAX_RESTARTS" 3 "$(var role 1 TORCHELASTIC_MAX_RESTARTS)"
dl role2 --standalone --nproc_per_node 1 --max_restarts=2 --monitor_interval=1 \
	--start_method=fork --no-python "$TORCH_PY"
check_ran "--max_restarts= --monitor_interval= --start_method= (underscore spellings)" role2 1
check_eq "--max_restarts=2: TORCHELASTIC_MAX_RESTARTS" 2 "$(var role2 0 TORCHELASTIC_MAX_RESTARTS)"

# --max-restarts means restarts: a worker that succeeds on its third attempt
flaky='echo "attempt $TORCHELASTIC_RESTART_COUNT"; [ "$TORCHELASTIC_RESTART_COUNT" -ge 2 ]'
run_job "$TEST_TMP/flaky2.log" 60 "$DLAUNCH" --standalone --nproc-per-node 1 \
	--max-restarts 2 --no-python sh -c "$flaky"
check_eq "--max-restarts 2: a worker failing twice succeeds on attempt 2" 0 "$JOB_RC"
check "--max-restarts 2: attempts 0, 1, 2 ran" test "$(count "$TEST_TMP/flaky2.log" 'attempt [012]$')" = 3
run_job "$TEST_TMP/flaky1.log" 60 "$DLAUNCH" --standalone --nproc-per-node 1 \
	--max_restarts 1 --no-python sh -c "$flaky"
check_eq "--max_restarts 1: the same worker fails the job (exit 1)" 1 "$JOB_RC"
check "--max_restarts 1: no attempt 2" test "$(count "$TEST_TMP/flaky1.log" 'attempt 2$')" = 0

# ---- --log-dir, --redirects, --tee ----
dl logs --standalone --nproc-per-node 2 --log-dir "$TEST_TMP/logs" --redirects 3 \
	--no-python "$TORCH_PY"
check_ran "--log-dir --redirects 3 runs" logs 2
for r in 0 1; do
	check "--log-dir: attempt_0/rank_$r/stdout.log holds rank $r's output" \
		grep -q "dump_env ok rank=$r " "$TEST_TMP/logs/attempt_0/rank_$r/stdout.log"
	check "--log-dir: attempt_0/rank_$r/stderr.log exists" test -f "$TEST_TMP/logs/attempt_0/rank_$r/stderr.log"
done
check "--redirects 3: workers' stdout is not on the console" \
	test "$(count "$TEST_TMP/logs.log" 'dump_env ok')" = 0
dl logs2 --standalone --nproc_per_node 2 --log_dir "$TEST_TMP/logs2" -t 1 \
	--no-python "$TORCH_PY"
check_ran "--log_dir -t 1 (short option) runs" logs2 2
check "-t 1: stdout is both in the file and on the console" \
	test "$(count "$TEST_TMP/logs2.log" 'dump_env ok')" = 2 -a \
	-n "$(grep -l 'dump_env ok' "$TEST_TMP/logs2/attempt_0/rank_1/stdout.log" 2>/dev/null)"
# torchrun ORs --tee into --redirects and shows the tee'd streams: with
# -r 3 -t 1 stdout is in the file and on the console, stderr only in the file
dl logs2b --standalone --nproc-per-node 2 --log-dir "$TEST_TMP/logs2b" -r 3 -t 1 \
	--no-python "$TORCH_PY"
check_ran "-r 3 -t 1 runs" logs2b 2
check "-r 3 -t 1: stdout is both in the file and on the console (as torchrun)" \
	test "$(count "$TEST_TMP/logs2b.log" 'dump_env ok')" = 2 -a \
	-n "$(grep -l 'dump_env ok' "$TEST_TMP/logs2b/attempt_0/rank_1/stdout.log" 2>/dev/null)"
dl logs3 --standalone --nproc-per-node 2 --log-dir "$TEST_TMP/logs3" --redirects 0:1,1:0 \
	--no-python "$TORCH_PY"
check_ran "--redirects 0:1,1:0 (per local rank) runs" logs3 2
check "--redirects 0:1,1:0: only rank 1's stdout reaches the console" \
	test "$(count "$TEST_TMP/logs3.log" 'dump_env ok rank=1 ')" = 1 -a \
	"$(count "$TEST_TMP/logs3.log" 'dump_env ok rank=0 ')" = 0

dl filt --standalone --nproc-per-node 2 --local-ranks-filter 1 --no-python "$TORCH_PY"
check_ran "--local-ranks-filter 1 runs" filt 2
check "--local-ranks-filter 1: only local rank 1's output is on the console" \
	test "$(count "$TEST_TMP/filt.log" 'dump_env ok rank=1 ')" = 1 -a \
	"$(count "$TEST_TMP/filt.log" 'dump_env ok rank=0 ')" = 0

# ---- rendezvous options ----
rdzv_start "$TEST_TMP/rdzv.log" || finish
dl rdzv1 --nnodes 1:2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint "$RDZV_ENDPOINT" \
	--rdzv-id optjob --rdzv-conf last_call_timeout=1,join_timeout=30,read_timeout=30,node_id=solo --local-addr 127.0.0.1 \
	--no-python "$TORCH_PY"
check_ran "--nnodes 1:2 with one node starts after the last call" rdzv1 2
check_eq "--nnodes 1:2 with one node: GROUP_WORLD_SIZE" 1 "$(var rdzv1 0 GROUP_WORLD_SIZE)"
check_eq "--rdzv-id optjob: TORCHELASTIC_RUN_ID" optjob "$(var rdzv1 1 TORCHELASTIC_RUN_ID)"
check_eq "--local-addr 127.0.0.1: MASTER_ADDR" 127.0.0.1 "$(var rdzv1 0 MASTER_ADDR)"
dl rdzv2 --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint="$RDZV_ENDPOINT" \
	--rdzv_id=optjob2 --rdzv_conf=last_call_timeout=1,node_id=solo2 --local_addr=127.0.0.1 \
	--no-python "$TORCH_PY"
check_ran "--rdzv_backend= --rdzv_endpoint= --rdzv_id= --rdzv_conf= --local_addr= (underscore spellings)" rdzv2 1
# join_timeout from --rdzv-conf: one of two required nodes; the job gives up
start=$SECONDS
run_job "$TEST_TMP/jt.log" 60 "$DLAUNCH" --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \
	--rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id jtjob --rdzv-conf join_timeout=2,node_id=lonely \
	--no-python true
check_eq "--rdzv-conf join_timeout=2 with 1 of 2 nodes: dlaunch exits 1" 1 "$JOB_RC"
check "--rdzv-conf join_timeout=2: it gives up within 20 s (took $((SECONDS - start)) s)" \
	test $((SECONDS - start)) -lt 20

# ---- static mode: --node-rank --master-addr --master-port ----
port=$(free_port)
start_job "$TEST_TMP/st0.log" "$DLAUNCH" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
	--master-port "$port" --nproc-per-node 1 --no-python "$TORCH_PY" "$DUMP" "$TEST_TMP/st"
p0=$LAST_PID
start_job "$TEST_TMP/st1.log" "$DLAUNCH" --nnodes=2 --node_rank=1 --master_addr=127.0.0.1 \
	--master_port="$port" --nproc_per_node=1 --no-python "$TORCH_PY" "$DUMP" "$TEST_TMP/st"
p1=$LAST_PID
wait_job "$p0" 60
rc0=$JOB_RC
wait_job "$p1" 20
check_eq "static: --node-rank/--master-addr/--master-port (both spellings) agents exit 0" "0 0" "$rc0 $JOB_RC"
check_eq "static: node rank 1's worker has RANK" 1 "$(var st 1 RANK)"
check_eq "static: MASTER_PORT is --master-port" "$port" "$(var st 1 MASTER_PORT)"
check_eq "static: GROUP_RANK of node 1" 1 "$(var st 1 GROUP_RANK)"

# ---- unsupported or wrong options are refused, naming them ----
refused "an unknown option" "--frobnicate" --standalone --frobnicate "$DUMP" x
refused "torchrun's --logs-specs (not supported)" "--logs[-_]specs" --standalone --logs-specs x "$DUMP" x
refused "--rdzv-backend zookeeper (not a backend)" "zookeeper. is not static, c10d, dlaunch, etcd" --rdzv-backend zookeeper --rdzv-endpoint 127.0.0.1:1 "$DUMP" x
refused "--rdzv-backend etcd-v2 with a bad endpoint list" "etcd endpoint .h:x." --rdzv-backend etcd-v2 --rdzv-endpoint 127.0.0.1:2379,h:x "$DUMP" x
refused "--nnodes 3:2 (min above max)" "nnodes" --nnodes 3:2 --rdzv-endpoint 127.0.0.1:1 "$DUMP" x
refused "--nproc-per-node banana" "nproc" --standalone --nproc-per-node banana "$DUMP" x
refused "--redirects 7" "redirects" --standalone --redirects 7 "$DUMP" x
refused "--no-python with -m" "-m" --standalone --no-python -m dump_env x
check_no_leftovers "options"
finish
