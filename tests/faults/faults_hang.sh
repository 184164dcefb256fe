#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_hang.sh - hang diagnosis (docs/hangs.md, issue 21): a rank that
# stops is named in every node's output before the kill.
#
#   one node, Python workers, rank 1 SIGSTOPped, --progress-timeout: the
#     verdict names rank 1 (stopped), hang-report.json/.txt are in the log
#     directory, the root-cause report carries the verdict, rank 0's Python
#     stack shows the line it is on (dlaunch's sitecustomize, SIGUSR2) and
#     its native stack is there (eu-stack or gdb);
#   a worker that cannot be dumped (it ignores SIGUSR2): its note says so
#     and the report still comes within the collection's deadline;
#   two hosts (network namespaces) through etcd, two Python workers each,
#     rank k SIGSTOPped for k in a few positions: every node's output
#     names rank k and its node within 10 s of the timeout; `dlaunch
#     status` over etcd shows the verdict, after the job ended too;
#   `dlaunch dump` on a healthy job through etcd: every rank's Python
#     stack comes back, the job goes on (no restart) and finishes;
#     `dlaunch status` shows that dump's verdict (no hang).
# The 20-of-20 trials and 16 ranks on 4 hosts are bench/bench.py hang's.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch
PROGS=$FAULTS_DIR/../e2e/progs

# hang_worker.py: prints a line every second (progress), sleeping in
# tick() (where a dump finds it but for the microseconds of a print); the
# rank HANG_IGNORE_USR2 names ignores SIGUSR2
cat >"$TEST_TMP/hang_worker.py" <<'EOF'
import os, signal, sys, time
if os.environ.get("HANG_IGNORE_USR2") == os.environ.get("RANK"):
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
open(os.path.join(os.environ["FAULT_DIR"], "pid.%s" % os.environ["RANK"]), "w").write(str(os.getpid()))
def tick():
    time.sleep(1)  # HANG-LINE
n = 0
while not os.path.exists(os.path.join(os.environ["FAULT_DIR"], "done")):
    tick()
    n += 1
    print("step", n, flush=True)
EOF

# the line tick() sleeps on, as faulthandler prints it
TICK_AT="line $(grep -n HANG-LINE "$TEST_TMP/hang_worker.py" | cut -d: -f1) in tick"
# rank_pid R: rank R's pid, once it is known
rank_pid() { cat "$TEST_TMP/pid.$1" 2>/dev/null; }
report_json() { echo "$TEST_TMP/$1/hang-report.json"; }

# ---- one node: rank 1 stopped ---------------------------------------------------
what="one node, rank 1 stopped"
rm -f "$TEST_TMP"/pid.* "$TEST_TMP/done"
new_case
start_agent solo "$BIN/dlaunch" --standalone --nproc-per-node=2 \
	--max-restarts=0 --progress-timeout=6 --log-dir "$TEST_TMP/solo" \
	"$TEST_TMP/hang_worker.py"
log=$TEST_TMP/agent.solo.log
if wait_for 60 test -s "$TEST_TMP/pid.1" && wait_for 30 log_has "$log" "step 3"; then
	kill -STOP "$(rank_pid 1)"
	t0=$SECONDS
	if wait_for 30 log_has "$log" "dlaunch: hang diagnosis"; then
		# how soon is a benchmark's question (make bench-hang); here it
		# only has to come
		echo "# $what: the diagnosis came $((SECONDS - t0)) s after the stop"
		check "$what: the verdict names rank 1" log_has "$log" "stuck +: 1$"
		check "$what: the reason says it is stopped" log_has "$log" "reason .*rank 1.*stopped"
		j=$(report_json solo)
		check "$what: hang-report.json in the log directory" test -s "$j"
		check "$what: hang-report.txt beside it" test -s "$TEST_TMP/solo/hang-report.txt"
		check_eq "$what: its analysis names rank 1" "[1]" "$(jq -c .analysis.stuck "$j")"
		check_eq "$what: rank 1's state is stopped (T)" "stopped T" \
			"$(jq -r '.reports[0].workers[] | select(.rank == 1) | "\(.state) \(.proc_state)"' "$j")"
		check "$what: rank 0's Python stack shows the line it sleeps on" \
			bash -c "jq -r '.reports[0].workers[] | select(.rank == 0) | .python' '$j' | grep -q '$TICK_AT'"
		check "$what: rank 0 has a native stack" \
			bash -c "jq -r '.reports[0].workers[] | select(.rank == 0) | .native' '$j' | grep -q 'TID'"
		check "$what: rank 1's Python dump is noted as not answered (stopped)" \
			bash -c "jq -r '.reports[0].workers[] | select(.rank == 1) | .notes[]' '$j' | grep -q 'python: no answer.*stopped'"
		check "$what: the text version folds nothing away from rank 1" \
			grep -q "rank 1" "$TEST_TMP/solo/hang-report.txt"
	else
		not_ok "$what: no hang diagnosis within 30 s of the stop"
		show_log "$log"
	fi
	if wait_agent solo 60; then
		check_eq "$what: dlaunch exits 1 (no restarts left)" 1 "${AGENT_RC[solo]}"
		check "$what: the root-cause report carries the verdict" \
			log_has "$log" "hang diagnosis: .*rank 1"
	else
		not_ok "$what: dlaunch still running 60 s after the stop"
	fi
