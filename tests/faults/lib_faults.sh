# SPDX-License-Identifier: Apache-2.0
# lib_faults.sh - helpers shared by the reliability suite (tests/faults/*.sh).
#
# Sources tests/e2e/lib.sh (ok/not_ok/skip/check/wait_for/spawn_bg/finish)
# and adds: field (a member of a JSON file), a unique mark put in the
# environment of every process a case starts (DLAUNCH_TEST_MARK, found
# again through /proc/*/environ by the checker), starting dlaunch-rdzv on
# port 0 and reading the port back, starting agents, reading the server's
# job detail, and the test worker.
#
# The case script itself does not carry the mark (it is never exported
# here), so the checker finds exactly the processes of the job: the server,
# the agents, their workers and whatever those forked.

FAULTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../e2e/lib.sh
source "$FAULTS_DIR/../e2e/lib.sh"
# shellcheck source=lib_check.sh
source "$FAULTS_DIR/lib_check.sh"
# shellcheck source=lib_netns.sh
source "$FAULTS_DIR/lib_netns.sh"

MARK=dlf-$$-$RANDOM$RANDOM
WORKER=$FAULTS_DIR/worker.sh
PY=/usr/bin/python3
# field FILE KEY...: a member of the JSON object in FILE (list indices as
# numbers), printed as JSON when it is a list or an object
field() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); v=d
for k in sys.argv[2:]: v=v[int(k)] if isinstance(v, list) else v[k]
print(json.dumps(v) if isinstance(v, (list, dict)) else v)' "$@"; }

# the rendezvous settings of every case: fast heartbeats so an eviction
# takes about a second, not the 5 s default
HB_CONF=${HB_CONF:-heartbeat_interval=0.2,heartbeat_timeout=1,last_call_timeout=0.5}

RDZV_PID=
RDZV_PORT=
RDZV_HOST=127.0.0.1
RDZV_URL=
RDZV_LOG=
RDZV_NS=
RDZV_STATE_DIR=
RDZV_CACERT=
RDZV_TOKEN=
RDZV_START_ARGS=()
declare -A AGENT_PID=()

