#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_hang.sh - the agent's hang detection on one node (docs/hangs.md):
#
#   dlaunch's sitecustomize: a user's own sitecustomize on PYTHONPATH still
#     runs, the script sees PYTHONPATH as it was given, and dlaunch's
#     directory is not on its sys.path;
#   --hang-timeout: ranks that stop stepping (control channel) while they
#     keep printing are a stall: the diagnosis (kind "stall"), then the
#     failure; ranks that step all the way are no stall, even with a
#     timeout shorter than the run;
#   --straggler-steps: a rank stepping ten times slower than the others is
#     logged as a straggler and left running;
#   a worker that is not Python never gets SIGUSR2 from a diagnosis.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
need_bin dlaunch
PY=/usr/bin/python3

# stepper.py: speaks the control channel, steps every STEP_MS_<local rank>
# (default 50) ms; after STOP_AFTER steps (if set) stops stepping but
# prints a line every 100 ms; exits 0 after RUN_S seconds
cat >"$TEST_TMP/stepper.py" <<'EOF'
import json, os, socket, sys, time
s = socket.socket(fileno=int(os.environ["DLAUNCH_CONTROL_FD"]))
s.sendall(b'{"type":"hello","version":1,"handles":[]}\n')
local = os.environ["LOCAL_RANK"]
step_s = int(os.environ.get("STEP_MS_" + local, "50")) / 1000.0
stop_after = int(os.environ.get("STOP_AFTER", "0"))
end = time.time() + float(os.environ.get("RUN_S", "5"))
n = 0
while time.time() < end:
    if stop_after and n >= stop_after:
        print("still here", flush=True)
        time.sleep(0.1)
        continue
    n += 1
    s.sendall(b'{"type":"step","step":%d}\n' % n)
    time.sleep(step_s)
EOF

# ---- the sitecustomize chain ----------------------------------------------------
mkdir -p "$TEST_TMP/user"
cat >"$TEST_TMP/user/sitecustomize.py" <<EOF
open("$TEST_TMP/user_site_ran", "w").write("yes")
EOF
cat >"$TEST_TMP/show.py" <<'EOF'
import os, sys
print("PYTHONPATH=%s" % os.environ.get("PYTHONPATH", "<unset>"))
print("SITE_ON_PATH=%s" % any(".dlaunch-site" in p for p in sys.path))
print("PYSTACK_VAR=%s" % ("DLAUNCH_PYSTACK_FILE" in os.environ))
EOF
out=$(PYTHONPATH="$TEST_TMP/user" "$BIN/dlaunch" --standalone --nproc-per-node=1 \
	--python "$PY" "$TEST_TMP/show.py" 2>&1)
check "sitecustomize: the user's own sitecustomize still runs" test -s "$TEST_TMP/user_site_ran"
check "sitecustomize: the script sees PYTHONPATH as given" \
	grep -q "PYTHONPATH=$TEST_TMP/user$" <<<"$out"
check "sitecustomize: dlaunch's directory is not on sys.path" grep -q "SITE_ON_PATH=False" <<<"$out"
check "sitecustomize: DLAUNCH_PYSTACK_FILE is taken out of the environment" \
	grep -q "PYSTACK_VAR=False" <<<"$out"
out=$(env -u PYTHONPATH "$BIN/dlaunch" --standalone --nproc-per-node=1 \
	--python "$PY" "$TEST_TMP/show.py" 2>&1)
check "sitecustomize: an unset PYTHONPATH stays unset for the script" \
	grep -q "PYTHONPATH=<unset>" <<<"$out"

# ---- a stall --------------------------------------------------------------------
log=$TEST_TMP/stall.log
STOP_AFTER=20 RUN_S=30 "$BIN/dlaunch" --standalone --nproc-per-node=2 \
	--max-restarts=0 --hang-timeout=2 --log-dir "$TEST_TMP/stall" \
	--python "$PY" "$TEST_TMP/stepper.py" >"$log" 2>&1
rc=$?
check_eq "stall: dlaunch fails the job (no restarts left)" 1 "$rc"
check "stall: found (no rank moved its step for 2 s)" \
	file_has "$log" "no rank of this node moved its step for 2 s"
check "stall: a hang diagnosis of kind stall came first" \
	file_has "$log" "hang diagnosis of job .*: stall by"
check_eq "stall: hang-report.json says stall" stall \
	"$(jq -r .trigger.kind "$TEST_TMP/stall/hang-report.json" 2>/dev/null)"
check "stall: the failure says stalled" file_has "$log" "stalled: no rank of node"
check "stall: output alone did not count as a step" file_has "$log" "still here"

# ---- no stall in a run that steps -------------------------------------------------
log=$TEST_TMP/nostall.log
RUN_S=4 "$BIN/dlaunch" --standalone --nproc-per-node=2 --max-restarts=0 \
	--hang-timeout=1 --python "$PY" "$TEST_TMP/stepper.py" >"$log" 2>&1
check_eq "no stall: a run that steps for 4 s with a 1 s hang timeout succeeds" 0 "$?"
check "no stall: no diagnosis" bash -c "! grep -q 'hang diagnosis' '$log'"

# ---- a straggler ---------------------------------------------------------------------
log=$TEST_TMP/straggler.log
STEP_MS_2=500 RUN_S=5 "$BIN/dlaunch" --standalone --nproc-per-node=3 \
	--max-restarts=0 --straggler-steps=5 --python "$PY" \
	"$TEST_TMP/stepper.py" >"$log" 2>&1
check_eq "straggler: the job still succeeds" 0 "$?"
check "straggler: rank 2 is logged as one" file_has "$log" "event=straggler rank=2 "
check "straggler: no other rank is" bash -c "! grep -Eq 'event=straggler rank=[01] ' '$log'"

# ---- a worker that is not Python --------------------------------------------------
cat >"$TEST_TMP/notpy.sh" <<EOF
#!/bin/bash
trap 'echo usr2 >"$TEST_TMP/got_usr2"' USR2
echo started
while :; do sleep 0.1; done
EOF
chmod +x "$TEST_TMP/notpy.sh"
log=$TEST_TMP/notpy.log
"$BIN/dlaunch" --standalone --nproc-per-node=1 --max-restarts=0 \
	--progress-timeout=2 --log-dir "$TEST_TMP/notpy" --no-python \
	"$TEST_TMP/notpy.sh" >"$log" 2>&1
check "not Python: the diagnosis ran" file_has "$log" "dlaunch: hang diagnosis"
check "not Python: it never got SIGUSR2" test ! -e "$TEST_TMP/got_usr2"
check "not Python: its native stack is in the report" \
	bash -c "jq -r '.reports[0].workers[0].native' '$TEST_TMP/notpy/hang-report.json' | grep -q TID"
finish
