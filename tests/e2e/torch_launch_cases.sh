#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_launch_cases.sh - PyTorch's own launcher test cases
# (test/distributed/launcher/run_test.py of torch 1.13 and its bin/
# workers), re-expressed against the dlaunch binary: the same command lines
# (torchrun's underscore spellings, --monitor_interval=1
# --start_method=spawn included) and the same assertions, chiefly "the set
# of ranks whose worker created its file is exactly 0..WORLD-1". Workers
# are this suite's own (tests/e2e/progs/torch_mark.py, torch_mark.sh,
# torch_launched.py, torch_init_method.py).
#
# The cases PyTorch runs on its single-process etcd server run here twice:
# against dlaunch-rdzv (--rdzv_backend=c10d) and against a real 3-member
# etcd (--rdzv_backend=etcd; skipped where etcd is missing). The rest need
# no rendezvous: static (--master_addr/--master_port/--node_rank),
# --standalone, --run_path, torch.distributed.is_torchelastic_launched(),
# init_method tcp:// and env:// on the master port. Each case's name below
# starts with the PyTorch test it re-expresses.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_torch.sh"
source "$(dirname "$0")/lib_etcd.sh"
torch_require dlaunch dlaunch-rdzv
PROGS=$(cd "$(dirname "$0")/progs" && pwd)
PY=$PROGS/torch_mark.py
SH=$PROGS/torch_mark.sh
# as run_test.py's setUp: no PET_* from outside, and a variable of the
# launcher's own environment that every worker must see
unset "${!PET_@}"
export PARENT_MARK=from-the-launcher
COMMON=(--monitor_interval=1 --start_method=spawn)

# md NAME: a fresh mark directory for case NAME; sets MD
md() {
	MD=$TEST_TMP/$1.d
	mkdir -p "$MD"
}
# job NAME LIMIT CMD...: run CMD under a deadline, console in $TEST_TMP/NAME.log
job() {
	local name=$1 limit=$2
	shift 2
	run_job "$TEST_TMP/$name.log" "$limit" "$@"
}
# marks NAME: the ranks that created their file for case NAME, in order
marks() { find "$TEST_TMP/$1.d" -mindepth 1 -printf '%f\n' 2>/dev/null | sort -n | paste -sd' '; }
upto() { seq 0 $(($1 - 1)) | paste -sd' '; }
# expect_ran WHAT NAME WORLD: dlaunch exited 0 and exactly ranks 0..WORLD-1
# created their file
expect_ran() {
	local want
	want=$(upto "$3")
	if [ "$JOB_RC" = 0 ] && [ "$(marks "$2")" = "$want" ]; then
		ok "$1: exit 0, ranks {$want} ran"
	else
		not_ok "$1: exit $JOB_RC, ranks {$(marks "$2")} ran, expected exit 0 and {$want}"
		show_log "$TEST_TMP/$2.log" 15
	fi
}
# expect_refused WHAT NAME REGEX: dlaunch exited 2 (usage error) with a
# message matching REGEX, and no worker ran
expect_refused() {
	if [ "$JOB_RC" = 2 ] && grep -Eq -- "$3" "$TEST_TMP/$2.log" && [ -z "$(marks "$2")" ]; then
		ok "$1: refused (exit 2) naming '$3', no worker ran"
	else
		not_ok "$1: expected exit 2 naming '$3' and no worker (exit $JOB_RC, ranks {$(marks "$2")})"
		show_log "$TEST_TMP/$2.log" 5
	fi
}
# expect_count WHAT LOG REGEX N: LOG has exactly N lines matching REGEX
expect_count() {
	local n
	n=$(count "$2" "$3")
	if [ "$n" = "$4" ]; then ok "$1"; else
		not_ok "$1 ($n lines match '$3', expected $4)"
		show_log "$2" 10
	fi
}
# gpus: the NVIDIA GPUs of this machine
gpus() {
	local g
	g=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	[ "$g" -gt 0 ] || g=$(find /dev -maxdepth 1 -name 'nvidia[0-9]*' 2>/dev/null | wc -l)
	echo "$g"
}
# auto_nproc: what --nproc_per_node=auto means on this machine, as torch
# says it (the GPU count where there are GPUs, else os.cpu_count())
auto_nproc() {
	if [ "$(gpus)" -gt 0 ]; then gpus; else "$TORCH_PY" -c 'import os; print(os.cpu_count())'; fi
}

