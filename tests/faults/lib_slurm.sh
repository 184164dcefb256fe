# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034 # SLURM_WHY is read by the tests
# lib_slurm.sh - a local Slurm cluster for the tests (sourced after
# lib_faults.sh): Debian's slurmctld and slurmd with munge, one network
# namespace per node (lib_netns.sh), the way a user would try
# contrib/slurm on one machine.
#
# Host 0 of the namespaces holds slurmctld (its name "ctl"), hosts 1..N one
# slurmd each, named n1..nN, each in its own UTS namespace so its host name
# is its node name. Daemons are entered with nsenter --net (not "ip netns
# exec", which remounts /sys and hides /sys/fs/cgroup from slurmd). One
# munged serves them all through a private socket; every file lives in
# $SLURM_DIR under the test's directory. slurm_stop stops what it started
# by pid; netns_teardown (the EXIT trap) kills anything left.
#
#   slurm_available      0 when a cluster can be made here (sets SLURM_WHY)
#   slurm_start N        munged, slurmctld, N slurmd; waits until all idle
#   slurm_cmd CMD...     a Slurm client command, on host 0
#   slurm_job_field ID F a field of `scontrol show job ID` (JobState, ...)
#   slurm_restart_ctld N slurmctld stopped, its state removed, started
#                        again: job ids start over, as Slurm reuses them
#   slurm_stop           stop the daemons, wait for them

SLURM_WHY=
SLURM_DIR=
SLURM_PIDS=()

slurm_available() {
	local b
	netns_available || { SLURM_WHY=$NETNS_WHY; return 1; }
	for b in slurmctld slurmd munged sbatch scontrol nsenter unshare; do
		if ! command -v "$b" >/dev/null 2>&1; then
			SLURM_WHY="$b is not installed (contrib/install-deps.sh installs slurmctld, slurmd, slurm-client and munge)"
			return 1
		fi
	done
}

slurm_cmd() { ip netns exec "$(netns_host 0)" env SLURM_CONF="$SLURM_DIR/slurm.conf" "$@"; }

slurm_job_field() {
	slurm_cmd scontrol show job "$1" 2>/dev/null |
		tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1
}

slurm_all_idle() {
	local n
	n=$(slurm_cmd sinfo -h -N -o '%t' 2>/dev/null | grep -c '^idle')
	[ "$n" = "$1" ]
}

# slurm_spawn I HOSTNAME LOG CMD...: CMD in host I's network namespace and
# a UTS namespace of its own named HOSTNAME
slurm_spawn() {
	local i=$1 name=$2 log=$3
	shift 3
	spawn_bg "$log" nsenter --net="/run/netns/$(netns_host "$i")" \
		unshare --uts sh -c 'hostname "$0" && exec "$@"' "$name" "$@"
	SLURM_PIDS+=("$LAST_PID")
}

slurm_start() {
	local n=$1 i cpus
	SLURM_DIR=$TEST_TMP/slurm
	mkdir -p "$SLURM_DIR/ctld" "$SLURM_DIR/spool"
	chmod 755 "$TEST_TMP" "$SLURM_DIR"
	netns_setup $((n + 1)) || { SLURM_WHY="could not build the hosts"; return 1; }
	dd if=/dev/urandom of="$SLURM_DIR/munge.key" bs=1024 count=1 2>/dev/null
	chmod 400 "$SLURM_DIR/munge.key"
	munged --force --key-file="$SLURM_DIR/munge.key" \
		--socket="$SLURM_DIR/munge.sock" \
		--pid-file="$SLURM_DIR/munged.pid" \
		--log-file="$SLURM_DIR/munged.log" \
		--seed-file="$SLURM_DIR/munged.seed" || {
		SLURM_WHY="munged did not start"
		return 1
	}
	cpus=$(nproc)
	{
		echo "ClusterName=dltest"
		echo "SlurmctldHost=ctl($(netns_addr 0))"
		echo "AuthType=auth/munge"
		echo "AuthInfo=socket=$SLURM_DIR/munge.sock"
		echo "CredType=cred/munge"
		echo "SlurmUser=root"
		echo "SlurmdUser=root"
		echo "StateSaveLocation=$SLURM_DIR/ctld"
		echo "SlurmdSpoolDir=$SLURM_DIR/spool/%n"
		echo "SlurmctldPidFile=$SLURM_DIR/slurmctld.pid"
		echo "SlurmdPidFile=$SLURM_DIR/slurmd.%n.pid"
		echo "ProctrackType=proctrack/linuxproc"
		echo "TaskPlugin=task/none"
		echo "SelectType=select/cons_tres"
		echo "SelectTypeParameters=CR_CPU"
		echo "JobAcctGatherType=jobacct_gather/none"
		echo "AccountingStorageType=accounting_storage/none"
		echo "JobCompType=jobcomp/none"
		echo "MpiDefault=none"
		echo "ReturnToService=2"
		echo "SlurmdTimeout=10"
		echo "MinJobAge=600"
		for ((i = 1; i <= n; i++)); do
			echo "NodeName=n$i NodeAddr=$(netns_addr "$i") CPUs=$cpus State=UNKNOWN"
		done
		echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
	} >"$SLURM_DIR/slurm.conf"
	slurm_spawn 0 ctl "$SLURM_DIR/slurmctld.out" \
		slurmctld -D -i -f "$SLURM_DIR/slurm.conf"
	for ((i = 1; i <= n; i++)); do
		mkdir -p "$SLURM_DIR/spool/n$i"
		slurm_spawn "$i" "n$i" "$SLURM_DIR/slurmd.n$i.out" \
			slurmd -D -N "n$i" -f "$SLURM_DIR/slurm.conf"
	done
	if ! wait_for 60 slurm_all_idle "$n"; then
		SLURM_WHY="the nodes did not come up: $(slurm_cmd sinfo -N 2>&1 | tr '\n' ' ' | head -c 300)"
		return 1
	fi
}

slurm_restart_ctld() {
	local n=$1 p=${SLURM_PIDS[0]}
	kill -TERM "$p" 2>/dev/null
	wait_for 20 bash -c "! kill -0 $p" || kill_tree "$p"
	wait "$p" 2>/dev/null
	# the dead pid leaves the list: slurm_stop must not signal a process
	# that took its number
	SLURM_PIDS=("${SLURM_PIDS[@]:1}")
	rm -rf "${SLURM_DIR:?}/ctld"
	mkdir -p "$SLURM_DIR/ctld"
	slurm_spawn 0 ctl "$SLURM_DIR/slurmctld.out" \
		slurmctld -D -c -i -f "$SLURM_DIR/slurm.conf"
	wait_for 60 slurm_all_idle "$n"
}

slurm_stop() {
	local p
	for p in "${SLURM_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${SLURM_PIDS[@]}"; do
		wait_for 20 bash -c "! kill -0 $p" || kill_tree "$p"
		wait "$p" 2>/dev/null
	done
	SLURM_PIDS=()
	[ -f "$SLURM_DIR/munged.pid" ] && kill -TERM "$(cat "$SLURM_DIR/munged.pid")" 2>/dev/null
}
