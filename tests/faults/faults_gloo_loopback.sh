#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_gloo_loopback.sh - a PyTorch DDP job (gloo) on two hosts whose own
# names resolve to loopback.
#
# Two hosts made with network namespaces (lib_netns.sh), each with its own
# host name (a UTS namespace) and its own /etc/hosts (bound over the real
# one in a private mount namespace) mapping that name to 127.0.1.1, as
# Debian's default does. gloo takes its address from the host name, so
# without an interface its ranks would tell each other 127.0.1.1 and be
# refused. No interface variable is set by the test: the agents give the
# workers the interface of the address they announced (eth0).
#
#   2 nodes x 1 worker, DDP over gloo: both exit 0, the replicas agree, each
#     agent says which interface its workers get and why;
#   --nnodes 1:2, every process of h1 killed mid-run: the survivor on h0
#     runs again alone and finishes (exit 0), alone with gloo's own choice;
#   static mode (--master-addr h0): each node's source address toward the
#     master stands for the announced one; the job runs.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

what="DDP over gloo on hosts named by loopback"
faults_require_hosts "$what"
if ! "$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' \
	>/dev/null 2>&1; then
	not_ok "$what: python3-torch with gloo importable by $PY (run contrib/install-deps.sh)"
	finish
fi
if ! netns_setup 2; then
	not_ok "$what: could not build the two hosts"
	finish
fi
# the user sets no interface: dlaunch must find it
unset GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME
export PYTHON_EXEC=$PY
DDP=$FAULTS_DIR/ddp_gloo.py
for i in 0 1; do
	printf '127.0.0.1 localhost\n127.0.1.1 dlg%s-%s\n' "$i" "$$" >"$TEST_TMP/hosts.$i"
done

# on_host I LOG CMD...: CMD on host I, named dlgI-PID, with its /etc/hosts
on_host() {
	local i=$1 log=$2
	shift 2
	netns_spawn "$i" "$log" env DLAUNCH_TEST_MARK="$MARK" \
		unshare --mount --uts sh -c \
		'hostname "$1" && mount --bind "$0" /etc/hosts && shift && exec "$@"' \
		"$TEST_TMP/hosts.$i" "dlg$i-$$" "$@"
}

on_host 0 "$TEST_TMP/rdzv.log" "$BIN/dlaunch-rdzv" --listen 0.0.0.0:0
RDZV_PID=$LAST_PID
if ! wait_for 10 grep -q '^listening on ' "$TEST_TMP/rdzv.log"; then
	not_ok "$what: dlaunch-rdzv did not start on h0"
	finish
fi
PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$TEST_TMP/rdzv.log" | head -n 1)
EP=$(netns_addr 0):$PORT
check "h1's own name resolves to 127.0.1.1 there" \
	grep -q "^127.0.1.1 " <(netns_exec 1 unshare --mount --uts sh -c \
	'hostname "$1" && mount --bind "$0" /etc/hosts && getent hosts "$1"' \
	"$TEST_TMP/hosts.1" "dlg1-$$")

# agent I CASE NNODES JOB CONF STEPS: the agent of host I, one worker
agent() {
	on_host "$1" "$TEST_TMP/$2.h$1.log" env DLAUNCH_NODE_ID="h$1" \
		"$BIN/dlaunch" --nnodes "$3" --nproc-per-node 1 \
		--max-restarts 3 --rdzv-endpoint "$EP" --rdzv-id "$4" \
		--rdzv-conf "$5" "$DDP" "$6" 0.5
}

