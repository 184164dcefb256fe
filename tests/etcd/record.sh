#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# record.sh - record real answers of etcd's v3 JSON gateway into
# tests/etcd/recorded/, the truth tests/unit/test_etcd_answer.c and
# test_etcd_stream.c parse.
#
# Starts a throwaway single-member etcd (Debian's etcd-server, 3.4) on two
# free loopback ports in a temporary directory, drives it with curl, and
# stops it again on every exit path: nothing is left running or on disk.
#
#   tests/etcd/record.sh [OUTDIR]     (default tests/etcd/recorded)
#
# Keys and values are base64 in the gateway: "a2V5" is "key". The answers
# carry cluster and member ids and raft terms of this run; they change
# from run to run, the shapes do not.
set -eu

cd "$(dirname "$0")/../.."
out=${1:-tests/etcd/recorded}
command -v etcd >/dev/null || {
	echo "record.sh: etcd not found (contrib/install-deps.sh installs etcd-server)" >&2
	exit 1
}
mkdir -p "$out"
tmp=$(mktemp -d /tmp/dlaunch-etcd-rec.XXXXXX)
# answers go to $rec first and reach $out only when every step worked
rec=$tmp/rec
mkdir "$rec"
etcd_pid=""
watch_pid=""
cleanup() {
	[ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null && wait "$watch_pid" 2>/dev/null
	if [ -n "$etcd_pid" ]; then
		kill "$etcd_pid" 2>/dev/null || true
		wait "$etcd_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# two ports free now (etcd cannot bind port 0 and report it)
set -- $(python3 -c '
import socket
ss = [socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
for s in ss: s.close()')
cport=$1
pport=$2
url=http://127.0.0.1:$cport

etcd --name rec --data-dir "$tmp/data" \
	--listen-client-urls "$url" --advertise-client-urls "$url" \
	--listen-peer-urls "http://127.0.0.1:$pport" \
	--initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "rec=http://127.0.0.1:$pport" \
	--logger zap --log-outputs stderr >"$tmp/etcd.out" 2>&1 &
etcd_pid=$!

# ready when /health says so (polled, 20 s at most)
i=0
until curl -sf "$url/health" 2>/dev/null | grep -q '"health":"true"'; do
	i=$((i + 1))
	if [ $i -gt 200 ] || ! kill -0 "$etcd_pid" 2>/dev/null; then
		echo "record.sh: etcd did not become ready" >&2
		cat "$tmp/etcd.out" >&2 || true
		exit 1
	fi
	sleep 0.1
done

# post PATH BODY [FILE] [TOKEN]: the answer body, also saved as FILE.json
post() {
	if [ -n "${4:-}" ]; then
		curl -s -X POST -H "Authorization: $4" -d "$2" "$url$1" >"$tmp/ans"
	else
		curl -s -X POST -d "$2" "$url$1" >"$tmp/ans"
	fi
	[ -n "${3:-}" ] && { cat "$tmp/ans"; echo; } >"$rec/$3.json"
	cat "$tmp/ans"
}
b64() { printf '%s' "$1" | base64 -w0; }
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)'"$1"')'; }
lines() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
# wait_lines FILE N: until FILE holds N lines (10 s at most)
wait_lines() {
	i=0
	while [ "$(lines "$1")" -lt "$2" ]; do
		i=$((i + 1))
		[ $i -gt 100 ] && { echo "record.sh: no watch answer in $1" >&2; exit 1; }
		sleep 0.1
	done
}

P=$(b64 /rec/)
PEND=$(b64 /rec0)  # the prefix's range end: '/' + 1 = '0'

# a watch on the prefix, from now on, with prev_kv
curl -sN -X POST -d "{\"create_request\":{\"key\":\"$P\",\"range_end\":\"$PEND\",\"prev_kv\":true}}" \
	"$url/v3/watch" >"$tmp/watch" &
watch_pid=$!
wait_lines "$tmp/watch" 1

post /v3/kv/put "{\"key\":\"$(b64 /rec/a)\",\"value\":\"$(b64 hello)\"}" put >/dev/null
post /v3/kv/put "{\"key\":\"$(b64 /rec/b)\",\"value\":\"$(b64 '{"x":1}')\",\"prev_kv\":true}" put_prev_kv >/dev/null
post /v3/kv/put "{\"key\":\"$(b64 /rec/b)\",\"value\":\"$(b64 second)\",\"prev_kv\":true}" put_prev_kv_hit >/dev/null
post /v3/kv/range "{\"key\":\"$(b64 /rec/a)\"}" range_hit >/dev/null
post /v3/kv/range "{\"key\":\"$(b64 /rec/none)\"}" range_miss >/dev/null
post /v3/kv/range "{\"key\":\"$P\",\"range_end\":\"$PEND\",\"limit\":\"1\"}" range_prefix_more >/dev/null
post /v3/kv/range "{\"key\":\"$P\",\"range_end\":\"$PEND\",\"count_only\":true}" range_count_only >/dev/null

# txn: a compare on the value that holds, then one that does not
post /v3/kv/txn "{\"compare\":[{\"key\":\"$(b64 /rec/a)\",\"target\":\"VALUE\",\"result\":\"EQUAL\",\"value\":\"$(b64 hello)\"}],\"success\":[{\"request_put\":{\"key\":\"$(b64 /rec/c)\",\"value\":\"$(b64 three)\"}},{\"request_range\":{\"key\":\"$(b64 /rec/a)\"}}],\"failure\":[{\"request_range\":{\"key\":\"$(b64 /rec/a)\"}}]}" txn_succeeded >/dev/null
post /v3/kv/txn "{\"compare\":[{\"key\":\"$(b64 /rec/a)\",\"target\":\"CREATE\",\"result\":\"EQUAL\",\"create_revision\":\"0\"}],\"success\":[{\"request_put\":{\"key\":\"$(b64 /rec/a)\",\"value\":\"$(b64 lost)\"}}],\"failure\":[{\"request_range\":{\"key\":\"$(b64 /rec/a)\"}},{\"request_delete_range\":{\"key\":\"$(b64 /rec/c)\",\"prev_kv\":true}}]}" txn_failed >/dev/null

# a lease: grant, a key bound to it, keepalive, revoke (deletes the key)
lease=$(post /v3/lease/grant '{"TTL":"30"}' lease_grant | field '["ID"]')
post /v3/kv/put "{\"key\":\"$(b64 /rec/node)\",\"value\":\"$(b64 up)\",\"lease\":\"$lease\"}" put_lease >/dev/null
post /v3/kv/range "{\"key\":\"$(b64 /rec/node)\"}" range_lease >/dev/null
post /v3/lease/keepalive "{\"ID\":\"$lease\"}" lease_keepalive >/dev/null
post /v3/lease/revoke "{\"ID\":\"$lease\"}" lease_revoke >/dev/null
post /v3/lease/keepalive "{\"ID\":\"$lease\"}" lease_keepalive_expired >/dev/null
post /v3/lease/revoke "{\"ID\":\"$lease\"}" error_lease_not_found >/dev/null
post /v3/kv/deleterange "{\"key\":\"$(b64 /rec/b)\",\"prev_kv\":true}" deleterange >/dev/null

# errors: an empty key; authentication while auth is off
post /v3/kv/put '{"value":"eA=="}' error_empty_key >/dev/null
post /v3/auth/authenticate '{"name":"root","password":"x"}' error_auth_disabled >/dev/null

# the watch saw: created, put a, put b, put b, put c, delete c, put node,
# delete node (revoke), delete b
wait_lines "$tmp/watch" 9
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=""
cp "$tmp/watch" "$rec/watch_stream.jsonl"

# compact up to now: a watch from revision 2 is canceled with
# compact_revision (the gateway then ends the stream)
rev=$(post /v3/kv/range "{\"key\":\"$(b64 /rec/a)\"}" | field '["header"]["revision"]')
post /v3/kv/compaction "{\"revision\":\"$rev\",\"physical\":true}" compaction >/dev/null
curl -sN --max-time 10 -X POST -d "{\"create_request\":{\"key\":\"$P\",\"range_end\":\"$PEND\",\"start_revision\":\"2\"}}" \
	"$url/v3/watch" >"$tmp/watch2" &
watch_pid=$!
wait_lines "$tmp/watch2" 2
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
watch_pid=""
cp "$tmp/watch2" "$rec/watch_compacted.jsonl"
post /v3/kv/range "{\"key\":\"$(b64 /rec/a)\",\"revision\":\"2\"}" error_compacted >/dev/null

# authentication: a root user, auth on, a token, then a bad token
post /v3/auth/user/add '{"name":"root","password":"rootpw"}' >/dev/null
post /v3/auth/role/add '{"name":"root"}' >/dev/null
post /v3/auth/user/grant '{"user":"root","role":"root"}' >/dev/null
post /v3/auth/enable '{}' >/dev/null
tok=$(post /v3/auth/authenticate '{"name":"root","password":"rootpw"}' auth_token | field '["token"]')
post /v3/auth/authenticate '{"name":"root","password":"wrong"}' error_auth_failed >/dev/null
post /v3/kv/range "{\"key\":\"$(b64 /rec/a)\"}" error_bad_token "not-a-token" >/dev/null
post /v3/kv/range "{\"key\":\"$(b64 /rec/a)\"}" range_with_token "$tok" >/dev/null
cp "$rec"/* "$out"/
echo "record.sh: answers of etcd $(etcd --version | head -1 | awk '{print $3}') in $out" >&2
