#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_inplace_ddp.sh - dlaunch-train re-forms in place under dlaunch, on
# four namespace hosts of two workers each (issue 20), with the rendezvous
# on a fifth host: dlaunch-rdzv, then a one-member etcd. Per backend:
#
#   host lost: every process of h3 killed (kill -9) mid-training; the six
#     survivors keep their processes, re-form at one step, and the job
#     finishes with the state (parameters, optimizer, sampler, RNG: the
#     trainer's state_digest) of a reference run that followed the same
#     membership schedule by checkpoint and restart (8 ranks up to that
#     step, then 6 from its checkpoint);
#   worker crash: one rank killed after its host's checkpoint directory was
#     removed; only it is a new process, it takes its state from a peer,
#     and the job ends with the state of an uninterrupted 8-rank run;
#   spare joining: three hosts train, a fourth joins mid-run with no
#     checkpoint directory; its ranks take their state from the survivors
#     and the job ends with the state of 6 ranks up to that step, then 8.
#
# The time from the kill to the survivors' re-form is printed (a comment:
# bench/bench.py reform measures it); the assertions are about processes,
# steps and state, which do not depend on the machine's speed.
#
# Heavy for tests/run.sh -j (eight dlaunch-train ranks and their reference
# runs keep both CPUs busy): never run beside another heavy test.
# test: heavy
source "$(dirname "$0")/lib_faults.sh"
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch-rdzv dlaunch dlaunch-train
what="dlaunch-train in place"
faults_require_hosts "$what"
if ! netns_setup 5; then
	not_ok "$what: could not build the five hosts"
	finish
fi

TRAIN=(--data synthetic:16384 --model 64-256-256-10 --epochs 6 --global-batch 64
	--log-every 20 --checkpoint-every 100 --timeout 30s)
RDZV_HOST_I=4

# train_pids I: the dlaunch-train processes running on host I, sorted
train_pids() {
	local p
	for p in $(ip netns pids "$(netns_host "$1")"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = dlaunch-train ] && echo "$p"
	done | sort -n
}
n_train() { train_pids "$1" | wc -l; }
hosts_have() { # N I...: every host I runs N trainers
	local n=$1 i
	shift
	for i in "$@"; do [ "$(n_train "$i")" = "$n" ] || return 1; done
}
# rank0_step: the highest step rank 0 has printed, in any agent's log
rank0_step() {
	cat "$TEST_TMP"/agent.*.log 2>/dev/null |
		sed -n 's/^\[rank0\]: epoch [0-9]*\/[0-9]* step \([0-9]*\)\/.*/\1/p' |
		sort -n | tail -n 1
}
past_step() { local s; s=$(rank0_step); [ -n "$s" ] && [ "$s" -ge "$1" ]; }
# reformed: the trainers' "re-formed in place" lines
reformed() { cat "$TEST_TMP"/agent.*.log 2>/dev/null | grep -h "re-formed in place for round "; }
n_reformed() { [ "$(reformed | wc -l)" -ge "$1" ]; }
# resume_steps: the distinct steps the ranks resumed after
resume_steps() { reformed | sed 's/.*resuming after step \([0-9]*\).*/\1/' | sort -u | tr '\n' ' '; }
# all_pids I...: the trainers of those hosts, one line, sorted
all_pids() { for i in "$@"; do train_pids "$i"; done | sort -n | tr '\n' ' '; }
# host_without_rank0: a host among 1-3 whose agent shows no rank 0 output
host_without_rank0() {
	local i
	for i in 1 2 3; do
		grep -q '^\[rank0\]:' "$TEST_TMP/agent.h$i.log" || { echo "$i"; return; }
	done
}
# final_digest: the state digest of rank 0's summary line
final_digest() {
	cat "$TEST_TMP"/agent.*.log 2>/dev/null |
		sed -n 's/.*"state_digest": "\([0-9a-f]*\)".*/\1/p' | sort -u | tr '\n' ' '
}

# show_recovery: the agents' and trainers' lines about the round change, as
# TAP comments (a failed check's diagnosis)
show_recovery() {
	local f
	for f in "$TEST_TMP"/agent.*.log; do
		echo "# --- $(basename "$f")"
		grep -E 'round|abort|re-form|fall|plain|restart|deadline|took the state|failed|exit' "$f" |
			grep -v ' step [0-9]*/' | tail -n 25 | cut -c1-240 | sed 's/^/#   /'
	done
}

