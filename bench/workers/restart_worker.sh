#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# restart_worker.sh FILE - the worker of the restart benchmark.
# Appends "start RESTART_COUNT RANK SECONDS" to FILE when it starts
# (SECONDS: bash's $EPOCHREALTIME, wall clock with microseconds, read
# without forking `date`, so the worker's own start-up cost stays small and
# the same under every launcher). In attempt 0, rank 0 waits until every
# worker of the attempt has started, appends "die 0 0 SECONDS" and exits 1;
# the other ranks sleep until they are stopped. In later attempts every
# worker exits 0 at once, so the job succeeds.
f=$1
echo "start ${TORCHELASTIC_RESTART_COUNT:-0} $RANK $EPOCHREALTIME" >>"$f"
if [ "${TORCHELASTIC_RESTART_COUNT:-0}" = 0 ]; then
	if [ "$RANK" = 0 ]; then
		while [ "$(grep -c '^start 0 ' "$f")" -lt "$WORLD_SIZE" ]; do
			sleep 0.005
		done
		echo "die 0 0 $EPOCHREALTIME" >>"$f"
		exit 1
	fi
	exec sleep 120
fi
exit 0
