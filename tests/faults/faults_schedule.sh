#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_schedule.sh - the fault schedule runner: a training job under random
# kills of workers and agents and server restarts, then the proof that it
# ended where an uninterrupted run ends.
#
# The job: dlaunch-train on synthetic data (CPU, TCP collectives), two
# agents with two workers each (world size 4) against dlaunch-rdzv
# --state-dir on loopback, checkpoints every 50 steps; SCHED_STEPS (2000,
# about 20-30 s uninterrupted here) steps. For SCHED_SECONDS (default 30),
# or until the job ends, a seeded schedule (FAULT_SEED, printed; set it to
# replay) injects, every 0.3 s to (reference run time / 6), one of:
#   - kill -9 of a random trainer process,
#   - kill -9 of a random agent, restarted 0.5-1.5 s later with the same
#     command (as a supervisor would),
#   - kill -9 of the server, restarted 0.3-2 s later on the same port from
#     its state dir.
# Then the job runs to the end. It must succeed (both agents exit 0), the
# server's rounds and the workers' records must never show a rank twice,
# every checkpoint must be valid, and the final parameters must equal, bit
# for bit, those of an uninterrupted run at the same world size.
#
# Heavy for tests/run.sh -j (four dlaunch-train ranks of a 256-512-512-16
# model train flat out): never run beside another heavy test.
# test: heavy
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch dlaunch-train

SEED=${FAULT_SEED:-$(($$ * 7919 % 32768))}
RANDOM=$SEED
echo "# fault schedule seed $SEED (replay with FAULT_SEED=$SEED)"
SECONDS_OF_FAULTS=${SCHED_SECONDS:-30}
STEPS=${SCHED_STEPS:-2000}
what="fault schedule (seed $SEED)"

train_args() { # CKPT_DIR
	echo "--data synthetic:8192 --model 256-512-512-16 --global-batch 64" \
		"--device cpu --threads 1 --max-steps $STEPS --epochs 1000" \
		"--checkpoint-every 50" \
		"--keep-checkpoints 3 --checkpoint-dir $1 --timeout 10s --log-every 100000"
}
CK="$PY $FAULTS_DIR/ckpt_tool.py"

# ---- the uninterrupted reference, world size 4 ----------------------------
t0=$SECONDS
# shellcheck disable=SC2046
marked timeout -k 5 300 "$BIN/dlaunch" --standalone --nproc-per-node=4 \
	--no-python "$BIN/dlaunch-train" $(train_args "$TEST_TMP/ref") \
	>"$TEST_TMP/ref.log" 2>&1
rc=$?
ref_secs=$((SECONDS - t0))
ref_file=$TEST_TMP/ref/ckpt-$(printf '%012d' "$STEPS").dlck
ref=$($CK digest "$ref_file" 2>/dev/null | sed 's/.*params=//')
if [ "$rc" != 0 ] || [ -z "$ref" ]; then
	not_ok "$what: the uninterrupted reference run failed (exit $rc)"
	show_log "$TEST_TMP/ref.log"
	finish
fi
echo "# reference: $STEPS steps in $ref_secs s, parameters $ref"

# ---- the job under faults ------------------------------------------------------
state=$TEST_TMP/state
ckpt=$TEST_TMP/ckpt
if ! start_rdzv --state-dir "$state"; then
	not_ok "$what: dlaunch-rdzv did not start"
	finish
fi
port=$RDZV_PORT
conf=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=0.5,join_timeout=60
agent_cmd() {
	# shellcheck disable=SC2046
	echo "$BIN/dlaunch" $(agent_args sched 2 2 "$conf") --max-restarts=1000 \
		--no-python "$WORKER" "$BIN/dlaunch-train" $(train_args "$ckpt")
}
declare -A STARTS=([A]=0 [B]=0)
# start_agent's log name is fixed; keep every incarnation's log apart
start_agent_logged() {
	local name=$1
	STARTS[$name]=$((STARTS[$name] + 1))
	local log=$TEST_TMP/agent.$name.${STARTS[$name]}.log
	# shellcheck disable=SC2046
	spawn_bg "$log" env DLAUNCH_TEST_MARK="$MARK" FAULT_DIR="$TEST_TMP" \
		FAULT_NODE="$name" DLAUNCH_NODE_ID="$name" $(agent_cmd)
	AGENT_PID[$name]=$LAST_PID
	unset "AGENT_RC[$name]"
}
start_agent_logged A
start_agent_logged B
if ! wait_for 30 job_running_with sched 2; then
	not_ok "$what: the job did not start"
	show_log "$TEST_TMP/agent.A.1.log"
	finish
