# SPDX-License-Identifier: Apache-2.0
# lib_etcd.sh - real etcd clusters for the tests of the etcd backend
# (sourced after tests/e2e/lib.sh; for the namespace variant, also after
# tests/faults/lib_netns.sh).
#
# One cluster at a time per test script. Members are Debian's etcd (3.4 or
# later) started with spawn_bg, so the suite's EXIT trap kills whatever is
# left; each has its own data directory under $TEST_TMP and its log in
# $TEST_TMP/etcd-cC-mI-S.log (cluster C, member I, start S), where the fault
# suite keeps the logs of a failed case. The system etcd that Debian's
# package may run on 127.0.0.1:2379 is never touched: members listen on free
# loopback ports, or on the addresses of network-namespace hosts.
#
# Everything talks to etcd the way dlaunch does, through its v3 JSON gateway
# with curl (keys and values base64, answers read with jq): no etcdctl.
#
# Starting and stopping
#   etcd_available            0 when etcd >= 3.4, curl and jq are here; else
#                             1 with the reason in ETCD_WHY (a skip)
#   etcd_cluster_start [N] [--tls DIR] [--client-cert-auth] [ETCD_FLAG...]
#                             N members (default 3) on free loopback ports,
#                             waits until every member answers a quorum read;
#                             ETCD_FLAG... go to every member as they are
#                             (e.g. --enable-v2 for torchrun's etcd-v2 mode)
#   etcd_cluster_start_netns H... [--peer-net] [--tls DIR] [--client-cert-auth] [ETCD_FLAG...]
#                             one member on each netns host H (lib_netns.sh's
#                             index), listening on that host's address, ports
#                             2379 (clients) and 2380 (peers); --peer-net:
#                             peers talk over the hosts' second network
#                             (netns_second_net, made here), clients over
#                             the first
#   etcd_member_cut_peers I / etcd_member_heal_peers I
#                             (--peer-net) take member I's peer link down
#                             (it still answers clients, without a leader:
#                             state "cut", which the helpers do not ask) /
#                             up again (state "up")
#   etcd_wait_healthy [SECS]  until every member in state "up" answers a
#                             quorum read (default 30 s); 1 on timeout
#   etcd_member_kill I [SIG]  signal member I (KILL by default) and, for a
#                             signal that ends it, wait until it is gone;
#                             STOP pauses it, CONT resumes it
#   etcd_member_restart I     start a member that is down again: same
#                             command line, data directory and ports (no
#                             wait: etcd_wait_healthy then)
#   etcd_cluster_stop_all [SIG]   every member not down (KILL by default)
#   etcd_cluster_restart_all      every member that is down (no wait)
#   etcd_cluster_destroy      kill every member and forget the cluster, so
#                             that another can be started
#   etcd_leader_index         print the index of the member that leads
#                             (asked of the members themselves); 1 if none
#
# Reading and writing (member index I optional: the first member that is up)
#   etcd_post PATH BODY [I]   POST a gateway request, print the answer; 1
#                             when curl fails or the answer is an error
#   etcd_put KEY VALUE [I]    write a key
#   etcd_get KEY [I]          print a key's value; 1 when absent or refused
#   etcd_get_prefix PFX [I]   print "key<TAB>value" per key under PFX, in key
#                             order (jq's @tsv: tabs and newlines escaped);
#                             PFX "" lists the whole store
#   etcd_del KEY [I]          delete a key
#   etcd_revision [I]         print the store's current revision
#   etcd_compact_defrag       compact at the current revision (physically)
#                             and defragment every member that is up; sets
#                             ETCD_COMPACT_REV
#   etcd_error_code           stdin an answer, print its gRPC code (empty
#                             when it is not an error)
#   etcd_metric_sum AWK-PROGRAM ARGS...   what the awk program (given the
#                             ARGS, e.g. -v m=...) prints for each member's
#                             /metrics, summed over the members
# Requests carry a token when ETCD_TOKEN is set (set and empty: none at
# all, to try anonymous access); otherwise, once auth is on, a fresh root
# token.
#
# TLS and authentication
#   etcd_make_certs DIR [SAN...]  ca.pem/ca.key, server.pem/server.key (IP
#                             127.0.0.1, DNS localhost, and each SAN given as
#                             IP:addr or DNS:name), client.pem/client.key;
#                             ECDSA P-256, valid two days
#   etcd_enable_auth PREFIX USER PASSWORD   root user, a role USER-rw with
#                             read and write on the key prefix PREFIX only, the
#                             user USER with that role; then auth on. Sets
#                             ETCD_USER and ETCD_PASSWORD_FILE
#   etcd_add_user USER PASSWORD PREFIX      another user limited to PREFIX
#   etcd_auth_token USER PASSWORD [I]       print a token for USER
#   etcd_rdzv_conf            print the dlaunch --rdzv-conf keys that reach
#                             this cluster (protocol, cacert, cert, key,
#                             username, password_file); empty for plain http
#
# State, after a start (arrays are indexed by member)
#   ETCD_N               number of members
#   ETCD_ENDPOINTS       "host:port,host:port,..." for --rdzv-endpoint
#   ETCD_URLS            client URLs (http:// or https://)
#   ETCD_HOSTS           each member's address
#   ETCD_PEER_HOSTS      each member's address for its peers
#   ETCD_CLIENT_PORTS, ETCD_PEER_PORTS
#   ETCD_PIDS            each member's pid (its process group leader)
#   ETCD_STATE           up | down | stopped (SIGSTOP) | cut (from its peers)
#   ETCD_NETNS           each member's netns host index, empty on loopback
#   ETCD_DIRS            each member's directory (data/, cmd: its argv)
#   ETCD_LOGS            each member's current log
#   ETCD_SCHEME          http | https;  ETCD_TLS_DIR  the certificates
#   ETCD_AUTH            1 once etcd_enable_auth ran; ETCD_ROOT_PASSWORD
#
# Members use etcd's default timing (heartbeat 100 ms, election 1 s): a
# new leader takes one to two seconds after the old one dies, and shorter
# timeouts make spurious elections likely on a loaded two-core machine.
# Passwords are hashed with bcrypt cost 4 (the least etcd takes): each
# authentication costs a millisecond instead of tens.
#
# What tests should know:
# - etcd's tokens ("simple" tokens) live in the members' memory: after all
#   members restart, a token from before is refused with code 16 ("invalid
#   auth token"), as it is after --auth-token-ttl seconds unused (300 by
#   default; pass e.g. --auth-token-ttl 5 to test renewal).
# - With auth on, the gateway refuses (HTTP 400) a client certificate that
#   has a common name; etcd_make_certs's client certificate has none.
# - A member paused with STOP should be resumed (CONT) or killed before
#   the test ends: the EXIT trap's SIGTERM would wait 5 s on it.
# - With members in namespace hosts, the helpers run curl inside the
#   member's host (the test's own namespace has no route there), and a host
#   that netns_cut took down cannot reach even its own address. To cut an
#   agent's host from etcd, put the members on hosts of their own (e.g.
#   netns_setup 6, agents on hosts 0-2, etcd_cluster_start_netns 3 4 5).
# - ETCD_CURL_TIMEOUT (default 5 s) bounds every helper's request.

