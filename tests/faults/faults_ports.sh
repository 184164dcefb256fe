#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_ports.sh - ports: two jobs on one host at once, and an occupied
# master port.
#
#   two jobs on one host: two dlaunch jobs of two dlaunch-train workers
#     each (they really bind MASTER_PORT) run at the same time on this host,
#     through one dlaunch-rdzv, and two --standalone jobs at the same time:
#     every job gets its own master port and all succeed, each leaving a
#     valid checkpoint of its last step;
#   occupied master port: static mode with --master-port set to a port
#     another process holds (and accepts on, answering nothing): the job
#     fails (exit 1) within 15 s (the collective timeout is 5 s) with a
#     message naming the port, not a hang.
source "$(dirname "$0")/lib_faults.sh"
faults_require dlaunch-rdzv dlaunch dlaunch-train

# newest_ckpt DIR: the name of DIR's newest valid checkpoint (ckpt_tool.py)
newest_ckpt() { basename "$("$PY" "$FAULTS_DIR/ckpt_tool.py" newest "$1" 2>/dev/null)"; }

TRAIN=("$BIN/dlaunch-train" --data synthetic:2048 --model 32-64-4
	--global-batch 64 --device cpu --threads 1 --max-steps 300 --epochs 100
	--log-every 100000 --timeout 10s)

what="two jobs on one host"
if start_rdzv; then
	for j in p1 p2; do
		# shellcheck disable=SC2046
		start_agent "$j" "$BIN/dlaunch" $(agent_args "$j" 1 2) \
			--no-python "$WORKER" "${TRAIN[@]}" --checkpoint-dir "$TEST_TMP/ck.$j"
	done
	if wait_agent p1 60 && wait_agent p2 60; then
		check_eq "$what: both jobs succeed" "0 0" "${AGENT_RC[p1]} ${AGENT_RC[p2]}"
	else
		not_ok "$what: the jobs did not end within 60 s"
	fi
	m1=$(job_field p1 '"\(.master_addr):\(.master_port)"')
	m2=$(job_field p2 '"\(.master_addr):\(.master_port)"')
	check "$what: through one server, each job has its own master port ($m1, $m2)" \
		test -n "$m1" -a "$m1" != null -a "$m1" != "$m2"
	check_eq "$what: four workers recorded" 4 "$(wc -l <"$TEST_TMP/ranks.log")"
	check_eq "$what: each job's newest checkpoint is its step 300" \
		"ckpt-000000000300.dlck ckpt-000000000300.dlck" \
		"$(newest_ckpt "$TEST_TMP/ck.p1") $(newest_ckpt "$TEST_TMP/ck.p2")"
	check_case "$what (rdzv)"
	stop_rdzv
else
	not_ok "$what: dlaunch-rdzv did not start"
fi

new_case
for j in s1 s2; do
	start_agent "$j" "$BIN/dlaunch" --standalone --nproc-per-node=2 \
		--no-python "$WORKER" "${TRAIN[@]}" --checkpoint-dir "$TEST_TMP/ck.$j"
done
if wait_agent s1 60 && wait_agent s2 60; then
	check_eq "$what: two --standalone jobs at once both succeed" "0 0" \
		"${AGENT_RC[s1]} ${AGENT_RC[s2]}"
else
	not_ok "$what: the --standalone jobs did not end within 60 s"
fi
ports=$(awk '{print $8}' "$TEST_TMP/ranks.log" | sort -u | wc -l)
check_eq "$what: the --standalone jobs used two master ports" 2 "$ports"
check_eq "$what: each --standalone job's newest checkpoint is its step 300" \
	"ckpt-000000000300.dlck ckpt-000000000300.dlck" \
	"$(newest_ckpt "$TEST_TMP/ck.s1") $(newest_ckpt "$TEST_TMP/ck.s2")"
check_case "$what (standalone)"

# ---- occupied master port --------------------------------------------------------
what="occupied master port"
new_case
spawn_bg "$TEST_TMP/holder.log" env DLAUNCH_TEST_MARK="$MARK" "$PY" -c '
import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print("listening on", s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept()
    conns.append(c)   # accept and never answer
'
holder=$LAST_PID
if wait_for 10 log_has "$TEST_TMP/holder.log" '^listening on'; then
	port=$(awk '{print $3}' "$TEST_TMP/holder.log")
	t0=${EPOCHREALTIME//[.,]/}
	start_agent static "$BIN/dlaunch" --nnodes=1 --node-rank=0 \
		--master-addr=127.0.0.1 --master-port="$port" --nproc-per-node=2 \
		--no-python "$WORKER" "${TRAIN[@]}" --timeout 5s
	if wait_agent static 60; then
		check_eq "$what: the job fails (exit 1)" 1 "${AGENT_RC[static]}"
		# rank 0 fails at once on the bind; the agent exits when rank 1
		# gives up its bootstrap with rank 0 at its collective timeout
		took_ms=$(((${EPOCHREALTIME//[.,]/} - t0) / 1000))
		check "$what: dlaunch exits within 15 s ($took_ms ms; the collective timeout is 5 s)" \
			test "$took_ms" -le 15000
		check "$what: the message names the port $port" \
			log_has "$TEST_TMP/agent.static.log" "$port.*([Aa]ddress already in use|in use)|([Aa]ddress already in use|in use).*$port"
	else
		not_ok "$what: dlaunch still running 60 s after start (a hang)"
		show_log "$TEST_TMP/agent.static.log"
	fi
	kill_tree "$holder"
	{ wait "$holder"; } 2>/dev/null
else
	not_ok "$what: the port holder did not start"
fi
check_case "$what"
finish
