#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch_module.sh - the dlaunch Python module's side of the control channel
# (progs/torch_module_channel.py plays the agent over a socket pair): hello,
# close-on-exec, fencing, aborted/step lines, bad input and a missing or
# bad DLAUNCH_CONTROL_FD making the worker plain without a crash, a dump
# answered while the main thread is stuck in a gloo all-reduce; and the
# example with the module under torchrun (no channel, the store served by
# torchrun's agent): a plain DDP script that runs to the end.
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
run_job "$TEST_TMP/torchrun.log" 120 env PYTHONPATH="$REPO/python" "$TORCHRUN" \
	--standalone --nproc_per_node 2 "$EXAMPLES/elastic_inplace.py" \
	--epochs 1 --log-every 40
check_eq "under torchrun: exit 0" 0 "$JOB_RC" || show_log "$TEST_TMP/torchrun.log"
check_eq "under torchrun: both ranks end at step 40 with one state, no channel" "2 1 0" \
	"$(grep -c 'inplace done rank=[01] world=2 .*step=40 reforms=0' "$TEST_TMP/torchrun.log") $(sed -n 's/.*inplace done .*digest=//p' "$TEST_TMP/torchrun.log" | sort -u | wc -l) $(grep -c 'control channel open' "$TEST_TMP/torchrun.log")"
finish