ETCD_N=0
ETCD_SEQ=0
ETCD_ENDPOINTS=
ETCD_URLS=()
ETCD_HOSTS=()
ETCD_PEER_HOSTS=()
_ETCD_PEER_ADDRS=() # etcd_cluster_start_netns --peer-net's, for _etcd_configure
ETCD_CLIENT_PORTS=()
ETCD_PEER_PORTS=()
ETCD_PIDS=()
ETCD_STATE=()
ETCD_NETNS=()
ETCD_DIRS=()
ETCD_LOGS=()
ETCD_STARTS=()
ETCD_SCHEME=http
ETCD_TLS_DIR=
ETCD_AUTH=0
ETCD_ROOT_PASSWORD=
ETCD_USER=
ETCD_PASSWORD_FILE=
ETCD_COMPACT_REV=
ETCD_WHY=
ETCD_CURL_TIMEOUT=${ETCD_CURL_TIMEOUT:-5}

etcd_available() {
	local t v
	for t in etcd curl jq base64; do
		if ! command -v "$t" >/dev/null 2>&1; then
			ETCD_WHY="$t is not installed (contrib/install-deps.sh installs it)"
			return 1
		fi
	done
	v=$(etcd --version 2>/dev/null | sed -n 's/^etcd Version: *//p')
	case "$v" in
	3.[0-3].* | [0-2].* | "")
		ETCD_WHY="etcd ${v:-of unknown version} is older than 3.4"
		return 1
		;;
	esac
	return 0
}

