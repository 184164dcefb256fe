#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_preempt.sh - a preemption (issue 24, docs/worker-protocol.md
# "preempt"): SIGTERM to the agents of a job of three namespace hosts, one
# worker each, with --preempt-grace. Against dlaunch-rdzv (on a fourth
# host) and against etcd (members on hosts 3-5):
#
#   every agent signalled, dlaunch-train: every rank stops after the same
#     step, the step the rendezvous picked, rank 0's newest checkpoint is
#     of that step, no rank passed it, every agent exits 0 and the job
#     ends PREEMPTED; PREEMPT_TRIALS times (default 2; bench/preempt.sh
#     runs 20);
#   one agent signalled: the same, the two others told by the rendezvous;
#   a PyTorch script with the dlaunch module (dlaunch-rdzv only): its loop
#     ends after the same step on every rank and its checkpoint is of it;
#   workers that do not speak the protocol: the SIGTERM is forwarded as
#     before, each agent exits 143;
#   a grace too short to reach the step: the agents fall back to SIGTERM
#     (the workers stop as a SIGTERM stops them) and exit 143.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch-rdzv dlaunch dlaunch-train
what="preemption on namespace hosts"
faults_require_hosts "$what"
TRIALS=${PREEMPT_TRIALS:-2}
BACKENDS=${PREEMPT_BACKENDS:-http etcd}
if ! netns_setup 6; then
	not_ok "$what: could not build the six hosts"
	finish
fi
REPO=$(cd "$FAULTS_DIR/../.." && pwd)
TRAIN=("$BIN/dlaunch-train" --device cpu --backend tcp
	--data synthetic:20000 --model 64-64-10 --epochs 1000 --log-every 200)

# agent_opts BACKEND JOB: the dlaunch options of one agent of JOB
agent_opts() {
	if [ "$1" = etcd ]; then
		echo "--rdzv-backend etcd --rdzv-endpoint $ETCD_ENDPOINTS" \
			"--rdzv-conf $CONF"
	else
		echo "--rdzv-endpoint $RDZV_HOST:$RDZV_PORT --rdzv-conf $HB_CONF"
	fi
	echo "--rdzv-id $2 --nnodes 3 --nproc-per-node 1 --max-restarts 0" \
		"--shutdown-timeout 5"
}
# start_three BACKEND JOB GRACE CMD...: agents h0-h2 of JOB on hosts 0-2
start_three() {
	local backend=$1 job=$2 grace=$3 i
	shift 3
	for i in 0 1 2; do
		# shellcheck disable=SC2046 # the options are words
		start_agent "h$i" --ns "$i" "$BIN/dlaunch" \
			$(agent_opts "$backend" "$job") --local-addr "$(netns_addr "$i")" \
			--preempt-grace "$grace" "$@"
	done
}
logs() { cat "$TEST_TMP"/agent.h[012].log 2>/dev/null; }
# trained N: rank 0 (on whichever host holds it) printed N progress lines
trained() { [ "$(logs | grep -c 'epoch .* step [0-9]')" -ge "$1" ]; }
# give_up WHAT WHY: a case whose job did not start; the checker still ends
# it (the server stays for the next case)
give_up() {
	not_ok "$1: $2"
	show_log "$TEST_TMP/agent.h0.log" 20
	check_case "$1"
}
# stopped_steps: the steps the ranks say they stopped after, one line
stopped_steps() {
	logs | sed -n 's/.*rank [0-9]*: preempted: stopped after step \([0-9]*\).*/\1/p' |
		sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' '
}
# picked_step JOB: the stop step the rendezvous (or etcd's leader) logged
# for JOB
picked_step() {
	cat "$RDZV_LOG" "$TEST_TMP"/agent.h[012].log 2>/dev/null |
		sed -n "s/.*job=$1 round=[0-9]* event=preempted .*stop_step=\([0-9]*\).*/\1/p" |
		sort -u | tr '\n' ' '
}
# status_shows BACKEND JOB N: `dlaunch status` says JOB stops after step N
status_shows() {
	local out
	if [ "$1" = etcd ]; then
		out=$(etcd_status --rdzv-id "$2")
	else
		out=$(netns_exec "$RDZV_NS" timeout 10 "$BIN/dlaunch" status \
			--rdzv-endpoint "$RDZV_HOST:$RDZV_PORT" --rdzv-id "$2")
	fi
	grep -qx "preempted: every rank stops after step $3" <<<"$out"
}
agents_rc() { echo "${AGENT_RC[h0]:-}${AGENT_RC[h1]:-}${AGENT_RC[h2]:-}"; }
wait_three() {
	local i
	for i in 0 1 2; do wait_agent "h$i" "$1" || return 1; done
}
# begin BACKEND JOB: a new case; CONF for etcd (a key prefix of its own)
begin() {
	new_case
	CONF=heartbeat_interval=0.2,heartbeat_timeout=2,last_call_timeout=0.5,lease_ttl=2,key_prefix=/p$$-$2
	FAULTS_ETCD_CONF=key_prefix=/p$$-$2
}

