#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# etcd_contrib.sh - contrib/etcd/etcd-cluster.sh does what its README says:
# "local" starts a 3-member etcd with TLS and an auth role limited to
# /dlaunch/, prints the dlaunch options for it, stops and starts again with
# its data; "pki" makes certificates and member settings that form a
# cluster across three hosts (network-namespace hosts here, skipped when
# namespaces cannot be made), and "auth" limits the dlaunch user there too.
DIR=$(cd "$(dirname "$0")" && pwd)
source "$DIR/lib.sh"
source "$DIR/lib_etcd.sh"
source "$DIR/../faults/lib_netns.sh"
SCRIPT=$DIR/../../contrib/etcd/etcd-cluster.sh
LOCAL=$TEST_TMP/local

# stop_local: the members "local" started are not spawn_bg's: stop them
# through the script, then kill any pid it left (never leave one behind)
stop_local() {
	local f
	[ -d "$LOCAL" ] || return 0
	"$SCRIPT" stop "$LOCAL" >/dev/null 2>&1
	for f in "$LOCAL"/etcd-*.pid; do
		[ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null
	done
	return 0
}
trap 'stop_local; netns_teardown; cleanup' EXIT

if ! etcd_available; then
	skip "contrib etcd cluster: $ETCD_WHY"
	finish
fi

# gw DIR URL PATH BODY [TOKEN]: a request with the cluster's client certificate
gw() {
	local -a h=()
	[ -n "${5:-}" ] && h=(-H "Authorization: $5")
	curl -s --max-time 5 --cacert "$1/ca.pem" --cert "$1/client.pem" --key "$1/client.key" \
		"${h[@]}" -X POST -d "$4" "$2$3"
}
# token DIR URL USER PASSWORD
token() { gw "$1" "$2" /v3/auth/authenticate "{\"name\":\"$3\",\"password\":\"$4\"}" | jq -r '.token // empty'; }
put_body() { echo "{\"key\":\"$(_etcd_b64 "$1")\",\"value\":\"$(_etcd_b64 "$2")\"}"; }

# ---- local: three members on this machine

read -r -a p <<<"$(_etcd_free_ports 6)"
ports=$(IFS=,; echo "${p[*]}")
out=$("$SCRIPT" local "$LOCAL" --ports "$ports" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
check_eq "local starts three members with TLS and auth" 0 $rc
url=https://127.0.0.1:${p[1]}
check "each member answers /health through TLS" bash -c '
	for port; do
		curl -s --max-time 5 --cacert "'"$LOCAL"'/ca.pem" --cert "'"$LOCAL"'/client.pem" \
			--key "'"$LOCAL"'/client.key" "https://127.0.0.1:$port/health" |
			grep -q "\"health\":\"true\"" || exit 1
	done' _ "${p[0]}" "${p[1]}" "${p[2]}"
check "a client without a certificate is refused" bash -c \
	"! curl -s --max-time 5 --cacert '$LOCAL/ca.pem' '$url/health'"
check "it prints the dlaunch endpoints" grep -qF -- \
	"--rdzv-endpoint 127.0.0.1:${p[0]},127.0.0.1:${p[1]},127.0.0.1:${p[2]}" <<<"$out"
check "it prints the dlaunch TLS and auth options" grep -qF -- \
	"--rdzv-conf protocol=https,cacert=$LOCAL/ca.pem,cert=$LOCAL/client.pem,key=$LOCAL/client.key,username=dlaunch,password_file=$LOCAL/dlaunch.password" <<<"$out"

pw=$(cat "$LOCAL/dlaunch.password")
tok=$(token "$LOCAL" "$url" dlaunch "$pw")
check "the dlaunch user gets a token with the password in dlaunch.password" [ -n "$tok" ]
check_eq "a wrong password is refused (code 3)" 3 \
	"$(gw "$LOCAL" "$url" /v3/auth/authenticate '{"name":"dlaunch","password":"no"}' | etcd_error_code)"
ans=$(gw "$LOCAL" "$url" /v3/kv/put "$(put_body /dlaunch/job/state s1)" "$tok")
check "the dlaunch user writes under /dlaunch/" _etcd_is_answer <<<"$ans"
check_eq "a write outside /dlaunch/ is refused (code 7)" 7 \
	"$(gw "$LOCAL" "$url" /v3/kv/put "$(put_body /elsewhere x)" "$tok" | etcd_error_code)"
check_eq "so is one to /dlaunch itself, outside the prefix /dlaunch/ (code 7)" 7 \
	"$(gw "$LOCAL" "$url" /v3/kv/put "$(put_body /dlaunch x)" "$tok" | etcd_error_code)"

local_pids=$(cat "$LOCAL"/etcd-*.pid)
"$SCRIPT" stop "$LOCAL" >/dev/null
check "stop leaves no member running" bash -c \
	'for p; do ! kill -0 "$p" 2>/dev/null || exit 1; done' _ $local_pids
check_eq "stop ended three members" 3 "$(wc -w <<<"$local_pids")"
out=$("$SCRIPT" local "$LOCAL" 2>&1)
check_eq "local again on the same directory starts the members on their ports" 0 $?
check "and finds authentication on already" grep -q 'authentication is on already' <<<"$out"
tok=$(token "$LOCAL" "$url" dlaunch "$pw")
check_eq "the data is still there" s1 "$(gw "$LOCAL" "$url" /v3/kv/range \
	"{\"key\":\"$(_etcd_b64 /dlaunch/job/state)\"}" "$tok" | jq -r '.kvs[0].value | @base64d')"
stop_local

# ---- pki: three hosts (network namespaces) from the member settings

if ! netns_available; then
	skip "contrib etcd cluster on three hosts: $NETNS_WHY"
	finish
fi
if ! netns_setup 3; then
	not_ok "three namespace hosts are made"
	finish
fi
PKI=$TEST_TMP/pki
out=$(PKI_DIR=$PKI "$SCRIPT" pki "$PKI" "$(netns_addr 0)" "$(netns_addr 1)" "$(netns_addr 2)" 2>&1)
check_eq "pki makes the certificates and the settings of three members" 0 $?
check "it says how to install each member" grep -q "install $PKI I" <<<"$out"
pids=()
for i in 0 1 2; do
	# the member's settings as Debian's etcd.service would read them;
	# only the data directory moves, the three share one file system here
	netns_spawn "$i" "$TEST_TMP/member$i.log" bash -c '
		for v in $(compgen -e); do case $v in ETCD_*) unset "$v" ;; esac; done
		set -a; . "$1"; set +a
		ETCD_DATA_DIR=$2 exec etcd' _ "$PKI/etcd-$i.env" "$TEST_TMP/data$i"
	pids+=("$LAST_PID")
done
# healthy DIR URL HOST: the member at URL says so, asked from HOST
healthy() {
	netns_exec "$3" curl -s --max-time 2 --cacert "$1/ca.pem" --cert "$1/client.pem" \
		--key "$1/client.key" "$2/health" | grep -q '"health":"true"'
}
ok_all=1
for i in 0 1 2; do
	wait_for 30 healthy "$PKI" "https://$(netns_addr "$i"):2379" "$(( (i + 1) % 3 ))" || ok_all=0
done
check_eq "the three members form a cluster over TLS across the hosts" 1 "$ok_all"
url0=https://$(netns_addr 0):2379
out=$(netns_exec 1 "$SCRIPT" auth "$PKI" "$url0" 2>&1)
check_eq "auth, run from another host, turns authentication on" 0 $?
check "and says the dlaunch user is limited to /dlaunch/" grep -q 'user dlaunch may use /dlaunch/ only' <<<"$out"
pw=$(cat "$PKI/dlaunch.password")
url2=https://$(netns_addr 2):2379
tok=$(netns_exec 1 bash -c "$(declare -f gw token); token '$PKI' '$url2' dlaunch '$pw'")
check "the dlaunch user authenticates with member 2" [ -n "$tok" ]
ans=$(netns_exec 1 bash -c "$(declare -f gw); gw '$PKI' '$url2' /v3/kv/put '$(put_body /dlaunch/j x)' '$tok'")
check "and writes under /dlaunch/" _etcd_is_answer <<<"$ans"
ans=$(netns_exec 1 bash -c "$(declare -f gw); gw '$PKI' '$url2' /v3/kv/put '$(put_body /j x)' '$tok'")
check_eq "but not outside (code 7)" 7 "$(etcd_error_code <<<"$ans")"
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
finish