# _etcd_b64 STRING: standard base64, one line
_etcd_b64() { printf '%s' "$1" | base64 -w0; }

# _etcd_prefix_end PREFIX: the first key after every key starting with
# PREFIX (its last byte plus one; "\0", every key, for the empty prefix),
# base64. Printable ASCII prefixes only.
_etcd_prefix_end() {
	local p=$1 last code
	if [ -z "$p" ]; then
		printf 'AA=='
		return 0
	fi
	last=${p: -1}
	printf -v code '%d' "'$last"
	if [ "$code" -lt 32 ] || [ "$code" -ge 126 ]; then
		echo "lib_etcd: prefix '$p' must end in printable ASCII" >&2
		return 1
	fi
	printf -v last "\\$(printf '%03o' $((code + 1)))"
	_etcd_b64 "${p%?}$last"
}

# _etcd_free_ports N: N distinct TCP ports free on 127.0.0.1 now (etcd
# cannot bind port 0 and say which port it got; a port taken before etcd
# binds it makes the start fail, and etcd_cluster_start tries again)
_etcd_free_ports() {
	local py=/usr/bin/python3
	[ -x "$py" ] || py=python3
	"$py" -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))
for s in ss:
    s.close()' "$1"
}

# _etcd_first_up: the index of the first member that is up
_etcd_first_up() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		[ "${ETCD_STATE[i]}" = up ] && { echo "$i"; return 0; }
	done
	return 1
}

# _etcd_raw_curl I PATH BODY [TOKEN]: POST BODY to member I's client URL,
# from inside its namespace host when it has one; a TOKEN goes in the
# Authorization header as etcd wants it (no "Bearer")
_etcd_raw_curl() {
	local i=$1 path=$2 body=$3 token=${4:-}
	local -a pre=() cmd=(curl -sS --max-time "$ETCD_CURL_TIMEOUT"
		--connect-timeout 2 -X POST -H 'Content-Type: application/json')
	if [ -n "${ETCD_NETNS[i]}" ]; then
		pre=(ip netns exec "$(netns_host "${ETCD_NETNS[i]}")")
	fi
	if [ "$ETCD_SCHEME" = https ]; then
		cmd+=(--cacert "$ETCD_TLS_DIR/ca.pem"
			--cert "$ETCD_TLS_DIR/client.pem" --key "$ETCD_TLS_DIR/client.key")
	fi
	[ -n "$token" ] && cmd+=(-H "Authorization: $token")
	"${pre[@]}" "${cmd[@]}" -d "$body" "${ETCD_URLS[i]}$path"
}

# _etcd_is_answer: stdin a gateway answer; 0 when it is not an error
_etcd_is_answer() { jq -e 'type == "object" and (has("error") or has("code") | not)' >/dev/null 2>&1; }

# etcd_auth_token USER PASSWORD [I]: print a token for USER (1, and the
# answer on stderr, when etcd refuses)
etcd_auth_token() {
	local i=${3:-} body ans
	[ -n "$i" ] || i=$(_etcd_first_up) || return 1
	body=$(jq -cn --arg n "$1" --arg p "$2" '{name: $n, password: $p}')
	ans=$(_etcd_raw_curl "$i" /v3/auth/authenticate "$body") || return 1
	if ! jq -er '.token // empty' <<<"$ans" 2>/dev/null; then
		echo "$ans" >&2
		return 1
	fi
}

# _etcd_token I: the token a request to member I carries (see the top)
_etcd_token() {
	if [ -n "${ETCD_TOKEN+set}" ]; then
		printf '%s' "$ETCD_TOKEN"
	elif [ "$ETCD_AUTH" = 1 ]; then
		etcd_auth_token root "$ETCD_ROOT_PASSWORD" "$1"
	fi
}

# etcd_post PATH BODY [I]: print the answer of member I (default: the
# first member up); 0 only for an answer that is not an error
etcd_post() {
	local i=${3:-} token ans
	[ -n "$i" ] || i=$(_etcd_first_up) || {
		echo "lib_etcd: no etcd member is up" >&2
		return 1
	}
	token=$(_etcd_token "$i") || return 1
	ans=$(_etcd_raw_curl "$i" "$1" "$2" "$token") || return 1
	printf '%s\n' "$ans"
	_etcd_is_answer <<<"$ans"
}