# collect PID...: wait (bounded) for the agents; RCS holds their statuses
collect() {
	local p
	RCS=
	wait_for 120 bash -c "for p in $*; do ! kill -0 \$p || exit 1; done"
	for p in "$@"; do
		wait "$p" 2>/dev/null
		RCS="$RCS $?"
	done
	RCS=${RCS# }
}

# -- 2 nodes: the job runs with the interface of the announced address
agent 0 run 2 job1 "$HB_CONF" 6
P0=$LAST_PID
agent 1 run 2 job1 "$HB_CONF" 6
P1=$LAST_PID
collect "$P0" "$P1"
check_eq "2 nodes: both agents exit 0" "0 0" "$RCS"
for i in 0 1; do
	check "2 nodes: h$i says which interface its workers get and why" \
		grep -q "workers get GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME=eth0, the interface of this node's address $(netns_addr "$i"): host name dlg$i-$$ resolves to loopback only" \
		"$TEST_TMP/run.h$i.log"
	check "2 nodes: h$i's worker got eth0 for gloo and NCCL" \
		grep -q "ddp start rank=[01] world=2 gloo_if=eth0 nccl_if=eth0" \
		"$TEST_TMP/run.h$i.log"
	check "2 nodes: h$i's replica agrees after 6 steps" \
		grep -q "ddp ok rank=[01] world=2 steps=6" "$TEST_TMP/run.h$i.log"
done
if [ "$RCS" != "0 0" ]; then
	tail -n 20 "$TEST_TMP/run.h0.log" "$TEST_TMP/run.h1.log" | sed 's/^/#   /'
fi

# -- min 1 node: h1 is lost mid-run, h0 finishes alone
agent 0 lost 1:2 job2 "$HB_CONF,last_call_timeout=5" 40
P0=$LAST_PID
agent 1 lost 1:2 job2 "$HB_CONF,last_call_timeout=5" 40
check "lost: both hosts train together" wait_for 90 bash -c \
	"grep -q 'ddp step rank=[01] world=2 step=2' '$TEST_TMP/lost.h0.log' &&
	 grep -q 'ddp step rank=[01] world=2 step=2' '$TEST_TMP/lost.h1.log'"
for p in $(ip netns pids "$(netns_host 1)"); do
	kill -KILL "$p" 2>/dev/null
done
check "lost: nothing is left on h1" wait_for 10 bash -c \
	"[ -z \"\$(ip netns pids $(netns_host 1))\" ]"
collect "$P0"
check_eq "lost: the survivor exits 0" "0" "$RCS"
check "lost: the survivor ran again alone and finished" \
	grep -q "ddp ok rank=0 world=1 steps=40" "$TEST_TMP/lost.h0.log"
check "lost: alone, the survivor's worker keeps gloo's own choice" \
	grep -q "ddp start rank=0 world=1 gloo_if=- nccl_if=-" "$TEST_TMP/lost.h0.log"
if [ "$RCS" != "0" ]; then
	tail -n 20 "$TEST_TMP/lost.h0.log" | sed 's/^/#   /'
fi

# -- static mode: no server; the address is the route to --master-addr
# (a port of h0's own namespace, where only the server listens)
MPORT=$((20000 + RANDOM % 10000))
[ "$MPORT" = "$PORT" ] && MPORT=$((MPORT + 1))
for i in 0 1; do
	on_host "$i" "$TEST_TMP/static.h$i.log" "$BIN/dlaunch" --nnodes 2 \
		--nproc-per-node 1 --node-rank "$i" --master-addr "$(netns_addr 0)" \
		--master-port "$MPORT" --rdzv-id job3 "$DDP" 4 0.1
	eval "S$i=\$LAST_PID"
done
collect "$S0" "$S1"
check_eq "static: both agents exit 0" "0 0" "$RCS"
for i in 0 1; do
	check "static: h$i's replica agrees" \
		grep -q "ddp ok rank=$i world=2 steps=4" "$TEST_TMP/static.h$i.log"
	check "static: h$i says why" grep -q \
		"NCCL_SOCKET_IFNAME=eth0, the interface of this node's address $(netns_addr "$i")" \
		"$TEST_TMP/static.h$i.log"
done
if [ "$RCS" != "0 0" ]; then
	tail -n 20 "$TEST_TMP/static.h0.log" "$TEST_TMP/static.h1.log" | sed 's/^/#   /'
fi
kill -TERM "$RDZV_PID" 2>/dev/null
wait_for 10 bash -c "! kill -0 $RDZV_PID"
finish