# one_trial BACKEND JOB WHO: dlaunch-train, SIGTERM to WHO (all, or h1)
one_trial() {
	local backend=$1 job=$2 who=$3 ck=$TEST_TMP/ck.$2 n s newest i
	local cw="$what ($backend, SIGTERM to $who): $job"
	begin "$backend" "$job"
	start_three "$backend" "$job" 60 --no-python "$WORKER" "${TRAIN[@]}" \
		--checkpoint-dir "$ck"
	if ! wait_for 120 trained 2; then
		give_up "$cw" "training did not start on three hosts"
		return
	fi
	if [ "$who" = all ]; then
		for i in 0 1 2; do kill -TERM "${AGENT_PID[h$i]}"; done
	else
		kill -TERM "${AGENT_PID[h1]}"
	fi
	check "$cw: the three agents exit" wait_three 90
	check_eq "$cw: every agent exits 0" 000 "$(agents_rc)"
	n=$(picked_step "$job")
	n=${n% }
	check "$cw: the rendezvous picked one stop step ($n)" \
		test -n "$n" -a "$(echo "$n" | wc -w)" = 1
	check_eq "$cw: the three ranks stopped after it" "3x$n " "$(stopped_steps)"
	check "$cw: no rank passed it" bash -c "! grep -q 'past the stop step' $TEST_TMP/agent.h[012].log"
	newest=$("$PY" "$FAULTS_DIR/ckpt_tool.py" newest "$ck" 2>/dev/null)
	s=$("$PY" "$FAULTS_DIR/ckpt_tool.py" digest "$newest" 2>/dev/null | sed -n 's/^step=\([0-9]*\) .*/\1/p')
	check_eq "$cw: rank 0's newest checkpoint is of that step" "$n" "$s"
	[ "$who" = all ] || check "$cw: h0 and h2 were told by the rendezvous, not signalled" \
		bash -c "! grep -q 'received SIGTERM' $TEST_TMP/agent.h0.log $TEST_TMP/agent.h2.log"
	if [ "$backend" = etcd ]; then
		check_eq "$cw: the job record says PREEMPTED" PREEMPTED \
			"$(job_field "$job" .state)"
		check "$cw: dlaunch status shows the stop step" \
			status_shows etcd "$job" "$n"
	else
		check "$cw: dlaunch status shows the stop step" \
			status_shows http "$job" "$n"
		check_eq "$cw: the job is PREEMPTED" PREEMPTED \
			"$(job_field "$job" .state)"
		check_eq "$cw: ... with its stop step" "$n" "$(job_field "$job" .preempt_step)"
	fi
	[ "$FAILED" -gt "$FAILED_BEFORE" ] && show_log "$TEST_TMP/agent.h1.log" 30
	check_case "$cw" 15
}

for backend in $BACKENDS; do
	if [ "$backend" = etcd ]; then
		if ! etcd_available; then
			skip "$what (etcd): $ETCD_WHY"
			continue
		fi
		if ! etcd_cluster_start_netns 3 4 5; then
			not_ok "$what (etcd): could not start etcd on hosts 3-5"
			continue
		fi
		FAULTS_ETCD=$ETCD_ENDPOINTS
		FAULTS_ETCD_NS=3
	elif ! start_rdzv --ns 3; then
		not_ok "$what: the rendezvous did not start"
		continue
	fi
	for ((t = 1; t <= TRIALS; t++)); do
		FAILED_BEFORE=$FAILED
		one_trial "$backend" "all$backend$t" all
	done
	FAILED_BEFORE=$FAILED
	one_trial "$backend" "one$backend" one
	if [ "$backend" = etcd ]; then
		etcd_cluster_destroy
		FAULTS_ETCD=
		FAULTS_ETCD_NS=
	fi
done
[ -n "$RDZV_PID" ] || start_rdzv --ns 3 || {
	not_ok "$what: the rendezvous did not start"
	finish
}

