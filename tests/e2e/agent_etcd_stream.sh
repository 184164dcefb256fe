#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_etcd_stream.sh - the lease's keep-alives and the watches on gRPC
# streams (docs/etcd.md, "Keep-alives and watches on streams"), against a
# real 3-member etcd: two agents (lease TTL 2 s) running for about four
# TTLs send their keep-alives as messages of one LeaseKeepAlive stream
# each and create (and cancel) their watches on one Watch stream each,
# counted by etcd itself (its gRPC counters: streams started against
# messages received), and no lease expires; through a front that speaks
# HTTP/1.1 only (netem_proxy.py --http1-only, which answers HTTP/2's
# preface with 505), the agents say so once and keep their leases and
# watches through etcd's JSON gateway (a stream inside etcd for each),
# and the job succeeds; with a slow member first (netem_proxy.py, 300 ms
# each way: answers slower than a keep-alive's first try while etcd is
# quick), the agents stay there on their streams, their tries sized by
# the answers' time; over TLS with client certificates and etcd's
# authentication on, the streams (HTTP/2 by ALPN; the watch stream with
# the login's token as metadata, the keep-alives with none: etcd asks
# none for them) carry them as well.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
source "$(dirname "$0")/lib_etcd.sh"
need_bin dlaunch
if ! etcd_available; then
	skip "etcd keep-alive stream: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 3; then
	not_ok "a 3-member etcd cluster starts"
	finish
fi
SCEN_BACKEND=etcd
source "$(dirname "$0")/lib_scenarios.sh"

# ka_count KIND [METHOD]: the members' count of KIND (started: streams;
# msg_received: requests) of gRPC method METHOD (LeaseKeepAlive), summed
ka_count() {
	etcd_metric_sum 'index($0, m) == 1 && index($0, "grpc_method=\"" g "\"") {s += $2} END {printf "%d", s}' \
		-v m="grpc_server_$1_total{" -v g="${2:-LeaseKeepAlive}"
}
# run_job JOB ENDPOINTS [CONF]: two agents, each worker sleeping 8 s
# (four lease TTLs); sets pids
run_job() {
	local job=$1 n
	pids=()
	RDZV_OPTS=(--rdzv-backend etcd --rdzv-endpoint "$2")
	for n in a b; do
		SCEN_EXTRA_CONF=${3:+,$3} agent "$n" "$job" 2 1 "" /bin/sh -c 'sleep 8'
		pids+=("$LAST_PID")
	done
	wait_for 60 all_exited "${pids[@]}"
}
no_lease_lost() { ! cat "$TEST_TMP"/agent."$1".*.log | grep -Eq 'lease [0-9a-f]* expired'; }

# on_streams WHAT JOB ENDPOINTS [CONF]: a job of two agents keeps its
# leases with a keep-alive stream each
on_streams() {
	local what=$1 job=$2 s0 m0 s m ws0 wm0 ws wm
	s0=$(ka_count started) m0=$(ka_count msg_received)
	ws0=$(ka_count started Watch) wm0=$(ka_count msg_received Watch)
	check "$what: two agents running four lease TTLs exit" run_job "$job" "$3" "${4:-}"
	check_eq "$what: ... with exit status 0" "00" "$(rcs_of "${pids[@]}")"
	s=$(($(ka_count started) - s0)) m=$(($(ka_count msg_received) - m0))
	# a keep-alive every third of the TTL: 12 per agent in 8 s; through
	# the gateway each would be a stream of its own (m = s)
	check "$what: the keep-alives went as messages of a few streams ($m keep-alives on $s streams)" \
		test "$m" -ge 12 -a "$m" -ge $((4 * s))
	ws=$(($(ka_count started Watch) - ws0)) wm=$(($(ka_count msg_received Watch) - wm0))
	check "$what: the watches were created on a stream per agent ($wm creates and cancels on $ws streams)" \
		test "$ws" -le 2 -a "$wm" -ge $((2 * ws))
	check "$what: no lease expired" no_lease_lost "$job"
	check "$what: no agent fell back to the gateway" \
		bash -c "! grep -h 'did not take .* on a gRPC stream' '$TEST_TMP'/agent.$job.*.log"
}

