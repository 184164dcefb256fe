#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# hang_bench.sh - the hang diagnosis measured (bench/bench.py hang runs
# it; docs/hangs.md): the issue's sweep. For each world size W of SIZES,
# W ranks on H nodes (W=2: 2 x 1, 4: 2 x 2, 8: 4 x 2, 16: 4 x 4), each
# node a network-namespace host where lib_netns can make them (else every
# node an agent on this host's loopback), through dlaunch-rdzv. In each
# trial one rank hangs, the rank k = trial mod W, so TRIALS >= W covers
# every rank position (fewer trials are spread from rank 0 to W-1).
# WORKER (HANG_WORKER here: lib_faults.sh has a WORKER) says which job:
#   train  dlaunch-train; the hang is DLAUNCH_DIST_FAULT=CALL:sleep|loop|
#          read before an all-reduce, or a SIGSTOP; --hang-timeout finds
#          it (a stall: no rank's step moved for PT s, counted from the
#          first step, so the ranks' slow start on a loaded machine is no
#          false trigger, as it would be for --progress-timeout);
#   torch  a plain PyTorch gloo script (bench/workers/gloo_hang.py, Debian
#          torch under /usr/bin/python3): GLOO_HANG=STEP:sleep|loop|read
#          before an all_reduce, or a SIGSTOP; the script reports no steps,
#          so --progress-timeout TORCH_PT (default 40 s: it counts from the
#          spawn, and torch's import and the group's forming take tens of
#          seconds here under load) finds it. Its Python stacks come from
#          dlaunch's sitecustomize; each node's report must show rank k's
#          on the script's line of the hang (the line marked HANG-LINE
#          KIND); a stopped rank has no Python stack (it cannot run the
#          handler): its note must say it is stopped instead.
# The trials run round by round (trial t of every size and kind, then
# t+1), so a run cut by HANG_DEADLINE (unix seconds: no trial starts
# after it) has covered every size and kind alike. Per trial one JSON
# line on stdout:
#   {"worker", "kind", "world", "nodes", "netns", "rank",
#    "named": [the stuck ranks each node printed, "|" between its
#    verdicts when it printed more than one],
#    "correct": every node printed a verdict, and each verdict any node
#    printed (to the agent's exit) named exactly that rank,
#    "verdicts": how many verdicts the nodes printed in all (one each),
#    "latency_s": from the trigger's time to the last node's verdict,
#    "nodes_reported": how many nodes printed a verdict,
#    "ended_by_itself": every agent exited within 20 s of the verdicts
#    without a signal from here (the job failed, its workers killed at
#    once), "trial_s": the trial's time, from the agents' start to the
#    last one's exit, "to_trigger_s": from the agents' start to the
#    trigger, "load1": the machine's 1-minute load average then, "reason",
#    torch only: "stack_line": every node's report shows rank k's Python
#    stack on the hang's line (null for SIGSTOP), "expect": that line,
#    "stack": rank k's innermost frame of the script in node 0's report
#    (for SIGSTOP, its note)},
#    and where it stands in the sweep: "round" (t), "index" (i, the job
#    hb<i>), "lane"
#
# HANG_SKIP (a resumed sweep: bench.py --hang-resume) lists the trials a
# previous run made, "ROUND/WORLD/KIND" apart by spaces: they are not run
# again. HANG_LANES (default 1) runs that many trials at once, each lane
# on hosts of its own (only at 2 and 4 ranks: 2 hosts a trial): a trial
# starts only once no other is still starting (its "step 20" line
# printed, or it ended), so a start-up never competes with another, and
# the lanes overlap only the trials' waits (the detection's timeout, the
# verdicts, the teardown).
#
#   bench/hang_bench.sh BUILD_DIR [TRIALS [KINDS [SIZES [WORKER]]]]
# TRIALS per kind and size (default 20), KINDS default "sleep loop read
# stop", SIZES default "2 4 8 16", WORKER default train. A trial that did
# not name the rank on every node keeps its agents' logs and reports in
# HANG_KEEP/JOB (default BUILD_DIR/hang-failed). Needs root for
# the namespaces, like tests/faults; reuses their helpers
# (tests/faults/lib_faults.sh, lib_netns.sh).
BUILD=$(cd "${1:-build}" && pwd)
TRIALS=${2:-20} KINDS=${3:-"sleep loop read stop"} SIZES=${4:-"2 4 8 16"}
HANG_WORKER=${5:-train}
case $HANG_WORKER in
train | torch) ;;
*)
	echo "hang_bench.sh: WORKER $HANG_WORKER: want train or torch" >&2
	exit 2
	;;