# etcd_error_code: the gRPC code of the answer on stdin ("" if none)
etcd_error_code() { jq -r '.code // .error.grpc_code // empty' 2>/dev/null; }

etcd_metric_sum() {
	local prog=$1 i sum=0 n tls=()
	shift
	[ "$ETCD_SCHEME" = https ] && tls=(--cacert "$ETCD_TLS_DIR/ca.pem"
		--cert "$ETCD_TLS_DIR/client.pem" --key "$ETCD_TLS_DIR/client.key")
	for i in "${!ETCD_CLIENT_PORTS[@]}"; do
		n=$(curl -s -m 5 "${tls[@]}" "${ETCD_URLS[$i]}/metrics" | awk "$@" "$prog")
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
}

etcd_put() {
	etcd_post /v3/kv/put "{\"key\":\"$(_etcd_b64 "$1")\",\"value\":\"$(_etcd_b64 "$2")\"}" "${3:-}" >/dev/null
}

etcd_get() {
	local ans
	ans=$(etcd_post /v3/kv/range "{\"key\":\"$(_etcd_b64 "$1")\"}" "${2:-}") || return 1
	jq -er 'if (.kvs | length) > 0 then (.kvs[0].value // "" | @base64d) else error("absent") end' \
		<<<"$ans" 2>/dev/null || return 1
}

etcd_get_prefix() {
	local ans key=AA== end
	end=$(_etcd_prefix_end "$1") || return 1
	[ -z "$1" ] || key=$(_etcd_b64 "$1")
	ans=$(etcd_post /v3/kv/range "{\"key\":\"$key\",\"range_end\":\"$end\"}" "${2:-}") || return 1
	jq -r '.kvs // [] | .[] | [(.key | @base64d), (.value // "" | @base64d)] | @tsv' <<<"$ans"
}

etcd_del() {
	etcd_post /v3/kv/deleterange "{\"key\":\"$(_etcd_b64 "$1")\"}" "${2:-}" >/dev/null
}

etcd_revision() {
	local ans
	ans=$(etcd_post /v3/kv/range '{"key":"AA==","keys_only":true,"limit":"1"}' "${1:-}") || return 1
	jq -er '.header.revision' <<<"$ans"
}

etcd_compact_defrag() {
	local rev ans i
	rev=$(etcd_revision) || return 1
	if ! ans=$(etcd_post /v3/kv/compaction "{\"revision\":\"$rev\",\"physical\":true}"); then
		# compacted at this revision already: nothing changed since
		[ "$(etcd_error_code <<<"$ans")" = 11 ] || { echo "$ans" >&2; return 1; }
	fi
	ETCD_COMPACT_REV=$rev
	for ((i = 0; i < ETCD_N; i++)); do
		[ "${ETCD_STATE[i]}" = up ] || continue
		etcd_post /v3/maintenance/defragment '{}' "$i" >/dev/null || {
			echo "lib_etcd: defragment of member $i failed" >&2
			return 1
		}
	done
}

# _etcd_member_ready I: member I answers a linearizable (quorum) read
_etcd_member_ready() {
	etcd_post /v3/kv/range '{"key":"AA==","keys_only":true,"limit":"1"}' "$1" >/dev/null 2>&1
}

# _etcd_all_ready: every member up answers; 2 when one of them has died
_etcd_all_ready() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		[ "${ETCD_STATE[i]}" = up ] || continue
		alive "${ETCD_PIDS[i]}" || return 2
		_etcd_member_ready "$i" || return 1
	done
	return 0
}

