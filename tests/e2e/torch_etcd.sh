#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_etcd.sh - an unmodified PyTorch DDP job (contrib/pytorch/
# ddp_fashion_mnist.py) on three agents that meet through etcd
# (--rdzv-backend etcd, min 2 max 3 nodes): one agent is killed with
# SIGKILL in the middle of epoch 1; the two survivors re-form, resume from
# rank 0's epoch-0 checkpoint and still reach the accuracy threshold.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_torch.sh"
source "$(dirname "$0")/lib_etcd.sh"
torch_require dlaunch
if ! etcd_available; then
	skip "torch over etcd: $ETCD_WHY"
	finish
fi
THRESHOLD=80
DDP=$EXAMPLES/ddp_fashion_mnist.py
CONF=heartbeat_interval=0.5,heartbeat_timeout=3,last_call_timeout=1,lease_ttl=3,key_prefix=/torch$$

etcd_cluster_start 1
ckpt=$TEST_TMP/ddp.pt
for node in nodeA nodeB nodeC; do
	start_job "$TEST_TMP/ddp.$node.log" env DLAUNCH_NODE_ID=$node "$DLAUNCH" \
		--nnodes 2:3 --nproc-per-node 1 --max-restarts 2 \
		--rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS" --rdzv-id ddp3 \
		--rdzv-conf "$CONF" "$DDP" --epochs 2 --checkpoint "$ckpt" \
		--min-accuracy $THRESHOLD --log-every 50
	eval "pid_$node=$LAST_PID"
done
if wait_for 180 grep -q 'ddp progress rank=0 epoch=1 step=50/' "$TEST_TMP/ddp.nodeA.log" \
	"$TEST_TMP/ddp.nodeB.log" "$TEST_TMP/ddp.nodeC.log"; then
	kill -KILL "$pid_nodeC"
	ok "ddp etcd: agent nodeC killed with SIGKILL mid-epoch 1"
else
	not_ok "ddp etcd: three nodes train and reach epoch 1 step 50"
	show_log "$TEST_TMP/ddp.nodeA.log"
fi
wait_job "$pid_nodeA" 180
rc_a=$JOB_RC
wait_job "$pid_nodeB" 30
cat "$TEST_TMP"/ddp.node[AB].log >"$TEST_TMP/ddp.log"
check_eq "ddp etcd: both surviving agents exit 0" "0 0" "$rc_a $JOB_RC" ||
	show_log "$TEST_TMP/ddp.log"
check "ddp etcd: the first round ran with world size 3" \
	grep -q 'ddp start rank=[0-2] world=3 ' "$TEST_TMP/ddp.log"
check_eq "ddp etcd: the survivors resumed at epoch 1 as a world of 2" 2 \
	"$(count "$TEST_TMP/ddp.log" 'ddp start rank=[01] world=2 pid=[0-9]+ restart_count=[0-9]+ resume_epoch=1$')"
check "ddp etcd: both ranks reach >= $THRESHOLD% test accuracy" \
	test "$(grep -oE 'ddp ok rank=[01] world=2 epochs=2 accuracy=[0-9.]+' "$TEST_TMP/ddp.log" |
		awk -F'accuracy=' -v t=$THRESHOLD '$2 >= t {n++} END {print n+0}')" = 2
grep -E 'ddp epoch=[0-9]+ test_accuracy' "$TEST_TMP/ddp.log" | sed 's/^/# /'
check_no_leftovers "ddp etcd"
etcd_cluster_destroy
finish