esac
# a trial that did not name the rank on every node keeps its logs here
KEEP=${HANG_KEEP:-$BUILD/hang-failed}
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
TORCH_PT=${TORCH_PT:-40}
TORCH_SCRIPT=$(cd "$(dirname "$0")" && pwd)/workers/gloo_hang.py
export DLAUNCH_BUILD=$BUILD
BIN=$BUILD/bin
# heartbeats of the default 5 s timeout: the faults suite's 1 s evicted
# nodes of a loaded machine mid-trial (the round ended, the ranks
# re-formed in place and moved), which is no part of what is measured
HB_CONF=${HB_CONF:-heartbeat_interval=0.5,heartbeat_timeout=5,last_call_timeout=0.5}
source "$(dirname "$0")/../tests/faults/lib_faults.sh"
# the helpers print TAP lines on stdout: ours are JSON, theirs go to stderr
exec 3>&1 1>&2

if [ "$HANG_WORKER" = torch ] && ! "$TORCH_PY" -c "import torch.distributed" 2>/dev/null; then
	echo '{"error": "'"$TORCH_PY"' has no torch.distributed (Debian: python3-torch)"}' >&3
	exit 0
fi

MAX_NODES=4
LANES=${HANG_LANES:-1}
if ! [ "$LANES" -ge 1 ] 2>/dev/null; then
	echo "hang_bench.sh: HANG_LANES=$LANES: want a count >= 1" >&2
	exit 2
fi
for world in $SIZES; do
	if [ "$LANES" -gt 1 ] && [ "$world" -gt 4 ]; then
		echo "hang_bench.sh: HANG_LANES=$LANES: lanes only at 2 and 4 ranks (2 hosts a trial), not $world" >&2
		exit 2
	fi
done
# agent hosts: the largest trial's, or 2 a lane; the rdzv on the next
NHOSTS=$((LANES * 2 > MAX_NODES ? LANES * 2 : MAX_NODES))
NETNS=false
if netns_available && netns_setup $((NHOSTS + 1)); then
	NETNS=true
	start_rdzv --ns "$NHOSTS" || exit 1
else
	if [ "$LANES" -gt 1 ]; then
		echo "hang_bench.sh: HANG_LANES=$LANES: lanes need namespace hosts (${NETNS_WHY:-netns_setup failed})" >&2
		exit 2
	fi
	echo "hang_bench: no namespace hosts (${NETNS_WHY:-netns_setup failed}): every node on the loopback" >&2
	start_rdzv || exit 1
fi
EP=$RDZV_HOST:$RDZV_PORT
# dlaunch-train's --hang-timeout (HANG_PT, default 3 s): the time from the
# hang to the trigger, no part of what is measured (the trigger to every
# node's verdict); the ranks step thousands of times a second, so no
# node of a loaded machine goes 3 s without a step before the fault
PT=${HANG_PT:-3}

# rank_pid JOB R: the marked worker (dlaunch-train or the torch script)
# of JOB (its agent's FAULT_NODE is JOB.H) with RANK=R
rank_pid() {
	local p what=dlaunch-train
	[ "$HANG_WORKER" = torch ] && what=gloo_hang.py
	for p in $(marked_pids); do
		grep -qzx "RANK=$2" "/proc/$p/environ" 2>/dev/null || continue
		grep -qzx "FAULT_NODE=$1\.[0-9]*" "/proc/$p/environ" 2>/dev/null || continue
		grep -q "$what" "/proc/$p/cmdline" 2>/dev/null || continue
		echo "$p"
		return 0
	done
	return 1
}

# secs MS: MS milliseconds as seconds, "1.234"
secs() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# ms_of "2026-11-27T22:06:34.664Z": unix ms
ms_of() { date -d "$1" +%s%3N; }