else
	not_ok "$what: the workers did not start"
	show_log "$log"
fi
check_case "$what" --no-workers

# ---- a worker that ignores SIGUSR2 ---------------------------------------------
what="a worker that ignores SIGUSR2"
rm -f "$TEST_TMP"/pid.* "$TEST_TMP/done"
new_case
start_agent deaf env HANG_IGNORE_USR2=0 "$BIN/dlaunch" --standalone \
	--nproc-per-node=2 --max-restarts=0 --progress-timeout=6 \
	--log-dir "$TEST_TMP/deaf" "$TEST_TMP/hang_worker.py"
log=$TEST_TMP/agent.deaf.log
if wait_for 60 test -s "$TEST_TMP/pid.1" && wait_for 30 log_has "$log" "step 3"; then
	kill -STOP "$(rank_pid 1)"
	if wait_for 30 log_has "$log" "dlaunch: hang diagnosis"; then
		j=$(report_json deaf)
		check "$what: its note says the Python dump did not come" \
			bash -c "jq -r '.reports[0].workers[] | select(.rank == 0) | .notes[]' '$j' | grep -q 'python: no answer in 2000 ms (it ignores or blocks SIGUSR2'"
		check "$what: its native stack came all the same" \
			bash -c "jq -r '.reports[0].workers[] | select(.rank == 0) | .native' '$j' | grep -q 'TID'"
		check "$what: the verdict still names rank 1" log_has "$log" "stuck +: 1$"
		check "$what: the worker itself was not killed by the signal" \
			bash -c "! grep -q 'rank 0 .* killed by SIGUSR2' '$log'"
	else
		not_ok "$what: no hang diagnosis within 30 s"
		show_log "$log"
	fi
	wait_agent deaf 60 || not_ok "$what: dlaunch still running"
else
	not_ok "$what: the workers did not start"
	show_log "$log"
fi
check_case "$what" --no-workers

# ---- two hosts through etcd ----------------------------------------------------
faults_require_hosts "hang diagnosis on two hosts"
if ! etcd_available; then
	skip "hang diagnosis through etcd: $ETCD_WHY"
	finish
fi
if ! netns_setup 3 || ! etcd_cluster_start_netns 2; then
	not_ok "hang diagnosis through etcd: hosts or etcd did not start"
	finish
fi
EP=$(netns_addr 2):2379
ETCD_ARGS=(--nnodes=2 --nproc-per-node=2 --rdzv-backend=etcd
	--rdzv-endpoint="$EP" --rdzv-conf=heartbeat_timeout=3,last_call_timeout=0.5)

# etcd_status JOB: dlaunch status of JOB over etcd into status.JOB
etcd_status() {
	netns_exec 0 "$BIN/dlaunch" status --rdzv-backend etcd \
		--rdzv-endpoint "$EP" --rdzv-id "$1" >"$TEST_TMP/status.$1" 2>&1
}

# status_shows JOB REGEX: dlaunch status of JOB over etcd has a line
# matching REGEX
status_shows() { etcd_status "$1" && grep -Eq "$2" "$TEST_TMP/status.$1"; }

# etcd_case K: job with rank K stopped; every node must name it
etcd_case() {
	local k=$1 job=hang-etcd-$1 n h
	what="two hosts through etcd, rank $k stopped"
	rm -f "$TEST_TMP"/pid.* "$TEST_TMP/done"
	new_case
	for h in 0 1; do
		start_agent "e$k$h" --ns "$h" "$BIN/dlaunch" "${ETCD_ARGS[@]}" \
			--rdzv-id="$job" --max-restarts=0 --progress-timeout=8 \
			--log-dir "$TEST_TMP/e$k$h" "$TEST_TMP/hang_worker.py"
	done
	if ! wait_for 90 test -s "$TEST_TMP/pid.3" ||
		! wait_for 30 log_has "$TEST_TMP/agent.e${k}0.log" "step 3"; then
		not_ok "$what: the workers did not start"
		show_log "$TEST_TMP/agent.e${k}0.log"
		touch "$TEST_TMP/done"
		check_case "$what" --no-workers
		return
	fi
	kill -STOP "$(rank_pid "$k")"
	t0=$SECONDS
	for h in 0 1; do
		n=e$k$h
		if wait_for 30 log_has "$TEST_TMP/agent.$n.log" "stuck +: $k$"; then
			ok "$what: node $n names rank $k ($((SECONDS - t0)) s after the stop)"
			check_eq "$what: node $n analysed both nodes' reports" 2 \
				"$(jq '.reports | length' "$(report_json "$n")")"
		else
			not_ok "$what: node $n did not name rank $k within 30 s"
			show_log "$TEST_TMP/agent.$n.log"
		fi
	done
	for h in 0 1; do
		wait_agent "e$k$h" 60 || not_ok "$what: agent e$k$h still running"
	done
	# the nodes and their leases are gone: the kept summary remains
	etcd_status "$job"
	check "$what: dlaunch status over etcd shows the diagnosis after the job ended" \
		grep -q "^last hang diagnosis: trigger .* (progress-timeout by " "$TEST_TMP/status.$job"
	check "$what: dlaunch status over etcd shows the verdict naming rank $k" \
		grep -q "verdict hang: rank $k (node " "$TEST_TMP/status.$job"
	check_case "$what" --no-workers
}
# a rank on each host, first and last positions
for k in 1 2; do
	etcd_case "$k"
