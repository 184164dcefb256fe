#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# worker.sh - the test worker of the reliability suite.
#
# Started by dlaunch (--no-python) with FAULT_DIR and FAULT_NODE in its
# environment (the case's agent passes them through). On start it appends
# one record to $FAULT_DIR/ranks.log:
#
#   DLAUNCH_ROUND RANK PID FAULT_NODE LOCAL_RANK WORLD_SIZE RESTART_COUNT
#   MASTER_ADDR:MASTER_PORT DLAUNCH_JOB_ID
#
# (one short O_APPEND write, atomic between workers), so the checker can
# prove no global rank was held twice in a round, and writes its pid to
# $FAULT_DIR/pid.NODE.LOCAL_RANK. Then it does what the case asks:
#
#   FAULT_ALWAYS_EXIT=C   exit C at once (an always-failing worker)
#   FAULT_GRANDCHILDREN=1 fork a child and an orphaned grandchild that sleep
#                         (their pids go to $FAULT_DIR/grandchildren and
#                         $FAULT_DIR/grandchildren.NODE)
#   FAULT_IGNORE_TERM=1   the worker and what it forks ignore SIGTERM; the
#                         worker says so on stderr each time it gets one
#   FAULT_SPEW_MB=M       print M MiB of 200-byte lines on stdout, then go on
#   FAULT_RUN_MS=T        exit 0 after T ms on its own
#
# and otherwise runs until told: the file $FAULT_DIR/done makes every worker
# exit 0; $FAULT_DIR/cmd.NODE.LOCAL_RANK holding "exit C" makes that one
# worker exit C (the file is consumed, so the next round's worker runs on).
#
# `worker.sh PROGRAM ARGS...` only records, then execs PROGRAM.
set -u
d=${FAULT_DIR:?FAULT_DIR is not set}
node=${FAULT_NODE:-${DLAUNCH_NODE_ID:-unknown}}
lr=${LOCAL_RANK:-x}
echo "${DLAUNCH_ROUND:-none} ${RANK:-none} $$ $node $lr ${WORLD_SIZE:-none}" \
	"${TORCHELASTIC_RESTART_COUNT:-none} ${MASTER_ADDR:-none}:${MASTER_PORT:-none}" \
	"${DLAUNCH_JOB_ID:-${TORCHELASTIC_RUN_ID:-none}}" >>"$d/ranks.log"
echo $$ >"$d/pid.$node.$lr.$$"
mv -f "$d/pid.$node.$lr.$$" "$d/pid.$node.$lr"

# with arguments: only record, then become that program (the schedule runner
# wraps dlaunch-train this way)
if [ $# -gt 0 ]; then
	exec "$@"
fi

if [ -n "${FAULT_ALWAYS_EXIT:-}" ]; then
	echo "worker rank ${RANK:-?}: failing on purpose with $FAULT_ALWAYS_EXIT" >&2
	exit "$FAULT_ALWAYS_EXIT"
fi

# ignored before anything is forked: the children inherit it
[ "${FAULT_IGNORE_TERM:-0}" = 1 ] && trap '' TERM

if [ "${FAULT_GRANDCHILDREN:-0}" = 1 ]; then
	sleep 100000 &
	echo "$!" >>"$d/grandchildren"
	echo "$!" >>"$d/grandchildren.$node"
	# a grandchild whose parent exits at once: orphaned, but still in the
	# worker's process group and still carrying the case's mark
	(
		sleep 100000 &
		echo "$!" >>"$d/grandchildren"
		echo "$!" >>"$d/grandchildren.$node"
	)
fi

# the worker itself now notes each SIGTERM (and still does not end)
[ "${FAULT_IGNORE_TERM:-0}" = 1 ] &&
	trap 'echo "worker rank ${RANK:-?}: ignoring SIGTERM" >&2' TERM

if [ -n "${FAULT_SPEW_MB:-}" ]; then
	line=$(printf '%0199d' 0)
	yes "$line" | head -c $((FAULT_SPEW_MB * 1048576))
	echo "worker rank ${RANK:-?}: spew done"
fi

start=$(date +%s%N)
cmd=$d/cmd.$node.$lr
while :; do
	[ -e "$d/done" ] && exit 0
	if [ -e "$cmd" ] && mv "$cmd" "$cmd.taken.$$" 2>/dev/null; then
		read -r what code <"$cmd.taken.$$"
		rm -f "$cmd.taken.$$"
		if [ "$what" = exit ]; then
			echo "worker rank ${RANK:-?}: exiting with $code as told" >&2
			exit "$code"
		fi
	fi
	if [ -n "${FAULT_RUN_MS:-}" ] &&
		[ $((($(date +%s%N) - start) / 1000000)) -ge "$FAULT_RUN_MS" ]; then
		exit 0
	fi
	sleep 0.05
done
