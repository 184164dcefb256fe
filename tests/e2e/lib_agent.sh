# SPDX-License-Identifier: Apache-2.0
# lib_agent.sh - helpers for the agent/launcher end-to-end tests (sourced
# after lib.sh). Every dlaunch a test starts carries DLAUNCH_TEST_MARK, so
# the processes of a job (dlaunch, workers, their children) are found
# again through /proc/*/environ, whatever became of their parents.
PROGS=$(cd "$(dirname "${BASH_SOURCE[0]}")/progs" && pwd)
MARK=agent-test-$$-$RANDOM
export DLAUNCH_TEST_MARK=$MARK

# marked_pids: pids of live (non-zombie) processes carrying this test's mark
marked_pids() {
	local f pid
	for f in /proc/[0-9]*/environ; do
		pid=${f#/proc/}
		pid=${pid%/environ}
		[ "$pid" = $$ ] && continue
		grep -qsa "DLAUNCH_TEST_MARK=$MARK" "$f" 2>/dev/null || continue
		grep -qs '^State:.*Z' "/proc/$pid/status" && continue
		echo "$pid"
	done
}
# no_marked_left: true when no process of this test remains
no_marked_left() { [ -z "$(marked_pids)" ]; }
# dl_exited PID: true once the background dlaunch PID has exited; its
# status is then in DL_RC
dl_exited() {
	alive "$1" && return 1
	wait "$1" 2>/dev/null
	DL_RC=$?
	return 0
}
# file_has FILE REGEX
file_has() { grep -Eq -- "$2" "$1" 2>/dev/null; }
