# SPDX-License-Identifier: Apache-2.0
# lib_agent.sh - helpers for the agent/launcher end-to-end tests (sourced
# after lib.sh). Every dlaunch a test starts carries DLAUNCH_TEST_MARK, so
# the processes of a job (dlaunch, workers, their children) are found
# again through /proc/*/environ, whatever became of their parents.
PROGS=$(cd "$(dirname "${BASH_SOURCE[0]}")/progs" && pwd)
MARK=agent-test-$$-$RANDOM
export DLAUNCH_TEST_MARK=$MARK

# marked_pids: pids of live (non-zombie) processes carrying this test's
# mark. One grep reads every environ (a grep per process took seconds on a
# loaded machine, and wait_for polls this). That grep and its sed carry the
# mark too (it is exported): they are gone when the list is read, and a
# process gone or a zombie is not listed.
marked_pids() {
	local pid state
	for pid in $(grep -lzx -- "DLAUNCH_TEST_MARK=$MARK" /proc/[0-9]*/environ 2>/dev/null |
		sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p'); do
		[ "$pid" = $$ ] && continue
		state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$pid/status" 2>/dev/null)
		[ -n "$state" ] && [ "$state" != Z ] && echo "$pid"
	done
	return 0
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