# rdzv_cases TAG BACKEND ENDPOINT CONF: the cases run_test.py runs on its
# etcd server, on this rendezvous (CONF: --rdzv_conf for every run)
rdzv_cases() {
	local tag=$1 backend=$2 endpoint=$3 conf=$4 n pa pb rc_a
	local rdzv=(--rdzv_backend="$backend" --rdzv_endpoint="$endpoint" --rdzv_conf="$conf")
	local rdzv1=(--rdzv_backend="$backend" --rdzv_endpoint="$endpoint" --rdzv_conf="$conf,last_call_timeout=1")
	local pet=(PET_RDZV_BACKEND="$backend" PET_RDZV_ENDPOINT="$endpoint" PET_RDZV_CONF="$conf")

	# test_launch_user_script_python
	md "$tag-py"
	job "$tag-py" 60 "$DLAUNCH" --nnodes=1 --nproc_per_node=4 "${rdzv[@]}" \
		--rdzv_id="$tag-py" "${COMMON[@]}" "$PY" --mark_dir="$MD"
	expect_ran "user_script_python ($tag): 1 node x 4, a .py worker" "$tag-py" 4
	expect_count "user_script_python ($tag): every worker saw the launcher's environment and torchrun's variables" \
		"$TEST_TMP/$tag-py.log" "torch_mark env .* WORLD_SIZE=4 .*TORCHELASTIC_RUN_ID=$tag-py .*PARENT_MARK=from-the-launcher$" 4

	# test_launch_user_script_bash: --no_python --module is refused first,
	# then --no_python runs the shell script
	md "$tag-shmod"
	job "$tag-shmod" 20 "$DLAUNCH" --nnodes=1 --nproc_per_node=4 "${rdzv[@]}" \
		--rdzv_id="$tag-shmod" "${COMMON[@]}" --no_python --module "$SH" "$MD"
	expect_refused "user_script_bash ($tag): --no_python --module" "$tag-shmod" "-m/--module and --no-python"
	# (also test_nproc_launch_number_configurations: the same command line)
	md "$tag-sh"
	job "$tag-sh" 60 "$DLAUNCH" --nnodes=1 --nproc_per_node=4 "${rdzv[@]}" \
		--rdzv_id="$tag-sh" "${COMMON[@]}" --no_python "$SH" "$MD"
	expect_ran "user_script_bash, nproc_launch_number ($tag): --no_python, --nproc_per_node=4" "$tag-sh" 4

	# test_launch_user_script_default_nproc: no --nproc_per_node, one worker
	md "$tag-defmod"
	job "$tag-defmod" 20 "$DLAUNCH" --nnodes=1 "${rdzv[@]}" --rdzv_id="$tag-defmod" \
		"${COMMON[@]}" --no_python --module "$SH" "$MD"
	expect_refused "user_script_default_nproc ($tag): --no_python --module" "$tag-defmod" "-m/--module and --no-python"
	md "$tag-def"
	job "$tag-def" 60 "$DLAUNCH" --nnodes=1 "${rdzv[@]}" --rdzv_id="$tag-def" \
		"${COMMON[@]}" --no_python "$SH" "$MD"
	expect_ran "user_script_default_nproc ($tag): one worker by default" "$tag-def" 1

	# test_launch_with_env_vars: every option from its PET_* variable
	md "$tag-petmod"
	job "$tag-petmod" 20 env PET_NNODES=1 PET_NPROC_PER_NODE=4 "${pet[@]}" \
		PET_RDZV_ID="$tag-petmod" PET_MONITOR_INTERVAL=1 PET_START_METHOD=spawn \
		PET_NO_PYTHON=1 PET_MODULE=1 "$DLAUNCH" "$SH" "$MD"
	expect_refused "launch_with_env_vars ($tag): PET_NO_PYTHON=1 PET_MODULE=1" "$tag-petmod" "-m/--module and --no-python"
	md "$tag-pet"
	job "$tag-pet" 60 env PET_NNODES=1 PET_NPROC_PER_NODE=4 "${pet[@]}" \
		PET_RDZV_ID="$tag-pet" PET_MONITOR_INTERVAL=1 PET_START_METHOD=spawn \
		PET_NO_PYTHON=1 PET_MODULE=0 "$DLAUNCH" "$SH" "$MD"
	expect_ran "launch_with_env_vars ($tag): PET_* only, PET_MODULE=0" "$tag-pet" 4

	# test_nproc_launch_auto_configurations, _unknown_configurations
	n=$(auto_nproc)
	md "$tag-auto"
	job "$tag-auto" 60 "$DLAUNCH" --nnodes=1 --nproc_per_node=auto "${rdzv[@]}" \
		--rdzv_id="$tag-auto" "${COMMON[@]}" --no_python "$SH" "$MD"
	expect_ran "nproc_launch_auto ($tag): --nproc_per_node=auto is $n here" "$tag-auto" "$n"
	# test_nproc_gpu_launch_configurations fakes 3 GPUs inside torchrun;
	# here: the GPUs this machine has, and none is a usage error (as
	# torch's "Cuda is not available")
	n=$(gpus)
	md "$tag-gpu"
	job "$tag-gpu" 60 "$DLAUNCH" --nnodes=1 --nproc_per_node=gpu "${rdzv[@]}" \
		--rdzv_id="$tag-gpu" "${COMMON[@]}" --no_python "$SH" "$MD"
	if [ "$n" -gt 0 ]; then
		expect_ran "nproc_gpu_launch ($tag): --nproc_per_node=gpu is the $n GPUs here" "$tag-gpu" "$n"
	else
		expect_refused "nproc_gpu_launch ($tag): --nproc_per_node=gpu without a GPU" "$tag-gpu" "no NVIDIA GPU"
	fi
	md "$tag-unknown"
	job "$tag-unknown" 20 "$DLAUNCH" --nnodes=1 --nproc_per_node=unknown "${rdzv[@]}" \
		--rdzv_id="$tag-unknown" "${COMMON[@]}" --no_python "$SH" "$MD"
	expect_refused "nproc_launch_unknown ($tag): --nproc_per_node=unknown" "$tag-unknown" "--nproc-per-node 'unknown'"

	# test_launch_elastic: --nnodes=1:2 and only one agent; the round closes
	# after the last call (1 s here: the default is torchrun's 30 s)
	md "$tag-el1"
	job "$tag-el1" 60 "$DLAUNCH" --nnodes=1:2 --nproc_per_node=4 "${rdzv1[@]}" \
		--rdzv_id="$tag-el1" "${COMMON[@]}" "$PY" --mark_dir="$MD"
	expect_ran "launch_elastic ($tag): --nnodes=1:2 with one agent" "$tag-el1" 4

	# test_launch_elastic_worker_raise_exception: --max_restarts=0 and a
	# worker that raises: the launch fails (exit 1), reported once, naming it
	md "$tag-raise"
	job "$tag-raise" 60 "$DLAUNCH" --nnodes=1:2 --nproc_per_node=4 "${rdzv1[@]}" \
		--rdzv_id="$tag-raise" "${COMMON[@]}" --max_restarts=0 "$PY" --fail
	check_eq "elastic_worker_raise_exception ($tag): dlaunch exits 1" 1 "$JOB_RC"
	expect_count "elastic_worker_raise_exception ($tag): one root-cause report" \
		"$TEST_TMP/$tag-raise.log" "root cause" 1
	check "elastic_worker_raise_exception ($tag): the report quotes the worker's RuntimeError" \
		grep -q "RuntimeError: torch_mark fails on purpose" <(sed -n '/root cause/,$p' "$TEST_TMP/$tag-raise.log")
	expect_count "elastic_worker_raise_exception ($tag): no restart" \
		"$TEST_TMP/$tag-raise.log" "TORCHELASTIC_RESTART_COUNT=[1-9]" 0

	# test_launch_elastic_multiple_agents: two agents, the same command
	# line; the round closes when the second joins (max 2 nodes)
	md "$tag-el2"
	start_job "$TEST_TMP/$tag-el2.a.log" "$DLAUNCH" --nnodes=1:2 --nproc_per_node=4 "${rdzv[@]}" \
		--rdzv_id="$tag-el2" "${COMMON[@]}" "$PY" --mark_dir="$MD"
	pa=$LAST_PID
	start_job "$TEST_TMP/$tag-el2.b.log" "$DLAUNCH" --nnodes=1:2 --nproc_per_node=4 "${rdzv[@]}" \
		--rdzv_id="$tag-el2" "${COMMON[@]}" "$PY" --mark_dir="$MD"
	pb=$LAST_PID
	wait_job "$pa" 60
	rc_a=$JOB_RC
	wait_job "$pb" 20
	cat "$TEST_TMP/$tag-el2.a.log" "$TEST_TMP/$tag-el2.b.log" >"$TEST_TMP/$tag-el2.log"
	check_eq "elastic_multiple_agents ($tag): both agents exit 0" "0 0" "$rc_a $JOB_RC"
	JOB_RC=$((rc_a + JOB_RC))
	expect_ran "elastic_multiple_agents ($tag): 2 agents x 4 workers" "$tag-el2" 8
	expect_count "elastic_multiple_agents ($tag): the last round had both agents (8 workers saw WORLD_SIZE=8)" \
		"$TEST_TMP/$tag-el2.log" "torch_mark env .* WORLD_SIZE=8 " 8
}

