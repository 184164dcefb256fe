#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# train_cli.sh - dlaunch-train's command line and inputs: bad options are
# usage errors (exit 2) with a message naming the option; unusable data,
# a checkpoint directory of another model and a CUDA request on a machine
# without a GPU fail cleanly (exit 1) without touching anything; a
# SIGTERM between steps writes a checkpoint that the next run resumes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_train.sh"

need_bin dlaunch-train
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT LOCAL_RANK

# usage CASE EXPECTED-TEXT ARGS...: exit 2 and EXPECTED-TEXT on stderr
usage_case() {
	local what=$1 text=$2 rc
	shift 2
	timeout 20 "$TRAIN" "$@" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
	rc=$?
	if [ $rc -eq 2 ] && grep -q -- "$text" "$TEST_TMP/err"; then
		ok "usage error: $what"
	else
		not_ok "usage error: $what (exit $rc: $(head -c 300 "$TEST_TMP/err"))"
	fi
}
usage_case "malformed --model" "model '784-x-10'" --model 784-x-10
usage_case "one-width --model" "model '784'" --model 784
usage_case "zero --global-batch" "global-batch '0'" --global-batch 0
usage_case "negative --lr" "lr '-1'" --lr -1
usage_case "unknown --device" "device 'tpu'" --device tpu
usage_case "unknown --backend" "backend 'mpi'" --backend mpi
usage_case "unknown --data" "data 'cifar'" --data cifar
usage_case "bad synthetic size" "synthetic:N 'x'" --data synthetic:x
usage_case "bad --timeout" "timeout 'soon'" --timeout soon
usage_case "stray argument" "unexpected argument 'extra'" extra
usage_case "unknown option" "usage:" --no-such-option

timeout 20 "$TRAIN" --help >"$TEST_TMP/help" 2>&1
check_eq "--help exits 0" 0 $?
check "--help documents --checkpoint-dir and the crash hook" \
	grep -q -- '--checkpoint-dir.*DLAUNCH_TRAIN_CRASH_AT_STEP' <(tr '\n' ' ' <"$TEST_TMP/help")

# runtime failures: exit 1, message naming the object
mkdir -p "$TEST_TMP/empty"
timeout 20 "$TRAIN" --data fashion-mnist --data-dir "$TEST_TMP/empty" \
	>"$TEST_TMP/out" 2>"$TEST_TMP/err"
check_eq "missing IDX files: exit 1" 1 $?
check "missing IDX files: the file is named" \
	grep -q "$TEST_TMP/empty/train-images-idx3-ubyte" "$TEST_TMP/err"
printf 'not gzip and not idx' >"$TEST_TMP/empty/train-images-idx3-ubyte"
printf 'x' >"$TEST_TMP/empty/train-labels-idx1-ubyte"
timeout 20 "$TRAIN" --data-dir "$TEST_TMP/empty" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
check_eq "garbage IDX file: exit 1" 1 $?
check "garbage IDX file: wrong magic reported by name" \
	grep -q "train-images-idx3-ubyte: not an IDX file" "$TEST_TMP/err"
timeout 20 "$TRAIN" --data synthetic:100 --model 16-8-3 --device cuda --backend nccl \
	>"$TEST_TMP/out" 2>"$TEST_TMP/err"
rc=$?
if [ -e /dev/nvidia0 ]; then
	skip "--device cuda without a GPU: this machine has one"
else
	check_eq "--device cuda without a GPU: exit 1" 1 $rc
	check "--device cuda without a GPU: says so" grep -q "no usable CUDA device" "$TEST_TMP/err"
fi
timeout 20 "$TRAIN" --data synthetic:100 --model 16-8-3 --device cpu --backend nccl \
	>"$TEST_TMP/out" 2>"$TEST_TMP/err"
check_eq "--backend nccl on the cpu: exit 1" 1 $?

# a checkpoint directory of another model is refused and left alone
SMALL=(--data synthetic:2000 --model 16-8-3 --global-batch 50 --log-every 1000)
timeout 60 "$TRAIN" "${SMALL[@]}" --epochs 1 --checkpoint-dir "$TEST_TMP/ck" >"$TEST_TMP/out" 2>&1
check_eq "synthetic run writes a checkpoint: exit 0" 0 $?
before=$(ls "$TEST_TMP/ck" | md5sum)
timeout 60 "$TRAIN" --data synthetic:2000 --model 16-9-3 --checkpoint-dir "$TEST_TMP/ck" \
	>"$TEST_TMP/out" 2>"$TEST_TMP/err"
