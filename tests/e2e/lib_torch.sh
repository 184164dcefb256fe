# SPDX-License-Identifier: Apache-2.0
# lib_torch.sh - helpers for the PyTorch end-to-end tests (tests/e2e/torch_*.sh),
# sourced after lib.sh.
#
# The programs under test are contrib/pytorch/*.py, run with the system
# interpreter that has python3-torch (/usr/bin/python3; the first python3 on
# PATH may be another one) under dlaunch and, as the reference, under the
# torchrun wrapper tests/torchrun/torchrun. Missing torch is a failure, not a
# skip: contrib/install-deps.sh installs python3-torch.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
TORCHRUN=$REPO/tests/torchrun/torchrun
EXAMPLES=$REPO/contrib/pytorch
DLAUNCH=$BIN/dlaunch
DLAUNCH_RDZV=$BIN/dlaunch-rdzv
# both launchers run *.py workers with PYTHON_EXEC when it is set
export PYTHON_EXEC=$TORCH_PY
# gloo picks its interface from the hostname; keep it on loopback
export GLOO_SOCKET_IFNAME=lo

# torch_require: fail loudly (and stop the script) when torch or the dlaunch
# binaries are missing, so no test can pass without them.
torch_require() {
	if ! "$TORCH_PY" -c 'import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()' \
		>"$TEST_TMP/torch-check.log" 2>&1; then
		not_ok "python3-torch with gloo importable by $TORCH_PY (run contrib/install-deps.sh): $(tail -n 1 "$TEST_TMP/torch-check.log")"
		finish
	fi
	need_bin "$@"
}

# run_job LOG SECONDS CMD...: run CMD (in its own directory under TEST_TMP,
# so leftovers can be found) with a deadline; sets JOB_RC and JOB_DIR.
JOB_SEQ=0
run_job() {
	local log=$1 limit=$2
	shift 2
	JOB_SEQ=$((JOB_SEQ + 1))
	JOB_DIR=$TEST_TMP/job$JOB_SEQ
	mkdir -p "$JOB_DIR"
	(cd "$JOB_DIR" && exec setsid timeout -k 5 "$limit" "$@") >"$log" 2>&1 </dev/null &
	local pid=$!
	BG_PIDS+=("$pid")
	wait "$pid"
	JOB_RC=$?
	[ "$JOB_RC" -eq 124 ] && echo "run_job: timed out after ${limit}s: $*" >>"$log"
	return 0
}

# start_job LOG CMD...: like run_job but in the background; sets LAST_PID,
# JOB_DIR. Collect it with wait_job.
start_job() {
	local log=$1
	shift
	JOB_SEQ=$((JOB_SEQ + 1))
	JOB_DIR=$TEST_TMP/job$JOB_SEQ
	mkdir -p "$JOB_DIR"
	(cd "$JOB_DIR" && exec setsid "$@") >"$log" 2>&1 </dev/null &
	LAST_PID=$!
	BG_PIDS+=("$LAST_PID")
}

# wait_job PID SECONDS: wait for a start_job process; sets JOB_RC (124 when
# it had to be killed at the deadline).
wait_job() {
	local pid=$1 limit=$2 stuck
	if ! wait_for "$limit" bash -c "! kill -0 $pid"; then
		# what was still running, for the failure that follows
		echo "# job $pid still running after ${limit}s:"
		ps -o pid=,ppid=,stat=,etime=,args= -p "$(leftovers | paste -sd,)" \
			2>/dev/null | sed 's/^/#   /'
		mapfile -t stuck < <(leftovers)
		show_stacks "${stuck[@]}"
		kill -TERM -- "-$pid" 2>/dev/null
		wait_for 5 bash -c "! kill -0 $pid" || kill -KILL -- "-$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		JOB_RC=124
		return 0
	fi
	wait "$pid"
	JOB_RC=$?
}

