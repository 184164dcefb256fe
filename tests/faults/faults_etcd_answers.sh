#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_etcd_answers.sh - an --rdzv-endpoint that answers, but not as
# etcd's gateway does (issue 23, case 5).
#
# A load balancer's default page (200 with HTML), a 200 with a JSON object
# that is not etcd's, and a 404 from a plain HTTP server: each ends the
# join at once (exit 1, within 10 s) with the same line, "... is not an
# answer of etcd's v3 gateway (is it an etcd 3.4+ client URL?)", and no
# process of the job is left. Then an https:// endpoint where etcd serves
# plain http: the line says so and names the fix (case 8), rather than
# asking for client certificates.
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch

# serve KIND: a plain HTTP server on a free loopback port answering every
# request as KIND says (html: 200 with a page, json: 200 with an object
# that is not etcd's, 404: not found); PORT is its port
serve() {
	local log=$TEST_TMP/http-$1.log
	spawn_bg "$log" env KIND="$1" "$PY" -c '
import http.server, os, sys
kind = os.environ["KIND"]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        if kind == "404":
            body, code, ctype = b"not found\n", 404, "text/plain"
        elif kind == "json":
            body, code, ctype = b"{\"status\": \"ok\"}\n", 200, "application/json"
        else:
            body, code, ctype = b"<html><body>Welcome to nginx!</body></html>\n", 200, "text/html"
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print("port", s.server_address[1], flush=True)
s.serve_forever()
'
	HTTP_PID=$LAST_PID
	wait_for 10 grep -q '^port [0-9]' "$log" || return 1
	PORT=$(sed -n 's/^port \([0-9]*\)$/\1/p' "$log")
}

for kind in html json 404; do
	what="endpoint answering $kind"
	new_case
	if ! serve "$kind"; then
		not_ok "$what: the HTTP server did not start"
		continue
	fi
	out=$TEST_TMP/agent-$kind.out
	start_agent "$kind" "$BIN/dlaunch" --rdzv-backend etcd \
		--rdzv-endpoint "127.0.0.1:$PORT" --rdzv-id answers --nnodes 1 \
		--rdzv-conf join_timeout=60 --no-python /bin/true
	if wait_agent "$kind" 10; then
		check_eq "$what: the join ends at once with exit 1" 1 "${AGENT_RC[$kind]}"
	else
		not_ok "$what: the agent still runs 10 s after it started"
		show_log "$TEST_TMP/agent.$kind.log"
	fi
	cp "$TEST_TMP/agent.$kind.log" "$out" 2>/dev/null
	check "$what: one line says it is not etcd's gateway" \
		grep -q "error: cannot join job answers through etcd: .*HTTP [0-9]* from http://127.0.0.1:$PORT is not an answer of etcd's v3 gateway (is it an etcd 3.4+ client URL?)" "$out"
	kill_tree "$HTTP_PID"
	check_case "$what" --no-workers
done

what="https endpoint of an etcd serving http"
if ! etcd_available; then
	skip "$what: $ETCD_WHY"
elif ! etcd_cluster_start 1; then
	not_ok "$what: etcd did not start"
else
	new_case
	start_agent tls "$BIN/dlaunch" --rdzv-backend etcd \
		--rdzv-endpoint "https://127.0.0.1:${ETCD_CLIENT_PORTS[0]}" \
		--rdzv-id answers --nnodes 1 --no-python /bin/true
	if wait_agent tls 10; then
		check_eq "$what: the join ends at once with exit 1" 1 "${AGENT_RC[tls]}"
	else
		not_ok "$what: the agent still runs 10 s after it started"
	fi
	check "$what: the line asks whether etcd serves plain HTTP and names the fix" \
		grep -q "error: cannot join job answers through etcd: no etcd answered at https://127.0.0.1:${ETCD_CLIENT_PORTS[0]}: .*(is etcd serving plain HTTP there? give http:// endpoints or --rdzv-conf protocol=http)" "$TEST_TMP/agent.tls.log"
	check "$what: it does not ask for client certificates" \
		bash -c "! grep -q 'client certificates' '$TEST_TMP/agent.tls.log'"
	show_log "$TEST_TMP/agent.tls.log" 3
	check_case "$what" --no-workers
	etcd_cluster_destroy
fi
finish