# ---- the cases without a rendezvous server ----

# test_launch_user_script_python_caffe2_bc: static, a host name as master
port=$(free_port)
md static
job static 60 "$DLAUNCH" --nnodes=1 --nproc_per_node=4 "${COMMON[@]}" --master_addr=localhost \
	--master_port="$port" --node_rank=0 "$PY" --mark_dir="$MD"
expect_ran "user_script_python_caffe2_bc: static, --master_addr=localhost --master_port --node_rank=0" static 4
expect_count "user_script_python_caffe2_bc: workers get MASTER_ADDR=localhost and the given MASTER_PORT" \
	"$TEST_TMP/static.log" "torch_mark env .* MASTER_ADDR=localhost MASTER_PORT=$port " 4

# test_launch_standalone
md standalone
job standalone 60 "$DLAUNCH" --nnodes=1 --nproc_per_node=4 --standalone "${COMMON[@]}" "$PY" --mark_dir="$MD"
expect_ran "launch_standalone: --standalone, 1 node x 4" standalone 4

# test_launch_run_path: --run_path in front of the other options
md runpath
job runpath 60 "$DLAUNCH" --run_path --nnodes=1 --nproc_per_node=4 "${COMMON[@]}" "$PY" --mark_dir="$MD"
expect_ran "launch_run_path: --run_path, 1 node x 4" runpath 4
# what --run-path means: the file is a Python script whatever its name,
# even one that is neither executable nor named *.py; from PET_RUN_PATH too
script=$TEST_TMP/mark_script
cp "$PY" "$script"
chmod 644 "$script"
md runpath2
job runpath2 60 "$DLAUNCH" --run-path --nproc-per-node=2 "$script" --mark-dir "$MD"
expect_ran "--run-path: a script with no .py suffix and no x bit runs under python" runpath2 2
md runpath3
job runpath3 60 env PET_RUN_PATH=1 "$DLAUNCH" --nproc-per-node=2 "$script" --mark-dir "$MD"
expect_ran "PET_RUN_PATH=1: the same" runpath3 2
md runpath4
job runpath4 20 env PET_RUN_PATH=0 "$DLAUNCH" --nproc-per-node=2 "$script" --mark-dir "$MD"
check "without --run-path (PET_RUN_PATH=0) that file is not run (exit $JOB_RC, ranks {$(marks runpath4)})" \
	test "$JOB_RC" != 0 -a -z "$(marks runpath4)"
