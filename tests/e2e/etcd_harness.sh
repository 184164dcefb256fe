#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# etcd_harness.sh - the etcd test harness (lib_etcd.sh) against a real etcd,
# so that the backend's tests can trust what it says: a 3-member cluster
# forms on free loopback ports, survives the loss of its leader and of all
# its members, compacts and defragments, serves torchrun's v2 API when
# asked; TLS refuses a stranger's CA and certificate; authentication limits
# a user to its key prefix; and members run in the fault suite's network
# namespace hosts, one of which can be cut off and healed.
#
# Skips when etcd (Debian's etcd-server), curl or jq is missing, and the
# namespace part when namespaces cannot be made (not root).
DIR=$(cd "$(dirname "$0")" && pwd)
source "$DIR/lib.sh"
source "$DIR/lib_etcd.sh"
source "$DIR/../faults/lib_netns.sh"
trap 'netns_teardown; cleanup' EXIT

if ! etcd_available; then
	skip "etcd harness: $ETCD_WHY"
	finish
fi

# ---- a plain cluster (with the v2 API on, for torchrun's etcd-v2 mode)

if ! etcd_cluster_start 3 --enable-v2; then
	not_ok "3 etcd members form a cluster on loopback ports"
	finish
fi
ok "3 etcd members form a cluster on loopback ports ($ETCD_ENDPOINTS)"
check "ETCD_ENDPOINTS names three members on 127.0.0.1, none on the system etcd's 2379" \
	bash -c '[[ $1 =~ ^127\.0\.0\.1:[0-9]+(,127\.0\.0\.1:[0-9]+){2}$ ]] && [[ ,$1, != *:2379,* ]]' \
	_ "$ETCD_ENDPOINTS"
check_eq "each member has distinct client and peer ports" 6 \
	"$(printf '%s\n' "${ETCD_CLIENT_PORTS[@]}" "${ETCD_PEER_PORTS[@]}" | sort -u | wc -l)"

check "a key is put through member 0" etcd_put /h/a one 0
check_eq "and read through member 2" one "$(etcd_get /h/a 2)"
if etcd_get /h/absent 1 >/dev/null; then
	not_ok "etcd_get fails for an absent key"
else
	ok "etcd_get fails for an absent key"
fi

# other_leader OLD: a member other than OLD leads
other_leader() {
	local l
	l=$(etcd_leader_index) && [ "$l" != "$1" ]
}
leader=$(etcd_leader_index)
check "one member says it leads" [ -n "$leader" ]
leader=${leader:-0}
pid=${ETCD_PIDS[leader]}
etcd_member_kill "$leader"
check "kill -9 of the leader (member $leader) ends it" bash -c "! kill -0 $pid 2>/dev/null"
check_eq "the killed member is marked down" down "${ETCD_STATE[leader]}"
if wait_for 15 other_leader "$leader"; then
	new=$(etcd_leader_index)
	ok "a new leader is elected among the survivors (member $new)"
	check_eq "the key is still read through the new leader" one "$(etcd_get /h/a "$new")"
else
	not_ok "a new leader is elected among the survivors"
fi
check "a key is written while a member is down" etcd_put /h/b two
old_port=${ETCD_CLIENT_PORTS[leader]}
etcd_member_restart "$leader"
check "the killed member restarts and the cluster is healthy" etcd_wait_healthy 30
check_eq "it keeps its client port" "$old_port" "${ETCD_CLIENT_PORTS[leader]}"
check_eq "it serves what was written while it was down" two "$(etcd_get /h/b "$leader")"

old_pids=("${ETCD_PIDS[@]}")
etcd_cluster_stop_all
check "every member is stopped" bash -c 'for p; do ! kill -0 "$p" 2>/dev/null || exit 1; done' _ "${old_pids[@]}"
check "no member answers while all are down" bash -c \
	'for u; do ! curl -s --max-time 2 "$u/health" >/dev/null || exit 1; done' _ "${ETCD_URLS[@]}"
etcd_cluster_restart_all
check "all members restart and the cluster is healthy" etcd_wait_healthy 30
check_eq "the data is intact after all members restarted" "one two" \
	"$(etcd_get /h/a 1) $(etcd_get /h/b 2)"

