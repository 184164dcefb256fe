#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# install-deps.sh - install the Debian packages dlaunch needs to build, test
# and run its examples, only those missing, quietly. Idempotent.
#
#   contrib/install-deps.sh          build + test dependencies
#   contrib/install-deps.sh --dry-run   print what would be installed
set -eu

# etcd-server: the etcd rendezvous backend's tests and contrib/etcd;
# python3-etcd: torchrun's etcd-v2 backend, run beside dlaunch by make bench;
# zstd: tests/e2e/build_cuda.sh unpacks the PTX a CUDA build embeds;
# dpkg-dev, mandoc, groff-base, lintian: make deb and the tests of the man
# pages and the package;
# chromium: the status page's browser test; prometheus: only its promtool
# (the /metrics, alert rule and rule unit tests); its service is not used
# slurmctld, slurmd, slurm-client, munge: the local Slurm cluster of
# tests/faults/faults_slurm.sh (contrib/slurm/train.sbatch for real)
# elfutils (eu-stack), gdb: native stacks of hung workers (docs/hangs.md)
PKGS="build-essential pkg-config
libevent-dev libjansson-dev libcurl4-openssl-dev libssl-dev libcmocka-dev
zlib1g-dev libopenblas-dev
curl iproute2 procps psmisc clang jq openssl etcd-server python3-etcd
python3 python3-torch dataset-fashion-mnist
gnuplot-nox zstd
dpkg-dev mandoc groff-base lintian
chromium prometheus
slurmctld slurmd slurm-client munge util-linux
elfutils gdb"

missing=""
for p in $PKGS; do
	# dpkg-query prints "install ok installed" for a present package
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if [ "${1:-}" = "--dry-run" ]; then
	echo "would install:$missing"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "install-deps: missing packages:$missing (run as root or install sudo)" >&2
		exit 1
	}
	SUDO="sudo"
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
# refresh the package lists only when an install fails for want of them
if ! $SUDO apt-get install -y -qq --no-install-recommends $missing >/tmp/dlaunch-apt.log 2>&1; then
	$SUDO apt-get update -qq >/dev/null
	$SUDO apt-get install -y -qq --no-install-recommends $missing >/tmp/dlaunch-apt.log 2>&1 || {
		cat /tmp/dlaunch-apt.log >&2
		exit 1
	}
fi
# the prometheus package starts a server on :9090 where systemd runs; the
# tests need only promtool, so a server installed here is stopped
case " $missing " in
*" prometheus "*)
	if [ -d /run/systemd/system ]; then
		$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
	fi ;;
esac
