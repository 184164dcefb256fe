#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_static.sh - dlaunch without a rendezvous server (static mode):
# worker environment, restarts, failure report, missing program, stopping
# (grandchildren, SIGTERM-ignoring workers, signals, kill -9 of dlaunch)
# and a worker writing 100 MB.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
DL=$BIN/dlaunch
need_bin dlaunch

# -- environment, 4 workers, static single node
out=$TEST_TMP/env.out
timeout 30 "$DL" --nproc-per-node 4 --master-port 29999 --rdzv-id envjob \
	"$PROGS/agent_env.sh" >"$out" 2>"$TEST_TMP/env.err"
check_eq "static: 4 workers succeed (exit 0)" 0 $?
check_eq "static: ranks 0..3 exactly once" "0 1 2 3" \
	"$(grep -o '^\[rank[0-9]*\]: ENV RANK=[0-9]*' "$out" | sed 's/.*RANK=//' | sort -n | tr '\n' ' ' | sed 's/ $//')"
ok_env=1
for r in 0 1 2 3; do
	line=$(grep "^\[rank$r\]: ENV " "$out")
	for kv in "RANK=$r" "LOCAL_RANK=$r" WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 \
		GROUP_RANK=0 GROUP_WORLD_SIZE=1 "ROLE_RANK=$r" ROLE_NAME=default \
		ROLE_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 \
		TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 \
		TORCHELASTIC_RUN_ID=envjob TORCHELASTIC_USE_AGENT_STORE=False \
		TORCH_NCCL_ASYNC_ERROR_HANDLING=1 OMP_NUM_THREADS=1 \
		DLAUNCH_JOB_ID=envjob DLAUNCH_ROUND=0 ERRFILE=set; do
		case " ${line#*ENV } " in *" $kv "*) ;; *) ok_env=0; echo "# rank $r lacks $kv: $line" ;; esac
	done
done
check_eq "static: every worker variable right" 1 $ok_env

# -- node 1 of 2 in static mode: ranks offset by nproc
timeout 30 "$DL" --nnodes 2 --node-rank 1 --nproc-per-node 2 \
	--master-addr 10.9.8.7 --master-port 1234 "$PROGS/agent_env.sh" >"$out" 2>&1
check "static: node rank 1 gets ranks 2,3, world 4, master 10.9.8.7:1234" \
	bash -c "grep -q '^\[rank2\]: ENV RANK=2 LOCAL_RANK=0 WORLD_SIZE=4 .*GROUP_RANK=1 GROUP_WORLD_SIZE=2 .*MASTER_ADDR=10.9.8.7 MASTER_PORT=1234' '$out' && grep -q '^\[rank3\]: ENV RANK=3 LOCAL_RANK=1' '$out'"

# -- a worker that fails once is restarted with TORCHELASTIC_RESTART_COUNT=1
export AGENT_OUT=$TEST_TMP/once.rec
timeout 60 "$DL" --nproc-per-node 2 --max-restarts 2 \
	"$PROGS/agent_fail.sh" once >"$TEST_TMP/once.out" 2>&1
check_eq "static: fail once, restarted, job succeeds" 0 $?
check "static: restart count 1 seen by both ranks" \
	bash -c "grep -q '^0 1 ' '$AGENT_OUT' && grep -q '^1 1 ' '$AGENT_OUT'"

# -- always failing: exit 1 after --max-restarts, report names rank 1
export AGENT_OUT=$TEST_TMP/always.rec
timeout 60 "$DL" --nproc-per-node 2 --max-restarts 1 --log-dir "$TEST_TMP/logs" \
	"$PROGS/agent_fail.sh" always >"$TEST_TMP/always.out" 2>&1
check_eq "static: always failing job exits 1" 1 $?
check_eq "static: two attempts made (max-restarts 1)" 2 \
	"$(awk '$1 == 1' "$AGENT_OUT" | wc -l)"
check "static: report names rank 1, exit code 7 and the error file's message" \
	bash -c "grep -q 'FAILED' '$TEST_TMP/always.out' && grep -Eq 'rank +: 1 ' '$TEST_TMP/always.out' && grep -Eq 'exitcode +: 7' '$TEST_TMP/always.out' && grep -q 'ValueError: rank one is broken' '$TEST_TMP/always.out' && grep -q 'Traceback' '$TEST_TMP/always.out'"
check "static: error file kept under --log-dir attempt_1/rank_1" \
	test -s "$TEST_TMP/logs/attempt_1/rank_1/error.json"
unset AGENT_OUT

# -- --log-dir alone: the console shows the output and the files keep it
timeout 60 "$DL" --nproc-per-node 2 --log-dir "$TEST_TMP/kept" \
	sh -c 'echo "out of $RANK"; echo "err of $RANK" >&2' >"$TEST_TMP/kept.out" 2>&1
check_eq "--log-dir alone: job succeeds" 0 $?
for r in 0 1; do
	check "--log-dir alone: rank $r's stdout on the console and in its stdout.log" \
		bash -c "grep -q '^\[rank$r\]: out of $r\$' '$TEST_TMP/kept.out' &&
			grep -qx 'out of $r' '$TEST_TMP/kept/attempt_0/rank_$r/stdout.log'"
	check "--log-dir alone: rank $r's stderr on the console and in its stderr.log" \
		bash -c "grep -q '^\[rank$r\]: err of $r\$' '$TEST_TMP/kept.out' &&
			grep -qx 'err of $r' '$TEST_TMP/kept/attempt_0/rank_$r/stderr.log'"