# position T W: the rank that hangs in trial T of W ranks: T mod W when
# the trials cover every position, else spread from rank 0 to W-1
position() {
	if [ "$TRIALS" -ge "$2" ]; then
		echo $(($1 % $2))
	elif [ "$TRIALS" -gt 1 ]; then
		echo $(($1 * ($2 - 1) / (TRIALS - 1)))
	else
		echo $(($2 - 1))
	fi
}

# mark_of: the line of rank 0's step 20 (the SIGSTOP comes then)
mark_of() { [ "$HANG_WORKER" = torch ] && echo "step 20 loss" || echo "step +20/"; }

# any_log_has JOB REGEX: some node's log of JOB has a line matching REGEX
any_log_has() { grep -Eqs -- "$2" "$TEST_TMP/agent.$1".*.log; }

# hang_line KIND: the line of the torch script that hangs so
hang_line() { grep -n "HANG-LINE $1\$\|HANG-LINE $1 " "$TORCH_SCRIPT" | head -n 1 | cut -d: -f1; }

# job_args KIND K: sets PRE (what comes before dlaunch: the torch
# script's fault, for the agent to pass on) and POST (dlaunch's detection
# option and the worker command) for a trial in which rank K hangs by KIND
job_args() {
	local kind=$1 k=$2
	PRE=() POST=()
	if [ "$HANG_WORKER" = torch ]; then
		[ "$kind" != stop ] && PRE=(env GLOO_HANG="30:$kind" \
			GLOO_HANG_RANK="$k" GLOO_HANG_DIR="$TEST_TMP")
		# no steps reported: output is its progress (the hang timeout
		# stays at its default: it never sees a step); run as a user
		# runs a script, `dlaunch script.py`
		POST=(--progress-timeout="$TORCH_PT" --python "$TORCH_PY"
			"$TORCH_SCRIPT")
		return
	fi
	POST=(--hang-timeout="$PT" --no-python)
	[ "$kind" != stop ] && POST+=(env DLAUNCH_DIST_FAULT="30:$kind"
		DLAUNCH_DIST_FAULT_RANK="$k")
	POST+=("$BIN/dlaunch-train" --device cpu --threads 1
		--data synthetic:4096 --model 32-32-4 --global-batch 64
		--epochs 100000 --max-steps 10000000 --timeout 300s --log-every 20)
}

# torch_stack KIND K JOB HOSTS: sets STACK_LINE (true when every node's
# report shows rank K's Python stack on the hang's line; for SIGSTOP,
# when every node's report notes that rank K is stopped), EXPECT and
# STACK (what node 0's report holds for rank K)
torch_stack() {
	local kind=$1 k=$2 job=$3 hosts=$4 h j py
	STACK_LINE=true EXPECT='' STACK=''
	if [ "$kind" = stop ]; then
		EXPECT="python: no answer ... (the process is stopped)"
	else
		EXPECT="gloo_hang.py\", line $(hang_line "$kind")"
	fi
	for ((h = 0; h < hosts; h++)); do
		j=$TEST_TMP/$job.$h/hang-report.json
		if [ "$kind" = stop ]; then
			py=$(jq -r --argjson k "$k" '[.reports[].workers[] | select(.rank == $k) | .notes[]?] | map(select(startswith("python:"))) | first // ""' "$j" 2>/dev/null)
			grep -q "^python: no answer .*(the process is stopped)" <<<"$py" || STACK_LINE=false
		else
			py=$(jq -r --argjson k "$k" '[.reports[].workers[] | select(.rank == $k) | .python // ""] | first // ""' "$j" 2>/dev/null)
			grep -qF "$EXPECT" <<<"$py" || STACK_LINE=false
			py=$(grep -m 1 'gloo_hang.py", line' <<<"$py" | sed 's/^ *File "[^"]*\/\([^"\/]*\)"/\1/')
		fi
		[ "$h" -eq 0 ] && STACK=$py
	done
}

