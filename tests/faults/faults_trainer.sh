#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_trainer.sh - dlaunch-train's checkpoints under damage and kills, and
# a hung trainer rank under dlaunch.
#
#   truncated / bit-flipped checkpoint: the trainer reports the damaged file
#     by name, resumes from the one before, and still ends with the same
#     parameters, bit for bit, as an uninterrupted run;
#   every checkpoint damaged: each is reported, the run starts over and
#     ends like the uninterrupted run;
#   kill -9 during a checkpoint save: every file under a final name stays
#     valid (checked by ckpt_tool.py, a reader independent of the trainer),
#     the leftover temporary file is removed by the next run, which resumes;
#   hung rank (SIGSTOP): the other rank's collective times out (--timeout),
#     dlaunch restarts the group, the stopped process is gone and the job
#     succeeds.
#
# Each case ends with the checker; its checkpoint part verifies every
# checkpoint the case wrote (the damaged ones were written over when the
# run saved their steps again).
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-train dlaunch

CK="$PY $FAULTS_DIR/ckpt_tool.py"
SMALL=(--data synthetic:4096 --model 32-64-4 --global-batch 64 --device cpu
	--log-every 100000)

# train LOG ARGS...: one world-of-one trainer run in the foreground (marked)
train() {
	local log=$1
	shift
	marked timeout -k 5 120 "$BIN/dlaunch-train" "${SMALL[@]}" "$@" >"$log" 2>&1
}

digest() { $CK digest "$1" 2>/dev/null | sed 's/.*params=//'; }
newest() { $CK newest "$1" 2>/dev/null; }

train "$TEST_TMP/ref.log" --max-steps 60 --checkpoint-dir "$TEST_TMP/ref" \
	--checkpoint-every 0
ref=$(digest "$(newest "$TEST_TMP/ref")")
if [ -z "$ref" ]; then
	not_ok "damaged checkpoint: the uninterrupted reference run left no valid checkpoint"
	show_log "$TEST_TMP/ref.log"
fi
check_case "reference run"

# damaged CASE MUTATION: steps 0..40 (checkpoints 20, 30, 40), damage the
# step-40 file with MUTATION FILE, then train on to step 60
damaged() {
	local what=$1 mutate=$2 d=$TEST_TMP/$3 f rc
	train "$TEST_TMP/$3.1.log" --max-steps 40 --checkpoint-dir "$d" --checkpoint-every 10
	f=$d/ckpt-000000000040.dlck
	if [ ! -f "$f" ]; then
		not_ok "$what: no checkpoint at step 40 to damage"
		show_log "$TEST_TMP/$3.1.log"
		return
	fi
	$mutate "$f"
	check "$what: ckpt_tool sees the damage" bash -c "! $CK verify '$f' >/dev/null"
	train "$TEST_TMP/$3.2.log" --max-steps 60 --checkpoint-dir "$d" --checkpoint-every 10
	rc=$?
	check_eq "$what: the resumed run exits 0" 0 "$rc"
	check "$what: the damaged file is reported by name" \
		log_has "$TEST_TMP/$3.2.log" "ckpt-000000000040.dlck"
	check "$what: it resumes from the checkpoint before (step 30)" \
		log_has "$TEST_TMP/$3.2.log" "resumed from .*ckpt-000000000030.dlck"
	check_eq "$what: final parameters equal the uninterrupted run's" \
		"$ref" "$(digest "$(newest "$d")")"
	# the damaged file was replaced when the run saved its step again
	check_case "$what"
}

truncate_half() { truncate -s $(($(stat -c %s "$1") / 2)) "$1"; }
# flip_bit FILE: one bit in the middle of the parameters
flip_bit() {
	local off=$(($(stat -c %s "$1") / 2)) b
	b=$(od -An -tu1 -j "$off" -N 1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $((b ^ 16)))" |
		dd of="$1" bs=1 seek="$off" count=1 conv=notrunc status=none
}
# flip_header FILE: one bit of the payload length in the header
flip_header() {
	local b
	b=$(od -An -tu1 -j 17 -N 1 "$1" | tr -d ' ')
	printf "$(printf '\\%03o' $((b ^ 1)))" |
		dd of="$1" bs=1 seek=17 count=1 conv=notrunc status=none
}

damaged "truncated checkpoint" truncate_half trunc
damaged "bit-flipped checkpoint (parameters)" flip_bit flip
damaged "bit-flipped checkpoint (header)" flip_header fliph

# every checkpoint damaged: the run reports each, starts over from step 0
# and ends like the reference
what="every checkpoint damaged"
d=$TEST_TMP/alldamaged
train "$TEST_TMP/all.1.log" --max-steps 40 --checkpoint-dir "$d" --checkpoint-every 10
for f in "$d"/ckpt-*.dlck; do flip_bit "$f"; done
train "$TEST_TMP/all.2.log" --max-steps 60 --checkpoint-dir "$d" --checkpoint-every 10
check_eq "$what: the run starts over and exits 0" 0 "$?"
check_eq "$what: it ends like the uninterrupted run" "$ref" \
	"$(digest "$(newest "$d")")"