faults_cleanup() {
	kill_marked
	netns_teardown
	# a failed case keeps its logs and worker records for diagnosis
	if [ "$FAILED" -gt 0 ] && [ -n "${DLAUNCH_BUILD:-}" ]; then
		local keep
		keep=$DLAUNCH_BUILD/test-logs/$(basename "$0" .sh).kept
		rm -rf "$keep"
		mkdir -p "$keep"
		cp "$TEST_TMP"/*.log "$keep"/ 2>/dev/null
		echo "# logs of the failed case kept in $keep"
	fi
	cleanup
}
trap faults_cleanup EXIT
trap 'exit 130' INT TERM

# finish: the sanitizer check over every log, then the runner's status
finish() {
	check_sanitizer_logs
	[ "$FAILED" -eq 0 ]
	exit $?
}

# faults_require BIN...: the binaries the case needs; a missing one fails
# the whole script (need_bin), it is never a skip
faults_require() { need_bin "$@"; }

# faults_require_hosts WHAT: the case WHAT needs network-namespace hosts
# with UTS namespaces of their own (unshare); where the machine cannot
# make them, one skip line and the script ends
faults_require_hosts() {
	if ! netns_available; then
		skip "$1: $NETNS_WHY"
		finish
	fi
	if ! command -v unshare >/dev/null 2>&1; then
		skip "$1: unshare (util-linux) is not installed"
		finish
	fi
}

# marked CMD...: run CMD with the case's mark and the worker's directory
marked() { env DLAUNCH_TEST_MARK="$MARK" FAULT_DIR="$TEST_TMP" "$@"; }

# listen_port PID [HOST_INDEX]: the TCP port PID listens on (via ss)
listen_port() {
	local pid=$1 out
	if [ -n "${2:-}" ]; then
		out=$(netns_exec "$2" ss -ltnpH 2>/dev/null)
	else
		out=$(ss -ltnpH 2>/dev/null)
	fi
	echo "$out" | grep "pid=$pid," | awk '{print $4}' | head -n 1 |
		sed 's/.*://'
}

# start_rdzv [--ns I] [--port P] [ARGS...]: start dlaunch-rdzv (on host I
# when given) listening on port P (default 0: any), wait until it accepts
# and set RDZV_PID, RDZV_PORT, RDZV_URL, RDZV_LOG. ARGS are kept in
# RDZV_START_ARGS (check_journal starts the next server with them); a
# --state-dir in them is RDZV_STATE_DIR, a --tls-cert makes RDZV_URL https
# with that certificate as the CA.
start_rdzv() {
	local ns='' port=0 host=127.0.0.1 scheme=http a prev=''
	while [ $# -gt 0 ]; do
		case "$1" in
		--ns) ns=$2; shift 2 ;;
		--port) port=$2; shift 2 ;;
		*) break ;;
		esac
	done
	RDZV_START_ARGS=("$@")
	RDZV_STATE_DIR=
	RDZV_CACERT=
	for a in "$@"; do
		case "$prev" in
		--state-dir) RDZV_STATE_DIR=$a ;;
		--tls-cert) RDZV_CACERT=$a scheme=https ;;
		esac
		prev=$a
	done
	[ -n "$ns" ] && host=$(netns_addr "$ns")
	RDZV_LOG=$TEST_TMP/rdzv.$((${RDZV_STARTS:-0} + 1)).log
	RDZV_STARTS=$((${RDZV_STARTS:-0} + 1))
	if [ -n "$ns" ]; then
		netns_spawn "$ns" "$RDZV_LOG" env DLAUNCH_TEST_MARK="$MARK" \
			"$BIN/dlaunch-rdzv" --listen "$host:$port" "$@"
	else
		spawn_bg "$RDZV_LOG" env DLAUNCH_TEST_MARK="$MARK" \
			"$BIN/dlaunch-rdzv" --listen "$host:$port" "$@"
	fi
	RDZV_PID=$LAST_PID
	RDZV_NS=$ns
	RDZV_HOST=$host
	if ! wait_for 10 rdzv_bound; then
		echo "# dlaunch-rdzv did not start; its log:"
		sed 's/^/#   /' "$RDZV_LOG" | tail -n 20
		return 1
	fi
	RDZV_URL=$scheme://$host:$RDZV_PORT
	return 0
}

rdzv_bound() {
	alive "$RDZV_PID" || return 1
	RDZV_PORT=$(listen_port "$RDZV_PID" "$RDZV_NS")
	[ -n "$RDZV_PORT" ]
}

# rdzv_curl PATH [CURL ARGS...]: a request to the server (from the root
# namespace, or from host 0's when the server runs there), with the token
# RDZV_TOKEN when a case sets it, and over TLS when the server uses it
rdzv_curl() {
	local path=$1
	shift
	[ -n "${RDZV_TOKEN:-}" ] && set -- -H "Authorization: Bearer $RDZV_TOKEN" "$@"
	[ -n "${RDZV_CACERT:-}" ] && set -- --cacert "$RDZV_CACERT" "$@"
	if [ -n "$RDZV_NS" ]; then
		netns_exec "$RDZV_NS" curl -sS -m 10 "$@" "$RDZV_URL$path"
	else
		curl -sS -m 10 "$@" "$RDZV_URL$path"
	fi
}

# job_json JOB: the server's detail of JOB (empty on failure); in an etcd
# case, the detail of JOB's record in etcd (etcd_job_json)
job_json() {
	if [ -n "$FAULTS_ETCD" ]; then
		etcd_job_json "$1"
	else
		rdzv_curl "/v1/jobs/$1" -f 2>/dev/null
	fi
}
# job_field JOB JQ: one field of the job detail
job_field() { job_json "$1" | jq -r "$2" 2>/dev/null; }
job_state_is() { [ "$(job_field "$1" .state)" = "$2" ]; }
job_members_are() { [ "$(job_field "$1" '.members | length')" = "$2" ]; }
# job_running_with JOB NNODES: RUNNING with NNODES members
job_running_with() { job_state_is "$1" RUNNING && job_members_are "$1" "$2"; }

# The etcd backend has no server to ask: a case of faults_etcd.sh sets
# FAULTS_ETCD (the --rdzv-endpoint list), FAULTS_ETCD_CONF (the
# --rdzv-conf that reaches the jobs: key_prefix at least) and, when the
# members live in namespace hosts, FAULTS_ETCD_NS (the host to ask from).
# job_json and the checker then read the job records in etcd through
# `dlaunch status --rdzv-backend etcd`, which restores them into the state
# machine and prints what the server would show; its text is turned back
# into the server's JSON (the fields the checker reads).
FAULTS_ETCD=
FAULTS_ETCD_CONF=
FAULTS_ETCD_NS=

# etcd_status ARGS...: `dlaunch status` over the case's etcd (10 s at most)
etcd_status() {
	local -a pre=()
	[ -n "$FAULTS_ETCD_NS" ] && pre=(ip netns exec "$(netns_host "$FAULTS_ETCD_NS")")
	timeout 10 "${pre[@]}" "$BIN/dlaunch" status --rdzv-backend etcd \
		--rdzv-endpoint "$FAULTS_ETCD" --rdzv-conf "$FAULTS_ETCD_CONF" "$@"
}

# etcd_job_json JOB: {job, state, round, restart_count, max_restarts,
# min_nodes, max_nodes, world_size, members: [{node_rank, node_id, nproc,
# rank_offset, status}]} from the status of JOB (1 when there is none).
# A member line is "RANK NODE ADDR NPROC FIRST-LAST STATUS SEEN", read from
# both ends so that an empty address cannot shift it.
etcd_job_json() {
	local out
	out=$(etcd_status --rdzv-id "$1" 2>/dev/null) || return 1
	{
		sed -nE '1s/^job (.*): ([A-Z]+), round (-?[0-9]+), restarts (-?[0-9]+)\/(-?[0-9]+), nodes (-?[0-9]+)-(-?[0-9]+), world size (-?[0-9]+), .*$/J\t\1\t\2\t\3\t\4\t\5\t\6\t\7\t\8/p' <<<"$out"
		awk '
		$1 == "RANK" && $2 == "NODE" { m = 1; next }
		m && $1 ~ /^[0-9]+$/ && NF >= 6 {
			split($(NF - 2), r, "-")
			printf "M\t%s\t%s\t%s\t%s\t%s\n", $1, $2, $(NF - 3), r[1], $(NF - 1)
			next
		}
		{ m = 0 }' <<<"$out"
	} | jq -Rn '
	[inputs | split("\t")] as $l
	| ($l | map(select(.[0] == "J")) | first) as $j
	| if $j == null then error("no job line") else . end
	| {job: $j[1], state: $j[2], round: ($j[3] | tonumber),
	   restart_count: ($j[4] | tonumber), max_restarts: ($j[5] | tonumber),
	   min_nodes: ($j[6] | tonumber), max_nodes: ($j[7] | tonumber),
	   world_size: ($j[8] | tonumber),
	   members: [$l[] | select(.[0] == "M")
	     | {node_rank: (.[1] | tonumber), node_id: .[2],
	        nproc: (.[3] | tonumber), rank_offset: (.[4] | tonumber),
	        status: .[5]}]}' 2>/dev/null
}

# jobs_list_json: {"jobs": [{"job": NAME}...]} of the server, or of the
# job records in etcd in an etcd case
jobs_list_json() {
	local out
	if [ -z "$FAULTS_ETCD" ]; then
		rdzv_curl /v1/jobs -f
		return
	fi
	out=$(etcd_status 2>&1) || {
		echo "$out"
		return 1
	}
	awk 'NR > 1 && $1 != "(no" {print $1}' <<<"$out" |
		jq -Rn '{jobs: [inputs | {job: .}]}'
}

# start_agent NAME [--ns I] CMD...: start CMD (`"$BIN/dlaunch" ARGS`, or
# `env VAR=VALUE... "$BIN/dlaunch" ARGS`) as agent NAME with the case's mark
# and FAULT_DIR/FAULT_NODE for the workers (DLAUNCH_NODE_ID=NAME too, so the
# server's members and failures carry the test's names); AGENT_PID[NAME] is its pid, its
# output goes to $TEST_TMP/agent.NAME.log
start_agent() {
	local name=$1 ns=
	shift
	if [ "${1:-}" = --ns ]; then
		ns=$2
		shift 2
	fi
	local log=$TEST_TMP/agent.$name.log
	if [ -n "$ns" ]; then
		netns_spawn "$ns" "$log" env DLAUNCH_TEST_MARK="$MARK" \
			FAULT_DIR="$TEST_TMP" FAULT_NODE="$name" \
			DLAUNCH_NODE_ID="$name" "$@"
	else
		spawn_bg "$log" env DLAUNCH_TEST_MARK="$MARK" \
			FAULT_DIR="$TEST_TMP" FAULT_NODE="$name" \
			DLAUNCH_NODE_ID="$name" "$@"
	fi
	AGENT_PID[$name]=$LAST_PID
	unset "AGENT_RC[$name]"
	CASE_AGENTS=1
}

# agent_exit NAME: wait (bounded by the caller's wait_for) for agent NAME to
# exit and print its status; AGENT_RC[NAME] keeps it
declare -A AGENT_RC=()
agent_exited() {
	local pid=${AGENT_PID[$1]}
	alive "$pid" && return 1
	if [ -z "${AGENT_RC[$1]:-}" ]; then
		wait "$pid" 2>/dev/null
		AGENT_RC[$1]=$?
	fi
	return 0
}
# wait_agent NAME SECONDS: 0 when it exited in time (AGENT_RC[NAME] set)
wait_agent() { wait_for "$2" agent_exited "$1"; }

# worker records (see worker.sh): "round rank pid node local_rank world
# restart_count" per worker start, in $TEST_TMP/ranks.log
ranks_in_round() { awk -v r="$1" '$1 == r' "$TEST_TMP/ranks.log" 2>/dev/null | wc -l; }
# workers_started N: at least N worker starts recorded in total
workers_started() {
	[ "$(cat "$TEST_TMP/ranks.log" 2>/dev/null | wc -l)" -ge "$1" ]
}
# round_complete R N: N workers recorded in round R
round_complete() { [ "$(ranks_in_round "$1")" -ge "$2" ]; }
# worker_pid NODE LOCAL_RANK: the pid of that worker's latest incarnation
worker_pid() { cat "$TEST_TMP/pid.$1.$2" 2>/dev/null; }
# worker_cmd NODE LOCAL_RANK CMD: tell that worker to do CMD (see worker.sh)
worker_cmd() { echo "$3" >"$TEST_TMP/cmd.$1.$2.tmp" && mv "$TEST_TMP/cmd.$1.$2.tmp" "$TEST_TMP/cmd.$1.$2"; }
# all_workers_done: tell every worker to exit 0
all_workers_done() { touch "$TEST_TMP/done"; }

# log_has FILE REGEX
log_has() { grep -Eq -- "$2" "$1" 2>/dev/null; }

# show_log FILE [N]: the last N lines of FILE as TAP comments (diagnosis)
show_log() {
	echo "# --- last lines of $(basename "$1")"
	tail -n "${2:-15}" "$1" 2>/dev/null | cut -c1-300 | sed 's/^/#   /'
}

# metric NAME_WITH_LABELS: a value from the server's /metrics (0 if absent)
metric() {
	rdzv_curl /metrics 2>/dev/null | awk -v m="$1" '$1 == m {print $2; f=1} END {if (!f) print 0}'
}

# FAULTS_BACKEND: the rendezvous of the cases written once for both
# backends (lib_membership.sh, lib_agent_faults.sh): http (dlaunch-rdzv,
# the default) or etcd (a cluster up through lib_etcd.sh, ETCD_ENDPOINTS).
# Over etcd each case's jobs live under a key prefix of their own, which
# the checker reads through `dlaunch status` (FAULTS_ETCD above), and
# agent_args gives etcd's options.
FAULTS_BACKEND=${FAULTS_BACKEND:-http}

# case_rdzv_start CASE: the case's rendezvous: dlaunch-rdzv started
# (start_rdzv), or over etcd the key prefix /cPID-CASE; 1 on failure
case_rdzv_start() {
	if [ "$FAULTS_BACKEND" = etcd ]; then
		FAULTS_ETCD=$ETCD_ENDPOINTS
		FAULTS_ETCD_CONF=key_prefix=/c$$-$1
		return 0
	fi
	start_rdzv
}
# case_rdzv_name: what the case's rendezvous is, for a message
case_rdzv_name() {
	[ "$FAULTS_BACKEND" = etcd ] && echo "etcd" || echo "dlaunch-rdzv"
}

# agent_args JOB NNODES NPROC [CONF]: the usual dlaunch options of a case
# (the worker command follows them), for the case's backend
agent_args() {
	local job=$1 nnodes=$2 nproc=$3 conf=${4:-$HB_CONF}
	if [ "$FAULTS_BACKEND" = etcd ]; then
		echo "--nnodes=$nnodes --nproc-per-node=$nproc --rdzv-backend=etcd" \
			"--rdzv-endpoint=$ETCD_ENDPOINTS --rdzv-id=$job" \
			"--rdzv-conf=$conf,$FAULTS_ETCD_CONF --max-restarts=${MAX_RESTARTS:-3}"
		return
	fi
	echo "--nnodes=$nnodes --nproc-per-node=$nproc --rdzv-backend=c10d" \
		"--rdzv-endpoint=$RDZV_HOST:$RDZV_PORT --rdzv-id=$job" \
		"--rdzv-conf=$conf --max-restarts=${MAX_RESTARTS:-3}"
}

# job_round JOB: the job's current round number
job_round() { job_field "$1" .round; }
# job_left_round JOB R: the job is RUNNING in a round after R with N members
job_running_after() {
	local r
	r=$(job_round "$1")
	[ -n "$r" ] && [ "$r" != null ] && [ "$r" -gt "$2" ] &&
		job_running_with "$1" "$3"
}
# pids_dead PID...: none of them is alive; false without a pid, or with
# one that is not a number (an empty record proves nothing)
pids_dead() {
	local p
	[ $# -gt 0 ] || return 1
	for p in "$@"; do
		[[ "$p" =~ ^[0-9]+$ ]] || return 1
		alive "$p" && return 1
	done
	return 0
}

# start_tap NAME [HOST_INDEX]: an http_tap.py in front of the server (on
# that host when given, listening on its 127.0.0.1), so that an agent
# pointed at it shows what it sent and what it got back: one line per
# exchange in $TEST_TMP/tap.NAME.log; TAP_PID, TAP_PORT
start_tap() {
	local name=$1 ns=${2:-} out=$TEST_TMP/tapout.$1.log
	local cmd=(env DLAUNCH_TEST_MARK="$MARK" "$PY" "$FAULTS_DIR/http_tap.py"
		--target "$RDZV_HOST:$RDZV_PORT" --log "$TEST_TMP/tap.$name.log")
	if [ -n "$ns" ]; then
		netns_spawn "$ns" "$out" "${cmd[@]}"
	else
		spawn_bg "$out" "${cmd[@]}"
	fi
	TAP_PID=$LAST_PID
	if ! wait_for 10 log_has "$out" '^listening on [0-9]+$'; then
		show_log "$out"
		return 1
	fi
	TAP_PORT=$(awk '/^listening on/ {print $3; exit}' "$out")
	touch "$TEST_TMP/tap.$name.log"
}
# stop_tap: stop the tap (after the agents behind it have exited)
stop_tap() {
	[ -n "${TAP_PID:-}" ] || return 0
	kill_tree "$TAP_PID"
	{ wait "$TAP_PID"; } 2>/dev/null
	TAP_PID=
}
# tap_args JOB NNODES NPROC [CONF]: agent_args with the tap as endpoint
tap_args() {
	local RDZV_HOST=127.0.0.1 RDZV_PORT=$TAP_PORT
	agent_args "$@"
}

# tap_learned_then_joined LOG N0 R0 R1: from the exchanges a tap logged after
# its first N0 lines, "HOW|ROUND": HOW is the first answer about round R0
# that said the round is over ("METHOD PATH -> STATUS"), ROUND the round of
# the first join answered 200 after it (a round after R1), each empty when
# there was none
tap_learned_then_joined() {
	awk -v n0="$2" -v r0="$3" -v r1="$4" '
	NR > n0 && !seen && $4 == "for_round=" r0 && $8 == "action=restart" {
		seen = NR
		how = $2 " " $3 " -> " $6
		next
	}
	seen && $3 ~ /\/join$/ && $6 == "200" {
		split($7, x, "=")
		if (x[2] + 0 > r1 + 0) {
			joined = x[2]
			exit
		}
	}
	END { print how "|" joined }' "$1"
}

# abort_case WHAT WHY: a case that could not go on (its job did not start):
# say why, then still end it with the checker, so nothing it left behind
# is blamed on the next case
abort_case() {
	not_ok "$1: $2"
	stop_tap
	check_case "$1"
	stop_rdzv
}

# stop_rdzv: stop the server (SIGTERM, then SIGKILL after 5 s) and reap it
# (nothing without one: over etcd a case has none)
stop_rdzv() {
	[ -n "$RDZV_PID" ] || return 0
	kill -TERM "$RDZV_PID" 2>/dev/null
	wait_for 5 bash -c "! kill -0 $RDZV_PID" || kill_tree "$RDZV_PID"
	{ wait "$RDZV_PID"; } 2>/dev/null
	return 0
}

# new_case: forget the previous case's worker records and commands; what
# check_case looks at starts here
new_case() {
	rm -f "$TEST_TMP"/ranks.log "$TEST_TMP"/pid.* "$TEST_TMP"/done \
		"$TEST_TMP"/grandchildren "$TEST_TMP"/grandchildren.* \
		"$TEST_TMP"/cmd.* "$TEST_TMP"/spawning
	AGENT_RC=()
	case_begin
}