old_rev=$(etcd_revision)
etcd_put /h/a three
check "compaction at the current revision and defrag of every member" etcd_compact_defrag
check_eq "compacted at the revision of the last write" "$((old_rev + 1))" "$ETCD_COMPACT_REV"
check_eq "keys are readable after compaction and defrag" "three two" \
	"$(etcd_get /h/a 0) $(etcd_get /h/b 1)"
ans=$(etcd_post /v3/kv/range "{\"key\":\"$(_etcd_b64 /h/a)\",\"revision\":\"$old_rev\"}")
check_eq "a range at an older revision fails as compacted (code 11)" 11 "$(etcd_error_code <<<"$ans")"
check_eq "etcd_get_prefix lists the keys of a prefix in order" "$(printf '/h/a\tthree\n/h/b\ttwo')" \
	"$(etcd_get_prefix /h/)"

# torchrun's etcd-v2 backend speaks the v2 API, off unless --enable-v2
curl -s --max-time 5 -X PUT -d value=v2 "${ETCD_URLS[0]}/v2/keys/dl/v2" >/dev/null
check_eq "with --enable-v2 a v2 key put through member 0 is read through member 2" v2 \
	"$(curl -s --max-time 5 "${ETCD_URLS[2]}/v2/keys/dl/v2" | jq -r .node.value)"
if /usr/bin/python3 -c 'import etcd' 2>/dev/null; then
	check_eq "python3-etcd (torchrun's etcd client) reads and writes through the v2 API" v2/py \
		"$(/usr/bin/python3 -c '
import sys, etcd
c = etcd.Client(host="127.0.0.1", port=int(sys.argv[1]), version_prefix="/v2")
c.write("/dl/py", c.read("/dl/v2").value + "/py")
print(c.read("/dl/py").value)' "${ETCD_CLIENT_PORTS[1]}" 2>&1)"
else
	skip "python3-etcd: not installed (contrib/install-deps.sh installs it)"
fi

old_pids=("${ETCD_PIDS[@]}")
etcd_cluster_destroy
check "etcd_cluster_destroy leaves no member running" bash -c \
	'for p; do ! kill -0 "$p" 2>/dev/null || exit 1; done' _ "${old_pids[@]}"

# ---- TLS with client certificates, then authentication

tls=$TEST_TMP/tls
if ! etcd_make_certs "$tls" || ! etcd_make_certs "$TEST_TMP/stranger"; then
	not_ok "etcd_make_certs makes a CA, a server and a client certificate"
	finish
fi
if ! etcd_cluster_start 3 --tls "$tls" --client-cert-auth; then
	not_ok "3 etcd members form a cluster with TLS and client certificates"
	finish
fi
ok "3 etcd members form a cluster with TLS and client certificates"
check "client URLs are https" bash -c '[[ $1 == https://127.0.0.1:* ]]' _ "${ETCD_URLS[1]}"
check "a put through member 0 with the right CA and a client certificate" etcd_put /dlaunch/j/k v 0
check_eq "and a get through member 1" v "$(etcd_get /dlaunch/j/k 1)"

# tls_curl ARGS...: a range through member 1 with curl's TLS ARGS; curl's status
tls_curl() {
	curl -s --max-time 5 -o /dev/null -X POST -d '{"key":"AA=="}' "$@" \
		"${ETCD_URLS[1]}/v3/kv/range"
}
s=$TEST_TMP/stranger
tls_curl --cacert "$s/ca.pem" --cert "$tls/client.pem" --key "$tls/client.key"
check_eq "curl refuses the server's certificate with another CA (curl status 60)" 60 $?
tls_curl --cacert "$tls/ca.pem"
rc=$?
check "the server refuses a client without a certificate (curl status $rc)" [ $rc -ne 0 ]
tls_curl --cacert "$tls/ca.pem" --cert "$s/client.pem" --key "$s/client.key"
rc=$?
check "the server refuses a client certificate from another CA (curl status $rc)" [ $rc -ne 0 ]
curl -s --max-time 5 -o /dev/null -X POST -d '{"key":"AA=="}' \
	"http://127.0.0.1:${ETCD_CLIENT_PORTS[1]}/v3/kv/range"
rc=$?
check "plain http to the https port is refused (curl status $rc)" [ $rc -ne 0 ]
tls_curl --cacert "$tls/ca.pem" --cert "$tls/client.pem" --key "$tls/client.key"
check_eq "the right CA and client certificate work (curl status 0)" 0 $?

check "auth on: root, a role on /dlaunch/ only, user alice" \
	etcd_enable_auth /dlaunch/ alice 'pa ss"w'