# trial KIND W K JOB ROUND INDEX LANE: W ranks, rank K hangs so; the
# nodes on the hosts of LANE
trial() {
	local kind=$1 world=$2 k=$3 job=$4 round=$5 index=$6 lane=$7
	local h n log named=() t_trig t_last=0 t reason
	local HOSTS NPROC ns=() PRE POST extra=
	local t0_ms t_end_ms
	t0_ms=$(date +%s%3N)
	HOSTS=$((world >= 8 ? MAX_NODES : 2))
	NPROC=$((world / HOSTS))
	job_args "$kind" "$k"
	for ((h = 0; h < HOSTS; h++)); do
		ns=()
		$NETNS && ns=(--ns "$((lane * HOSTS + h))")
		start_agent "$job.$h" "${ns[@]}" "${PRE[@]}" "$BIN/dlaunch" \
			--nnodes="$HOSTS" --nproc-per-node="$NPROC" \
			--rdzv-backend=c10d --rdzv-endpoint="$EP" --rdzv-id="$job" \
			--rdzv-conf="$HB_CONF" --max-restarts=0 \
			--log-dir "$TEST_TMP/$job.$h" "${POST[@]}"
	done
	if [ "$kind" = stop ]; then
		# rank 0's lines are in the log of the node that holds it, and
		# node ranks follow the join order: any node's log
		wait_for 180 any_log_has "$job" "$(mark_of)" &&
			kill -STOP "$(rank_pid "$job" "$k")"
	fi
	for ((h = 0; h < HOSTS; h++)); do
		wait_for 240 log_has "$TEST_TMP/agent.$job.$h.log" "event=hang_diagnosed"
	done
	t_trig=$(jq '.trigger.time_ms // 0' "$TEST_TMP/$job.0/hang-report.json" 2>/dev/null)
	reason=$(jq -c '.analysis.reason // ""' "$TEST_TMP/$job.0/hang-report.json" 2>/dev/null)
	n=0
	for ((h = 0; h < HOSTS; h++)); do
		log=$TEST_TMP/agent.$job.$h.log
		# the node's first verdict: that of the trigger
		t=$(grep -m 1 "event=hang_diagnosed" "$log" | cut -d' ' -f1)
		if [ -n "$t" ]; then
			n=$((n + 1))
			t=$(ms_of "$t")
			[ "$t" -gt "$t_last" ] && t_last=$t
		fi
	done
	if [ "$HANG_WORKER" = torch ]; then
		torch_stack "$kind" "$k" "$job" "$HOSTS"
		extra=$(printf ', "stack_line": %s, "expect": %s, "stack": %s' \
			"$([ "$kind" = stop ] && [ "$STACK_LINE" = true ] && echo null || echo "$STACK_LINE")" \
			"$(jq -Rn --arg s "$EXPECT" '$s')" "$(jq -Rn --arg s "$STACK" '$s')")
		[ "$kind" = stop ] && extra+=$(printf ', "stopped_noted": %s' "$STACK_LINE")
	fi
	# --max-restarts=0: the job fails with the verdict, and after it
	# the agents kill their workers at once (no --shutdown-timeout) and
	# exit by themselves; a SIGTERM only for one that did not
	local ended=true
	for ((h = 0; h < HOSTS; h++)); do
		wait_agent "$job.$h" 20 && continue
		ended=false
		kill -TERM "${AGENT_PID[$job.$h]}" 2>/dev/null
		wait_agent "$job.$h" 60
	done
	t_end_ms=$(date +%s%3N)
	# every verdict a node printed, to its end, must name exactly rank
	# k: a second diagnosis of the same hang that names another rank
	# (once the workers are being killed) is a wrong answer too
	local correct=true verdicts=0 v s
	for ((h = 0; h < HOSTS; h++)); do
		log=$TEST_TMP/agent.$job.$h.log
		v=$(grep -c "event=hang_diagnosed" "$log")
		verdicts=$((verdicts + v))
		s=$(grep -E "^  stuck +: " "$log" | sed 's/.*: //' | paste -sd'|')
		named+=("$s")
		[ "$(grep -cE "^  stuck +: $k\$" "$log")" -eq "$v" ] || correct=false
		[ "$s" = "$(yes "$k" | head -n "$v" | paste -sd'|')" ] || correct=false
	done
	[ "$n" -eq "$HOSTS" ] || correct=false
	if [ "$correct" = false ]; then
		# the interesting case: its logs and reports are kept
		mkdir -p "$KEEP/$job"
		cp -r "$TEST_TMP/agent.$job".*.log "$TEST_TMP/$job".* "$KEEP/$job"/ 2>/dev/null
		cp "$TEST_TMP"/rdzv.*.log "$KEEP/$job"/ 2>/dev/null
		echo "hang_bench: trial $job did not name rank $k on every node: logs kept in $KEEP/$job" >&2
	fi
	printf '{"worker": "%s", "kind": "%s", "world": %d, "nodes": %d, "netns": %s, "rank": %d, "named": [%s], "correct": %s, "latency_s": %s, "nodes_reported": %d, "verdicts": %d, "ended_by_itself": %s, "trial_s": %s, "to_trigger_s": %s, "load1": %s, "reason": %s%s, "round": %d, "index": %d, "lane": %d}\n' \
		"$HANG_WORKER" "$kind" "$world" "$HOSTS" "$NETNS" "$k" \
		"$(printf '"%s",' "${named[@]}" | sed 's/,$//')" \
		"$correct" \
		"$([ "${t_trig:-0}" -gt 0 ] && [ "$t_last" -gt 0 ] &&
			printf '%d.%03d' $(((t_last - t_trig) / 1000)) \
				$(((t_last - t_trig) % 1000)) || echo null)" \
		"$n" "$verdicts" "$ended" "$(secs $((t_end_ms - t0_ms)))" \
		"$([ "${t_trig:-0}" -gt 0 ] && secs $((t_trig - t0_ms)) || echo null)" \
		"$(cut -d' ' -f1 /proc/loadavg)" \
		"${reason:-\"\"}" "$extra" "$round" "$index" "$lane" >&3
}

