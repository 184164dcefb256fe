#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# etcd-cluster.sh - a 3-member etcd for dlaunch's etcd rendezvous
# (--rdzv-backend etcd): TLS between members and to clients, client
# certificates required, and an etcd user that can touch only dlaunch's
# keys. Needs Debian's etcd-server (etcd 3.4 or later), openssl, curl, jq.
#
#   etcd-cluster.sh pki DIR HOST0 HOST1 HOST2
#       a CA, one certificate per member (for clients and peers alike),
#       a client certificate for dlaunch, and DIR/etcd-I.env, the
#       /etc/default/etcd of member I for Debian's etcd.service. Run once,
#       anywhere; then copy DIR to the three hosts. HOSTs are addresses or
#       DNS names, as the agents will reach them.
#   etcd-cluster.sh install DIR I
#       on host I, as root: the CA and member I's certificate into
#       /etc/etcd/pki, DIR/etcd-I.env as /etc/default/etcd (the old file
#       kept as /etc/default/etcd.before-dlaunch), and restart etcd.service.
#       With DESTDIR set, only writes the files under it.
#   etcd-cluster.sh auth DIR ENDPOINT
#       once the cluster is up: a root user, a role "dlaunch" that may read
#       and write the key prefix /dlaunch/ and nothing else, a user
#       "dlaunch" with that role; then authentication on. The passwords are
#       made here, in DIR/root.password and DIR/dlaunch.password.
#   etcd-cluster.sh local DIR [--ports C0,C1,C2,P0,P1,P2]
#       all of the above on this one machine, for trying it out: three
#       members on 127.0.0.1 (client ports 23791-23793, peer ports
#       23801-23803 unless given), in the background, data and logs in DIR.
#       Survives the loss of one member, not of the machine.
#   etcd-cluster.sh stop DIR
#       stop the members "local" started.
#
# Each command ends by printing what to do next; "local" and "auth" print
# the dlaunch options that reach the cluster. Environment: PREFIX (the key
# prefix the dlaunch user may use, default /dlaunch/), DLAUNCH_USER
# (default dlaunch); for "pki", PKI_DIR and DATA_DIR (where the members
# will find their certificates and keep their data, default /etc/etcd/pki
# and /var/lib/etcd/dlaunch; a data directory of its own leaves the one of
# Debian's default single-member etcd alone).
set -euo pipefail

PREFIX=${PREFIX:-/dlaunch/}
DLAUNCH_USER=${DLAUNCH_USER:-dlaunch}
PKI_DIR=${PKI_DIR:-/etc/etcd/pki}
DATA_DIR=${DATA_DIR:-/var/lib/etcd/dlaunch}

die() { echo "etcd-cluster.sh: $*" >&2; exit 1; }
usage() { sed -n '3,41p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

need() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 ||
			die "$t is not installed (contrib/install-deps.sh installs what dlaunch needs)"
	done
}

is_ip() { [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; }

# key FILE: a new ECDSA P-256 private key
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# sign NAME SUBJECT EXTENSIONS: NAME.key and NAME.pem signed by ca.pem
sign() {
	key "$1.key"
	openssl req -new -key "$1.key" -subj "$2" 2>/dev/null |
		openssl x509 -req -CA ca.pem -CAkey ca.key -set_serial "0x$(openssl rand -hex 12)" \
			-days 825 -extfile <(printf '%s\n' "$3") -out "$1.pem" 2>/dev/null
}

# env_file I NAME HOST LISTEN CPORT PPORT INITIAL TOKEN DATA CERTDIR: the
# settings of one member as etcd reads them from its environment
env_file() {
	local i=$1 name=$2 host=$3 listen=$4 cport=$5 pport=$6 initial=$7 token=$8 data=$9 certs=${10}
	local client_urls=https://$listen:$cport
	# tools on the member's host may also use the loopback address
	case "$listen" in
	127.0.0.1 | 0.0.0.0) ;;
	*) client_urls+=",https://127.0.0.1:$cport" ;;
	esac
	cat <<EOF