check_eq "another model's checkpoint dir: exit 1" 1 $?
check "another model's checkpoint dir: explained" grep -q "is for model 16-8-3, not 16-9-3" "$TEST_TMP/err"
check_eq "another model's checkpoint dir: left unchanged" "$before" "$(ls "$TEST_TMP/ck" | md5sum)"

# SIGTERM between steps: rank 0 saves where it stands; the next run resumes
spawn_bg "$TEST_TMP/term.log" "$TRAIN" --data synthetic:20000 --model 16-64-3 \
	--global-batch 10 --epochs 50 --checkpoint-every 0 --log-every 100 \
	--checkpoint-dir "$TEST_TMP/term"
pid=$LAST_PID
if wait_for 30 grep -q 'step [0-9]*/' "$TEST_TMP/term.log"; then
	kill -TERM "$pid"
	wait_for 30 bash -c "! kill -0 $pid"
	wait "$pid"
	check_eq "SIGTERM: exits 1 (interrupted)" 1 $?
	check "SIGTERM: a checkpoint was written" test -n "$(newest_ckpt "$TEST_TMP/term")"
	step=$(basename "$(newest_ckpt "$TEST_TMP/term")" .dlck | sed 's/ckpt-0*//')
	timeout 60 "$TRAIN" --data synthetic:20000 --model 16-64-3 --global-batch 10 \
		--epochs 50 --max-steps $((step + 5)) --checkpoint-dir "$TEST_TMP/term" \
		>"$TEST_TMP/term2.log" 2>&1
	check "SIGTERM: the next run resumes at step $step" \
		grep -q "resumed from .*: step $step," "$TEST_TMP/term2.log"
	check_eq "SIGTERM: and takes the remaining 5 steps" $((step + 5)) \
		"$(summary_field "$TEST_TMP/term2.log" steps)"
else
	not_ok "SIGTERM: the trainer did not start"
fi

# a rank that cannot reach the master names the address and where it came
# from (under dlaunch: node rank 0's announcement), not just a timeout
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
env RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
	DLAUNCH_JOB_ID=j1 timeout 30 "$TRAIN" --data synthetic:100 \
	--model 16-8-3 --device cpu --backend tcp --timeout 1s \
	>"$TEST_TMP/out" 2>"$TEST_TMP/err"
rc=$?
check_eq "unreachable master: exit 1" 1 "$rc"
check "unreachable master: names the address" \
	grep -q "cannot reach the master (rank 0) at 127.0.0.1:$port" "$TEST_TMP/err"
check "unreachable master: says where it came from" \
	grep -q "node rank 0 announced to the rendezvous" "$TEST_TMP/err"

# SIGTERM while rank 0 waits for a peer that never comes (a round torn
# down as its workers start): it stops at once, not at --timeout (300 s)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
spawn_bg "$TEST_TMP/lone.log" env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 \
	MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$TRAIN" --data synthetic:100 \
	--model 16-8-3 --device cpu --backend tcp --timeout 300s
pid=$LAST_PID
if wait_for 30 bash -c "ss -Hltn 'sport = :$port' | grep -q ."; then
	kill -TERM "$pid"
	if wait_for 30 bash -c "! kill -0 $pid 2>/dev/null"; then
		wait "$pid"
		check_eq "SIGTERM while forming the group: exits 1" 1 $?
		check "SIGTERM while forming the group: says so" \
			grep -q "rank 0: stopped by a signal while forming the process group" "$TEST_TMP/lone.log"
	else
		not_ok "SIGTERM while forming the group: rank 0 still waits for its peer 30 s later"
		kill -KILL "$pid"
		wait "$pid"
	fi
else
	not_ok "SIGTERM while forming the group: rank 0 never listened on port $port"
	cat "$TEST_TMP/lone.log" >&2
	kill -KILL "$pid" 2>/dev/null
	wait "$pid"
fi

finish
