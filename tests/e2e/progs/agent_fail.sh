#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# agent_fail.sh MODE: rank 1 fails. MODE once: only in the first attempt
# (TORCHELASTIC_RESTART_COUNT=0); always: every time, after writing the
# PyTorch @record error file; others succeed.
[ -n "${AGENT_OUT:-}" ] && echo "$RANK $TORCHELASTIC_RESTART_COUNT $DLAUNCH_NODE_ID" >>"$AGENT_OUT"
if [ "$RANK" = 1 ]; then
	case "$1" in
	once)
		if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
			echo "rank 1 fails in attempt 0" >&2
			exit 3
		fi ;;
	always)
		printf '{"message": {"message": "ValueError: rank one is broken", "extraInfo": {"py_callstack": "Traceback (most recent call last): train.py line 7", "timestamp": "1763726400"}}}' >"$TORCHELASTIC_ERROR_FILE"
		exit 7 ;;
	esac
fi
# the others wait to be stopped or for the failing rank's round to pass
sleep "${AGENT_SLEEP:-0}"
exit 0