# member $name of dlaunch's etcd cluster, on $host (written by etcd-cluster.sh)
ETCD_NAME=$name
ETCD_DATA_DIR=$data
ETCD_LISTEN_CLIENT_URLS=$client_urls
ETCD_ADVERTISE_CLIENT_URLS=https://$host:$cport
ETCD_LISTEN_PEER_URLS=https://$listen:$pport
ETCD_INITIAL_ADVERTISE_PEER_URLS=https://$host:$pport
ETCD_INITIAL_CLUSTER=$initial
ETCD_INITIAL_CLUSTER_TOKEN=$token
ETCD_INITIAL_CLUSTER_STATE=new
ETCD_CERT_FILE=$certs/member-$i.pem
ETCD_KEY_FILE=$certs/member-$i.key
ETCD_TRUSTED_CA_FILE=$certs/ca.pem
ETCD_CLIENT_CERT_AUTH=true
ETCD_PEER_CERT_FILE=$certs/member-$i.pem
ETCD_PEER_KEY_FILE=$certs/member-$i.key
ETCD_PEER_TRUSTED_CA_FILE=$certs/ca.pem
ETCD_PEER_CLIENT_CERT_AUTH=true
# old revisions go after an hour; dlaunch's watches re-read after a compaction
ETCD_AUTO_COMPACTION_RETENTION=1
ETCD_LOGGER=zap
EOF
}

# make_pki DIR CERTDIR CPORTS PPORTS DATA HOST...: certificates and env files
# (CPORTS, PPORTS: comma-separated, one per host)
make_pki() {
	local dir=$1 certs=$2 cports=$3 pports=$4 data=$5
	shift 5
	local -a hosts=("$@") cp pp
	local i san listen initial="" token
	IFS=, read -r -a cp <<<"$cports"
	IFS=, read -r -a pp <<<"$pports"
	mkdir -p "$dir"
	chmod 700 "$dir"
	(
		cd "$dir"
		umask 077
		# an existing CA is kept: certificates made later still match
		if [ ! -f ca.pem ]; then
			key ca.key
			openssl req -x509 -new -key ca.key -subj /CN=dlaunch-etcd-ca -days 3650 \
				-addext basicConstraints=critical,CA:TRUE \
				-addext keyUsage=critical,keyCertSign,cRLSign -out ca.pem 2>/dev/null
		fi
		for i in 0 1 2; do
			if is_ip "${hosts[i]}"; then san="IP:${hosts[i]}"; else san="DNS:${hosts[i]}"; fi
			# members are servers to clients and to each other, and
			# clients of each other: both uses in one certificate
			sign "member-$i" "/CN=etcd-$i" "subjectAltName=$san,IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth
keyUsage=critical,digitalSignature"
		done
		# no common name: with authentication on, etcd's JSON gateway
		# (which dlaunch uses) refuses a client certificate that has one
		sign client /O=dlaunch "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature"
	) || die "openssl could not make the certificates in $dir"
	for i in 0 1 2; do
		initial+="${initial:+,}etcd-$i=https://${hosts[i]}:${pp[i]}"
	done
	token=dlaunch-$(openssl rand -hex 6)
	for i in 0 1 2; do
		listen=${hosts[i]}
		# etcd binds addresses, not names
		is_ip "$listen" || listen=0.0.0.0
		env_file "$i" "etcd-$i" "${hosts[i]}" "$listen" "${cp[i]}" "${pp[i]}" \
			"$initial" "$token" "$data" "$certs" >"$dir/etcd-$i.env"
	done
}

# gw ENDPOINT DIR PATH BODY [TOKEN]: a request to etcd's v3 JSON gateway
gw() {
	local -a h=()
	[ -n "${5:-}" ] && h=(-H "Authorization: $5")
	curl -sS --max-time 10 --cacert "$2/ca.pem" --cert "$2/client.pem" --key "$2/client.key" \
		"${h[@]}" -X POST -d "$4" "$1$3"
}

# ok_or_exists ANSWER WHAT: fine when etcd did it or had it already
ok_or_exists() {
	[ -n "$1" ] || die "$2: no answer from etcd"
	if jq -e 'has("error") or has("code")' >/dev/null <<<"$1"; then
		grep -q 'already exists\|already granted' <<<"$1" && return 0
		die "$2 refused: $(jq -r '.message // .error' <<<"$1")"
	fi
}

b64() { printf '%s' "$1" | base64 -w0; }

# password FILE: FILE's password, made first when FILE does not exist
password() {
	[ -s "$1" ] || (umask 077 && openssl rand -hex 16 | tr -d '\n' >"$1")
	cat "$1"
}