# torchrun's --run_path "takes precedence over --no_python"; -m is refused
md runpath5
job runpath5 60 "$DLAUNCH" --no_python --run_path --nproc-per-node=2 "$script" --mark-dir "$MD"
expect_ran "--run_path takes precedence over --no_python" runpath5 2
md runpath6
job runpath6 20 "$DLAUNCH" --run_path -m torch_mark --mark-dir "$MD"
expect_refused "--run_path with -m" runpath6 "--run-path .*-m/--module"

# test_min_max_nodes_parse: N and MIN:MAX are taken (above), MIN:MAX:X is not
md minmax
job minmax 20 "$DLAUNCH" --nnodes=2:20:30 --rdzv_endpoint=127.0.0.1:1 "$PY" --mark_dir="$MD"
expect_refused "min_max_nodes_parse: --nnodes=2:20:30" minmax "--nnodes '2:20:30'"

# test_is_torchelastic_launched, and test_is_not_torchelastic_launched as
# the control that shows the check can fail
job launched 120 "$DLAUNCH" --run_path --nnodes=1 --nproc_per_node=1 --monitor_interval=1 \
	"$PROGS/torch_launched.py" --out_file="$TEST_TMP/launched.out"
check_eq "is_torchelastic_launched: --run_path, 1 x 1: the worker's torch says True (exit $JOB_RC)" \
	True "$(cat "$TEST_TMP/launched.out" 2>/dev/null)"