# -- workers that do not speak the protocol get the SIGTERM, as before
cw="$what: plain workers"
begin http plain
start_three http plain 60 --no-python "$WORKER"
if wait_for 60 round_complete 1 3; then
	for i in 0 1 2; do kill -TERM "${AGENT_PID[h$i]}"; done
	check "$cw: the three agents exit" wait_three 30
	check_eq "$cw: each with 143, as a SIGTERM ends it" 143143143 "$(agents_rc)"
	check "$cw: each forwarded the SIGTERM" bash -c \
		"[ \$(grep -l 'received SIGTERM; forwarding it to the workers' $TEST_TMP/agent.h[012].log | wc -l) = 3 ]"
	check "$cw: none asked for a stop step" bash -c "! grep -q 'asking the rendezvous' $TEST_TMP/agent.h[012].log"
	check_case "$cw"
else
	give_up "$cw" "the workers did not start"
fi

# -- the grace ends before the stop step: SIGTERM, then SIGKILL
cw="$what: grace too short"
begin http short
start_three http short 0.3 --no-python "$WORKER" "${TRAIN[@]}" \
	--checkpoint-dir "$TEST_TMP/ck.short"
if wait_for 120 trained 2; then
	for i in 0 1 2; do kill -TERM "${AGENT_PID[h$i]}"; done
	check "$cw: the three agents exit" wait_three 60
	check_eq "$cw: each with 143" 143143143 "$(agents_rc)"
	check "$cw: each says the grace ran out" bash -c \
		"[ \$(grep -l 'not done within --preempt-grace; stopping' $TEST_TMP/agent.h[012].log | wc -l) = 3 ]"
	check "$cw: the workers stopped as SIGTERM stops them" \
		bash -c "grep -q 'stopped by signal 15' $TEST_TMP/agent.h[012].log && ! grep -q 'preempted: stopped' $TEST_TMP/agent.h[012].log"
	check_case "$cw" 15
else
	give_up "$cw" "training did not start"
fi

# -- a PyTorch script with the dlaunch module, PREEMPT_TORCH_TRIALS times
# (default 1; bench/preempt.sh runs 20)
torch_trial() {
	local job=$1 n
	local cw="$what: PyTorch with the dlaunch module: $job"
	begin http "$job"
	start_three http "$job" 60 "$REPO/contrib/pytorch/elastic_inplace.py" \
		--epochs 1000 --samples 960 --global-batch 24 --step-ms 20 \
		--log-every 5 --checkpoint "$TEST_TMP/$job.pt"
	if ! wait_for 120 bash -c "cat $TEST_TMP/agent.h0.log | grep -q 'inplace step=10 '"; then
		give_up "$cw" "training did not start"
		return
	fi
	for i in 0 1 2; do kill -TERM "${AGENT_PID[h$i]}"; done
	check "$cw: the three agents exit" wait_three 90
	check_eq "$cw: every agent exits 0" 000 "$(agents_rc)"
	n=$(picked_step "$job")
	n=${n% }
	check_eq "$cw: the loop ended after the stop step ($n) on every rank" \
		"3x$n " "$(logs | sed -n 's/.*inplace preempted rank=[0-9] step=\([0-9]*\).*/\1/p' | sort | uniq -c | awk '{print $1 "x" $2}' | tr '\n' ' ')"
	check "$cw: no rank passed it" bash -c "! grep -q 'past the stop step' $TEST_TMP/agent.h[012].log"
	check_eq "$cw: the ranks end with one state" 1 \
		"$(logs | sed -n 's/.*inplace done .*digest=\([0-9a-f]*\).*/\1/p' | sort -u | wc -l)"
	check_eq "$cw: the script's checkpoint is of that step" "$n" \
		"$("$PY" -c 'import sys, torch; print(torch.load(sys.argv[1])["step"])' "$TEST_TMP/$job.pt" 2>/dev/null)"
	check_eq "$cw: the job is PREEMPTED" PREEMPTED "$(job_field "$job" .state)"
	check_case "$cw" 15 --no-workers
}
if "$PY" -c 'import torch.distributed as d; assert d.is_gloo_available()' >/dev/null 2>&1; then
	export PYTHON_EXEC=$PY PYTHONPATH=$REPO/python
	for ((t = 1; t <= ${PREEMPT_TORCH_TRIALS:-1}; t++)); do
		torch_trial "torch$t"
	done
else
	skip "$what: PyTorch with the dlaunch module: python3-torch with gloo is not importable by $PY"
fi
stop_rdzv
finish