fi

# trainer_pids: the marked dlaunch-train processes
trainer_pids() {
	local p
	for p in $(marked_pids); do
		grep -q dlaunch-train "/proc/$p/comm" 2>/dev/null && echo "$p"
	done
}

faults=() member_checks=0 member_problems=
# faults come every 0.3 s to ref/6 s (at least 1 s): about a dozen land on
# the job however fast this machine runs it today
max_gap_ds=$((ref_secs * 10 / 6))
[ "$max_gap_ds" -lt 10 ] && max_gap_ds=10
end=$((SECONDS + SECONDS_OF_FAULTS))
while [ $SECONDS -lt $end ]; do
	# the pause between faults is the schedule itself, not a synchronisation
	gap=$((3 + RANDOM % (max_gap_ds - 2)))
	sleep "$((gap / 10)).$((gap % 10))"
	st=$(job_field sched .state)
	case "$st" in SUCCEEDED | FAILED) break ;; esac
	if [ "$st" = RUNNING ]; then
		p=$(job_json sched | members_problems)
		member_checks=$((member_checks + 1))
		[ -n "$p" ] && member_problems+="$p; "
	fi
	case $((RANDOM % 3)) in
	0)
		mapfile -t tp < <(trainer_pids)
		if [ ${#tp[@]} -gt 0 ]; then
			victim=${tp[$((RANDOM % ${#tp[@]}))]}
			kill -KILL "$victim" 2>/dev/null
			faults+=("t=$SECONDS kill -9 trainer $victim")
		fi
		;;
	1)
		n=$([ $((RANDOM % 2)) = 0 ] && echo A || echo B)
		kill -KILL "${AGENT_PID[$n]}" 2>/dev/null
		wait "${AGENT_PID[$n]}" 2>/dev/null
		faults+=("t=$SECONDS kill -9 agent $n")
		sleep "0.$((5 + RANDOM % 10))" # the supervisor's restart delay
		start_agent_logged "$n"
		;;
	2)
		kill -KILL "$RDZV_PID" 2>/dev/null
		wait "$RDZV_PID" 2>/dev/null
		faults+=("t=$SECONDS kill -9 server")
		sleep "0.$((3 + RANDOM % 10))" # how long the server stays down
		if ! start_rdzv --port "$port" --state-dir "$state"; then
			not_ok "$what: the server did not restart on port $port"
			break
		fi
		;;
	esac
done
printf '# %s\n' "${faults[@]}"

# ---- the end -------------------------------------------------------------------
# exit_of NAME: agent NAME's exit status, or "late" when the schedule
# killed it after its node's part was done and its restart came after
# the job had ended (the end fell between the state read above and the
# kill): such an agent exits 1 saying nothing ran there, which is right
exit_of() {
	if [ "${AGENT_RC[$1]}" = 1 ] &&
		log_has "$TEST_TMP/agent.$1.${STARTS[$1]}.log" "had ended before this node joined it"; then
		echo late
	else
		echo "${AGENT_RC[$1]}"
	fi
}
if wait_agent A 240 && wait_agent B 60; then
	rcs="$(exit_of A) $(exit_of B)"
	check "$what: both agents exit 0 after ${#faults[@]} faults (or, restarted after the job's end, say they were late: $rcs)" \
		bash -c "[[ '$rcs' =~ ^(0|late)\ (0|late)$ ]] && [ '$rcs' != 'late late' ]"
else
	not_ok "$what: the job did not end within 240 s of the last fault"
fi
check_eq "$what: job state" SUCCEEDED "$(job_field sched .state)"
rounds=$(job_round sched)
echo "# restarts charged: $(job_field sched .restart_count), rounds: $rounds"
check "$what: the faults hit the running job (${#faults[@]} faults, $rounds rounds)" \
	test "${#faults[@]}" -ge 3 -a "$rounds" -ge 2
check "$what: the server's rounds never gave a rank twice ($member_checks looks)" \
	test -z "$member_problems"
[ -n "$member_problems" ] && echo "# $member_problems"
# shellcheck disable=SC2046
check "$what: every checkpoint left is valid" $CK verify $(compgen -G "$ckpt/ckpt-*.dlck")
final=$ckpt/ckpt-$(printf '%012d' "$STEPS").dlck
check_eq "$what: final parameters equal the uninterrupted run's, bit for bit" \
	"$ref" "$($CK digest "$final" 2>/dev/null | sed 's/.*params=//')"
# strays, the workers' records, the server's detail, the journal replayed
# (--state-dir) and every checkpoint the job wrote
check_case "$what" 15
finish