done

# -- a missing program: clear error naming it, no hang
start=$SECONDS
timeout 20 "$DL" --nproc-per-node 2 dlaunch-no-such-prog >"$TEST_TMP/missing.out" 2>&1
rc=$?
check_eq "missing program: usage error (2)" 2 $rc
check "missing program: message names it" \
	grep -q "cannot run 'dlaunch-no-such-prog'" "$TEST_TMP/missing.out"
timeout 20 "$DL" "$TEST_TMP/nope.py" >"$TEST_TMP/missing2.out" 2>&1
check_eq "missing script: usage error (2) naming it" "2 1" \
	"$? $(grep -c "nope.py" "$TEST_TMP/missing2.out")"

# -- unsupported option refused by name
timeout 10 "$DL" --logs-specs x x.py >"$TEST_TMP/unsup.out" 2>&1
check_eq "unsupported --logs-specs refused with status 2" "2 1" \
	"$? $(grep -c -- '--logs-specs' "$TEST_TMP/unsup.out")"

# -- grandchildren and a SIGTERM-ignoring worker: nothing left after stop
mkdir -p "$TEST_TMP/stub"
spawn_bg "$TEST_TMP/stub.out" "$DL" --nproc-per-node 2 --shutdown-timeout 1 \
	"$PROGS/agent_stubborn.sh" "$TEST_TMP/stub"
dl=$LAST_PID
check "stubborn: both workers started" \
	wait_for 20 bash -c "[ \$(ls '$TEST_TMP/stub' | wc -l) -ge 2 ]"
kill -TERM "$dl"
check "stubborn: dlaunch exits after SIGTERM (grace 1s, then SIGKILL)" \
	wait_for 20 dl_exited "$dl"
check "stubborn: dlaunch exit status non-zero" test "${DL_RC:-0}" -ne 0
check "stubborn: no process of the job left (grandchild, daemon, worker)" \
	wait_for 5 no_marked_left
sed 's/^/# stubborn: /' "$TEST_TMP/stub.out"

# -- SIGTERM to dlaunch is forwarded to the workers
mkdir -p "$TEST_TMP/trap"
spawn_bg "$TEST_TMP/trap.out" "$DL" --nproc-per-node 2 "$PROGS/agent_trap.sh" "$TEST_TMP/trap"
dl=$LAST_PID
check "signal: workers ready" wait_for 20 bash -c "[ -e '$TEST_TMP/trap/ready.0' ] && [ -e '$TEST_TMP/trap/ready.1' ]"
kill -TERM "$dl"
check "signal: dlaunch exits" wait_for 20 dl_exited "$dl"
check_eq "signal: exit status 128+SIGTERM" 143 "${DL_RC:-}"
check_eq "signal: both workers received SIGTERM" "TERM TERM" \
	"$(cat "$TEST_TMP/trap/got.0" "$TEST_TMP/trap/got.1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"

# -- kill -9 of dlaunch: its workers die with it (PDEATHSIG)
rm -f "$TEST_TMP/trap"/*
spawn_bg "$TEST_TMP/k9.out" "$DL" --nproc-per-node 2 "$PROGS/agent_trap.sh" "$TEST_TMP/trap"
dl=$LAST_PID
check "kill -9: workers ready" wait_for 20 bash -c "[ -e '$TEST_TMP/trap/ready.0' ] && [ -e '$TEST_TMP/trap/ready.1' ]"
kill -KILL "$dl"
check "kill -9: workers gone within a second" wait_for 1 no_marked_left

# -- 100 MB on stdout: nothing lost in the log file, agent not blocked
lines=1000000
timeout 120 "$DL" --nproc-per-node 1 --redirects 1 --log-dir "$TEST_TMP/flood" \
	"$PROGS/agent_flood.sh" $lines >"$TEST_TMP/flood.out" 2>&1
check_eq "flood: job succeeds" 0 $?
f=$TEST_TMP/flood/attempt_0/rank_0/stdout.log
check_eq "flood: every line in the log file" "$lines" "$(wc -l <"$f" 2>/dev/null)"
check_eq "flood: exactly 100 MB" 100000000 "$(stat -c %s "$f" 2>/dev/null)"
check_eq "flood: first and last line intact" "00000000 00999999" \
	"$(head -c 8 "$f") $(tail -n 1 "$f" | head -c 8)"
check "flood: nothing redirected reached the console" \
	bash -c "! grep -q '^\[rank0\]: 0000' '$TEST_TMP/flood.out'"

# -- tee and local-ranks-filter
timeout 30 "$DL" --nproc-per-node 2 --tee 3 --local-ranks-filter 1 \
	--log-dir "$TEST_TMP/tee" "$PROGS/agent_env.sh" >"$TEST_TMP/tee.out" 2>&1
check "tee: both ranks' stdout in files, only rank 1 on the console" \
	bash -c "grep -q 'RANK=0' '$TEST_TMP/tee/attempt_0/rank_0/stdout.log' && grep -q 'RANK=1' '$TEST_TMP/tee/attempt_0/rank_1/stdout.log' && grep -q '^\[rank1\]: ENV' '$TEST_TMP/tee.out' && ! grep -q '^\[rank0\]:' '$TEST_TMP/tee.out'"

check "no process of the test left" wait_for 5 no_marked_left
finish
