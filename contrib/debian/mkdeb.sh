#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# mkdeb.sh - build dlaunch's Debian binary package from an installed tree:
#
#   contrib/debian/mkdeb.sh ROOT OUTDIR VERSION MAINTAINER
#
# ROOT is `make install PREFIX=/usr DESTDIR=ROOT` (make deb makes it) and
# must be .../debian/dlaunch, where dpkg-shlibdeps expects a package's
# files. This strips the binaries, compresses the man pages, adds the
# copyright file and a changelog, declares the dependencies from what the
# binaries link (dpkg-shlibdeps: each NEEDED library's package, versioned
# by its symbols), writes the control file and md5sums, and builds
# OUTDIR/dlaunch_VERSION_ARCH.deb with dpkg-deb, owned by root. No network.
# Prints the package's path.
set -euo pipefail

root=$(cd "$1" && pwd) out=$2 version=$3 maintainer=$4
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "mkdeb.sh: $*" >&2; exit 1; }

[[ $root == */debian/dlaunch ]] || die "$root is not .../debian/dlaunch"
[ -x "$root/usr/bin/dlaunch" ] || die "$root/usr/bin/dlaunch missing (make deb installs it)"
pkgdir=$(cd "$root/../.." && pwd)
arch=$(dpkg --print-architecture)
doc=$root/usr/share/doc/dlaunch

# as dh_strip and dh_compress would: no symbols or notes in the binaries,
# man pages and the changelog gzipped without a name or time stamp
for b in "$root"/usr/bin/*; do
	strip --remove-section=.comment --remove-section=.note --strip-unneeded "$b"
done
find "$root/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +

install -m 644 "$here/copyright" "$doc/copyright"
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo "(no git)")
date=$(date -u -R -d "$("$here/../version.sh" --date) 00:00:00")
printf '%s\n' "dlaunch ($version) unstable; urgency=medium" "" \
	"  * Built by make deb from commit $commit." "" \
	" -- $maintainer  $date" | gzip -9n >"$doc/changelog.gz"
chmod 644 "$doc/changelog.gz"

# the dependencies, from the libraries the binaries link; a library that
# no Debian package holds (a CUDA toolkit in /usr/local) fails here
mkdir -p "$root/DEBIAN"
printf 'Source: dlaunch\n\nPackage: dlaunch\nArchitecture: any\n' \
	>"$pkgdir/debian/control"
depends=$(cd "$pkgdir" && dpkg-shlibdeps -O "$root"/usr/bin/*) ||
	die "dpkg-shlibdeps failed: the binaries link a library no Debian package holds"
depends=${depends#shlibs:Depends=}
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependency"

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" \
	-e "s|@MAINTAINER@|$maintainer|" -e "s|@SIZE@|$size|" \
	-e "s|@DEPENDS@|$depends|" "$here/control.in" >"$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' |
	sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"
find "$root" -type d -exec chmod 755 {} +

deb=$out/dlaunch_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
