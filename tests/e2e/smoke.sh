#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# smoke.sh - each program of the project runs once, in seconds (the
# end-to-end half of make test-quick; the whole suite tests each in depth):
#   - dlaunch-rdzv starts on a free port and answers /healthz;
#   - two dlaunch agents form one job through it and run a worker each,
#     with ranks 0 and 1 of a world of 2, and exit 0;
#   - dlaunch --standalone runs a worker with its dlaunch-keeper beside it
#     (the keeper is started by the agent, never by hand);
#   - dlaunch-train trains a small model on two ranks under dlaunch and
#     prints its summary line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_rdzv.sh"
source "$(dirname "$0")/lib_agent.sh"
need_bin dlaunch dlaunch-rdzv dlaunch-train dlaunch-keeper

# ---- dlaunch-rdzv -------------------------------------------------------------
if ! rdzv_start "$TEST_TMP/rdzv.log"; then
	not_ok "dlaunch-rdzv starts and prints its address"
	finish
fi
ok "dlaunch-rdzv starts and prints its address"
check_eq "dlaunch-rdzv answers /healthz" 200 "$(req GET /healthz)"

# ---- two agents through the server --------------------------------------------
export AGENT_OUT=$TEST_TMP/env.rec
pids=()
for node in a b; do
	spawn_bg "$TEST_TMP/agent.$node.log" env DLAUNCH_NODE_ID="smoke-$node" \
		"$BIN/dlaunch" --nnodes 2 --nproc-per-node 1 \
		--rdzv-endpoint "${RDZV#http://}" --rdzv-id smoke \
		--shutdown-timeout 2 --no-python "$PROGS/agent_env.sh"
	pids+=("$LAST_PID")
done
for node in 0 1; do
	if wait_for 60 dl_exited "${pids[$node]}"; then
		check_eq "two agents: agent $node exits 0" 0 "$DL_RC"
	else
		not_ok "two agents: agent $node did not exit within 60 s"
	fi
done
check_eq "two agents: ranks 0 and 1 of a world of 2 ran" "0 2
1 2" "$(awk '{print $1, $3}' "$AGENT_OUT" 2>/dev/null | sort)"
unset AGENT_OUT
rdzv_stop
check_eq "dlaunch-rdzv exits 0 on SIGTERM" 0 "$RDZV_RC"

# ---- dlaunch --standalone with its keeper -------------------------------------
# keeper_up: a dlaunch-keeper of this test is running
keeper_up() {
	local p
	for p in $(marked_pids); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = dlaunch-keeper ] && return 0
	done
	return 1
}
go=$TEST_TMP/go
# the worker waits (30 s at most) until the test has seen the keeper
spawn_bg "$TEST_TMP/standalone.log" "$BIN/dlaunch" --standalone \
	--nproc-per-node 1 --no-python sh -c \
	"i=0; while [ ! -e '$go' ] && [ \$i -lt 600 ]; do sleep 0.05; i=\$((i + 1)); done; [ -e '$go' ]"
pid=$LAST_PID
check "standalone: dlaunch-keeper runs beside the agent" wait_for 20 keeper_up
touch "$go"
if wait_for 60 dl_exited "$pid"; then
	check_eq "standalone: dlaunch exits 0" 0 "$DL_RC"
else
	not_ok "standalone: dlaunch did not exit within 60 s"
fi
check "standalone: nothing of the job is left" wait_for 10 no_marked_left

# ---- dlaunch-train on two ranks -----------------------------------------------
OMP_NUM_THREADS=1 timeout -k 5 120 "$BIN/dlaunch" --standalone \
	--nproc-per-node 2 --no-python "$BIN/dlaunch-train" --device cpu \
	--timeout 20s --data synthetic:2000 --model 16-8-3 --global-batch 50 \
	--epochs 1 --log-every 1000 >"$TEST_TMP/train.log" 2>&1
check_eq "dlaunch-train: two ranks under dlaunch exit 0" 0 $?
check "dlaunch-train: it prints its summary line" grep -q '{"summary"' "$TEST_TMP/train.log"
finish
