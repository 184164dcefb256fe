#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_etcd_stream.sh - the lease's keep-alives on a gRPC stream
# (docs/etcd.md, "Keep-alives on a stream"), against a real 3-member etcd:
# two agents (lease TTL 2 s) running for about four TTLs send their
# keep-alives as messages of one LeaseKeepAlive stream each, counted by
# etcd itself (its gRPC counters: streams started against messages
# received), and no lease expires; through a front that speaks HTTP/1.1
# only (netem_proxy.py --http1-only, which answers HTTP/2's preface with
# 505), the agents say so once and keep their leases through etcd's JSON
# gateway, and the job succeeds; over TLS with client certificates and
# etcd's authentication on, the stream (HTTP/2 by ALPN, no token: etcd
# asks none for a keep-alive) carries them as well.
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

# ka_count KIND: the members' LeaseKeepAlive count of KIND (started:
# streams; msg_received: keep-alives), summed
ka_count() {
	local port n sum=0 tls=()
	[ "$ETCD_SCHEME" = https ] && tls=(--cacert "$ETCD_TLS_DIR/ca.pem"
		--cert "$ETCD_TLS_DIR/client.pem" --key "$ETCD_TLS_DIR/client.key")
	for port in "${ETCD_CLIENT_PORTS[@]}"; do
		n=$(curl -s -m 5 "${tls[@]}" "$ETCD_SCHEME://127.0.0.1:$port/metrics" |
			awk -v m="grpc_server_$1_total{" 'index($0, m) == 1 && index($0, "grpc_method=\"LeaseKeepAlive\"") {s += $2} END {printf "%d", s}')
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
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

# -- on a stream
s0=$(ka_count started) m0=$(ka_count msg_received)
check "stream: two agents running four lease TTLs exit" run_job ka "$ETCD_ENDPOINTS"
check_eq "stream: ... with exit status 0" "00" "$(rcs_of "${pids[@]}")"
s=$(($(ka_count started) - s0)) m=$(($(ka_count msg_received) - m0))
# a keep-alive every third of the TTL: 12 per agent in 8 s; through the
# gateway each would be a stream of its own (m = s)
check "stream: the keep-alives went as messages of a few streams ($m keep-alives on $s streams)" \
	test "$m" -ge 12 -a "$m" -ge $((4 * s))
check "stream: no lease expired" no_lease_lost ka
check "stream: no agent fell back to the gateway" \
	bash -c "! grep -h 'did not take lease keep-alives' '$TEST_TMP'/agent.ka.*.log"

# -- through a front that speaks HTTP/1.1 only, before member 0
spawn_bg "$TEST_TMP/proxy.log" python3 "$(dirname "$0")/../faults/netem_proxy.py" \
	--target "127.0.0.1:${ETCD_CLIENT_PORTS[0]}" --delay-ms 0 --loss 0 --http1-only
proxy_pid=$LAST_PID
if wait_for 10 file_has "$TEST_TMP/proxy.log" '^listening on [0-9]+'; then
	port=$(awk '/^listening on/ {print $3; exit}' "$TEST_TMP/proxy.log")
	s0=$(ka_count started) m0=$(ka_count msg_received)
	check "http/1.1 front: two agents running four lease TTLs exit" \
		run_job front "127.0.0.1:$port"
	check_eq "http/1.1 front: ... with exit status 0" "00" "$(rcs_of "${pids[@]}")"
	check "http/1.1 front: it refused HTTP/2" file_has "$TEST_TMP/proxy.log" 'HTTP/2 refused'
	check "http/1.1 front: each agent said its keep-alives go through the gateway" \
		test "$(grep -l "etcd at http://127.0.0.1:$port did not take lease keep-alives on a gRPC stream" "$TEST_TMP"/agent.front.*.log | wc -l)" = 2
	s=$(($(ka_count started) - s0)) m=$(($(ka_count msg_received) - m0))
	check "http/1.1 front: the keep-alives went through the gateway, a stream inside etcd each ($m on $s)" \
		test "$m" -ge 8 -a "$m" -le $((s + 2))
	check "http/1.1 front: no lease expired" no_lease_lost front
	kill -TERM "$proxy_pid"
else
	not_ok "http/1.1 front: the proxy did not start"
fi
etcd_cluster_destroy

# -- over TLS with client certificates, etcd's authentication on
etcd_make_certs "$TEST_TMP/pki"
if etcd_cluster_start 1 --tls "$TEST_TMP/pki" --client-cert-auth &&
	etcd_enable_auth "/t$$/" dl secret-$$; then
	s0=$(ka_count started) m0=$(ka_count msg_received)
	check "tls: two agents running four lease TTLs exit" \
		run_job tls "$ETCD_ENDPOINTS" "$(etcd_rdzv_conf)"
	check_eq "tls: ... with exit status 0" "00" "$(rcs_of "${pids[@]}")"
	s=$(($(ka_count started) - s0)) m=$(($(ka_count msg_received) - m0))
	check "tls: the keep-alives went as messages of a few streams ($m keep-alives on $s streams)" \
		test "$m" -ge 12 -a "$m" -ge $((4 * s))
	check "tls: no lease expired" no_lease_lost tls
	check "tls: no agent fell back to the gateway" \
		bash -c "! grep -h 'did not take lease keep-alives' '$TEST_TMP'/agent.tls.*.log"
else
	not_ok "tls: an etcd member with TLS and authentication starts"
fi
etcd_cluster_destroy
check "no process of the test left" wait_for 10 no_marked_left
finish