# reference WORLD1 STEP WORLD2: the state digest after WORLD1 ranks train to
# STEP and WORLD2 ranks resume from that checkpoint to the end (STEP 0: one
# run of WORLD2 ranks). The training is deterministic: a reference already
# computed (the worker crash's 8-rank run, the same for both backends) is
# read back instead of trained again.
reference() {
	local dir=$TEST_TMP/ref.$1.$2.$3
	if [ -s "$dir/digest" ]; then
		cat "$dir/digest"
		return 0
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$2" -gt 0 ]; then
		timeout 120 "$BIN/dlaunch" --standalone --nproc-per-node "$1" \
			--no-python "$BIN/dlaunch-train" "${TRAIN[@]}" \
			--checkpoint-dir "$dir/ck" --max-steps "$2" \
			>"$dir/a.log" 2>&1 || return 1
	fi
	timeout 120 "$BIN/dlaunch" --standalone --nproc-per-node "$3" \
		--no-python "$BIN/dlaunch-train" "${TRAIN[@]}" \
		--checkpoint-dir "$dir/ck" >"$dir/b.log" 2>&1 || return 1
	sed -n 's/.*"state_digest": "\([0-9a-f]*\)".*/\1/p' "$dir/b.log" | sort -u |
		tr '\n' ' ' >"$dir/digest.tmp"
	mv "$dir/digest.tmp" "$dir/digest"
	cat "$dir/digest"
}

# start_rendezvous BACKEND: dlaunch-rdzv or one etcd member on host 4;
# RDZV_ARGS then hold the agents' rendezvous options
start_rendezvous() {
	if [ "$1" = http ]; then
		start_rdzv --ns "$RDZV_HOST_I" || return 1
		RDZV_ARGS=(--rdzv-backend=c10d --rdzv-endpoint="$RDZV_HOST:$RDZV_PORT")
	else
		etcd_cluster_start_netns "$RDZV_HOST_I" || return 1
		RDZV_ARGS=(--rdzv-backend=etcd --rdzv-endpoint="$ETCD_ENDPOINTS")
	fi
}
stop_rendezvous() {
	if [ "$1" = http ]; then stop_rdzv; else etcd_cluster_destroy; fi
}

# start_host I JOB CONF: an agent with two trainers on host I; the host's
# checkpoint directory is $TEST_TMP/ck.I
start_host() {
	local i=$1 job=$2 conf=$3
	start_agent "h$i" --ns "$i" "$BIN/dlaunch" --nnodes=3:4 \
		--nproc-per-node=2 "${RDZV_ARGS[@]}" --rdzv-id="$job" \
		--rdzv-conf="$conf" --max-restarts=3 --shutdown-timeout=2 \
		--reform-timeout=30 --no-python "$BIN/dlaunch-train" \
		"${TRAIN[@]}" --checkpoint-dir "$TEST_TMP/ck.$i"
}
# wait_job HOST...: every agent of those hosts exits; 0 when all said 0
wait_job() {
	local i rcs=''
	for i in "$@"; do
		wait_agent "h$i" 90 || return 1
		rcs+=${AGENT_RC[h$i]}
	done
	[ "$rcs" = "$(printf '0%.0s' "$@")" ]
}

