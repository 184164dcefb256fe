#!/bin/bash
# torch_module.sh - the dlaunch Python module's side of the control channel
# (progs/torch_module_channel.py plays the agent over a socket pair): hello,
# close-on-exec, fencing, aborted/step lines, bad input and a missing or
# bad DLAUNCH_CONTROL_FD making the worker plain without a crash.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_torch.sh"
torch_require dlaunch
PYTHONPATH=$REPO/python timeout 60 "$TORCH_PY" "$PROGS/torch_module_channel.py" \
	>"$TEST_TMP/out.log" 2>&1
rc=$?
grep -E '^(ok|not ok) - ' "$TEST_TMP/out.log"
FAILED=$((FAILED + $(grep -c '^not ok - ' "$TEST_TMP/out.log")))
check_eq "the channel checks ran to the end" 0 "$rc" || show_log "$TEST_TMP/out.log"
finish
