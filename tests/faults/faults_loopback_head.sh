#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_loopback_head.sh - a head whose own name is loopback on itself.
#
# Two hosts made with network namespaces (lib_netns.sh). The server runs on
# h0 and every agent reaches it by the name "dlhead-PID", which h0's
# /etc/hosts maps to 127.0.1.1 (Debian's default for a host's own name)
# and h1's to h0's address (each agent sees its own /etc/hosts, bound over
# the real one in a private mount namespace). The workers meet at
# MASTER_ADDR:MASTER_PORT (master_meet.py), as a distributed program's
# bootstrap does, so a master address h1 cannot reach fails the job.
#
#   the head's agent announces its interface address, not 127.0.0.1: the
#     job runs with the head as node rank 0;
#   a head forced to announce loopback (--local-addr 127.0.0.1): the
#     server makes h1, which announced its real address, node rank 0.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch

what="head named by a loopback address"
faults_require_hosts "$what"
if ! netns_setup 2; then
	not_ok "$what: could not build the two hosts"
	finish
fi

HEAD=dlhead-$$
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$HEAD" >"$TEST_TMP/hosts.0"
printf '127.0.0.1 localhost\n%s %s\n' "$(netns_addr 0)" "$HEAD" >"$TEST_TMP/hosts.1"
MEET=$FAULTS_DIR/master_meet.py

# on_host I LOG CMD...: CMD on host I with that host's /etc/hosts
on_host() {
	local i=$1 log=$2
	shift 2
	netns_spawn "$i" "$log" env DLAUNCH_TEST_MARK="$MARK" \
		unshare --mount sh -c \
		'mount --bind "$0" /etc/hosts && exec "$@"' \
		"$TEST_TMP/hosts.$i" "$@"
}

on_host 0 "$TEST_TMP/rdzv.log" "$BIN/dlaunch-rdzv" --listen 0.0.0.0:0
RDZV_PID=$LAST_PID
if ! wait_for 10 grep -q '^listening on ' "$TEST_TMP/rdzv.log"; then
	not_ok "$what: dlaunch-rdzv did not start on h0"
	finish
fi
PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$TEST_TMP/rdzv.log" | head -n 1)
check "h0 resolves the head's name to 127.0.1.1" \
	grep -q "127.0.1.1" <(netns_exec 0 unshare --mount sh -c \
	'mount --bind "$0" /etc/hosts && getent hosts "$1"' \
	"$TEST_TMP/hosts.0" "$HEAD")

# meet CASE JOB EXTRA...: the head's agent, then h1's, one worker each
meet() {
	local c=$1 job=$2
	shift 2
	on_host 0 "$TEST_TMP/$c.head.log" env DLAUNCH_NODE_ID=head \
		"$BIN/dlaunch" --nnodes 2 --nproc-per-node 1 \
		--rdzv-endpoint "$HEAD:$PORT" --rdzv-id "$job" \
		--rdzv-conf "$HB_CONF" "$@" "$MEET"
	HEAD_PID=$LAST_PID
	# the head joins first, so it is node rank 0 unless the server moves it
	check "$c: the head waits in the job" wait_for 10 netns_exec 0 sh -c \
		"curl -s http://127.0.0.1:$PORT/v1/jobs/$job | grep -q '\"head\"'"
	on_host 1 "$TEST_TMP/$c.n1.log" env DLAUNCH_NODE_ID=n1 \
		"$BIN/dlaunch" --nnodes 2 --nproc-per-node 1 \
		--rdzv-endpoint "$HEAD:$PORT" --rdzv-id "$job" \
		--rdzv-conf "$HB_CONF" "$MEET"
	N1_PID=$LAST_PID
	wait_for 60 bash -c "! kill -0 $HEAD_PID && ! kill -0 $N1_PID"
	wait "$HEAD_PID" 2>/dev/null
	HEAD_RC=$?
	wait "$N1_PID" 2>/dev/null
	N1_RC=$?
}

# -- the head announces the interface, not the loopback route
meet route job1
check_eq "interface: both nodes succeed" "0 0" "$HEAD_RC $N1_RC"
check "interface: the head says what it announces and why" \
	grep -q "announcing address $(netns_addr 0) (from an interface" \
	"$TEST_TMP/route.head.log"
check "interface: the head is the master at its own address" \
	grep -q "MASTER_ADDR=$(netns_addr 0) " "$TEST_TMP/route.n1.log"
check "interface: rank 1 reached it" grep -q "rank 1: reached the master" \
	"$TEST_TMP/route.n1.log"

# -- a head forced to loopback: the server picks the other node as master
meet forced job2 --local-addr 127.0.0.1
check_eq "forced loopback: both nodes succeed" "0 0" "$HEAD_RC $N1_RC"
check "forced loopback: the server moved the master" \
	grep -q "event=master_moved node=n1 addr=$(netns_addr 1)" "$TEST_TMP/rdzv.log"
check "forced loopback: h1 is node rank 0" \
	grep -q "rank 0: met ranks" "$TEST_TMP/forced.n1.log"
check "forced loopback: the head reached h1" \
	grep -q "MASTER_ADDR=$(netns_addr 1) .*" "$TEST_TMP/forced.head.log"
kill -TERM "$RDZV_PID" 2>/dev/null
wait_for 10 bash -c "! kill -0 $RDZV_PID"
finish