(cd "$TEST_TMP" && exec "$TORCH_PY" "$PROGS/torch_launched.py" --out_file="$TEST_TMP/not-launched.out") \
	>"$TEST_TMP/not-launched.log" 2>&1
check_eq "is_not_torchelastic_launched: the same script run directly says False" \
	False "$(cat "$TEST_TMP/not-launched.out" 2>/dev/null)"

# test_init_method_tcp_with_torchelastic, test_init_method_env_with_torchelastic:
# 4 workers form a gloo group on --master_port through tcp://, then env://
for method in tcp env; do
	port=$(free_port)
	init=env://
	[ $method = tcp ] && init=tcp://localhost:$port
	job init-$method 180 "$DLAUNCH" --run_path --nnodes=1 --nproc_per_node=4 --master_addr=localhost \
		--master_port="$port" --monitor_interval=1 "$PROGS/torch_init_method.py" --init_method="$init"
	check_eq "init_method_${method}_with_torchelastic: dlaunch exits 0" 0 "$JOB_RC"
	expect_count "init_method_${method}_with_torchelastic: each of 4 ranks all-reduced to all ones" \
		"$TEST_TMP/init-$method.log" "init_method ok rank=[0-3] world=4 method=$method votes=\[1, 1, 1, 1\] launched=True$" 4
done
check_no_leftovers "cases without a rendezvous server"

# ---- the rendezvous cases, on dlaunch-rdzv ----
rdzv_start "$TEST_TMP/rdzv.log" || finish
rdzv_cases c10d c10d "$RDZV_ENDPOINT" read_timeout=30
# test_launch_shutdown asks that the launcher closes its rendezvous: the
# server knows each job ended
check "launch_shutdown (c10d): the server records the job as SUCCEEDED" \
	grep -q '^job c10d-el2: SUCCEEDED,' <("$DLAUNCH" status --rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id c10d-el2 2>&1)
check_no_leftovers "rendezvous cases on dlaunch-rdzv"

# ---- the rendezvous cases, on etcd ----
if ! etcd_available; then
	skip "rendezvous cases on etcd: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 3; then
	not_ok "a 3-member etcd cluster starts"
	finish
fi
rdzv_cases etcd etcd "$ETCD_ENDPOINTS" key_prefix=/cases$$
check "launch_shutdown (etcd): the job record in etcd says SUCCEEDED" \
	grep -q '^job etcd-el2: SUCCEEDED,' <("$DLAUNCH" status --rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS" \
		--rdzv-id etcd-el2 --rdzv-conf key_prefix=/cases$$ 2>&1)
check_no_leftovers "rendezvous cases on etcd"
etcd_cluster_destroy
finish
