#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rdzv_page.sh - the status page of dlaunch-rdzv in a real browser
# (headless Chromium, driven over the DevTools protocol by
# page_browser.py): a running 3-agent job's members and ranks as the JSON
# API reports them, a worker failure showing up live (new round, root
# cause, timeline) without a reload, a failure's markup (another job's
# worker writes it to stderr) shown as text and never run, the hang report
# section (its Dump stacks button opens a trigger; reports posted for it
# show the verdict and the folded stacks, markup in them as text), and
# with a token nothing but the prompt until it is given. DLAUNCH_SCREENSHOT=PATH
# keeps the screenshot it takes (the README's docs/status-page.png: the
# main job with a realistic failure, a Python traceback).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_rdzv.sh"
need_bin dlaunch dlaunch-rdzv
CHROMIUM=$(command -v chromium || true)
if [ -z "$CHROMIUM" ] || ! command -v python3 >/dev/null; then
	skip "status page in a browser: chromium or python3 not installed (contrib/install-deps.sh installs them)"
	finish
fi

JOB=pagejob
CONF=heartbeat_interval=0.2,heartbeat_timeout=1.5,last_call_timeout=0.5
rdzv_start "$TEST_TMP/rdzv.log" || { not_ok "dlaunch-rdzv starts"; finish; }
EP=${RDZV#http://}
pids=()
for i in 1 2 3; do
	spawn_bg "$TEST_TMP/agent$i.log" env DLAUNCH_NODE_ID="node$i" \
		"$BIN/dlaunch" --nnodes 3 --nproc-per-node 2 --rdzv-endpoint "$EP" \
		--rdzv-id "$JOB" --rdzv-conf "$CONF" --max-restarts 3 \
		--shutdown-timeout 2 "$PROGS/page_worker.sh" "$TEST_TMP/fail"
	pids+=("$LAST_PID")
done
# a one-node job whose rank 1 fails at once with markup in its stderr
touch "$TEST_TMP/xssfail"
spawn_bg "$TEST_TMP/xss.log" env DLAUNCH_NODE_ID=xssnode \
	"$BIN/dlaunch" --nnodes 1 --nproc-per-node 2 --rdzv-endpoint "$EP" \
	--rdzv-id xssjob --rdzv-conf "$CONF" --max-restarts 0 \
	--shutdown-timeout 2 "$PROGS/page_worker.sh" "$TEST_TMP/xssfail" xss
xss_failed() { curl -s -m 5 "$RDZV/v1/jobs/xssjob" | jq -e '(.failures | length) > 0' >/dev/null; }
check "the markup job's failure reached the server" wait_for 30 xss_failed
running() { curl -s -m 5 "$RDZV/v1/jobs/$JOB" | jq -e '.state == "RUNNING" and (.members | length) == 3' >/dev/null; }
check "3 agents form a round" wait_for 30 running

# a two-node job joined by hand, for the hang report: no agent answers
# its trigger, page_browser.py posts the reports
SAVED_JOB=$JOB
JOB=hangjob
JOB_CONF='"min_nodes":2,"max_nodes":2,"max_restarts":0,"last_call_timeout":"1s","heartbeat_timeout":"600s"'
join_bg "$TEST_TMP/h1" hnode1 2 '"addr":"127.0.0.1"'
join_bg "$TEST_TMP/h2" hnode2 2 '"addr":"127.0.0.1"'
join_wait "$TEST_TMP/h1" "$TEST_TMP/h2"
check_eq "the hang job runs" "200 200" "$(cat "$TEST_TMP/h1.code") $(cat "$TEST_TMP/h2.code")"
JOB=$SAVED_JOB

# a second server with a token, holding one waiting node of its own job
TOKEN=page-token-$RANDOM$RANDOM
printf '%s\n' "$TOKEN" >"$TEST_TMP/token"
SAVED_PID=$RDZV_PID SAVED=$RDZV
rdzv_start "$TEST_TMP/rdzv-token.log" --token-file "$TEST_TMP/token" ||
	{ not_ok "dlaunch-rdzv with a token starts"; finish; }
TOKEN_RDZV=$RDZV
RDZV=$SAVED RDZV_PID=$SAVED_PID
check_eq "the token server refuses the API without it" 401 \
	"$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$TOKEN_RDZV/v1/jobs")"
check_eq "... but serves the page shell, which holds no data" 200 \
	"$(curl -s -m 5 -o "$TEST_TMP/shell" -w '%{http_code}' "$TOKEN_RDZV/jobs/secretjob")"
check "the shell loads nothing from outside the server" \
	bash -c "! grep -Eq '(src|href)=\"(https?:)?//' '$TEST_TMP/shell'"
curl -s -m 5 -o /dev/null -H "Authorization: Bearer $TOKEN" -X POST \
	--data '{"node_id":"lonely","incarnation":"i1","nproc":1,"min_nodes":2,"max_nodes":2,"max_restarts":0,"heartbeat_timeout":600,"wait_ms":0}' \
	"$TOKEN_RDZV/v1/jobs/secretjob/join?wait_ms=0"

mkdir -p "$TEST_TMP/profile"
python3 "$(dirname "$0")/page_browser.py" --chromium "$CHROMIUM" \
	--profile "$TEST_TMP/profile" --url "$RDZV" --job "$JOB" \
	--fail-file "$TEST_TMP/fail" --token-url "$TOKEN_RDZV" \
	--token-job secretjob --token "$TOKEN" --xss-job xssjob \
	--hang-job hangjob \
	--screenshot "$TEST_TMP/status-page.png" 2>"$TEST_TMP/browser.err"
[ -s "$TEST_TMP/browser.err" ] && sed 's/^/# /' "$TEST_TMP/browser.err"
if [ -n "${DLAUNCH_SCREENSHOT:-}" ] && [ -s "$TEST_TMP/status-page.png" ]; then
	cp "$TEST_TMP/status-page.png" "$DLAUNCH_SCREENSHOT"
fi
check "the failure reached the server from the agent" \
	bash -c "curl -s -m 5 '$RDZV/v1/jobs/$JOB' | jq -e '.restart_count == 1' >/dev/null"
finish