cmd_pki() {
	[ $# -eq 4 ] || usage
	need openssl
	make_pki "$1" "$PKI_DIR" 2379,2379,2379 2380,2380,2380 "$DATA_DIR" "$2" "$3" "$4"
	cat <<EOF
made in $1: ca.pem, member-{0,1,2}.{pem,key}, client.{pem,key}, etcd-{0,1,2}.env
next: copy $1 to each host and run there, as root:
  $0 install $1 I        (I = 0 on $2, 1 on $3, 2 on $4)
then, once the three are up:
  $0 auth $1 https://$2:2379
EOF
}

cmd_install() {
	[ $# -eq 2 ] || usage
	local dir=$1 i=$2 root=${DESTDIR:-} env certs data
	[[ $i =~ ^[012]$ ]] || die "member index $i: 0, 1 or 2"
	env=$dir/etcd-$i.env
	[ -f "$env" ] || die "$env missing (made by: $0 pki)"
	# the places the member's settings name
	certs=$(dirname "$(sed -n 's/^ETCD_CERT_FILE=//p' "$env")")
	data=$(sed -n 's/^ETCD_DATA_DIR=//p' "$env")
	local owner=()
	[ -z "$root" ] && getent passwd etcd >/dev/null && owner=(-o etcd -g etcd)
	install -d -m 700 "${owner[@]}" "$root$certs" "$root$data"
	install -m 600 "${owner[@]}" "$dir/ca.pem" "$dir/member-$i.pem" "$dir/member-$i.key" "$root$certs/"
	install -d "$root/etc/default"
	if [ -f "$root/etc/default/etcd" ] && [ ! -f "$root/etc/default/etcd.before-dlaunch" ]; then
		cp -p "$root/etc/default/etcd" "$root/etc/default/etcd.before-dlaunch"
	fi
	install -m 644 "$env" "$root/etc/default/etcd"
	if [ -z "$root" ]; then
		systemctl restart etcd
		echo "member $i started (journalctl -u etcd to follow it)"
	else
		echo "member $i's files written under $root"
	fi
}

cmd_auth() {
	[ $# -eq 2 ] || usage
	need curl jq openssl
	local dir=$1 ep=$2 rootpw pw ans
	ep=${ep%/}
	rootpw=$(password "$dir/root.password")
	pw=$(password "$dir/$DLAUNCH_USER.password")
	ans=$(gw "$ep" "$dir" /v3/auth/authenticate "$(jq -cn --arg p "$rootpw" '{name: "root", password: $p}')") ||
		die "cannot reach etcd at $ep"
	if jq -e '.token' >/dev/null 2>&1 <<<"$ans"; then
		echo "authentication is on already (root's password is in $dir/root.password)"
	else
		grep -q 'not enabled' <<<"$ans" ||
			die "etcd at $ep: $(jq -r '.message // .error' <<<"$ans") (auth on with another root password?)"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/user/add "$(jq -cn --arg p "$rootpw" '{name: "root", password: $p}')")" "adding root"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/role/add '{"name":"root"}')" "adding the root role"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/user/grant '{"user":"root","role":"root"}')" "granting root"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/role/add '{"name":"dlaunch"}')" "adding the dlaunch role"
		# the prefix's range: every key from PREFIX up to PREFIX with its
		# last byte plus one ("/dlaunch/" .. "/dlaunch0")
		local last=${PREFIX: -1} code end
		printf -v code '%d' "'$last"
		printf -v end "\\$(printf '%03o' $((code + 1)))"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/role/grant "$(jq -cn --arg k "$(b64 "$PREFIX")" \
			--arg e "$(b64 "${PREFIX%?}$end")" \
			'{name: "dlaunch", perm: {permType: "READWRITE", key: $k, range_end: $e}}')")" "granting $PREFIX"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/user/add "$(jq -cn --arg n "$DLAUNCH_USER" --arg p "$pw" '{name: $n, password: $p}')")" "adding $DLAUNCH_USER"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/user/grant "$(jq -cn --arg n "$DLAUNCH_USER" '{user: $n, role: "dlaunch"}')")" "granting $DLAUNCH_USER"
		ok_or_exists "$(gw "$ep" "$dir" /v3/auth/enable '{}')" "enabling authentication"
		echo "authentication on: user $DLAUNCH_USER may use $PREFIX only; root's password is in $dir/root.password"
	fi
}

# print_dlaunch DIR ENDPOINTS: the dlaunch options for this cluster
print_dlaunch() {
	cat <<EOF
dlaunch's options for this cluster (the rest of the command line as usual):
  dlaunch --rdzv-backend etcd --rdzv-endpoint $2 \\
    --rdzv-conf protocol=https,cacert=$1/ca.pem,cert=$1/client.pem,key=$1/client.key,username=$DLAUNCH_USER,password_file=$1/$DLAUNCH_USER.password \\
    --rdzv-id JOB --nnodes MIN:MAX --nproc-per-node N train.py
EOF
}