done

# ---- dlaunch status over etcd while a newer trigger is open ----------------------
# A trigger put after the kept diagnosis, with one of the two nodes'
# reports in: status shows that trigger and the analysis of what is in
# (not the kept verdict); once it is gone, the kept one again.
what="dlaunch status over etcd with a trigger open"
job=hang-etcd-1
pre=/dlaunch/$job/hang
rep=$(jq -c '.reports[0] | .trigger.id = "live-1" | del(.workers[].native, .workers[].python)' \
	"$TEST_TMP/e10/hang-report.json" 2>/dev/null)
node=$(jq -r .node <<<"$rep")
if [ -n "$rep" ] && etcd_put "$pre/report/$node" "$rep" &&
	etcd_put "$pre/trigger" "{\"id\":\"live-1\",\"kind\":\"dump\",\"by\":\"cli\",\"time_ms\":$(date +%s%3N)}"; then
	etcd_status "$job"
	check "$what: it shows the open trigger" \
		grep -q "^last hang diagnosis: trigger live-1 (dump by cli)" "$TEST_TMP/status.$job"
	check "$what: with the analysis of the report in so far" \
		grep -Eq "^  verdict [a-z]+: " "$TEST_TMP/status.$job"
	etcd_del "$pre/trigger"
	etcd_status "$job"
	check "$what: once it is gone, the kept diagnosis again" \
		grep -q "(progress-timeout by " "$TEST_TMP/status.$job"
else
	not_ok "$what: cannot put the trigger and a report into etcd"
fi

# ---- dlaunch dump on a healthy job -----------------------------------------------
what="dlaunch dump of a healthy job through etcd"
rm -f "$TEST_TMP"/pid.* "$TEST_TMP/done"
new_case
for h in 0 1; do
	start_agent "d$h" --ns "$h" "$BIN/dlaunch" "${ETCD_ARGS[@]}" \
		--rdzv-id=hang-dump --max-restarts=0 --log-dir "$TEST_TMP/d$h" \
		"$TEST_TMP/hang_worker.py"
done
if wait_for 90 test -s "$TEST_TMP/pid.3" &&
	wait_for 30 log_has "$TEST_TMP/agent.d0.log" "step 3"; then
	netns_exec 0 "$BIN/dlaunch" dump --rdzv-backend etcd \
		--rdzv-endpoint "$EP" --rdzv-id hang-dump --json --timeout 20 \
		>"$TEST_TMP/dump.json" 2>"$TEST_TMP/dump.err"
	check_eq "$what: exit 0 (every node reported)" 0 "$?"
	check_eq "$what: four ranks' reports" "0 1 2 3" \
		"$(jq -r '[.reports[].workers[].rank] | sort | map(tostring) | join(" ")' "$TEST_TMP/dump.json")"
	check_eq "$what: every rank's Python stack shows tick()" 4 \
		"$(jq --arg at "$TICK_AT" '[.reports[].workers[] | select(.python // "" | test($at))] | length' "$TEST_TMP/dump.json")"
	check "$what: the verdict is not a hang" \
		bash -c "jq -r .analysis.verdict '$TEST_TMP/dump.json' | grep -qv hang"
	# rank 0 is on either node (node ranks follow the order of the joins)
	s0=$(cat "$TEST_TMP"/agent.d[01].log | grep -c "^\[rank0\]: step")
	check "$what: rank 0 goes on stepping after the dump" \
		wait_for 30 bash -c "[ \$(cat '$TEST_TMP'/agent.d[01].log | grep -c '^\[rank0\]: step') -gt $((s0 + 3)) ]"
	id=$(jq -r .trigger.id "$TEST_TMP/dump.json")
	# every node keeps the verdict once it has analysed: poll for it
	check "$what: dlaunch status over etcd shows this dump's diagnosis" \
		wait_for 20 status_shows hang-dump "^last hang diagnosis: trigger $id \(dump by cli\)"
	check "$what: dlaunch status says the dump found no hang" \
		grep -Eq "^  verdict (none|straggler):" "$TEST_TMP/status.hang-dump"
	touch "$TEST_TMP/done"
	for h in 0 1; do
		if wait_agent "d$h" 60; then
			check_eq "$what: node d$h's job succeeds" 0 "${AGENT_RC[d$h]}"
		else
			not_ok "$what: agent d$h still running"
		fi
	done
	check "$what: no restart" bash -c "! grep -q 'round_entered recovery=restarted' '$TEST_TMP'/agent.d*.log"
else
	not_ok "$what: the workers did not start"
	show_log "$TEST_TMP/agent.d0.log"
fi
check_case "$what" --no-workers
finish