on_streams stream ka "$ETCD_ENDPOINTS"

# -- through a front that speaks HTTP/1.1 only, before member 0
spawn_bg "$TEST_TMP/proxy.log" python3 "$(dirname "$0")/../faults/netem_proxy.py" \
	--target "127.0.0.1:${ETCD_CLIENT_PORTS[0]}" --delay-ms 0 --loss 0 --http1-only
proxy_pid=$LAST_PID
if wait_for 10 file_has "$TEST_TMP/proxy.log" '^listening on [0-9]+'; then
	port=$(awk '/^listening on/ {print $3; exit}' "$TEST_TMP/proxy.log")
	s0=$(ka_count started) m0=$(ka_count msg_received)
	ws0=$(ka_count started Watch) wm0=$(ka_count msg_received Watch)
	check "http/1.1 front: two agents running four lease TTLs exit" \
		run_job front "127.0.0.1:$port"
	check_eq "http/1.1 front: ... with exit status 0" "00" "$(rcs_of "${pids[@]}")"
	check "http/1.1 front: it refused HTTP/2" file_has "$TEST_TMP/proxy.log" 'HTTP/2 refused'
	check "http/1.1 front: each agent said its watches and keep-alives go through the gateway" \
		test "$(grep -l "etcd at http://127.0.0.1:$port did not take .* on a gRPC stream (.*); the agent's watches and lease keep-alives go through its JSON gateway" "$TEST_TMP"/agent.front.*.log | wc -l)" = 2
	s=$(($(ka_count started) - s0)) m=$(($(ka_count msg_received) - m0))
	check "http/1.1 front: the keep-alives went through the gateway, a stream inside etcd each ($m on $s)" \
		test "$m" -ge 8 -a "$m" -le $((s + 2))
	ws=$(($(ka_count started Watch) - ws0)) wm=$(($(ka_count msg_received Watch) - wm0))
	check "http/1.1 front: the watches went through the gateway, a stream inside etcd each ($wm creates on $ws streams)" \
		test "$ws" -ge 4 -a "$wm" -le "$ws"
	check "http/1.1 front: no lease expired" no_lease_lost front
	kill -TERM "$proxy_pid"
else
	not_ok "http/1.1 front: the proxy did not start"
fi

# -- a slow member first: 300 ms each way before member 0, so each answer
# takes longer than a quick etcd's keep-alive try (a quarter of the TTL,
# 500 ms). A member that answers nothing in time is slow or hung, not a
# front that holds gRPC: the keep-alives stay on a stream there, waiting
# twice what the grant took, and no agent turns to the gateway
spawn_bg "$TEST_TMP/slow.log" python3 "$(dirname "$0")/../faults/netem_proxy.py" \
	--target "127.0.0.1:${ETCD_CLIENT_PORTS[0]}" --delay-ms 300 --loss 0
proxy_pid=$LAST_PID
if wait_for 10 file_has "$TEST_TMP/slow.log" '^listening on [0-9]+'; then
	port=$(awk '/^listening on/ {print $3; exit}' "$TEST_TMP/slow.log")
	on_streams "slow member" slow "127.0.0.1:$port,127.0.0.1:${ETCD_CLIENT_PORTS[1]},127.0.0.1:${ETCD_CLIENT_PORTS[2]}"
	check "slow member: the agents kept to it" \
		bash -c "! grep -h 'did not answer' '$TEST_TMP'/agent.slow.*.log"
	kill -TERM "$proxy_pid"
else
	not_ok "slow member: the proxy did not start"
fi
etcd_cluster_destroy

# -- over TLS with client certificates, etcd's authentication on
etcd_make_certs "$TEST_TMP/pki"
if etcd_cluster_start 1 --tls "$TEST_TMP/pki" --client-cert-auth &&
	etcd_enable_auth "/t$$/" dl secret-$$; then
	on_streams tls tls "$ETCD_ENDPOINTS" "$(etcd_rdzv_conf)"
else
	not_ok "tls: an etcd member with TLS and authentication starts"
fi
etcd_cluster_destroy
check "no process of the test left" wait_for 10 no_marked_left
finish
