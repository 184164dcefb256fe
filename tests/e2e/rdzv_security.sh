#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rdzv_security.sh - dlaunch-rdzv's guards: bearer token (401), body limit
# (413), malformed, deeply nested and wrongly typed JSON and bad names
# (400), all while a long poll of another client stays served; TLS only
# with --tls-cert/--tls-key; the no-token warning on a non-loopback address.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch-rdzv

echo 's3cret-token' >"$TEST_TMP/token"
rdzv_start "$TEST_TMP/rdzv.log" --token-file "$TEST_TMP/token" || { not_ok "server starts"; finish; }
check "no warning about a missing token" bash -c "! grep -q 'without a token' '$TEST_TMP/rdzv.log'"

check_eq "missing token: 401" 401 "$(req GET /v1/jobs)"
check "401 is a json error" jq -e .error "$TEST_TMP/body"
RDZV_CURL_ARGS=(-H 'Authorization: Bearer wrong-token')
check_eq "wrong token: 401" 401 "$(req GET /v1/jobs)"
RDZV_CURL_ARGS=(-H 'Authorization: Bearer s3cret-token-and-more')
check_eq "token with a suffix: 401" 401 "$(req GET /v1/jobs)"
RDZV_CURL_ARGS=()
check_eq "healthz needs no token" 200 "$(req GET /healthz)"
check_eq "metrics need the token" 401 "$(req GET /metrics)"
RDZV_CURL_ARGS=(-H 'Authorization: Bearer s3cret-token')
check_eq "right token: 200" 200 "$(req GET /v1/jobs)"

# another client holds a long poll through all the abuse below
JOB=guarded
JOB_CONF='"min_nodes":2,"max_nodes":2,"max_restarts":0'
join_bg "$TEST_TMP/held" nodeA 1 '"addr":"127.0.0.1"'
wait_for 10 grep -q "event=node_joined node=nodeA" "$TEST_TMP/rdzv.log"

J=/v1/jobs/guarded/join
head -c $((10 * 1024 * 1024)) /dev/zero | tr '\0' 'a' >"$TEST_TMP/big"
code=$(curl -s -m 30 "${RDZV_CURL_ARGS[@]}" -o "$TEST_TMP/body" -w '%{http_code}' -X POST --data-binary @"$TEST_TMP/big" "$RDZV$J")
check_eq "10 MB body: 413" 413 "$code"
check_eq "malformed json: 400" 400 "$(req POST $J '{"node_id": "n1", nproc')"
check "the 400 names the problem" grep -q "malformed json" "$TEST_TMP/body"
deep=$(printf '%.0s[' $(seq 1 5000))
check_eq "deeply nested json: 400" 400 "$(req POST $J "{\"a\":$deep")"
check "the 400 says it is nested too deep" grep -q "nested deeper" "$TEST_TMP/body"
check_eq "json that is not an object: 400" 400 "$(req POST $J '[1,2]')"
check_eq "empty body: 400" 400 "$(req POST $J '')"
base='"incarnation":"i","min_nodes":2,"max_nodes":2,"max_restarts":0'
check_eq "nproc as a string: 400" 400 "$(req POST $J "{\"node_id\":\"n2\",\"nproc\":\"8\",$base}")"
check "the 400 names the field" grep -q "nproc" "$TEST_TMP/body"
check_eq "negative nproc: 400" 400 "$(req POST $J "{\"node_id\":\"n2\",\"nproc\":-1,$base}")"
check_eq "fractional min_nodes: 400" 400 "$(req POST $J "{\"node_id\":\"n2\",\"nproc\":1,\"incarnation\":\"i\",\"min_nodes\":1.5,\"max_nodes\":2,\"max_restarts\":0}")"
check_eq "node_id as a number: 400" 400 "$(req POST $J "{\"node_id\":7,\"nproc\":1,$base}")"
check_eq "node_id with a slash: 400" 400 "$(req POST $J "{\"node_id\":\"a/b\",\"nproc\":1,$base}")"
long=$(head -c 200 /dev/zero | tr '\0' n)
check_eq "node_id of 200 bytes: 400" 400 "$(req POST $J "{\"node_id\":\"$long\",\"nproc\":1,$base}")"
check_eq "duplicate keys: 400" 400 "$(req POST $J "{\"node_id\":\"n2\",\"node_id\":\"n3\",\"nproc\":1,$base}")"
check_eq "bad duration: 400" 400 "$(req POST $J "{\"node_id\":\"n2\",\"nproc\":1,\"heartbeat_timeout\":\"soon\",$base}")"
check_eq "job name with dots first: 400" 400 "$(req POST /v1/jobs/.hidden/join "{\"node_id\":\"n2\",\"nproc\":1,$base}")"
check_eq "job name too long: 400" 400 "$(req GET /v1/jobs/$long$long)"
check_eq "config mismatch: 409" 409 "$(req POST $J "{\"node_id\":\"n2\",\"nproc\":1,\"incarnation\":\"i\",\"min_nodes\":1,\"max_nodes\":2,\"max_restarts\":0}")"
check "the 409 names the field" grep -q "min_nodes" "$TEST_TMP/body"
check_eq "heartbeat with round as a string: 400" 400 "$(req POST /v1/jobs/guarded/heartbeat '{"node_id":"nodeA","incarnation":"inc-nodeA","round":"1"}')"
check_eq "report with a bad status: 400" 400 "$(req POST /v1/jobs/guarded/report '{"node_id":"nodeA","incarnation":"inc-nodeA","round":1,"status":"meh"}')"
check_eq "report failed without failures: 400" 400 "$(req POST /v1/jobs/guarded/report '{"node_id":"nodeA","incarnation":"inc-nodeA","round":1,"status":"failed"}')"
check_eq "watch without a round: 400" 400 "$(req GET /v1/jobs/guarded/watch)"
check_eq "wait_ms over the maximum: 400" 400 "$(req GET '/v1/jobs/guarded/watch?round=1&wait_ms=999999')"
check_eq "unknown path: 404" 404 "$(req GET /v2/nothing)"
check_eq "unknown job: 404" 404 "$(req GET /v1/jobs/nosuchjob)"
check_eq "wrong method: 405" 405 "$(req DELETE /v1/jobs/guarded/join)"
check_eq "the server still answers others" 200 "$(req GET /healthz)"
req GET /v1/jobs/guarded >/dev/null
check_eq "nothing changed: one node waiting" "WAITING nodeA" "$(body_field '"\(.state) \([.waiting[].node_id] | join(","))"')"
check "the held join is still pending" test ! -e "$TEST_TMP/held.code"
join_bg "$TEST_TMP/b" nodeB 1 '"addr":"127.0.0.1"'
join_wait "$TEST_TMP/held" "$TEST_TMP/b"
check_eq "the held long poll is answered when the round closes" 200 "$(cat "$TEST_TMP/held.code")"

