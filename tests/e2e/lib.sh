# SPDX-License-Identifier: Apache-2.0
# lib.sh - helpers for end-to-end tests (sourced by tests/e2e/*.sh).
#
# A test prints "ok - what", "not ok - what" or "skip - what: why" per
# check. Every process a test starts goes through spawn_bg so the EXIT trap
# kills what is left, whatever happened. Waits poll a condition with a
# deadline (wait_for); no test sleeps for a fixed time and hopes.
set -u

# python3 is the system's (Debian's, the one CI has and torch is built
# for), not a version manager's shim ahead of it in PATH: a pyenv shim
# took 12 s to start python on a loaded machine (/usr/bin/python3: 1.3 s),
# longer than the progress timeouts and deadlines some cases set
if [ -x /usr/bin/python3 ]; then
	PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/\.pyenv/' | paste -sd: -)
	export PATH
fi
BIN=${DLAUNCH_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build/bin}
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-test.XXXXXX")
BG_PIDS=()
FAILED=0

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; FAILED=$((FAILED + 1)); }
skip() { echo "skip - $*"; }

# check WHAT CMD...: ok when CMD succeeds
check() {
	local what=$1; shift
	if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# check_eq WHAT EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (expected '$2', got '$3')"; return 1; fi
}

# wait_for SECONDS CMD...: poll CMD every 20 ms until it succeeds; 1 on
# timeout. The deadline is in microseconds ($EPOCHREALTIME): bash's
# $SECONDS counts whole seconds, so "wait 1 s" could give up after 10 ms.
wait_for() {
	local limit=$1; shift
	local now=${EPOCHREALTIME//[.,]/}
	local deadline=$((now + limit * 1000000))
	while ! "$@" 2>/dev/null; do
		now=${EPOCHREALTIME//[.,]/}
		[ "$now" -ge "$deadline" ] && return 1
		sleep 0.02
	done
	return 0
}

# spawn_bg LOG CMD...: start CMD in the background in its own process group,
# output to LOG; sets LAST_PID.
spawn_bg() {
	local log=$1; shift
	setsid "$@" >"$log" 2>&1 </dev/null &
	LAST_PID=$!
	BG_PIDS+=("$LAST_PID")
}

# kill_tree PID: SIGKILL the process group PID leads
kill_tree() {
	kill -KILL -- "-$1" 2>/dev/null
	kill -KILL "$1" 2>/dev/null
	return 0
}

# alive PID
alive() { kill -0 "$1" 2>/dev/null; }

cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null
	done
	for p in "${BG_PIDS[@]}"; do
		wait_for 5 bash -c "! kill -0 -- -$p" || kill -KILL -- "-$p" 2>/dev/null
	done
	# DLAUNCH_KEEP_TMP=1 keeps the test's files for a post-mortem
	if [ "${DLAUNCH_KEEP_TMP:-0}" = 1 ]; then
		echo "# kept $TEST_TMP"
	else
		rm -rf "$TEST_TMP"
	fi
}
trap cleanup EXIT

# finish: exit status for the runner
finish() { [ "$FAILED" -eq 0 ]; exit $?; }

# need_bin NAME...: the binaries make builds into $BIN. A missing one is a
# build regression, not a machine without some optional tool: it is a
# failure ("not ok") naming it, and the script ends there. Skips are for
# what a machine may lack (a GPU, CUDA, privileges, python3).
need_bin() {
	local b missing=0
	for b in "$@"; do
		if [ ! -x "$BIN/$b" ]; then
			not_ok "$(basename "$0" .sh): $BIN/$b missing: build it with make"
			missing=1
		fi
	done
	[ "$missing" -eq 0 ] || finish
}
