#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_etcd_ended.sh - a job id whose run has ended, with the etcd
# backend (docs/etcd.md, "Ended jobs"), as with dlaunch-rdzv
# (agent_rerun.sh): a node joining sooner than rerun_after after the end
# runs nothing and exits 1 with dlaunch-rdzv's message; later, the same
# command is run 2 of the id and trains again, run 1 kept in the job's
# status; with rerun_after=0 an ended id is never run again.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_etcd.sh"
need_bin dlaunch
if ! etcd_available; then
	skip "etcd backend, ended job: $ETCD_WHY"
	finish
fi
PREFIX=/t$$
CONF=heartbeat_interval=0.2,heartbeat_timeout=2,last_call_timeout=0.5,lease_ttl=2,key_prefix=$PREFIX
if ! etcd_cluster_start 1; then
	not_ok "an etcd member starts"
	finish
fi
export AGENT_OUT=$TEST_TMP/ranks.rec
# run NODE LOG RERUN_AFTER [JOB]: one dlaunch of JOB (default "ended")
run() {
	timeout 60 env DLAUNCH_NODE_ID="$1" "$BIN/dlaunch" --rdzv-backend etcd \
		--rdzv-endpoint "$ETCD_ENDPOINTS" --nnodes 1 --nproc-per-node 1 \
		--rdzv-id "${4:-ended}" --rdzv-conf "$CONF,rerun_after=$3" \
		"$PROGS/agent_env.sh" >"$TEST_TMP/$2.log" 2>&1
}
status() {
	timeout 10 "$BIN/dlaunch" status --rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS" \
		--rdzv-conf "key_prefix=$PREFIX" --rdzv-id "${1:-ended}"
}
workers() { wc -l <"$AGENT_OUT"; }

run n1 run1 3s
check_eq "run 1 succeeds" 0 $?
check_eq "its worker ran" 1 "$(workers)"
ended=$(etcd_get "$PREFIX/ended/state" | jq -r '.ended_unix_ms // empty')
check "the job record keeps when the job ended ($ended)" \
	bash -c "[[ '$ended' =~ ^[0-9]+\$ ]] && [ $((${EPOCHREALTIME//[.,]/} / 1000)) -ge '${ended:-0}' ]"

# sooner than rerun_after: late for run 1, refused as dlaunch-rdzv does.
# The leader that judges the join is this node's (run 1's agent has
# gone), so this join's rerun_after counts: an hour, so that a slow start
# here cannot make the join later than it.
run n2 late 1h
check_eq "a join sooner than rerun_after after the end exits 1" 1 $?
check "it names the run it is late for, in dlaunch-rdzv's words" \
	grep -Eq "job ended has already ended \(SUCCEEDED\): job ended has ended \(SUCCEEDED\) [0-9]+ ms ago: this node is late for run 1; a join from 3600000 ms after the end starts a new run \(or use another job id\)" \
	"$TEST_TMP/late.log"
check "it says nothing ran" grep -q "nothing ran here" "$TEST_TMP/late.log"
check_eq "no worker ran again" 1 "$(workers)"

# once rerun_after has passed: run 2 of the id
ended_long_enough() { [ $((${EPOCHREALTIME//[.,]/} / 1000 - ${ended:-0})) -ge 3000 ]; }
check "rerun: the end is rerun_after old" wait_for 10 ended_long_enough
run n3 rerun 3s
check_eq "rerun: the same command after rerun_after succeeds" 0 $?
check_eq "rerun: the worker ran again" 2 "$(workers)"
check "rerun: its worker runs in round 2 (the round after run 1's)" \
	grep -q "DLAUNCH_ROUND=2 " "$TEST_TMP/rerun.log"
check "rerun: the leader says run 2 started" grep -q "event=run_started previous=SUCCEEDED" "$TEST_TMP/rerun.log"
out=$(status)
check "rerun: dlaunch status shows run 2, SUCCEEDED, and run 1 kept" \
	bash -c "grep -q '^job ended: SUCCEEDED, round 2,' <<<'$out' && grep -q '^run 2; earlier runs: 1 SUCCEEDED (round 1, restarts 0)' <<<'$out'"

# rerun_after=0: never
run n1 never1 0 never
check_eq "rerun_after=0: the run succeeds" 0 $?
run n2 never2 0 never
check_eq "rerun_after=0: a join after the end exits 1" 1 $?
check "rerun_after=0: it is told reruns are off, in dlaunch-rdzv's words" \
	grep -q "job never has ended (SUCCEEDED); this server does not rerun ended jobs: use another job id" \
	"$TEST_TMP/never2.log"
check_eq "rerun_after=0: no worker ran for the join" 3 "$(workers)"

# a bad value is refused before anything runs
run n9 bad soon
check_eq "rerun_after=soon is refused (exit 2)" 2 $?
check "it says what rerun_after takes" grep -q "rerun_after='soon' is not a duration" "$TEST_TMP/bad.log"
finish
