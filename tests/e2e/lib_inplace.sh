# SPDX-License-Identifier: Apache-2.0
# lib_inplace.sh - the cases of the in-place re-form (issue 20,
# docs/worker-protocol.md), run by agent_inplace.sh against dlaunch-rdzv
# and by agent_inplace_etcd.sh against etcd (sourced after lib.sh,
# lib_agent.sh and, for etcd, lib_etcd.sh with a cluster up). Set before:
# INPLACE_BACKEND (http or etcd), CONF, FALLBACK_MODES and BAD_MODES (the
# worker modes of progs/control_worker.py to try).
W=$PROGS/control_worker.py

if [ "$INPLACE_BACKEND" = etcd ]; then
	RDZV_OPTS=(--rdzv-backend etcd --rdzv-endpoint "$ETCD_ENDPOINTS")
	CONF=$CONF,lease_ttl=2,key_prefix=/t$$
	STATUS_OPTS=("${RDZV_OPTS[@]}" --rdzv-conf "key_prefix=/t$$")
	RDZV_PID=
else
	spawn_bg "$TEST_TMP/rdzv.log" "$BIN/dlaunch-rdzv" --listen 127.0.0.1:0
	RDZV_PID=$LAST_PID
	wait_for 10 grep -q 'listening on' "$TEST_TMP/rdzv.log"
	EP=$(sed -n 's/.*listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$TEST_TMP/rdzv.log" | head -n 1)
	check "rendezvous server listening" test -n "$EP"
	RDZV_OPTS=(--rdzv-endpoint "$EP")
	STATUS_OPTS=("${RDZV_OPTS[@]}")
fi

# agent NAME JOB NNODES [ENV=VALUE...]: one agent of 2 workers; LAST_PID
agent() {
	local name=$1 job=$2 nnodes=$3
	shift 3
	spawn_bg "$TEST_TMP/$job.$name.log" env DLAUNCH_NODE_ID="$name" "$@" \
		"$DL" --nnodes "$nnodes" --nproc-per-node 2 \
		"${RDZV_OPTS[@]}" --rdzv-id "$job" --rdzv-conf "$CONF" \
		--shutdown-timeout 2 --max-restarts 3 --reform-timeout 2 "$W"
}
all_exited() { local p; for p in "$@"; do alive "$p" && return 1; done; return 0; }
rc_of() { wait "$1" 2>/dev/null; echo $?; }
# count PATTERN GLOB: lines matching PATTERN in the files of GLOB (a
# pattern under $CW_DIR, expanded at each call: files come and go)
count() {
	# shellcheck disable=SC2086
	cat $CW_DIR/$2 2>/dev/null | grep -c -- "$1"
}
at_least() { [ "$(count "$2" "$3")" -ge "$1" ]; }
# procs NODE: the worker processes a node has had, one per log file
procs() { ls "$CW_DIR" | grep -c "^$1\."; }
procs_are() { [ "$(procs "$1")" = "$2" ]; }
# all_welcomed: n1's worker 0 and both of n2's got welcome
all_welcomed() { at_least 1 '^welcome' "n1.0.*.log" && at_least 2 '^welcome' "n2.*.log"; }
# said N REGEX: n1's agent has logged REGEX N times
said() { [ "$(grep -Ec -- "$2" "$TEST_TMP/$JOB.n1.log")" = "$1" ]; }
pid_of() { awk 'NR == 1 {print $2}' "$1"; }
new_job() { export CW_DIR=$TEST_TMP/$1; mkdir -p "$CW_DIR"; JOB=$1; }
# entered_as WANT: `dlaunch status` on the job prints WANT, its "entered:"
# lines (node and how, by node), one line
entered_as() {
	"$DL" status "${STATUS_OPTS[@]}" --rdzv-id "$JOB" >"$TEST_TMP/status.out" 2>&1 &&
		[ "$(awk '/^entered: / {print $2, $3}' "$TEST_TMP/status.out" | sort | tr '\n' '|')" = "$1" ]
}
# finish_job AGENT_PID...: stop the workers; every agent exits 0
finish_job() {
	touch "$CW_DIR/stop"
	check "$JOB: the agents exit" wait_for 30 all_exited "$@"
	local rcs="" want="" p
	for p in "$@"; do rcs="$rcs$(rc_of "$p")"; want="${want}0"; done
	check_eq "$JOB: the job succeeds on every node" "$want" "$rcs"
}

# -- kill -9 of every process of one node
new_job nodeloss
agent n1 $JOB 2:3; p1=$LAST_PID
agent n2 $JOB 2:3; p2=$LAST_PID
agent n3 $JOB 2:3; p3=$LAST_PID
check "$JOB: 6 workers said hello and were welcomed" \
	wait_for 30 at_least 6 '^welcome' "*.log"
kill_tree "$p3"
for f in "$CW_DIR"/n3.*.log; do kill -KILL "$(pid_of "$f")" 2>/dev/null; done
check "$JOB: the 4 survivors get membership" \
	wait_for 30 at_least 4 '^membership' "n[12].*.log"
check_eq "$JOB: no survivor is a new process" "2 2" "$(procs n1) $(procs n2)"
for f in "$CW_DIR"/n[12].*.log; do
	check "$JOB: $(basename "$f") alive with its pid" alive "$(pid_of "$f")"
done
check_eq "$JOB: abort of round 1 then membership of round 2, each survivor" \
	"4" "$(for f in "$CW_DIR"/n[12].*.log; do grep -E '^(abort|membership)' "$f" | awk '{print $1, $2}' | tr '\n' ' '; echo; done | grep -c '^abort 1 membership 2 $')"
check_eq "$JOB: new ranks 0-3 once each, world size 4, 2 nodes" \
	"0 4 2|1 4 2|2 4 2|3 4 2|" \
	"$(grep -h '^membership' "$CW_DIR"/n[12].*.log | awk '{print $3, $4, $7}' | sort -n | tr '\n' '|')"
check_eq "$JOB: node ranks 0 and 1, one per node" "2 2" \
	"$(for f in "$CW_DIR"/n[12].*.log; do echo "$(basename "$f" | cut -d. -f1) $(grep '^membership' "$f" | awk '{print $6}')"; done | sort -u | awk '{n[$1]; r[$2]} END {print length(n), length(r)}')"
check_eq "$JOB: one master and one store prefix for the round" 1 \
	"$(grep -h '^membership' "$CW_DIR"/n[12].*.log | awk '{print $9, $10}' | sort -u | wc -l)"
check "$JOB: the agents say the round re-formed in place" \
	file_has "$TEST_TMP/$JOB.n1.log" "round=2 event=round_entered recovery=in_place"
if [ "$INPLACE_BACKEND" = http ]; then
	# the rendezvous hears it with the next heartbeat
	recovered() {
		curl -sf "http://$EP/v1/jobs/$JOB" >"$TEST_TMP/job.json" &&
			[ "$(jq -r '[.members[].recovery.how] | join(" ")' "$TEST_TMP/job.json")" = "in_place in_place" ]
	}
	check "$JOB: the job's record says both nodes entered round 2 in place" \
		wait_for 10 recovered
	check_eq "$JOB: ... and its timeline counts them" 2 \
		"$(jq '.rounds[-1].entered.in_place' "$TEST_TMP/job.json")"
	check "$JOB: dlaunch status shows it" \
		bash -c "'$DL' status --rdzv-endpoint '$EP' --rdzv-id $JOB | grep -q '^entered: n1 in_place'"
	bad_recovery() {
		[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST \
			-d "{\"node_id\":\"n1\",\"incarnation\":\"x\",\"round\":2,$1}" \
			"http://$EP/v1/jobs/$JOB/heartbeat")" = 400 ]
	}
	check "$JOB: a heartbeat with another recovery is refused (400)" \
		bad_recovery '"recovery":"kept"'
	check "$JOB: ... or with a control character in its reason" \
		bad_recovery '"recovery":"in_place","recovery_why":"a\u0001b"'
	check "$JOB: the metrics count it" \
		bash -c "curl -sf http://$EP/metrics | grep -Eq '^dlaunch_rdzv_round_entries_total\{how=\"in_place\"\} ([2-9]|[0-9]{2,})$'"
fi
# over etcd each node writes its key once more, the leader keeps it in
# the job record, and status reads it there
check "$JOB: dlaunch status says both nodes entered in place" \
	wait_for 10 entered_as "n1 in_place|n2 in_place|"
check "$JOB: ... and why" grep -q '^entered: n2 in_place (every worker of this node re-formed)$' "$TEST_TMP/status.out"
finish_job "$p1" "$p2"

# -- one worker killed: only it is a new process
new_job crash
agent n1 $JOB 2; p1=$LAST_PID
agent n2 $JOB 2; p2=$LAST_PID
check "$JOB: 4 workers welcomed" wait_for 30 at_least 4 '^welcome' "*.log"
victim=$(ls "$CW_DIR"/n1.1.*.log)
kill -KILL "$(pid_of "$victim")"
check "$JOB: the 3 others re-form" \
	wait_for 30 at_least 3 '^membership' "*.log"
check "$JOB: rank 1 starts again as a new process" \
	wait_for 30 procs_are n1.1 2
check_eq "$JOB: the others are the same processes" "1 1 1" \
	"$(procs n1.0) $(procs n2.0) $(procs n2.1)"
new=$(ls "$CW_DIR"/n1.1.*.log | grep -v "^$victim$")
check_eq "$JOB: the new worker has the old one's rank, in round 2 of world size 4" \
	"$(awk 'NR == 1 {print $3, 4, 2}' "$victim")" \
	"$(awk 'NR == 1 {print $3, $4, $5}' "$new")"
check "$JOB: the new rank 1 speaks too" wait_for 10 file_has "$new" '^welcome'
check_eq "$JOB: membership of round 2, restart count 1, for the others" \
	"2 1|2 1|2 1|" \
	"$(grep -h '^membership' "$CW_DIR"/*.log | awk '{print $2, $8}' | tr '\n' '|')"
finish_job "$p1" "$p2"

# -- a spare joins: the round grows, the others stay
new_job spare
agent n1 $JOB 2:3; p1=$LAST_PID
agent n2 $JOB 2:3; p2=$LAST_PID
check "$JOB: 4 workers welcomed" wait_for 30 at_least 4 '^welcome' "*.log"
agent n3 $JOB 2:3; p3=$LAST_PID
check "$JOB: the 4 first workers re-form" \
	wait_for 30 at_least 4 '^membership' "n[12].*.log"
check "$JOB: the spare's workers start" wait_for 30 procs_are n3 2
check_eq "$JOB: no worker of n1, n2 is a new process" "2 2" "$(procs n1) $(procs n2)"
check_eq "$JOB: world size 6 in the new round" "6|6|6|6|" \
	"$(grep -h '^membership' "$CW_DIR"/n[12].*.log | awk '{print $4}' | tr '\n' '|')"
check_eq "$JOB: the spare's workers are ranks 4 and 5 of 6" "4 6|5 6|" \
	"$(awk 'FNR == 1 {print $3, $4}' "$CW_DIR"/n3.*.log | sort -n | tr '\n' '|')"
finish_job "$p1" "$p2" "$p3"

# -- fallbacks: n2's workers misbehave during the re-form that n1's
#    killed worker causes; n2 restarts its workers (within the deadline
#    of 2 s), n1's survivor stays, the job finishes
for mode in $FALLBACK_MODES; do
	new_job "fallback_$mode"
	agent n1 $JOB 2; p1=$LAST_PID
	agent n2 $JOB 2 CW_MODE=$mode; p2=$LAST_PID
	# a hanging worker reads no welcome: its hello is what counts
	check "$JOB: 4 workers said hello" \
		wait_for 30 at_least 4 '^hello' "*.log"
	check "$JOB: n1's workers welcomed" \
		wait_for 30 at_least 2 '^welcome' "n1.*.log"
	t0=${EPOCHREALTIME//[.,]/}
	kill -KILL "$(pid_of "$(ls "$CW_DIR"/n1.1.*.log)")"
	check "$JOB: n2 starts its workers again" \
		wait_for 30 procs_are n2 4
	t1=${EPOCHREALTIME//[.,]/}
	# the report, the deadline (2 s), the stop (grace 2 s), the round
	check "$JOB: within the deadline ($(((t1 - t0) / 1000)) ms)" \
		test $((t1 - t0)) -lt 8000000
	check "$JOB: n1's other worker re-forms in place" \
		wait_for 30 at_least 1 '^membership' "n1.0.*.log"
	check_eq "$JOB: ... and is the same process" 1 "$(procs n1.0)"
	check "$JOB: n2's agent says why" \
		file_has "$TEST_TMP/$JOB.n2.log" "in-place re-form of round [0-9]+ failed"
	check "$JOB: ... and that its workers restarted" \
		file_has "$TEST_TMP/$JOB.n2.log" 'event=round_entered recovery=restarted why="the in-place re-form failed"'
	if [ "$INPLACE_BACKEND" = http ]; then
		restarted() {
			curl -sf "http://$EP/v1/jobs/$JOB" >"$TEST_TMP/job.json" &&
				[ "$(jq -r '.members[] | select(.node_id == "n2") | .recovery.how' "$TEST_TMP/job.json")" = restarted ]
		}
		check "$JOB: the job's record says n2 restarted" wait_for 10 restarted
	fi
	check "$JOB: dlaunch status says n1 in place, n2 restarted" \
		wait_for 10 entered_as "n1 in_place|n2 restarted|"
	check "$JOB: ... and why n2 restarted" \
		grep -q '^entered: n2 restarted (the in-place re-form failed' "$TEST_TMP/status.out"
	finish_job "$p1" "$p2"
done

# -- bad input on n1's worker 1: said once, that worker plain; the agent
#    keeps serving the other (welcomed); at the next round end n1 restarts
#    both its workers, as a node with a plain worker does
for mode in $BAD_MODES; do
	new_job "bad_$mode"
	agent n1 $JOB 2 CW_MODE_1=$mode; p1=$LAST_PID
	agent n2 $JOB 2; p2=$LAST_PID
	check "$JOB: the 4 workers said hello" \
		wait_for 30 at_least 4 '^hello' "*.log"
	check "$JOB: the 3 others welcomed" \
		wait_for 30 all_welcomed
	case $mode in
	version2) what='speaks control protocol version 2' ;;
	*) what='treating it as a plain worker from now on' ;;
	esac
	# a close is also how a worker exits: said when it matters, at the
	# re-form; the others at once
	[ $mode = close ] ||
		check "$JOB: said" wait_for 10 said 1 "rank [0-9]+ .*$what"
	[ $mode = version2 ] && check_eq "$JOB: worker 1 got no welcome" 0 "$(count "^welcome" "n1.1.*.log")"
	kill -KILL "$(pid_of "$(ls "$CW_DIR"/n2.0.*.log)")"
	check "$JOB: n1 restarts both its workers" \
		wait_for 30 procs_are n1 4
	check "$JOB: n2's other worker stays" \
		wait_for 30 at_least 1 '^membership' "n2.1.*.log"
	[ $mode = close ] &&
		check "$JOB: said" wait_for 10 said 1 "rank [0-9]+ .*(closed by the worker|cannot write).*$what"
	first=$(pid_of "$(ls -tr "$CW_DIR"/n1.1.*.log | head -n 1)")
	check_eq "$JOB: said once for that process" 1 \
		"$(grep -Ec "rank [0-9]+ \(pid $first\).*$what" "$TEST_TMP/$JOB.n1.log")"
	finish_job "$p1" "$p2"
done

if [ "$INPLACE_BACKEND" = etcd ]; then
	etcd_cluster_destroy
else
	kill -TERM "$RDZV_PID"
fi
check "no process of the test is left" wait_for 10 no_marked_left