run_backend() {
	local be=$1 conf before after s t0 t1 ref job
	# a last call long enough for four agents in namespaces to meet
	conf=heartbeat_interval=0.2,heartbeat_timeout=1,last_call_timeout=1
	[ "$be" = etcd ] && conf+=,lease_ttl=2

	# ---- host lost ------------------------------------------------------
	case_what="$what ($be): host lost"
	new_case
	rm -rf "$TEST_TMP"/ck.* "$TEST_TMP"/agent.*.log
	if ! start_rendezvous "$be"; then
		not_ok "$case_what: the rendezvous did not start"
		return
	fi
	job=lost$be
	for i in 0 1 2 3; do start_host "$i" "$job" "$conf"; done
	if wait_for 90 hosts_have 2 0 1 2 3 && wait_for 90 past_step 60; then
		before=$(all_pids 0 1 2)
		t0=${EPOCHREALTIME//[.,]/}
		for p in $(ip netns pids "$(netns_host 3)"); do kill -KILL "$p"; done
		if wait_for 60 n_reformed 6; then
			t1=${EPOCHREALTIME//[.,]/}
			echo "# $be: kill of h3 to six ranks re-formed: $(((t1 - t0) / 1000)) ms (heartbeat timeout 1 s)"
			s=$(resume_steps)
			check "$case_what: the six survivors resume after one step ($s)" \
				test "$(echo "$s" | wc -w)" = 1
			after=$(all_pids 0 1 2)
			check_eq "$case_what: no surviving trainer is a new process" "$before" "$after" ||
				show_recovery
			check "$case_what: the job finishes (h0-h2 exit 0)" wait_job 0 1 2
			check_eq "$case_what: still the same processes at the end" "$before" \
				"$(cat "$TEST_TMP"/agent.h[012].log | grep -o 'dlaunch-train\[[0-9]*\] info: rank [0-9]* of 6: re-formed' | sed 's/.*\[\([0-9]*\)\].*/\1/' | sort -n | tr '\n' ' ')"
			if ref=$(reference 8 "${s% }" 6); then
				check_eq "$case_what: final state equals 8 ranks to step ${s% }, then 6 from its checkpoint" \
					"$ref" "$(final_digest)"
			else
				not_ok "$case_what: the reference run failed"
			fi
		else
			not_ok "$case_what: the survivors did not re-form"
			show_log "$TEST_TMP/agent.h0.log" 30
		fi
	else
		not_ok "$case_what: the job did not start training"
		show_log "$TEST_TMP/agent.h0.log" 30
	fi
	check_case "$case_what" --no-workers
	stop_rendezvous "$be"

	# ---- worker crash ---------------------------------------------------
	case_what="$what ($be): worker crash"
	new_case
	rm -rf "$TEST_TMP"/ck.* "$TEST_TMP"/agent.*.log
	start_rendezvous "$be" || { not_ok "$case_what: no rendezvous"; return; }
	job=crash$be
	for i in 0 1 2 3; do start_host "$i" "$job" "$conf"; done
	if wait_for 90 hosts_have 2 0 1 2 3 && wait_for 90 past_step 60; then
		before=$(for i in 0 1 2 3; do train_pids "$i"; done)
		# a host that does not write the checkpoints (rank 0 does); the
		# respawned rank must not find a checkpoint there
		vh=$(host_without_rank0)
		victim=$(train_pids "$vh" | tail -n 1)
		rm -rf "$TEST_TMP/ck.$vh"
		kill -KILL "$victim"
		if wait_for 60 n_reformed 7; then
			after=$(for i in 0 1 2 3; do train_pids "$i"; done)
			check_eq "$case_what: seven trainers are the same processes" 7 \
				"$(comm -12 <(echo "$before" | sort) <(echo "$after" | sort) | wc -l)" ||
				show_recovery
			check "$case_what: the killed rank is a new process" \
				test -n "$(comm -13 <(echo "$before" | sort) <(echo "$after" | sort))"
			check "$case_what: it took its state from a peer (no checkpoint on its host)" \
				grep -Eq 'took the state of step [0-9]+ from rank' "$TEST_TMP/agent.h$vh.log"
			check "$case_what: the job finishes" wait_job 0 1 2 3
			if ref=$(reference 8 0 8); then
				check_eq "$case_what: final state equals an uninterrupted 8-rank run" \
					"$ref" "$(final_digest)"
			else
				not_ok "$case_what: the reference run failed"
			fi
		else
			not_ok "$case_what: the ranks did not re-form"
			show_log "$TEST_TMP/agent.h$vh.log" 30
		fi
	else
		not_ok "$case_what: the job did not start training"
	fi
	check_case "$case_what" --no-workers
	stop_rendezvous "$be"

	# ---- spare host joining ---------------------------------------------
	case_what="$what ($be): host joining"
	new_case
	rm -rf "$TEST_TMP"/ck.* "$TEST_TMP"/agent.*.log
	start_rendezvous "$be" || { not_ok "$case_what: no rendezvous"; return; }
	job=grow$be
	for i in 0 1 2; do start_host "$i" "$job" "$conf"; done
	if wait_for 90 hosts_have 2 0 1 2 && wait_for 90 past_step 60; then
		before=$(all_pids 0 1 2)
		start_host 3 "$job" "$conf"
		if wait_for 60 n_reformed 6 && wait_for 60 hosts_have 2 3; then
			s=$(resume_steps)
			after=$(all_pids 0 1 2)
			check_eq "$case_what: the three first hosts keep their trainers" "$before" "$after" ||
				show_recovery
			check "$case_what: the joining ranks took their state from a peer" \
				wait_for 30 grep -Eq 'took the state of step [0-9]+ from rank' "$TEST_TMP/agent.h3.log"
			check "$case_what: the job finishes" wait_job 0 1 2 3
			if ref=$(reference 6 "${s% }" 8); then
				check_eq "$case_what: final state equals 6 ranks to step ${s% }, then 8" \
					"$ref" "$(final_digest)"
			else
				not_ok "$case_what: the reference run failed"
			fi
		else
			not_ok "$case_what: the job did not grow in place"
			show_log "$TEST_TMP/agent.h3.log" 30
		fi
	else
		not_ok "$case_what: the job did not start training"
	fi
	check_case "$case_what" --no-workers
	stop_rendezvous "$be"
}

run_backend http
if etcd_available; then
	run_backend etcd
else
	skip "$what (etcd): $ETCD_WHY"
fi
finish