# show_stacks PID...: for each python process among PIDS, the native stack of
# every thread (gdb in batch mode), or where gdb is missing or may not attach
# (ptrace restrictions) each thread's kernel wait channel; commented. The
# evidence a hung worker leaves before it is killed.
show_stacks() {
	local p t bt
	for p in "$@"; do
		case "$(cat "/proc/$p/comm" 2>/dev/null)" in python*) ;; *) continue ;; esac
		echo "# threads of $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)):"
		bt=
		if command -v gdb >/dev/null; then
			bt=$(timeout 90 gdb -p "$p" -batch -nx -ex 'set pagination off' \
				-ex 'thread apply all bt -frame-arguments none 30' </dev/null 2>&1)
		fi
		if grep -q '^Thread ' <<<"$bt"; then
			grep -E '^(Thread|#)' <<<"$bt" | head -n 300 | sed 's/^/#     /'
			continue
		fi
		[ -n "$bt" ] && echo "#     gdb: $(tail -n 1 <<<"$bt")"
		for t in /proc/"$p"/task/*; do
			echo "#     ${t##*/} $(cat "$t/comm" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)"
		done
	done
}

# leftovers: pids of processes still running in a directory under TEST_TMP
# (every job's workers run there), one per line; empty when clean.
leftovers() {
	local p cwd
	for p in /proc/[0-9]*; do
		cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
		case "$cwd" in "$TEST_TMP"/*) echo "${p#/proc/}" ;; esac
	done
}

no_leftovers() { [ -z "$(leftovers)" ]; }

# check_no_leftovers WHAT: ok when no process of this test's jobs remains
# (waits a little: the last reaped worker may still be exiting).
check_no_leftovers() {
	if wait_for 10 no_leftovers; then
		ok "$1: no process left behind"
	else
		not_ok "$1: processes left behind: $(leftovers | tr '\n' ' ')"
	fi
}

# count LOG REGEX: number of lines of LOG matching REGEX (extended)
count() { grep -cE -- "$2" "$1" 2>/dev/null || true; }

# check_ranks WHAT LOG PROGRAM WORLD [EXTRA]: each rank 0..WORLD-1 printed
# exactly one "PROGRAM ok rank=R world=WORLD EXTRA" line and none failed.
check_ranks() {
	local what=$1 log=$2 prog=$3 world=$4 extra=${5:-} r n bad=""
	for ((r = 0; r < world; r++)); do
		n=$(count "$log" "$prog ok rank=$r world=$world( |$)${extra}")
		[ "$n" = 1 ] || bad="$bad rank$r:$n"
	done
	n=$(count "$log" "$prog FAILED")
	[ "$n" = 0 ] || bad="$bad FAILED-lines:$n"
	if [ -z "$bad" ]; then
		ok "$what: $world ranks report $prog ok"
	else
		not_ok "$what: per-rank ok lines wrong ($bad); log $log:"
		tail -n 30 "$log" | sed 's/^/#   /'
	fi
}

# rdzv_start LOG [ARGS...]: start dlaunch-rdzv on a loopback port chosen by
# the kernel; sets RDZV_PID and RDZV_ENDPOINT (host:port) once it listens.
rdzv_start() {
	local log=$1
	shift
	spawn_bg "$log" "$DLAUNCH_RDZV" --listen 127.0.0.1:0 "$@"
	RDZV_PID=$LAST_PID
	RDZV_ENDPOINT=
	if ! wait_for 15 grep -q 'listening on ' "$log"; then
		not_ok "dlaunch-rdzv starts and prints its address: $(tail -n 3 "$log")"
		return 1
	fi
	RDZV_ENDPOINT=$(sed -n 's/.*listening on \([^ ]*:[0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
	[ -n "$RDZV_ENDPOINT" ]
}

# free_port: a TCP port free on loopback right now (for torchrun's c10d store)
free_port() {
	"$TORCH_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# show_log LOG: the tail of a log, commented, for a failing check
show_log() { tail -n "${2:-25}" "$1" | sed 's/^/#   /'; }