# many concurrent clients at once
for i in $(seq 1 40); do
	curl -s -m 10 "${RDZV_CURL_ARGS[@]}" -o /dev/null -w '%{http_code}\n' "$RDZV/v1/jobs/guarded" >>"$TEST_TMP/many" &
done
wait_for 15 bash -c "[ \$(wc -l <'$TEST_TMP/many') -ge 40 ]"
check_eq "40 concurrent clients all answered 200" 40 "$(grep -c '^200$' "$TEST_TMP/many")"
rdzv_stop
check_eq "SIGTERM: exit 0" 0 "$RDZV_RC"

# no token on a non-loopback address: a warning
DLAUNCH_TOKEN= spawn_bg "$TEST_TMP/open.log" "$BIN/dlaunch-rdzv" --listen 0.0.0.0:0
OPEN=$LAST_PID
wait_for 10 grep -q '^listening on' "$TEST_TMP/open.log"
check "no token and a public address: warned" grep -q "without a token" "$TEST_TMP/open.log"
kill -TERM "$OPEN"

# DLAUNCH_TOKEN from the environment
export DLAUNCH_TOKEN=env-token
RDZV_CURL_ARGS=()
rdzv_start "$TEST_TMP/env.log" || { not_ok "server starts"; finish; }
check_eq "DLAUNCH_TOKEN is enforced" 401 "$(req GET /v1/jobs)"
RDZV_CURL_ARGS=(-H 'Authorization: Bearer env-token')
check_eq "DLAUNCH_TOKEN is accepted" 200 "$(req GET /v1/jobs)"
rdzv_stop
unset DLAUNCH_TOKEN

# TLS
if openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TEST_TMP/key.pem" \
	-out "$TEST_TMP/cert.pem" -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1; then
	RDZV_SCHEME=https
	rdzv_start "$TEST_TMP/tls.log" --tls-cert "$TEST_TMP/cert.pem" --tls-key "$TEST_TMP/key.pem" || { not_ok "tls server starts"; finish; }
	RDZV_CURL_ARGS=(--cacert "$TEST_TMP/cert.pem")
	check_eq "https with the CA: 200" 200 "$(req GET /v1/jobs)"
	check_eq "https join" 200 "$(req POST /v1/jobs/t1/join '{"node_id":"n1","incarnation":"i","nproc":1,"min_nodes":1,"max_nodes":1,"max_restarts":0}')"
	code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://${RDZV#https://}/healthz")
	check "plain http is refused on the https port" test "$code" != 200
	RDZV_CURL_ARGS=()
	code=$(req GET /healthz)
	check "https without trusting the cert fails" test "$code" != 200
	rdzv_stop
	check_eq "tls server: SIGTERM exit 0" 0 "$RDZV_RC"
	"$BIN/dlaunch-rdzv" --listen 127.0.0.1:0 --tls-cert "$TEST_TMP/cert.pem" --tls-key "$TEST_TMP/token" >"$TEST_TMP/badkey.log" 2>&1
	check_eq "a bad key file: exit 1" 1 $?
	check "with a message naming it" grep -q "cannot load TLS key" "$TEST_TMP/badkey.log"
else
	skip "tls: openssl could not make a test certificate"
fi
finish
