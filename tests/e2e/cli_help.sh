#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# cli_help.sh - the four command lines share one option engine: each
# --help is generated from its table and shows every default (the values
# of the config a bare command line gets: agent_config_init,
# rdzv_server_config_init, the trainer's options_init); `dlaunch status`
# checks a job name with the server's rule and reads the token file as
# dlaunch does; --rdzv-backend etcd refuses a bad endpoint list before
# anything starts.
source "$(dirname "$0")/lib.sh"
need_bin dlaunch dlaunch-rdzv dlaunch-train

# help_has NAME FILE TEXT...: each TEXT is in FILE, the help's line wraps
# undone (a newline and its indent read as one space)
help_has() {
	local name=$1 file=$2 flat
	shift 2
	flat=$(sed -e ':a' -e 'N' -e '$!ba' -e 's/\n */ /g' "$file")
	for text in "$@"; do
		if [[ $flat == *"$text"* ]]; then ok "$name: --help shows '$text'"
		else not_ok "$name: --help lacks '$text'"; fi
	done
}

"$BIN/dlaunch" --help >"$TEST_TMP/dlaunch" 2>&1
check_eq "dlaunch --help exits 0" 0 $?
help_has dlaunch "$TEST_TMP/dlaunch" \
	"--nnodes N|MIN:MAX number of nodes, or the range the job may run with (default: 1:1)" \
	"(default: join_timeout=600s,last_call_timeout=5s,heartbeat_interval=1s,heartbeat_timeout=5s,read_timeout=60s)" \
	"--shutdown-timeout DURATION grace between SIGTERM and SIGKILL when stopping workers; none after a hang diagnosis' verdict: SIGKILL at once (default: 30s)" \
	"(default: 30s)" "--reform-timeout DURATION" \
	"--preempt-grace DURATION" "(default: 60s)" \
	"--progress-timeout DURATION" "(default: 0: off)" \
	"--hang-timeout DURATION" "(default: 300s)" \
	"--straggler-steps N" "(default: 5)" \
	"--rdzv-backend NAME" "(default: static)" "--rdzv-id ID" "(default: none)" \
	"--max-restarts N" "(default: 0)" "--role NAME ROLE_NAME of the workers (default: default)" \
	"--master-addr ADDR static mode: address of node rank 0 (default: 127.0.0.1)" \
	"(default: 29500)" "(default: SIGTERM,SIGINT,SIGHUP,SIGQUIT)" \
	"Not supported (refused): --logs-specs."
check_eq "dlaunch --help: its 33 options (34 less the refused one) are listed" \
	33 "$(grep -c '^  -' "$TEST_TMP/dlaunch")"
help_has dlaunch "$TEST_TMP/dlaunch" \
	"etcd (etcd-v1, etcd-v2 and etcd-v3 are taken as etcd)" \
	"--rdzv-endpoint HOST:PORT|URL[,...]" "(port 2379 when omitted;" \
	"protocol (http or https" "key_prefix (where the job's keys live; default /dlaunch)" \
	"lease_ttl (whole seconds, 2-3600; default heartbeat_timeout rounded up, at least 2)" \
	"rerun_after (a join this long after the job ended starts a new run of its id, as dlaunch-rdzv --rerun-after; default 30s, 0: never)"

# a bad etcd endpoint list: a usage error at once, naming the item; no
# agent starts (nothing joins, no worker runs)
start=$SECONDS
"$BIN/dlaunch" --rdzv-backend etcd --rdzv-endpoint 127.0.0.1:2379,bad:port:x --rdzv-id j \
	--nnodes 1:2 --no-python touch "$TEST_TMP/ran" >"$TEST_TMP/out" 2>&1
check_eq "--rdzv-backend etcd with a bad endpoint: exit 2" 2 $?
check "--rdzv-backend etcd with a bad endpoint: it is named" \
	grep -q -- "--rdzv-endpoint: etcd endpoint 'bad:port:x' has more than one ':'" "$TEST_TMP/out"
check "--rdzv-backend etcd with a bad endpoint: refused at once ($((SECONDS - start)) s)" \
	test $((SECONDS - start)) -lt 5
check "--rdzv-backend etcd with a bad endpoint: no worker ran" test ! -e "$TEST_TMP/ran"
PET_RDZV_BACKEND=etcd-v2 "$BIN/dlaunch" --rdzv-endpoint 127.0.0.1 \
	--rdzv-conf lease_ttl=1 --no-python true >"$TEST_TMP/out" 2>&1
check_eq "PET_RDZV_BACKEND=etcd-v2 with --rdzv-conf lease_ttl=1: exit 2" 2 $?
check "--rdzv-conf lease_ttl=1: the range is named" \
	grep -q "lease_ttl='1' is not whole seconds from 2 to 3600" "$TEST_TMP/out"
"$BIN/dlaunch" --rdzv-endpoint 127.0.0.1:29400 --rdzv-conf key_prefix=/x \
	--no-python true >"$TEST_TMP/out" 2>&1