check "$what: each damaged file is reported" \
	test "$(grep -c 'ckpt-0000000000[234]0.dlck' "$TEST_TMP/all.2.log")" -ge 3
check_case "$what"

# ---- kill -9 during a checkpoint save ---------------------------------------
# A larger model (~1.9 M parameters, 15 MB files) checkpointing every step,
# so a save takes long enough to be caught: the test waits for a temporary
# file to appear (after at least one save completed) and kills the trainer at once, up to 6 times, until one
# kill has left a temporary file behind (the save was cut in the middle).
what="kill -9 during a checkpoint save"
d=$TEST_TMP/killsave
BIG=(--data synthetic:2048 --model 784-1024-1024-10 --global-batch 64
	--device cpu --log-every 100000 --checkpoint-every 1 --keep-checkpoints 2
	--checkpoint-dir "$d" --threads 1)
has_tmp() { compgen -G "$d/*.tmp.*" >/dev/null; }
# saving: a save in progress after at least one completed
saving() { compgen -G "$d/ckpt-*.dlck" >/dev/null && has_tmp; }
cut_saves=0
for try in 1 2 3 4 5 6; do
	spawn_bg "$TEST_TMP/killsave.$try.log" env DLAUNCH_TEST_MARK="$MARK" \
		"$BIN/dlaunch-train" "${BIG[@]}" --max-steps 100000
	pid=$LAST_PID
	if wait_for 30 saving; then
		kill -KILL "$pid"
		wait "$pid" 2>/dev/null
		has_tmp && cut_saves=$((cut_saves + 1))
	else
		kill -KILL "$pid"
		wait "$pid" 2>/dev/null
	fi
	[ "$cut_saves" -ge 1 ] && [ "$try" -ge 2 ] && break
done
check "$what: at least one kill cut a save in the middle ($cut_saves of $try)" \
	test "$cut_saves" -ge 1
files=$(compgen -G "$d/ckpt-*.dlck")
if [ -n "$files" ]; then
	# shellcheck disable=SC2086
	check "$what: every checkpoint under a final name is valid" $CK verify $files
else
	not_ok "$what: no checkpoint was written before the kills"
fi
last=$(newest "$d")
marked timeout -k 5 120 "$BIN/dlaunch-train" "${BIG[@]}" \
	--max-steps $(($(basename "$last" .dlck | sed 's/ckpt-0*//') + 2)) \
	>"$TEST_TMP/killsave.resume.log" 2>&1
check_eq "$what: the next run exits 0" 0 "$?"
check "$what: it resumes from the newest valid checkpoint" \
	log_has "$TEST_TMP/killsave.resume.log" "resumed from .*$(basename "$last")"
check "$what: it removes the leftover temporary files" bash -c "! compgen -G '$d/*.tmp.*'"
check_case "$what"
rm -rf "$d"

# ---- hung trainer rank --------------------------------------------------------
what="hung trainer rank (SIGSTOP)"
if [ -x "$BIN/dlaunch" ]; then
	d=$TEST_TMP/hang
	# rank_pid R: the pid of the marked dlaunch-train with RANK=R
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
	new_case
	start_agent hang "$BIN/dlaunch" --standalone --nproc-per-node=2 \
		--max-restarts=2 --no-python "$WORKER" "$BIN/dlaunch-train" \
		--data synthetic:4096 --model 64-256-256-4 --global-batch 64 \
		--device cpu --threads 1 --max-steps 4000 --epochs 1000 \
		--checkpoint-every 50 --checkpoint-dir "$d" \
		--timeout 3s --log-every 100000
	log=$TEST_TMP/agent.hang.log
	has_ckpt() { compgen -G "$d/ckpt-*.dlck" >/dev/null; }
	if wait_for 30 has_ckpt && p1=$(rank_pid 1); then
		kill -STOP "$p1"
		t0=$SECONDS
		if wait_for 30 log_has "$log" "resumed from"; then
			took=$((SECONDS - t0))
			# the survivor speaks the control channel: after its
			# collective times out it waits up to --timeout more for
			# its agent's abort (docs/worker-protocol.md), then exits;
			# its agent sees the stopped rank and restarts at once
			check "$what: the group restarts within twice the 3 s collective timeout + 8 s ($took s)" \
				test "$took" -le 14
		else
			not_ok "$what: no restart within 30 s of the SIGSTOP"
		fi
		if wait_agent hang 60; then
			check_eq "$what: the job still succeeds" 0 "${AGENT_RC[hang]}"
			check "$what: the stopped rank is gone" pids_dead "$p1"
			check "$what: the group restarted and resumed from a checkpoint" \
				log_has "$log" "resumed from"
			check "$what: the surviving rank names the timeout" \
				log_has "$log" "(timed out|timeout)"
			check "$what: both ranks started again ($(wc -l <"$TEST_TMP/ranks.log") worker starts recorded)" \
				workers_started 4
		else
			not_ok "$what: dlaunch still running 60 s after a rank was stopped"
			show_log "$log"
		fi
	else
		not_ok "$what: the trainers did not start"
		show_log "$log"
	fi
	check_case "$what"
else
	not_ok "$what: $BIN/dlaunch missing: build it with make"
fi

finish
