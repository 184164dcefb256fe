#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# deb_package.sh - make deb builds a Debian package that lintian passes
# without an error, whose Depends name the packages of the libraries the
# binaries link, and that installs and removes cleanly with dpkg, the
# binaries, man pages and completion working while it is installed.
#
# dpkg runs in a throwaway root, so the machine (shared, and a CI runner)
# is not touched: --instdir a temporary directory, --admindir a temporary
# dpkg database holding this host's records of exactly the packages the
# .deb depends on. dpkg checks a package's direct dependencies against its
# database, so the install still proves them satisfied (and fails when one
# is missing, which is checked too), and the installed binaries run against
# the very libraries those records describe: the host's. The package has no
# maintainer scripts, so nothing runs outside the throwaway root.
#
# Heavy for tests/run.sh -j (make deb compiles the whole tree, then
# lintian): never run beside another heavy test.
# test: heavy
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_docs.sh"
source "$(dirname "$0")/lib_rdzv.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT LOCAL_RANK

for tool in dpkg-deb dpkg-shlibdeps; do
	if ! command -v "$tool" >/dev/null; then
		skip "make deb: $tool is not installed (dpkg-dev; contrib/install-deps.sh installs it)"
		finish
	fi
done

make -C "$REPO" -s -j"$(nproc)" BUILD="$DLAUNCH_BUILD" DEB_OUT="$TEST_TMP" deb \
	>"$TEST_TMP/make.log" 2>&1
rc=$?
deb=$(tail -n 1 "$TEST_TMP/make.log")
check_eq "make deb succeeds" 0 $rc || { sed 's/^/# /' "$TEST_TMP/make.log" | tail -n 30; finish; }
check "make deb writes DEB_OUT/dlaunch_VERSION_ARCH.deb" \
	test "$deb" = "$TEST_TMP/dlaunch_$("$REPO/contrib/version.sh")_$(dpkg --print-architecture).deb" -a -s "$deb"

# the control fields; Depends from what the binaries link: each library
# they need (objdump -p), through the package that holds it (dpkg -S), is
# depended on, directly or through a package of Depends that depends on it
# (libopenblas0 for the OpenBLAS variant in use)
dpkg-deb -x "$deb" "$TEST_TMP/x"
check_eq "Package: dlaunch" dlaunch "$(dpkg-deb -f "$deb" Package)"
depends=$(dpkg-deb -f "$deb" Depends)
echo "# Depends: $depends"
dep_names=$(tr ',|' '\n\n' <<<"$depends" | sed 's/(.*//; s/[[:space:]]//g' | sort -u)
LDCONFIG=$(command -v ldconfig || echo /sbin/ldconfig)
unmet=""
for bin in "$TEST_TMP"/x/usr/bin/*; do
	for so in $(objdump -p "$bin" | awk '$1 == "NEEDED" { print $2 }'); do
		path=$("$LDCONFIG" -p | awk -v so="$so" '$1 == so { print $NF; exit }')
		owner=$(dpkg -S "$(realpath "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
		[ -n "$owner" ] || owner=$(dpkg -S "$path" 2>/dev/null | head -n 1 | cut -d: -f1)
		found=0
		for d in $dep_names; do
			if [ "$d" = "$owner" ] || dpkg-query -W -f='${Depends}' "$d" 2>/dev/null |
				tr ',|' '\n\n' | sed 's/(.*//; s/[[:space:]]//g; s/:.*//' | grep -qx "$owner"; then
				found=1
			fi
		done
		[ "$found" = 1 ] || unmet+=" $(basename "$bin"):$so($owner)"
	done
