#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_ddp.sh - DDP training of an MLP on Fashion-MNIST
# (contrib/pytorch/ddp_fashion_mnist.py) under dlaunch: standalone with an
# elastic restart (a worker killed with SIGKILL in the middle of epoch 1; the
# job resumes from rank 0's epoch-0 checkpoint and still reaches the
# threshold), and on two agents against dlaunch-rdzv.
#
# Threshold: 80% test accuracy. One epoch over the 60000 training images with
# 2 ranks x batch 64 reaches ~84% (two epochs ~86%) in about 4 s per epoch
# on this 2-core machine.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_torch.sh"
torch_require dlaunch dlaunch-rdzv
THRESHOLD=80
DDP=$EXAMPLES/ddp_fashion_mnist.py

# accuracy_ok LOG WORLD EPOCHS: every rank printed "ddp ok" with an
# accuracy >= THRESHOLD
accuracy_ok() {
	local n
	n=$(grep -oE "ddp ok rank=[0-9]+ world=$2 epochs=$3 accuracy=[0-9.]+" "$1" |
		awk -F'accuracy=' -v t=$THRESHOLD '$2 >= t {n++} END {print n+0}')
	[ "$n" = "$2" ]
}

# ---- standalone, 2 ranks, 2 epochs; rank 1 killed -9 in epoch 1 ----
log=$TEST_TMP/ddp-restart.log
ckpt=$TEST_TMP/ddp.pt
start_job "$log" "$DLAUNCH" --standalone --nproc-per-node 2 --max-restarts 1 \
	"$DDP" --epochs 2 --checkpoint "$ckpt" --min-accuracy $THRESHOLD --log-every 50
job=$LAST_PID
if wait_for 120 grep -q 'ddp progress rank=1 epoch=1 step=100/' "$log"; then
	victim=$(sed -n 's/.*ddp start rank=1 world=2 pid=\([0-9]*\) restart_count=0 .*/\1/p' "$log")
	check "ddp restart: rank 1's pid is known" test -n "$victim"
	[ -n "$victim" ] && kill -KILL "$victim"
	ok "ddp restart: rank 1 (pid $victim) killed with SIGKILL mid-epoch 1"
else
	not_ok "ddp restart: training reaches epoch 1 step 100"
	show_log "$log"
fi
wait_job "$job" 150
check_eq "ddp restart: dlaunch exits 0 after one restart" 0 "$JOB_RC"
check "ddp restart: epoch 0 was saved before the kill" \
	test "$(count "$log" 'ddp saved epoch=0 ')" = 1
check "ddp restart: both ranks resume at epoch 1 with restart_count=1" \
	test "$(count "$log" 'ddp start rank=[01] world=2 pid=[0-9]+ restart_count=1 resume_epoch=1$')" = 2
check "ddp restart: epoch 1 completed once, after the restart" \
	test "$(count "$log" 'ddp saved epoch=1 ')" = 1
check "ddp restart: no third attempt" \
	test "$(count "$log" 'restart_count=2')" = 0
check "ddp restart: both ranks reach >= $THRESHOLD% test accuracy" accuracy_ok "$log" 2 2
grep -E 'ddp epoch=[0-9]+ test_accuracy' "$log" | sed 's/^/# /'
if ! accuracy_ok "$log" 2 2; then show_log "$log"; fi
# the checkpoint is the plain module's state dict (no DDP "module." prefix)
check "ddp restart: checkpoint holds model.module.state_dict(), optimizer and epoch 1" \
	"$TORCH_PY" -c '
import sys, torch
s = torch.load(sys.argv[1])
assert s["epoch"] == 1, s["epoch"]
assert sorted(s["model"]) == ["fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight", "fc3.bias", "fc3.weight"], list(s["model"])
assert "state" in s["optimizer"]' "$ckpt"
check_no_leftovers "ddp restart"

# ---- two agents, one worker each, one epoch ----
rdzv_start "$TEST_TMP/rdzv.log" || finish
for node in nodeA nodeB; do
	start_job "$TEST_TMP/ddp2.$node.log" "$DLAUNCH" --nnodes 2 --nproc-per-node 1 \
		--rdzv-backend c10d --rdzv-endpoint "$RDZV_ENDPOINT" --rdzv-id ddp2 \
		--rdzv-conf node_id=$node "$DDP" --epochs 1 --min-accuracy $THRESHOLD
	eval "pid_$node=$LAST_PID"
done
wait_job "$pid_nodeA" 120
rc_a=$JOB_RC
wait_job "$pid_nodeB" 15
cat "$TEST_TMP"/ddp2.node?.log >"$TEST_TMP/ddp2.log"
check_eq "ddp 2 nodes: both agents exit 0" "0 0" "$rc_a $JOB_RC" ||
	show_log "$TEST_TMP/ddp2.log"
check "ddp 2 nodes: both ranks reach >= $THRESHOLD% after one epoch" accuracy_ok "$TEST_TMP/ddp2.log" 2 1
if ! accuracy_ok "$TEST_TMP/ddp2.log" 2 1; then show_log "$TEST_TMP/ddp2.log"; fi
check_no_leftovers "ddp 2 nodes"
finish
