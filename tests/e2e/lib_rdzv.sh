# SPDX-License-Identifier: Apache-2.0
# lib_rdzv.sh - helpers for the dlaunch-rdzv end-to-end tests (sourced
# after lib.sh). Everything goes through real HTTP with curl.

# rdzv_start LOG ARGS...: start dlaunch-rdzv on a free loopback port and
# wait until it prints its address; sets RDZV_PID and RDZV (http://h:p).
rdzv_start() {
	local log=$1; shift
	spawn_bg "$log" "$BIN/dlaunch-rdzv" --listen 127.0.0.1:0 "$@"
	RDZV_PID=$LAST_PID
	if ! wait_for 10 grep -q '^listening on ' "$log"; then
		echo "dlaunch-rdzv did not start:"; cat "$log"
		return 1
	fi
	RDZV=${RDZV_SCHEME:-http}://$(sed -n 's/^listening on //p' "$log" | head -n1)
}

# rdzv_stop: SIGTERM the server and wait for it to exit; sets RDZV_RC.
rdzv_stop() {
	kill -TERM "$RDZV_PID" 2>/dev/null
	wait_for 10 bash -c "! kill -0 $RDZV_PID" || kill_tree "$RDZV_PID"
	wait "$RDZV_PID" 2>/dev/null
	RDZV_RC=$?
}

RDZV_CURL_ARGS=()

# req METHOD PATH [BODY]: one request; the body goes to $TEST_TMP/body and
# the status code to stdout.
req() {
	local method=$1 path=$2
	if [ $# -ge 3 ]; then
		curl -s -m 70 "${RDZV_CURL_ARGS[@]}" -o "$TEST_TMP/body" \
			-w '%{http_code}' -X "$method" --data-binary "$3" \
			"$RDZV$path"
	else
		curl -s -m 70 "${RDZV_CURL_ARGS[@]}" -o "$TEST_TMP/body" \
			-w '%{http_code}' -X "$method" "$RDZV$path"
	fi
}

# req_file METHOD PATH FILE: req with the body read from FILE (for bodies
# over the 128 KiB a single command-line argument may hold)
req_file() {
	curl -s -m 70 "${RDZV_CURL_ARGS[@]}" -o "$TEST_TMP/body" \
		-w '%{http_code}' -X "$1" --data-binary "@$3" "$RDZV$2"
}

# body_field FILTER: a jq filter over the last answer's body
body_field() { jq -r "$1" "$TEST_TMP/body"; }

# join_bg OUT NODE NPROC EXTRA_JSON: a join in the background whose answer
# body lands in OUT and its status in OUT.code
join_bg() {
	local out=$1 node=$2 nproc=$3 extra=${4:-}
	local body="{\"node_id\":\"$node\",\"incarnation\":\"inc-$node\",\"nproc\":$nproc,$JOB_CONF${extra:+,$extra}}"
	(curl -s -m 70 "${RDZV_CURL_ARGS[@]}" -o "$out" -w '%{http_code}' \
		-X POST --data-binary "$body" \
		"$RDZV/v1/jobs/$JOB/join?wait_ms=20000" >"$out.code.tmp"
	 mv "$out.code.tmp" "$out.code") &
}

# join_wait OUT...: wait until every background join answered
join_wait() {
	local f
	for f in "$@"; do
		wait_for 30 test -s "$f.code" || return 1
	done
}

# hb NODE ROUND: a heartbeat; status to stdout
hb() {
	req POST "/v1/jobs/$JOB/heartbeat" \
		"{\"node_id\":\"$1\",\"incarnation\":\"inc-$1\",\"round\":$2}"
}

# beat_bg NODE: keep NODE alive in job $JOB from now on, the way an agent
# does, whatever round it is in (a zero-wait watch counts as a sign of
# life); sets LAST_PID (stop it with kill_tree).
beat_bg() {
	spawn_bg "$TEST_TMP/beat-$1.log" bash -c "while :; do
		curl -s -m 5 ${RDZV_CURL_ARGS[*]} -o /dev/null \
			'$RDZV/v1/jobs/$JOB/watch?round=0&node_id=$1&incarnation=inc-$1&wait_ms=0'
		sleep 0.2
	done"
}
