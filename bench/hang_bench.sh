#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# hang_bench.sh - the hang diagnosis measured (bench/bench.py hang runs
# it; docs/hangs.md): the issue's sweep. For each world size W of SIZES,
# dlaunch-train with W ranks on H nodes (W=2: 2 x 1, 4: 2 x 2, 8: 4 x 2,
# 16: 4 x 4), each node a network-namespace host where lib_netns can make
# them (else every node an agent on this host's loopback), through
# dlaunch-rdzv. In each trial one rank hangs (DLAUNCH_DIST_FAULT=CALL:
# sleep|loop|read before an all-reduce, or SIGSTOP), the rank k = trial
# mod W, so TRIALS >= W covers every rank position (fewer trials are
# spread from rank 0 to W-1); --hang-timeout finds
# it (a stall: no rank's step moved for PT s, counted from the first
# step, so the ranks' slow start on a loaded machine is no false trigger,
# as it would be for --progress-timeout). Per trial one JSON line on
# stdout:
#   {"kind", "world", "nodes", "netns", "rank",
#    "named": [the stuck ranks each node printed],
#    "correct": every node named exactly that rank,
#    "latency_s": from the trigger's time to the last node's verdict,
#    "nodes_reported": how many nodes printed a verdict}
#
#   bench/hang_bench.sh BUILD_DIR [TRIALS [KINDS [SIZES]]]
# TRIALS per kind and size (default 20), KINDS default "sleep loop read
# stop", SIZES default "2 4 8 16". Needs root for the namespaces, like
# tests/faults; reuses their helpers (tests/faults/lib_faults.sh,
# lib_netns.sh).
BUILD=$(cd "${1:-build}" && pwd)
TRIALS=${2:-20} KINDS=${3:-"sleep loop read stop"} SIZES=${4:-"2 4 8 16"}
export DLAUNCH_BUILD=$BUILD
BIN=$BUILD/bin
# heartbeats of the default 5 s timeout: the faults suite's 1 s evicted
# nodes of a loaded machine mid-trial (the round ended, the ranks
# re-formed in place and moved), which is no part of what is measured
HB_CONF=${HB_CONF:-heartbeat_interval=0.5,heartbeat_timeout=5,last_call_timeout=0.5}
source "$(dirname "$0")/../tests/faults/lib_faults.sh"
# the helpers print TAP lines on stdout: ours are JSON, theirs go to stderr
exec 3>&1 1>&2

MAX_NODES=4
NETNS=false
if netns_available && netns_setup $((MAX_NODES + 1)); then
	NETNS=true
	start_rdzv --ns "$MAX_NODES" || exit 1
else
	echo "hang_bench: no namespace hosts (${NETNS_WHY:-netns_setup failed}): every node on the loopback" >&2
	start_rdzv || exit 1
fi
EP=$RDZV_HOST:$RDZV_PORT
PT=5

# rank_pid R: the marked dlaunch-train with RANK=R
rank_pid() {
	local p
	for p in $(marked_pids); do
		grep -qzx "RANK=$1" "/proc/$p/environ" 2>/dev/null || continue
		grep -q dlaunch-train "/proc/$p/cmdline" 2>/dev/null || continue
		echo "$p"
		return 0
	done
	return 1
}

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

# any_log_has JOB REGEX: some node's log of JOB has a line matching REGEX
any_log_has() { grep -Eqs -- "$2" "$TEST_TMP/agent.$1".*.log; }

# trial KIND W K JOB: W ranks, rank K hangs so
trial() {
	local kind=$1 world=$2 k=$3 job=$4 h fault=() n log named=() t_trig t_last=0 t reason
	local HOSTS NPROC ns=()
	HOSTS=$((world >= 8 ? MAX_NODES : 2))
	NPROC=$((world / HOSTS))
	[ "$kind" != stop ] &&
		fault=(env DLAUNCH_DIST_FAULT="30:$kind" DLAUNCH_DIST_FAULT_RANK="$k")
	for ((h = 0; h < HOSTS; h++)); do
		ns=()
		$NETNS && ns=(--ns "$h")
		start_agent "$job.$h" "${ns[@]}" "$BIN/dlaunch" --nnodes="$HOSTS" \
			--nproc-per-node="$NPROC" --rdzv-backend=c10d \
			--rdzv-endpoint="$EP" --rdzv-id="$job" --rdzv-conf="$HB_CONF" \
			--max-restarts=0 --hang-timeout=$PT \
			--log-dir "$TEST_TMP/$job.$h" --no-python "${fault[@]}" \
			"$BIN/dlaunch-train" --device cpu --threads 1 \
			--data synthetic:4096 --model 32-32-4 --global-batch 64 \
			--epochs 100000 --max-steps 10000000 --timeout 300s --log-every 20
	done
	if [ "$kind" = stop ]; then
		# rank 0's lines are in the log of the node that holds it, and
		# node ranks follow the join order: any node's log
		wait_for 120 any_log_has "$job" "step +20/" &&
			kill -STOP "$(rank_pid "$k")"
	fi
	for ((h = 0; h < HOSTS; h++)); do
		wait_for 180 log_has "$TEST_TMP/agent.$job.$h.log" "event=hang_diagnosed"
	done
	t_trig=$(jq '.trigger.time_ms // 0' "$TEST_TMP/$job.0/hang-report.json" 2>/dev/null)
	reason=$(jq -c '.analysis.reason // ""' "$TEST_TMP/$job.0/hang-report.json" 2>/dev/null)
	n=0
	for ((h = 0; h < HOSTS; h++)); do
		log=$TEST_TMP/agent.$job.$h.log
		named+=("$(grep -E "^  stuck +: " "$log" | tail -n 1 | sed 's/.*: //')")
		t=$(grep "event=hang_diagnosed" "$log" | tail -n 1 | cut -d' ' -f1)
		if [ -n "$t" ]; then
			n=$((n + 1))
			t=$(ms_of "$t")
			[ "$t" -gt "$t_last" ] && t_last=$t
		fi
	done
	for ((h = 0; h < HOSTS; h++)); do
		kill -TERM "${AGENT_PID[$job.$h]}" 2>/dev/null
	done
	for ((h = 0; h < HOSTS; h++)); do
		wait_agent "$job.$h" 60
	done
	local correct=true
	for h in "${named[@]}"; do
		[ "$h" = "$k" ] || correct=false
	done
	[ "$n" -eq "$HOSTS" ] || correct=false
	printf '{"kind": "%s", "world": %d, "nodes": %d, "netns": %s, "rank": %d, "named": [%s], "correct": %s, "latency_s": %s, "nodes_reported": %d, "reason": %s}\n' \
		"$kind" "$world" "$HOSTS" "$NETNS" "$k" \
		"$(printf '"%s",' "${named[@]}" | sed 's/,$//')" \
		"$correct" \
		"$([ "${t_trig:-0}" -gt 0 ] && [ "$t_last" -gt 0 ] &&
			printf '%d.%03d' $(((t_last - t_trig) / 1000)) \
				$(((t_last - t_trig) % 1000)) || echo null)" \
		"$n" "${reason:-\"\"}" >&3
}

i=0
for kind in $KINDS; do
	for world in $SIZES; do
		for ((t = 0; t < TRIALS; t++)); do
			trial "$kind" "$world" "$(position "$t" "$world")" "hb$i"
			i=$((i + 1))
		done
	done
done
FAILED=0
