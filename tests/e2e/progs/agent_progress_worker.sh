#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_progress_worker.sh MODE DIR: a worker for the --progress-timeout tests.
# Every start appends "RANK RESTART_COUNT PID" to DIR/starts.
#
#   stop-once  prints a tick every 100 ms; in the first attempt rank 1
#              stops itself (SIGSTOP) after three ticks; later attempts
#              print five ticks and exit 0
#   stop       rank 0 stops itself at once, after a line on stderr
#   touch      prints nothing, touches $DLAUNCH_PROGRESS_FILE every 100 ms
#              for 2 s (its path goes to DIR/file.RANK), exits 0
#   silent     prints nothing, writes its start time (ns) to DIR/t0.RANK and
#              exits 0 once DIR/stop exists
# Every loop is bounded (30 s) so nothing outlives a broken test.
mode=$1 dir=$2
echo "$RANK $TORCHELASTIC_RESTART_COUNT $$" >>"$dir/starts"
case $mode in
stop-once)
	for i in $(seq 300); do
		echo "tick $i"
		if [ "$TORCHELASTIC_RESTART_COUNT" != 0 ] && [ "$i" -ge 5 ]; then
			exit 0
		fi
		if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 1 ] &&
			[ "$i" = 3 ]; then
			kill -STOP $$
		fi
		sleep 0.1
	done ;;
stop)
	if [ "$RANK" = 0 ]; then
		echo "rank 0 about to stop itself" >&2
		kill -STOP $$
	fi
	for _ in $(seq 300); do echo tick; sleep 0.1; done ;;
touch)
	echo "$DLAUNCH_PROGRESS_FILE" >"$dir/file.$RANK"
	for _ in $(seq 20); do touch "$DLAUNCH_PROGRESS_FILE"; sleep 0.1; done ;;
silent)
	date +%s%N >"$dir/t0.$RANK"
	for _ in $(seq 1500); do [ -e "$dir/stop" ] && exit 0; sleep 0.02; done ;;
esac
exit 0
