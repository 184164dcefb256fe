#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# etcd_takeover.sh - the etcd backend's takeover at a scale where etcd's
# answers come in bursts: 256 simulated nodes (bench/etcd_load: each the
# real backend, its etcd client and the agent's round loop) on a real
# 3-member etcd form their first round; the node that leads is dropped as
# kill -9 leaves it; a new leader takes over and every one of the 255
# survivors enters a new round. The new leader learns the survivors'
# rejoins from its watch of the node keys, 255 writes within a fraction of
# a second: a watch stream that left the end of such a burst unread (as
# libcurl 7.88 did on a gRPC stream whose upload was paused) never
# completes the takeover. etcd_load says what it saw as JSON; a run that
# did not complete exits 1 with what was missing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_etcd.sh"
LOAD="$BIN/../bench/etcd_load"
if [ ! -x "$LOAD" ]; then
	skip "etcd takeover at scale: $LOAD not built"
	finish
fi
if ! etcd_available; then
	skip "etcd takeover at scale: $ETCD_WHY"
	finish
fi
if ! etcd_cluster_start 3; then
	not_ok "a 3-member etcd cluster starts"
	finish
fi
out=$TEST_TMP/load.json
# the first round within 120 s, then the takeover within 120 s
timeout -k 5 300 "$LOAD" --endpoints "$ETCD_ENDPOINTS" --nodes 256 --job takeover \
	--lease-ttl 5 --last-call-ms 1000 --timeout 120 --idle-ms 0 \
	>"$out" 2>"$TEST_TMP/load.log"
rc=$?
check_eq "256 simulated nodes form a round, lose their leader and re-form: etcd_load exits 0 ($(tail -c 300 "$TEST_TMP/load.log" | tr '\n' ' '))" \
	0 "$rc"
# jqe FILTER: the filter holds of etcd_load's JSON
jqe() { jq -e "$1" "$out" >/dev/null; }
if [ "$rc" = 0 ]; then
	check_eq "all 256 nodes were in the first round" 256 "$(jq -r '.world' "$out")"
	check_eq "the 255 survivors were in a new round after the takeover" 255 \
		"$(jq -r '.takeover.survivors' "$out")"
	check "a new leader, not the one dropped ($(jq -c '.takeover | {killed, new_leader}' "$out"))" \
		jqe '.takeover.new_leader != .takeover.killed and (.takeover.new_leader | startswith("sim"))'
	check "the re-formed round is later than the first ($(jq -r '.takeover.round' "$out"))" \
		jqe '.takeover.round >= 2'
fi
etcd_cluster_destroy
finish