check_eq "an etcd --rdzv-conf key with dlaunch-rdzv: exit 2" 2 $?
check "an etcd --rdzv-conf key with dlaunch-rdzv: named" \
	grep -q -- "--rdzv-conf key_prefix is only for --rdzv-backend etcd" "$TEST_TMP/out"

"$BIN/dlaunch" status --help >"$TEST_TMP/status" 2>&1
check_eq "dlaunch status --help exits 0" 0 $?
help_has "dlaunch status" "$TEST_TMP/status" "usage: dlaunch status" \
	"--rdzv-id ID" "(default: all jobs)" "--rdzv-token-file FILE" "--rdzv-ca FILE"
"$BIN/dlaunch" dump --help >"$TEST_TMP/dump" 2>&1
check_eq "dlaunch dump --help exits 0" 0 $?
help_has "dlaunch dump" "$TEST_TMP/dump" "usage: dlaunch dump" \
	"--rdzv-id ID" "--json" "--timeout DURATION" "(default: 20s)"
"$BIN/dlaunch" dump --rdzv-endpoint 127.0.0.1:1 >"$TEST_TMP/out" 2>&1
check_eq "dlaunch dump without --rdzv-id: exit 2" 2 $?
"$BIN/dlaunch" dump --rdzv-endpoint 127.0.0.1:1 --rdzv-id j >"$TEST_TMP/out" 2>&1
check_eq "dlaunch dump, nobody listening: exit 1" 1 $?
check "dlaunch dump, nobody listening: says so" grep -q "cannot reach rendezvous" "$TEST_TMP/out"
DLAUNCH_NODE_ID='bad/id' "$BIN/dlaunch" --standalone --no-python true >"$TEST_TMP/out" 2>&1
check_eq "DLAUNCH_NODE_ID the server would refuse: exit 2 before any join" 2 $?
check "DLAUNCH_NODE_ID: the rule is named" \
	grep -q "DLAUNCH_NODE_ID 'bad/id' must be 1-128 of \[A-Za-z0-9._:-\]" "$TEST_TMP/out"
check "DLAUNCH_NODE_ID: nothing joined" bash -c "! grep -q joining '$TEST_TMP/out'"

"$BIN/dlaunch" status --rdzv-endpoint 127.0.0.1:1 --rdzv-id .hidden >"$TEST_TMP/out" 2>&1
check_eq "dlaunch status --rdzv-id .hidden (the server refuses it): exit 2" 2 $?
check "dlaunch status --rdzv-id .hidden: the rule is named" \
	grep -q "rdzv-id '.hidden' must be 1-128 of \[A-Za-z0-9._:-\], not starting with '.'" "$TEST_TMP/out"
printf 'one\ntwo\n' >"$TEST_TMP/twolines"
"$BIN/dlaunch" status --rdzv-endpoint 127.0.0.1:1 --rdzv-token-file "$TEST_TMP/twolines" \
	>"$TEST_TMP/out" 2>&1
check_eq "dlaunch status: a two-line token file is a usage error" 2 $?
check "dlaunch status: the token file is named" grep -q "twolines has more than one line" "$TEST_TMP/out"
"$BIN/dlaunch" status --rdzv-endpoint 127.0.0.1:1 --bogus x >"$TEST_TMP/out" 2>&1
check_eq "dlaunch status --bogus: exit 2" 2 $?
check "dlaunch status --bogus: named" grep -q "unknown option '--bogus'" "$TEST_TMP/out"

"$BIN/dlaunch-rdzv" --help >"$TEST_TMP/rdzv" 2>&1
check_eq "dlaunch-rdzv --help exits 0" 0 $?
help_has dlaunch-rdzv "$TEST_TMP/rdzv" "--listen HOST:PORT" "(default: 127.0.0.1:29400)" \
	"--max-body SIZE largest request body (413 beyond) (default: 64KiB)" \
	"--max-header SIZE largest request header block (default: 16KiB)" \
	"(default: 1024)" "(default: 65536)" \
	"--idle-timeout DURATION close idle or slow connections (default: 60s)"
"$BIN/dlaunch-rdzv" --max-jobs 0 >"$TEST_TMP/out" 2>&1
check_eq "dlaunch-rdzv --max-jobs 0: exit 2" 2 $?
check "dlaunch-rdzv --max-jobs 0: the range is named" \
	grep -q -- "--max-jobs '0' is not a whole number in 1..1000000" "$TEST_TMP/out"

"$BIN/dlaunch-train" --help >"$TEST_TMP/train" 2>&1
check_eq "dlaunch-train --help exits 0" 0 $?
help_has dlaunch-train "$TEST_TMP/train" "(default: fashion-mnist)" \
	"(default: 784-256-128-10)" "--epochs N epochs (default: 10)" \
	"--global-batch N samples per step over all ranks (default: 128)" \
	"--lr X learning rate (default: 0.05)" "(default: 0.0005)" \
	"(default: cosine)" "(default: 42)" "(default: 200)" "(default: 3)" \
	"(default: 128KiB)" "(default: \$DLAUNCH_DIST_TIMEOUT, else 300s)"
finish