# starting JOB PID: JOB's start-up is not over: no "step 20" line yet,
# and its trial (PID: its lane's subshell) has not ended; waited for up to
# 300 s, twice a second (it takes seconds to minutes)
starting() { alive "$2" && ! any_log_has "$1" "$(mark_of)"; }
wait_started() {
	local end=$((SECONDS + 300))
	while starting "$1" "$2" && [ "$SECONDS" -lt "$end" ]; do
		sleep 0.5
	done
}

# round by round, so that a run HANG_DEADLINE cuts short has covered
# every size and kind alike; a trial HANG_SKIP names was made before
declare -A SKIP=()
for s in ${HANG_SKIP:-}; do SKIP[$s]=1; done
declare -a LANE_PID=()
i=0
for ((t = 0; t < TRIALS; t++)); do
	for world in $SIZES; do
		for kind in $KINDS; do
			i=$((i + 1))
			[ -n "${SKIP[$t/$world/$kind]:-}" ] && continue
			# a free lane (one at a time: the lane is this shell)
			lane=0
			while [ "$LANES" -gt 1 ]; do
				for ((lane = 0; lane < LANES; lane++)); do
					[ -z "${LANE_PID[$lane]:-}" ] && break 2
					alive "${LANE_PID[$lane]}" || break 2
				done
				sleep 0.2
			done
			if [ -n "${HANG_DEADLINE:-}" ] && [ "$(date +%s)" -ge "$HANG_DEADLINE" ]; then
				echo "hang_bench: the deadline passed: trial $t of $TRIALS not started" >&2
				break 3
			fi
			if [ "$LANES" -eq 1 ]; then
				trial "$kind" "$world" "$(position "$t" "$world")" "hb$((i - 1))" "$t" "$((i - 1))" 0
				continue
			fi
			trial "$kind" "$world" "$(position "$t" "$world")" "hb$((i - 1))" "$t" "$((i - 1))" "$lane" &
			LANE_PID[$lane]=$!
			# the next trial starts once this one's start-up is over
			wait_started "hb$((i - 1))" "${LANE_PID[$lane]}"
		done
	done
done
# the lanes' trials (a bare wait would wait for the rdzv server too)
for p in "${LANE_PID[@]}"; do wait "$p"; done
FAILED=0
