# SPDX-License-Identifier: Apache-2.0
# lib_netns.sh - separate "hosts" for the reliability suite, made with
# network namespaces (sourced after lib_faults.sh).
#
# netns_setup N creates N hosts named ${NETNS_PREFIX}h0 .. h(N-1), each a
# network namespace with one interface eth0 (10.213.0.(i+1)/24), joined by
# veth pairs to a bridge that lives in a private "switch" namespace
# ${NETNS_PREFIX}sw. Nothing is created in the root namespace and nothing
# routes outside: the switch namespace has no uplink. The names carry the
# test's pid, so parallel runs never collide, and netns_teardown (run from
# the EXIT trap, also on failure) kills every process left in them and
# deletes them, which removes the veth pairs and the bridge with them.
#
#   netns_available        0 when namespaces can be made here (sets NETNS_WHY)
#   netns_setup N          make hosts h0..h(N-1); NETNS_HOSTS holds their names
#   netns_host I           the namespace name of host I
#   netns_addr I           host I's address
#   netns_exec I CMD...    run CMD on host I
#   netns_spawn I LOG CMD  spawn_bg on host I (LAST_PID is the command's pid)
#   netns_cut I / netns_heal I   take host I's link down / up again
#   netns_second_net I...  give hosts I... a second interface eth1 on a
#                          bridge of its own (10.214.0.(i+1)/24): a network
#                          apart from eth0's (etcd members' peer traffic)
#   netns_addr2 I          host I's address on that second network
#   netns_cut2 I / netns_heal2 I   take host I's eth1 down / up again
#   netns_teardown         kill what runs in the namespaces, delete them

NETNS_PREFIX=dlf$$x
NETNS_HOSTS=()
NETNS_SWITCH=
NETNS_WHY=

netns_available() {
	if [ "$(id -u)" -ne 0 ]; then
		NETNS_WHY="network namespaces need root"
		return 1
	fi
	if ! command -v ip >/dev/null 2>&1; then
		NETNS_WHY="iproute2 (ip) is not installed"
		return 1
	fi
	local probe=${NETNS_PREFIX}probe
	if ! ip netns add "$probe" 2>/dev/null; then
		NETNS_WHY="ip netns add failed (no namespace support here)"
		return 1
	fi
	ip netns del "$probe" 2>/dev/null
	return 0
}

netns_host() { echo "${NETNS_PREFIX}h$1"; }
netns_addr() { echo "10.213.0.$(($1 + 1))"; }

# netns_setup N: N hosts on one bridge; 1 (with a message) on failure
netns_setup() {
	local n=$1 i h
	NETNS_SWITCH=${NETNS_PREFIX}sw
	ip netns add "$NETNS_SWITCH" || return 1
	ip -n "$NETNS_SWITCH" link add br0 type bridge || return 1
	ip -n "$NETNS_SWITCH" link set br0 up || return 1
	for ((i = 0; i < n; i++)); do
		h=$(netns_host "$i")
		ip netns add "$h" || return 1
		NETNS_HOSTS+=("$h")
		ip -n "$h" link set lo up || return 1
		ip link add name eth0 netns "$h" type veth \
			peer name "p$i" netns "$NETNS_SWITCH" || return 1
		ip -n "$NETNS_SWITCH" link set "p$i" master br0 || return 1
		ip -n "$NETNS_SWITCH" link set "p$i" up || return 1
		ip -n "$h" addr add "$(netns_addr "$i")/24" dev eth0 || return 1
		ip -n "$h" link set eth0 up || return 1
	done
	# links come up asynchronously: wait for carrier on every host and
	# for every bridge port to forward (no ping here: iputils is absent)
	wait_for 10 netns_links_up "$n" || return 1
	return 0
}

netns_links_up() {
	local i
	for ((i = 0; i < $1; i++)); do
		ip -n "$(netns_host "$i")" link show eth0 | grep -q LOWER_UP ||
			return 1
		bridge -n "$NETNS_SWITCH" link show dev "p$i" |
			grep -q 'state forwarding' || return 1
	done
}

netns_exec() {
	local h
	h=$(netns_host "$1")
	shift
	ip netns exec "$h" "$@"
}

# netns_spawn I LOG CMD...: like spawn_bg, inside host I ("ip netns exec"
# execs CMD, so LAST_PID is CMD's pid and leads its process group)
netns_spawn() {
	local h
	h=$(netns_host "$1")
	shift
	local log=$1
	shift
	spawn_bg "$log" ip netns exec "$h" "$@"
}

netns_cut() { ip -n "$(netns_host "$1")" link set eth0 down; }
netns_heal() { ip -n "$(netns_host "$1")" link set eth0 up; }

netns_addr2() { echo "10.214.0.$(($1 + 1))"; }

# netns_second_net I...: hosts I... (made by netns_setup) get eth1 on a
# second bridge br1 of the switch; 1 on failure
netns_second_net() {
	local i h
	[ -n "$NETNS_SWITCH" ] || return 1
	ip -n "$NETNS_SWITCH" link add br1 type bridge || return 1
	ip -n "$NETNS_SWITCH" link set br1 up || return 1
	for i in "$@"; do
		h=$(netns_host "$i")
		ip link add name eth1 netns "$h" type veth \
			peer name "q$i" netns "$NETNS_SWITCH" || return 1
		ip -n "$NETNS_SWITCH" link set "q$i" master br1 || return 1
		ip -n "$NETNS_SWITCH" link set "q$i" up || return 1
		ip -n "$h" addr add "$(netns_addr2 "$i")/24" dev eth1 || return 1
		ip -n "$h" link set eth1 up || return 1
	done
	wait_for 10 netns_links2_up "$@"
}

netns_links2_up() {
	local i
	for i in "$@"; do
		ip -n "$(netns_host "$i")" link show eth1 | grep -q LOWER_UP ||
			return 1
		bridge -n "$NETNS_SWITCH" link show dev "q$i" |
			grep -q 'state forwarding' || return 1
	done
}

netns_cut2() { ip -n "$(netns_host "$1")" link set eth1 down; }
netns_heal2() { ip -n "$(netns_host "$1")" link set eth1 up; }

netns_teardown() {
	local h p
	for h in "${NETNS_HOSTS[@]}"; do
		for p in $(ip netns pids "$h" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
	done
	for h in "${NETNS_HOSTS[@]}" $NETNS_SWITCH; do
		ip netns del "$h" 2>/dev/null
	done
	NETNS_HOSTS=()
	NETNS_SWITCH=
}