done
check_eq "Depends covers every library the binaries link" "" "$unmet"
stripped=""
for bin in "$TEST_TMP"/x/usr/bin/*; do
	readelf -S "$bin" | grep -q '\.symtab' && stripped+=" $(basename "$bin")"
done
check_eq "the binaries are stripped (no symbol table left in)" "" "$stripped"
check "the man pages are gzipped" test -s "$TEST_TMP/x/usr/share/man/man8/dlaunch-rdzv.8.gz"
check "the dlaunch Python module is where /usr/bin/python3 finds it" \
	test -s "$TEST_TMP/x/usr/lib/python3/dist-packages/dlaunch/__init__.py"
check_eq "... and the packaged module imports" "$TEST_TMP/x/usr/lib/python3/dist-packages/dlaunch/__init__.py" \
	"$(cd / && PYTHONPATH=$TEST_TMP/x/usr/lib/python3/dist-packages /usr/bin/python3 -c 'import dlaunch; print(dlaunch.__file__)' 2>&1)"

# make install with another PREFIX, under DESTDIR (the tree make deb just
# built, so nothing is compiled): everything lands under DESTDIR/PREFIX,
# and the pages and the unit name that PREFIX
inst=$TEST_TMP/inst
make -C "$REPO" -s BUILD="$DLAUNCH_BUILD/deb" NO_CUDA=1 PREFIX=/opt/dl \
	DESTDIR="$inst" install >"$TEST_TMP/install.log" 2>&1
check_eq "make install PREFIX=/opt/dl DESTDIR=...: exit 0" 0 $? ||
	tail -n 20 "$TEST_TMP/install.log" | sed 's/^/# /'
missing=""
for f in bin/dlaunch bin/dlaunch-rdzv bin/dlaunch-train share/man/man1/dlaunch.1 \
	share/man/man1/dlaunch-train.1 share/man/man8/dlaunch-rdzv.8 \
	share/bash-completion/completions/dlaunch \
	share/bash-completion/completions/dlaunch-rdzv \
	share/bash-completion/completions/dlaunch-train \
	share/doc/dlaunch/README.md share/doc/dlaunch/http-api.md \
	share/doc/dlaunch/examples/pytorch/elastic.py \
	share/doc/dlaunch/examples/pytorch/elastic_inplace.py \
	share/doc/dlaunch/examples/slurm/train.sbatch \
	share/doc/dlaunch/examples/systemd/dlaunch-rdzv.service; do
	[ -e "$inst/opt/dl/$f" ] || missing+=" $f"
done
check_eq "make install: binaries, man pages, completion, docs, examples under DESTDIR/PREFIX" "" "$missing"
check_eq "make install: nothing outside DESTDIR/PREFIX" "./opt ./opt/dl" \
	"$(cd "$inst" && find . -mindepth 1 -maxdepth 2 | sort | tr '\n' ' ' | sed 's/ $//')"
check "make install: the unit runs PREFIX/bin/dlaunch-rdzv" \
	grep -q '^ExecStart=/opt/dl/bin/dlaunch-rdzv ' \
	"$inst/opt/dl/share/doc/dlaunch/examples/systemd/dlaunch-rdzv.service"
check "make install: dlaunch(1) points to PREFIX's doc directory" \
	grep -q '/opt/dl/share/doc/dlaunch' "$inst/opt/dl/share/man/man1/dlaunch.1"

if command -v lintian >/dev/null; then
	lintian --no-cfg --fail-on error "$deb" >"$TEST_TMP/lintian" 2>&1
	rc=$?
	grep -v 'running with root privileges' "$TEST_TMP/lintian" | sed 's/^/# lintian: /'
	check_eq "lintian: no error (exit status)" 0 $rc
	check_eq "lintian: no E: tag" 0 "$(grep -c '^E:' "$TEST_TMP/lintian")"
else
	skip "lintian: not installed (contrib/install-deps.sh installs it)"
fi

if [ "$(id -u)" -ne 0 ]; then
	skip "dpkg -i / dpkg -r: dpkg needs root, even for a throwaway root"
	finish
fi

# the throwaway dpkg: ROOT and its database ADMIN, with this host's
# records of the packages Depends names (those installed here)
ROOT=$TEST_TMP/root ADMIN=$TEST_TMP/admin
mkdir -p "$ROOT" "$ADMIN/info" "$ADMIN/updates" "$ADMIN/triggers"
: >"$ADMIN/available"
admin_status() { # PACKAGE-TO-LEAVE-OUT: the records, one left out
	: >"$ADMIN/status"
	for d in $dep_names; do
		[ "$d" = "${1:-}" ] && continue
		dpkg-query -s "$d" >>"$ADMIN/status" 2>/dev/null && echo >>"$ADMIN/status"
		name=$(dpkg-query -W -f='${binary:Package}' "$d" 2>/dev/null) &&
			: >"$ADMIN/info/$name.list"
	done
}
tdpkg() { dpkg --admindir="$ADMIN" --instdir="$ROOT" --log="$TEST_TMP/dpkg.log" "$@"; }

# a database without one of the dependencies: dpkg refuses to configure
gone=$(grep -m1 -o 'libjansson[0-9a-z.-]*' <<<"$dep_names")
admin_status "$gone"
tdpkg -i "$deb" >"$TEST_TMP/dpkg.out" 2>&1
check "dpkg -i without $gone: dependency problems, not installed" \
	bash -c "grep -q 'dependency problems' '$TEST_TMP/dpkg.out' &&
		! dpkg-query --admindir='$ADMIN' -W -f='\${Status}' dlaunch | grep -q 'ok installed'"
tdpkg -r dlaunch >/dev/null 2>&1
rm -rf "$ROOT" && mkdir -p "$ROOT"

admin_status
tdpkg -i "$deb" >"$TEST_TMP/dpkg.out" 2>&1
rc=$?
check_eq "dpkg -i: exit 0" 0 $rc || sed 's/^/# /' "$TEST_TMP/dpkg.out"
check_eq "dpkg -s: install ok installed" "install ok installed" \
	"$(dpkg-query --admindir="$ADMIN" -W -f='${Status}' dlaunch)"
missing=""
while read -r path; do
	[ -e "$ROOT/$path" ] || [ -L "$ROOT/$path" ] || missing+=" $path"
done < <(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's|^\./||; /^$/d')
check_eq "every file of the package is installed" "" "$missing"
check "the systemd unit runs the installed server" \
	grep -q '^ExecStart=/usr/bin/dlaunch-rdzv ' "$ROOT/lib/systemd/system/dlaunch-rdzv.service"

# the installed binaries work: a real job, a server and its status
R=$ROOT/usr/bin
timeout 120 "$R/dlaunch" --standalone --nproc-per-node 2 --no-python \
	"$R/dlaunch-train" --data synthetic:2000 --epochs 1 --device cpu \
	>"$TEST_TMP/job.log" 2>&1
rc=$?
check_eq "installed dlaunch runs installed dlaunch-train on 2 processes: exit 0" 0 $rc ||
	tail -n 20 "$TEST_TMP/job.log" | sed 's/^/# /'
check "the job printed its summary" grep -q '{"summary"' "$TEST_TMP/job.log"
BIN=$R rdzv_start "$TEST_TMP/rdzv.log"
check "installed dlaunch-rdzv serves" test -n "${RDZV:-}"
timeout 60 "$R/dlaunch" --nnodes 1 --rdzv-endpoint "${RDZV#http://}" --rdzv-id pkgjob \
	--no-python true >"$TEST_TMP/rjob.log" 2>&1
check_eq "a job through the installed server: exit 0" 0 $?
"$R/dlaunch" status --rdzv-endpoint "${RDZV#http://}" >"$TEST_TMP/status.log" 2>&1
check "installed dlaunch status lists the job" grep -q pkgjob "$TEST_TMP/status.log"
rdzv_stop
check_eq "installed dlaunch-rdzv stops on SIGTERM with exit 0" 0 "$RDZV_RC"
for page in man1/dlaunch.1 man1/dlaunch-train.1 man8/dlaunch-rdzv.8; do
	gzip -dc "$ROOT/usr/share/man/$page.gz" | groff -man -ww -T ascii >"$TEST_TMP/page" 2>"$TEST_TMP/warn"
	check "installed $page renders, with no warning" \
		test -s "$TEST_TMP/page" -a ! -s "$TEST_TMP/warn"
done
check_eq "the installed completion (loaded as dlaunch-rdzv's) completes --log-level" \
	"error warn info debug" "$(bash -c "source '$ROOT/usr/share/bash-completion/completions/dlaunch-rdzv'
		COMP_WORDS=(dlaunch-rdzv --log-level ''); COMP_CWORD=2; _dlaunch; echo \"\${COMPREPLY[*]}\"")"

tdpkg -r dlaunch >"$TEST_TMP/dpkg.out" 2>&1
check_eq "dpkg -r: exit 0" 0 $?
check "dpkg -s: dlaunch is not installed any more" \
	bash -c "! dpkg-query --admindir='$ADMIN' -W -f='\${Status}' dlaunch 2>/dev/null | grep -q installed"
check_eq "nothing is left in the root" "" "$(cd "$ROOT" && find . -mindepth 1 | head -n 5 | tr '\n' ' ')"
finish
