#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_secure.sh - dlaunch agents against a dlaunch-rdzv that wants a
# bearer token over TLS (--token-file, --tls-cert/--tls-key): with the
# token file and the CA (--rdzv-token-file, --rdzv-ca) two agents form the
# job and it succeeds; a wrong token, a missing CA or an unusable CA file
# is a clear error at once (exit 1), never a wait for the join timeout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_rdzv.sh"
DL=$BIN/dlaunch
need_bin dlaunch dlaunch-rdzv
if ! openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$TEST_TMP/key.pem" \
	-out "$TEST_TMP/cert.pem" >/dev/null 2>&1; then
	skip "secure agents: openssl could not make a test certificate"
	finish
fi
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TEST_TMP/token"
echo >>"$TEST_TMP/token"
echo wrong-token >"$TEST_TMP/wrong"
echo "not a certificate" >"$TEST_TMP/notca.pem"

RDZV_SCHEME=https
rdzv_start "$TEST_TMP/rdzv.log" --token-file "$TEST_TMP/token" \
	--tls-cert "$TEST_TMP/cert.pem" --tls-key "$TEST_TMP/key.pem" ||
	{ not_ok "server with token and TLS starts"; finish; }

# secure_agent LOG NODE JOB OPTIONS...: one agent of a 1..2-node job
secure_agent() {
	local log=$1 node=$2 job=$3
	shift 3
	spawn_bg "$log" env DLAUNCH_NODE_ID="$node" AGENT_OUT="$TEST_TMP/$job.rec" \
		"$DL" --nnodes "${NNODES:-2}" --nproc-per-node 1 --rdzv-endpoint "$RDZV" \
		--rdzv-id "$job" --rdzv-conf last_call_timeout=0.2,join_timeout=30 \
		"$@" "$(dirname "$0")/progs/agent_env.sh"
}
BAD_SEQ=0
exited() { ! kill -0 "$1" 2>/dev/null; }
rc_of() { wait "$1" 2>/dev/null; echo $?; }

# -- the right token and CA: two agents form the job, it succeeds
pids=()
for n in a b; do
	secure_agent "$TEST_TMP/ok.$n.log" "$n" secure --rdzv-token-file "$TEST_TMP/token" \
		--rdzv-ca "$TEST_TMP/cert.pem"
	pids+=("$LAST_PID")
done
check "token + TLS: both agents finish" wait_for 30 exited "${pids[0]}"
wait_for 10 exited "${pids[1]}"
check_eq "token + TLS: both agents exit 0" "0 0" "$(rc_of "${pids[0]}") $(rc_of "${pids[1]}")"
check_eq "token + TLS: ranks 0 and 1 ran, world size 2" "0 2,1 2" \
	"$(awk '{print $1" "$3}' "$TEST_TMP/secure.rec" 2>/dev/null | sort -n | paste -sd,)"

# bad_case WHAT TEXT OPTIONS...: one agent of a one-node job exits 1 within
# 10 s (the join timeout is 30 s), its log naming TEXT; no worker ran
bad_case() {
	local what=$1 text=$2 job
	shift 2
	job=bad$((++BAD_SEQ))
	NNODES=1 secure_agent "$TEST_TMP/$job.log" "x$BAD_SEQ" "$job" "$@"
	if wait_for 10 exited "$LAST_PID"; then
		check_eq "$what: exit 1" 1 "$(rc_of "$LAST_PID")"
	else
		not_ok "$what: the agent gave up within 10 s"
	fi
	check "$what: the error says $text" grep -q -- "$text" "$TEST_TMP/$job.log"
	check "$what: no worker started" test ! -e "$TEST_TMP/$job.rec"
}
bad_case "wrong token" "HTTP 401" --rdzv-token-file "$TEST_TMP/wrong" \
	--rdzv-ca "$TEST_TMP/cert.pem"
bad_case "no token" "HTTP 401" --rdzv-ca "$TEST_TMP/cert.pem"
bad_case "no CA for a self-signed server" "certificate" \
	--rdzv-token-file "$TEST_TMP/token"
bad_case "an unusable CA file" "notca.pem" \
	--rdzv-token-file "$TEST_TMP/token" --rdzv-ca "$TEST_TMP/notca.pem"

# a token file of two lines is a usage error naming the file
printf 'one\ntwo\n' >"$TEST_TMP/twolines"
timeout 10 "$DL" --nnodes 1 --rdzv-endpoint "$RDZV" --rdzv-id lines \
	--rdzv-token-file "$TEST_TMP/twolines" /bin/true >"$TEST_TMP/lines.out" 2>&1
check_eq "two-line token file: usage error" 2 $?
check "two-line token file: named in the error" grep -q "twolines has more than one line" \
	"$TEST_TMP/lines.out"

rdzv_stop
check_eq "server: SIGTERM exit 0" 0 "$RDZV_RC"
finish