etcd_wait_healthy() {
	local secs=${1:-30} rc i
	local deadline=$((${EPOCHREALTIME//[.,]/} + secs * 1000000))
	while :; do
		_etcd_all_ready
		rc=$?
		[ $rc -eq 0 ] && return 0
		[ $rc -eq 2 ] && break
		[ "${EPOCHREALTIME//[.,]/}" -ge "$deadline" ] && break
		sleep 0.05
	done
	for ((i = 0; i < ETCD_N; i++)); do
		[ "${ETCD_STATE[i]}" = up ] || continue
		if ! alive "${ETCD_PIDS[i]}"; then
			echo "# etcd member $i (pid ${ETCD_PIDS[i]}) exited; last lines of ${ETCD_LOGS[i]}:"
			tail -n 5 "${ETCD_LOGS[i]}" | sed 's/^/#   /'
		elif ! _etcd_member_ready "$i"; then
			echo "# etcd member $i (${ETCD_URLS[i]}) does not answer a quorum read"
		fi
	done
	return 1
}

# _etcd_launch I: start member I from its recorded command line, with a
# new log. etcd reads ETCD_* variables from its environment as flags (and
# refuses one that a flag also sets): exported ones never reach it.
_etcd_launch() {
	local i=$1 log v
	local -a argv=() unenv=()
	mapfile -d '' -t argv <"${ETCD_DIRS[i]}/cmd"
	for v in $(compgen -e); do
		case "$v" in ETCD_* | ETCDCTL_*) unenv+=(-u "$v") ;; esac
	done
	ETCD_STARTS[i]=$((${ETCD_STARTS[i]:-0} + 1))
	log=$TEST_TMP/etcd-c$ETCD_SEQ-m$i-${ETCD_STARTS[i]}.log
	if [ -n "${ETCD_NETNS[i]}" ]; then
		netns_spawn "${ETCD_NETNS[i]}" "$log" env "${unenv[@]}" etcd "${argv[@]}"
	else
		spawn_bg "$log" env "${unenv[@]}" etcd "${argv[@]}"
	fi
	# bash still reaps it, but no longer reports "Killed" for every
	# member a test kills on purpose
	disown "$LAST_PID" 2>/dev/null
	ETCD_PIDS[i]=$LAST_PID
	ETCD_LOGS[i]=$log
	ETCD_STATE[i]=up
}

# _etcd_configure HOSTS NETNS CPORTS PPORTS TLS_DIR CCA FLAG...: lay out a
# new cluster (arrays passed by name) and write each member's command line;
# the peers' addresses are _ETCD_PEER_ADDRS when set, else HOSTS
_etcd_configure() {
	local -n hosts_=$1 netns_=$2 cports_=$3 pports_=$4
	local tls=$5 cca=$6
	shift 6
	local i n=${#hosts_[@]} initial="" token dir
	ETCD_SEQ=$((ETCD_SEQ + 1))
	ETCD_N=$n
	ETCD_SCHEME=http
	ETCD_TLS_DIR=$tls
	[ -n "$tls" ] && ETCD_SCHEME=https
	ETCD_HOSTS=("${hosts_[@]}")
	ETCD_PEER_HOSTS=("${hosts_[@]}")
	[ ${#_ETCD_PEER_ADDRS[@]} -eq 0 ] || ETCD_PEER_HOSTS=("${_ETCD_PEER_ADDRS[@]}")
	ETCD_NETNS=("${netns_[@]}")
	ETCD_CLIENT_PORTS=("${cports_[@]}")
	ETCD_PEER_PORTS=("${pports_[@]}")
	ETCD_URLS=() ETCD_PIDS=() ETCD_STATE=() ETCD_DIRS=() ETCD_LOGS=() ETCD_STARTS=()
	ETCD_AUTH=0 ETCD_ROOT_PASSWORD='' ETCD_USER='' ETCD_PASSWORD_FILE='' ETCD_COMPACT_REV=''
	ETCD_ENDPOINTS=
	for ((i = 0; i < n; i++)); do
		initial+="${initial:+,}m$i=http://${ETCD_PEER_HOSTS[i]}:${pports_[i]}"
		ETCD_URLS+=("$ETCD_SCHEME://${hosts_[i]}:${cports_[i]}")
		ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}${hosts_[i]}:${cports_[i]}"
		ETCD_STATE+=(down)
		ETCD_PIDS+=("")
		ETCD_LOGS+=("")
		ETCD_STARTS+=(0)
	done
	# a token of its own: a member that reaches another test's cluster
	# through a reused port is refused instead of joining it
	token=dlaunch-test-$$-$ETCD_SEQ-$RANDOM
	for ((i = 0; i < n; i++)); do
		dir=$TEST_TMP/etcd-c$ETCD_SEQ/m$i
		mkdir -p "$dir" || return 1
		ETCD_DIRS+=("$dir")
		local -a argv=(--name "m$i" --data-dir "$dir/data"
			--listen-client-urls "${ETCD_URLS[i]}"
			--advertise-client-urls "${ETCD_URLS[i]}"
			--listen-peer-urls "http://${ETCD_PEER_HOSTS[i]}:${pports_[i]}"
			--initial-advertise-peer-urls "http://${ETCD_PEER_HOSTS[i]}:${pports_[i]}"
			--initial-cluster "$initial"
			--initial-cluster-token "$token"
			--initial-cluster-state new
			--logger zap --log-outputs stderr
			--bcrypt-cost 4)
		if [ -n "$tls" ]; then
			argv+=(--cert-file "$tls/server.pem" --key-file "$tls/server.key")
			[ "$cca" = 1 ] &&
				argv+=(--client-cert-auth --trusted-ca-file "$tls/ca.pem")
		fi
		argv+=("$@")
		printf '%s\0' "${argv[@]}" >"$dir/cmd" || return 1
	done
}

# _etcd_boot: start every member, wait for a healthy cluster (30 s)
_etcd_boot() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		_etcd_launch "$i"
	done
	etcd_wait_healthy 30
}

# _etcd_parse_opts ARG...: lib options first, then etcd's own flags;
# sets _ETCD_TLS, _ETCD_CCA and _ETCD_FLAGS
_etcd_parse_opts() {
	_ETCD_TLS='' _ETCD_CCA=0 _ETCD_FLAGS=()
	while [ $# -gt 0 ]; do
		case "$1" in
		--tls)
			_ETCD_TLS=$(cd "$2" && pwd) || return 1
			shift 2
			;;
		--client-cert-auth) _ETCD_CCA=1; shift ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	_ETCD_FLAGS=("$@")
	if [ "$_ETCD_CCA" = 1 ] && [ -z "$_ETCD_TLS" ]; then
		echo "lib_etcd: --client-cert-auth needs --tls DIR" >&2
		return 1
	fi
	if [ -n "$_ETCD_TLS" ] && [ ! -f "$_ETCD_TLS/server.pem" ]; then
		echo "lib_etcd: $_ETCD_TLS has no server.pem (made by etcd_make_certs?)" >&2
		return 1
	fi
}

etcd_cluster_start() {
	local n=3 attempt i
	local -a hosts netns cports pports ports
	if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
		n=$1
		shift
	fi
	if [ "$ETCD_N" -gt 0 ]; then
		echo "lib_etcd: a cluster is running; etcd_cluster_destroy it first" >&2
		return 1
	fi
	_etcd_parse_opts "$@" || return 1
	for attempt in 1 2 3; do
		read -r -a ports <<<"$(_etcd_free_ports $((2 * n)))" || return 1
		hosts=() netns=() cports=() pports=()
		for ((i = 0; i < n; i++)); do
			hosts+=(127.0.0.1)
			netns+=("")
			cports+=("${ports[2 * i]}")
			pports+=("${ports[2 * i + 1]}")
		done
		_etcd_configure hosts netns cports pports "$_ETCD_TLS" "$_ETCD_CCA" \
			"${_ETCD_FLAGS[@]}" || return 1
		_etcd_boot && return 0
		# a port taken between the pick and etcd's bind: pick again
		if ! cat "${ETCD_LOGS[@]}" 2>/dev/null | grep -q 'address already in use'; then
			break
		fi
		echo "# etcd: a port was taken meanwhile (attempt $attempt); again"
		etcd_cluster_destroy
	done
	echo "# etcd: the cluster did not form; logs in $TEST_TMP/etcd-c$ETCD_SEQ-*"
	return 1
}

etcd_cluster_start_netns() {
	local i peer_net=0
	local -a hs=() hosts=() cports=() pports=() _ETCD_PEER_ADDRS=()
	while [[ "${1:-}" =~ ^[0-9]+$ ]]; do
		hs+=("$1")
		shift
	done
	if [ "${1:-}" = --peer-net ]; then
		peer_net=1
		shift
	fi
	if ! declare -F netns_spawn >/dev/null; then
		echo "lib_etcd: source tests/faults/lib_netns.sh first" >&2
		return 1
	fi
	if [ ${#hs[@]} -eq 0 ] || [ "$ETCD_N" -gt 0 ]; then
		echo "lib_etcd: etcd_cluster_start_netns H... (with no cluster running)" >&2
		return 1
	fi
	_etcd_parse_opts "$@" || return 1
	if [ $peer_net = 1 ] && ! netns_second_net "${hs[@]}"; then
		echo "lib_etcd: could not give hosts ${hs[*]} a peer network" >&2
		return 1
	fi
	# each host has a port space of its own: the standard ports are free
	for i in "${hs[@]}"; do
		hosts+=("$(netns_addr "$i")")
		[ $peer_net = 0 ] || _ETCD_PEER_ADDRS+=("$(netns_addr2 "$i")")
		cports+=(2379)
		pports+=(2380)
	done
	_etcd_configure hosts hs cports pports "$_ETCD_TLS" "$_ETCD_CCA" \
		"${_ETCD_FLAGS[@]}" || return 1
	_etcd_boot || {
		echo "# etcd: the cluster did not form; logs in $TEST_TMP/etcd-c$ETCD_SEQ-*"
		return 1
	}
}

etcd_member_kill() {
	local i=$1 sig=${2:-KILL} pid
	pid=${ETCD_PIDS[i]}
	[ -n "$pid" ] || return 1
	case "$sig" in
	STOP | SIGSTOP)
		kill -STOP "$pid" && ETCD_STATE[i]=stopped
		return
		;;
	CONT | SIGCONT)
		kill -CONT "$pid" && ETCD_STATE[i]=up
		return
		;;
	esac
	kill "-$sig" "$pid" 2>/dev/null
	# a paused member would never act on a TERM
	kill -CONT "$pid" 2>/dev/null
	if ! wait_for 10 bash -c "! kill -0 $pid"; then
		echo "# etcd member $i (pid $pid) survived SIG$sig" >&2
		return 1
	fi
	ETCD_STATE[i]=down
	return 0
}

etcd_member_cut_peers() {
	local i=$1
	if [ "${ETCD_PEER_HOSTS[i]}" = "${ETCD_HOSTS[i]}" ] || [ "${ETCD_STATE[i]}" != up ]; then
		echo "lib_etcd: member $i is ${ETCD_STATE[i]} or has no peer network of its own" >&2
		return 1
	fi
	netns_cut2 "${ETCD_NETNS[i]}" && ETCD_STATE[i]=cut
}

etcd_member_heal_peers() {
	local i=$1
	[ "${ETCD_STATE[i]}" = cut ] || return 1
	netns_heal2 "${ETCD_NETNS[i]}" && ETCD_STATE[i]=up
}

etcd_member_restart() {
	local i=$1
	if [ "${ETCD_STATE[i]}" != down ]; then
		echo "lib_etcd: member $i is ${ETCD_STATE[i]}, not down" >&2
		return 1
	fi
	_etcd_launch "$i"
}

etcd_cluster_stop_all() {
	local i rc=0
	for ((i = 0; i < ETCD_N; i++)); do
		[ "${ETCD_STATE[i]}" = down ] && continue
		etcd_member_kill "$i" "${1:-KILL}" || rc=1
	done
	return $rc
}

etcd_cluster_restart_all() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		[ "${ETCD_STATE[i]}" = down ] && _etcd_launch "$i"
	done
	return 0
}

etcd_cluster_destroy() {
	etcd_cluster_stop_all KILL
	ETCD_N=0
}

etcd_leader_index() {
	local i ans id leader term best=-1 best_term=-1
	for ((i = 0; i < ETCD_N; i++)); do
		[ "${ETCD_STATE[i]}" = up ] || continue
		ans=$(ETCD_CURL_TIMEOUT=2 etcd_post /v3/maintenance/status '{}' "$i" 2>/dev/null) || continue
		read -r id leader term < <(jq -r '"\(.header.member_id) \(.leader // "0") \(.raftTerm // "0")"' <<<"$ans")
		# a member that says it leads itself; after a partition the
		# old leader may still think so: the higher term wins
		if [ "$id" = "$leader" ] && [ "$term" -gt "$best_term" ]; then
			best=$i
			best_term=$term
		fi
	done
	[ "$best" -ge 0 ] || return 1
	echo "$best"
}

etcd_make_certs() {
	local dir=$1 san="IP:127.0.0.1,DNS:localhost" s
	shift
	for s in "$@"; do san+=",$s"; done
	mkdir -p "$dir" || return 1
	(
		set -e
		cd "$dir"
		key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
		key ca.key
		openssl req -x509 -new -key ca.key -subj /CN=dlaunch-test-ca -days 2 \
			-addext basicConstraints=critical,CA:TRUE \
			-addext keyUsage=critical,keyCertSign,cRLSign -out ca.pem 2>/dev/null
		# leaf NAME SUBJECT EXTENSIONS: a certificate signed by the CA
		leaf() {
			key "$1.key"
			openssl req -new -key "$1.key" -subj "$2" 2>/dev/null |
				openssl x509 -req -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 8)" \
					-days 2 -extfile <(printf '%s\n' "$3") -out "$1.pem" 2>/dev/null
		}
		# the server's certificate also serves as a client one: the
		# gateway inside etcd dials etcd's own gRPC port with it
		leaf server /CN=etcd-server "subjectAltName=$san
extendedKeyUsage=serverAuth,clientAuth
keyUsage=critical,digitalSignature"
		# no common name: with auth on, etcd's gateway refuses a client
		# certificate that has one (400 "CommonName of client sending a
		# request against gateway will be ignored"), since the gateway
		# cannot pass the name on as the user the way gRPC does
		leaf client /O=dlaunch-test-client "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature"
		chmod 600 ./*.key
	) || {
		echo "lib_etcd: openssl could not make the certificates in $dir" >&2
		return 1
	}
}

# _etcd_auth_req PATH BODY: an auth administration request (as root once
# auth is on); 1 with the answer on stderr when refused
_etcd_auth_req() {
	local ans
	ans=$(etcd_post "$1" "$2") || {
		echo "lib_etcd: $1 refused: $ans" >&2
		return 1
	}
}

etcd_add_user() {
	local user=$1 pw=$2 prefix=$3 end
	end=$(_etcd_prefix_end "$prefix") || return 1
	_etcd_auth_req /v3/auth/role/add "$(jq -cn --arg n "$user-rw" '{name: $n}')" &&
		_etcd_auth_req /v3/auth/role/grant "$(jq -cn --arg n "$user-rw" \
			--arg k "$(_etcd_b64 "$prefix")" --arg e "$end" \
			'{name: $n, perm: {permType: "READWRITE", key: $k, range_end: $e}}')" &&
		_etcd_auth_req /v3/auth/user/add "$(jq -cn --arg n "$user" --arg p "$pw" '{name: $n, password: $p}')" &&
		_etcd_auth_req /v3/auth/user/grant "$(jq -cn --arg u "$user" --arg r "$user-rw" '{user: $u, role: $r}')"
}

etcd_enable_auth() {
	local prefix=$1 user=$2 pw=$3
	ETCD_ROOT_PASSWORD=root-$RANDOM$RANDOM$RANDOM
	_etcd_auth_req /v3/auth/user/add "{\"name\":\"root\",\"password\":\"$ETCD_ROOT_PASSWORD\"}" &&
		_etcd_auth_req /v3/auth/role/add '{"name":"root"}' &&
		_etcd_auth_req /v3/auth/user/grant '{"user":"root","role":"root"}' &&
		etcd_add_user "$user" "$pw" "$prefix" &&
		_etcd_auth_req /v3/auth/enable '{}' || return 1
	ETCD_AUTH=1
	ETCD_USER=$user
	ETCD_PASSWORD_FILE=$TEST_TMP/etcd-$user.password
	printf '%s' "$pw" >"$ETCD_PASSWORD_FILE"
	chmod 600 "$ETCD_PASSWORD_FILE"
}

etcd_rdzv_conf() {
	local conf=""
	if [ "$ETCD_SCHEME" = https ]; then
		conf="protocol=https,cacert=$ETCD_TLS_DIR/ca.pem,cert=$ETCD_TLS_DIR/client.pem,key=$ETCD_TLS_DIR/client.key"
	fi
	if [ -n "$ETCD_USER" ]; then
		conf+="${conf:+,}username=$ETCD_USER,password_file=$ETCD_PASSWORD_FILE"
	fi
	printf '%s\n' "$conf"
}
