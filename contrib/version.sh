#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# version.sh - dlaunch's version, for the man pages and the Debian package.
#
#   contrib/version.sh          e.g. 0.1.0+git512.6da9c3f
#   contrib/version.sh --date   the day of that version, YYYY-MM-DD
#
# With a release tag vX.Y.Z (git describe): X.Y.Z on the tag, X.Y.Z+N.gHASH
# N commits after it. Without one: VERSION's X.Y.Z, and in a git checkout
# +gitN.HASH with N the number of commits, so a later build sorts after an
# earlier one (dpkg --compare-versions). ".dirty" marks uncommitted changes.
# The date is the last commit's, else SOURCE_DATE_EPOCH's, else today's.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
in_git() { git -C "$top" rev-parse --git-dir >/dev/null 2>&1; }

if [ "${1:-}" = --date ]; then
	if in_git && d=$(git -C "$top" log -1 --format=%cs 2>/dev/null) && [ -n "$d" ]; then
		echo "$d"
	elif [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
		date -u -d "@$SOURCE_DATE_EPOCH" +%F
	else
		date -u +%F
	fi
	exit 0
fi

base=$(head -n 1 "$top/VERSION" | tr -d '[:space:]')
case $base in
[0-9]*) ;;
*) echo "version.sh: $top/VERSION does not start with a digit" >&2; exit 1 ;;
esac
if ! in_git; then
	echo "$base"
	exit 0
fi
dirty=""
git -C "$top" diff --quiet HEAD -- 2>/dev/null || dirty=".dirty"
if tag=$(git -C "$top" describe --tags --match 'v[0-9]*' 2>/dev/null); then
	# v1.2.3 or v1.2.3-5-gabc1234
	echo "${tag#v}" | sed 's/-\([0-9]*\)-\(g[0-9a-f]*\)$/+\1.\2/' | sed "s/\$/$dirty/"
	exit 0
fi
n=$(git -C "$top" rev-list --count HEAD)
hash=$(git -C "$top" rev-parse --short HEAD)
echo "$base+git$n.$hash$dirty"