cmd_local() {
	[ $# -eq 1 ] || [ $# -eq 3 ] || usage
	need etcd openssl curl jq
	local dir=$1 ports="" i v t made=""
	if [ $# -eq 3 ]; then
		[ "$2" = --ports ] || usage
		ports=$3
		[[ $ports =~ ^[0-9]+(,[0-9]+){5}$ ]] || die "--ports wants six ports: C0,C1,C2,P0,P1,P2"
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	# a directory made before keeps its ports: they are in its members' data
	if [ -f "$dir/etcd-0.env" ]; then
		for v in CLIENT PEER; do
			for i in 0 1 2; do
				made+="${made:+,}$(sed -n "s/^ETCD_LISTEN_${v}_URLS=.*:\([0-9]*\)\$/\1/p" "$dir/etcd-$i.env")"
			done
		done
		[ -z "$ports" ] || [ "$ports" = "$made" ] ||
			die "$dir was made for ports $made; use another directory for other ports"
		ports=$made
	fi
	ports=${ports:-23791,23792,23793,23801,23802,23803}
	local -a p
	IFS=, read -r -a p <<<"$ports"
	for i in 0 1 2; do
		if [ -f "$dir/etcd-$i.pid" ] && kill -0 "$(cat "$dir/etcd-$i.pid")" 2>/dev/null; then
			die "member $i runs already (pid $(cat "$dir/etcd-$i.pid")); $0 stop $dir first"
		fi
	done
	[ -f "$dir/etcd-0.env" ] ||
		make_pki "$dir" "$dir" "${p[0]},${p[1]},${p[2]}" "${p[3]},${p[4]},${p[5]}" "$dir/data" \
			127.0.0.1 127.0.0.1 127.0.0.1
	for i in 0 1 2; do
		# each member its own data directory on one machine
		sed -i "s|^ETCD_DATA_DIR=.*|ETCD_DATA_DIR=$dir/data-$i|" "$dir/etcd-$i.env"
		# etcd takes its settings from the file only: none from here
		(
			for v in $(compgen -e); do
				case "$v" in ETCD_* | ETCDCTL_*) unset "$v" ;; esac
			done
			set -a
			# shellcheck disable=SC1090
			. "$dir/etcd-$i.env"
			set +a
			exec setsid etcd </dev/null >>"$dir/etcd-$i.log" 2>&1
		) &
		echo $! >"$dir/etcd-$i.pid"
	done
	# ready when each member answers /health through TLS (30 s at most)
	for i in 0 1 2; do
		t=0
		until curl -s --max-time 2 --cacert "$dir/ca.pem" --cert "$dir/client.pem" --key "$dir/client.key" \
			"https://127.0.0.1:${p[i]}/health" 2>/dev/null | grep -q '"health":"true"'; do
			t=$((t + 1))
			if [ $t -gt 300 ] || ! kill -0 "$(cat "$dir/etcd-$i.pid")" 2>/dev/null; then
				tail -n 5 "$dir/etcd-$i.log" >&2
				cmd_stop "$dir" >/dev/null
				die "member $i did not come up (its log: $dir/etcd-$i.log)"
			fi
			sleep 0.1
		done
	done
	echo "3 members up on 127.0.0.1, data and logs in $dir"
	cmd_auth "$dir" "https://127.0.0.1:${p[0]}"
	print_dlaunch "$dir" "127.0.0.1:${p[0]},127.0.0.1:${p[1]},127.0.0.1:${p[2]}"
	echo "stop them with: $0 stop $dir"
}

cmd_stop() {
	[ $# -eq 1 ] || usage
	local dir=$1 i t pids=()
	for i in 0 1 2; do
		[ -f "$dir/etcd-$i.pid" ] && pids+=("$(cat "$dir/etcd-$i.pid")")
	done
	# all at once, and a leader that outlives its followers by 3 s is
	# killed: it would spend 7 s handing its leadership to a member that
	# is gone. The data is safe either way (etcd syncs its log to disk
	# before it answers a write).
	if [ ${#pids[@]} -gt 0 ]; then
		kill -TERM "${pids[@]}" 2>/dev/null || true
		t=0
		while kill -0 "${pids[@]}" 2>/dev/null && [ $t -lt 30 ]; do
			sleep 0.1
			t=$((t + 1))
		done
		kill -KILL "${pids[@]}" 2>/dev/null || true
		# until they are gone (reaped), not merely signalled
		t=0
		while kill -0 "${pids[@]}" 2>/dev/null && [ $t -lt 50 ]; do
			sleep 0.1
			t=$((t + 1))
		done
	fi
	rm -f "$dir"/etcd-[012].pid
	echo "stopped the members in $dir (their data stays there)"
}

[ $# -ge 1 ] || usage
sub=$1
shift
case "$sub" in
pki) cmd_pki "$@" ;;
install) cmd_install "$@" ;;
auth) cmd_auth "$@" ;;
local) cmd_local "$@" ;;
stop) cmd_stop "$@" ;;
-h | --help | help) usage ;;
*) usage ;;
esac