ans=$(etcd_post /v3/auth/authenticate '{"name":"alice","password":"wrong"}')
check_eq "a wrong password is refused (code 3)" 3 "$(etcd_error_code <<<"$ans")"
tok=$(etcd_auth_token alice 'pa ss"w')
check "alice gets a token" [ -n "$tok" ]
# as_alice CMD...: CMD with alice's token instead of root's
as_alice() { ETCD_TOKEN=$tok "$@"; }
check "alice writes inside /dlaunch/" as_alice etcd_put /dlaunch/j/alice 1
check_eq "alice reads inside /dlaunch/" 1 "$(as_alice etcd_get /dlaunch/j/alice 2)"
ans=$(as_alice etcd_post /v3/kv/put "{\"key\":\"$(_etcd_b64 /other)\",\"value\":\"eA==\"}")
check_eq "alice's write outside /dlaunch/ is refused (code 7)" 7 "$(etcd_error_code <<<"$ans")"
ans=$(as_alice etcd_post /v3/kv/range "{\"key\":\"$(_etcd_b64 /dlaunch0)\"}")
check_eq "alice's read just past the prefix is refused (code 7)" 7 "$(etcd_error_code <<<"$ans")"
ans=$(as_alice etcd_post /v3/auth/role/grant \
	'{"name":"alice-rw","perm":{"permType":"READWRITE","key":"AA==","range_end":"AA=="}}')
check_eq "alice cannot widen her own role (code 7)" 7 "$(etcd_error_code <<<"$ans")"
ans=$(ETCD_TOKEN= etcd_post /v3/kv/range "{\"key\":\"$(_etcd_b64 /dlaunch/j/k)\"}")
check_eq "a request without a token is refused (code 3)" 3 "$(etcd_error_code <<<"$ans")"
ans=$(ETCD_TOKEN=forged.1 etcd_post /v3/kv/range "{\"key\":\"$(_etcd_b64 /dlaunch/j/k)\"}")
check_eq "a forged token is refused (code 16)" 16 "$(etcd_error_code <<<"$ans")"
check_eq "the harness itself reads as root" "v 1" \
	"$(etcd_get /dlaunch/j/k) $(etcd_get /dlaunch/j/alice)"
check_eq "nothing was written outside /dlaunch/" "" \
	"$(etcd_get_prefix "" | cut -f1 | grep -v '^/dlaunch/')"
check_eq "etcd_rdzv_conf gives dlaunch the TLS files and the credentials" \
	"protocol=https,cacert=$tls/ca.pem,cert=$tls/client.pem,key=$tls/client.key,username=alice,password_file=$ETCD_PASSWORD_FILE" \
	"$(etcd_rdzv_conf)"
check_eq "the password file holds the password" 'pa ss"w' "$(cat "$ETCD_PASSWORD_FILE")"
etcd_cluster_destroy

# ---- members in network-namespace hosts, one of them cut off

if ! netns_available; then
	skip "etcd in network namespaces: $NETNS_WHY"
	finish
fi
if ! netns_setup 3; then
	not_ok "three namespace hosts are made"
	finish
fi
if ! etcd_cluster_start_netns 0 1 2; then
	not_ok "3 etcd members form a cluster in three namespace hosts"
	finish
fi
ok "3 etcd members form a cluster in three namespace hosts"
check_eq "ETCD_ENDPOINTS are the hosts' addresses" \
	"$(netns_addr 0):2379,$(netns_addr 1):2379,$(netns_addr 2):2379" "$ETCD_ENDPOINTS"
check "a key is put through the member on host 0" etcd_put /n/a one 0
check_eq "and read through the member on host 2" one "$(etcd_get /n/a 2)"
# not_ready I: member I does not answer a quorum read (within 2 s)
not_ready() { ! ETCD_CURL_TIMEOUT=2 _etcd_member_ready "$1"; }
netns_cut 2
check "cut from its peers, the member on host 2 serves no quorum read" wait_for 10 not_ready 2
check "the members on hosts 0 and 1 still take writes" wait_for 10 etcd_put /n/b two 0
check_eq "and read them through host 1" two "$(etcd_get /n/b 1)"
netns_heal 2
check "healed, the member on host 2 is back in the cluster" etcd_wait_healthy 30
check_eq "it serves what was written while it was cut off" two "$(etcd_get /n/b 2)"
etcd_cluster_destroy
finish
