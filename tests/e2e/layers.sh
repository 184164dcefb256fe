#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# layers.sh - the folders are layers, and no arrow goes back up
# (issue 22: no circle between files of different folders, no arrow from
# a lower folder back up).
#
# LAYERS below is the one table of them: each folder with sources, the
# archive make builds of it ("-": none) and the folders below it that it
# may use. Two checks read it:
#   includes  every quoted #include of a folder's files resolves to the
#             folder itself, to include/dlaunch/ (the public faces) or to
#             a folder below it;
#   symbols   every symbol an archive of $DLAUNCH_BUILD/lib leaves
#             undefined is its own, a lower archive's or the system's,
#             never one that only an archive above it (or beside it)
#             defines (nm; what a link of the archive alone with its
#             lower archives would miss: tests/unit/test_etcd_alone.c
#             is such a link, for the etcd folder).
# A folder with sources or an archive that the table does not name fails
# too: a new unit takes its place in the table first. Both checks are run
# once on a small tree and archive that break the rule, which they must
# refuse. tests/ and bench/ stand above everything and are not checked.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LIB=${DLAUNCH_BUILD:-$ROOT/build}/lib

# folder             archive           the folders below it that it uses
LAYERS=(
	"include/dlaunch   -                 "
	"common            libdlcommon.a     "
	"rendezvous/state  librdzv_state.a   common"
	"rendezvous        librdzv.a         rendezvous/state common"
	"agent/rdzv        libagent_rdzv.a   common"
	"agent/keeper      libkeeper.a       common"
	"agent/etcd        libetcd.a         agent/rdzv rendezvous/state common"
	"agent             libagent.a        agent/etcd agent/keeper agent/rdzv rendezvous/state common"
	"launcher          -                 agent agent/etcd agent/keeper agent/rdzv rendezvous rendezvous/state common"
	"trainer/dist      libdist.a         common"
	"trainer           libtrain.a        trainer/dist common"
)
# folders above every layer, not checked
EXEMPT='^(tests|bench)(/|$)'

declare -A ARCHIVE BELOW FOLDER_OF
for row in "${LAYERS[@]}"; do
	read -r folder archive below <<<"$row"
	ARCHIVE[$folder]=$archive
	BELOW[$folder]=" $below "
	[ "$archive" != - ] && FOLDER_OF[$archive]=$folder
done

# sources ROOT: the C sources and headers under ROOT, one a line
sources() {
	if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git -C "$1" ls-files '*.c' '*.h' '*.cu' '*.cuh'
	else
		(cd "$1" && find . -name build -prune -o -type f \
			\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
			-print | sed 's|^\./||')
	fi
}

# normpath PATH: NORM=PATH without "." and ".." steps (no fork, not even
# a command substitution: the include check runs it for every include)
normpath() {
	local IFS=/ part out=()
	for part in $1; do
		case "$part" in
		"" | .) ;;
		..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
		*) out+=("$part") ;;
		esac
	done
	NORM="${out[*]}"
}

# include_arrows ROOT: one line "FILE: #include "X" (FOLDER -> TARGET)"
# per include that breaks the table, "FILE: no layer for FOLDER" per
# file of a folder the table does not name, "FILE: X not found" per
# include that resolves nowhere (the build adds no -I but include/).
include_arrows() {
	local root=$1 f dir inc target tdir
	sources "$root" >"$TEST_TMP/sources"
	while IFS= read -r f; do
		dir=${f%/*}
		[[ "$dir" =~ $EXEMPT ]] && continue
		[ -n "${ARCHIVE[$dir]+x}" ] || echo "$f: no layer for $dir"
	done <"$TEST_TMP/sources"
	# FILE:NAME for every quoted include, one grep for the whole tree
	(cd "$root" && tr '\n' '\0' <"$TEST_TMP/sources" | xargs -0 sed -nE \
		's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/; T; F; p' |
		paste -d: - -) >"$TEST_TMP/incs"
	while IFS=: read -r f inc; do
		dir=${f%/*}
		[[ "$dir" =~ $EXEMPT ]] && continue
		[ -n "${ARCHIVE[$dir]+x}" ] || continue
		if [ -e "$root/$dir/$inc" ]; then
			normpath "$dir/$inc"
			target=$NORM
		elif [ -e "$root/include/$inc" ]; then
			target=include/$inc
		else
			echo "$f: \"$inc\" not found"
			continue
		fi
		tdir=${target%/*}
		[ "$tdir" = "$dir" ] || [ "$tdir" = include/dlaunch ] ||
			[[ "${BELOW[$dir]}" == *" $tdir "* ]] ||
			echo "$f: #include \"$inc\" ($dir -> $tdir)"
	done <"$TEST_TMP/incs"
}

# symbol_arrows LIBDIR: one line "ARCHIVE takes SYMBOL from OTHER (FOLDER)"
# per symbol an archive needs that neither it nor an archive of a lower
# layer defines but another archive of LIBDIR does (one nm, one awk);
# "ARCHIVE: no layer" for an archive the table does not name.
symbol_arrows() {
	local libdir=$1 row folder archive below f lower
	: >"$TEST_TMP/table"
	for row in "${LAYERS[@]}"; do
		read -r folder archive below <<<"$row"
		[ "$archive" = - ] && continue
		lower=
		for f in $below; do
			[ "${ARCHIVE[$f]:--}" != - ] && lower="$lower ${ARCHIVE[$f]}"
		done
		echo "$archive $folder$lower" >>"$TEST_TMP/table"
	done
	nm -g -A "$libdir"/*.a 2>/dev/null | awk -v table="$TEST_TMP/table" '
	BEGIN {
		while ((getline line < table) > 0) {
			n = split(line, w, " ")
			folder[w[1]] = w[2]
			for (i = 3; i <= n; i++)
				lower[w[1], w[i]] = 1
		}
	}
	NF < 3 { next }
	{
		a = $1
		sub(/:.*/, "", a)
		sub(/.*\//, "", a)
		archives[a] = 1
		kind = $(NF - 1)
		if (kind == "U")
			need[a, $NF] = 1
		else if (kind ~ /^[A-TV-Z]$/ && !((a, $NF) in def)) {
			def[a, $NF] = 1
			defs[$NF] = defs[$NF] " " a
		}
	}
	END {
		for (a in archives)
			if (!(a in folder))
				print a ": no layer"
		for (key in need) {
			split(key, k, SUBSEP)
			a = k[1]
			sym = k[2]
			if (!(a in folder) || (a, sym) in def || !(sym in defs))
				continue
			n = split(defs[sym], by, " ")
			ok = 0
			for (i = 1; i <= n; i++)
				if ((a, by[i]) in lower)
					ok = 1
			if (ok)
				continue
			for (i = 1; i <= n; i++)
				print a " takes " sym " from " by[i] " (" \
				    (by[i] in folder ? folder[by[i]] : "no layer") ")"
		}
	}'
}

cd "$ROOT" || exit 1

# --- the checks refuse what breaks the rule
bad=$TEST_TMP/badtree
mkdir -p "$bad/agent/etcd" "$bad/agent/rdzv" "$bad/include/dlaunch"
printf '#include "../fsm.h"\n#include "../rdzv/rdzv.h"\n#include "dlaunch/log.h"\n' \
	>"$bad/agent/etcd/backend.c"
mkdir -p "$bad/newfolder"
touch "$bad/agent/fsm.h" "$bad/agent/rdzv/rdzv.h" "$bad/include/dlaunch/log.h" \
	"$bad/newfolder/x.c"
include_arrows "$bad" >"$TEST_TMP/bad-includes"
check_eq "the include check refuses an include of a folder above, and a folder in no layer" \
	"agent/etcd/backend.c: #include \"../fsm.h\" (agent/etcd -> agent)|newfolder/x.c: no layer for newfolder" \
	"$(sort "$TEST_TMP/bad-includes" | paste -sd'|')"

CC=${CC:-cc}
if [ -e "$LIB/libagent.a" ] && command -v "$CC" >/dev/null; then
	badlib=$TEST_TMP/badlib
	mkdir -p "$badlib"
	cp "$LIB/libagent.a" "$LIB/libdlcommon.a" "$badlib/"
	printf 'void agent_fsm_post_kind(void *f, int k, unsigned long r);\nvoid up(void);\nvoid up(void) { agent_fsm_post_kind(0, 0, 0); }\n' \
		>"$TEST_TMP/up.c"
	if "$CC" -c "$TEST_TMP/up.c" -o "$TEST_TMP/up.o" &&
		ar rcs "$badlib/libetcd.a" "$TEST_TMP/up.o" &&
		ar rcs "$badlib/libnew.a" "$TEST_TMP/up.o"; then
		symbol_arrows "$badlib" >"$TEST_TMP/bad-symbols" ||
			not_ok "layers: reading the symbols of $badlib/*.a failed"
		check_eq "the symbol check refuses a call up into the agent, and an archive in no layer" \
			"libetcd.a takes agent_fsm_post_kind from libagent.a (agent)|libnew.a: no layer" \
			"$(sort "$TEST_TMP/bad-symbols" | paste -sd'|')"
	else
		not_ok "could not build the archive that breaks the rule with $CC"
	fi
else
	skip "the symbol check on an archive that breaks the rule: no $LIB/libagent.a or no $CC"
fi

# --- the tree
include_arrows "$ROOT" >"$TEST_TMP/includes"
for row in "${LAYERS[@]}"; do
	read -r folder _ <<<"$row"
	below=$(echo ${BELOW[$folder]})
	check_eq "$folder/ includes only itself, include/dlaunch/ and the folders below it (${below:-none})" \
		"" "$(grep "^$folder/[^/]*: " "$TEST_TMP/includes" | paste -sd'|')"
done
check_eq "every folder with sources is in a layer" \
	"" "$(grep ': no layer for ' "$TEST_TMP/includes" | paste -sd'|')"

if ! ls "$LIB"/*.a >/dev/null 2>&1; then
	not_ok "layers: no archive under $LIB: build them with make"
	finish
fi
if ! symbol_arrows "$LIB" >"$TEST_TMP/symbols"; then
	not_ok "layers: reading the symbols of $LIB/*.a failed"
	finish
fi
for a in "$LIB"/*.a; do
	name=$(basename "$a")
	folder=${FOLDER_OF[$name]:-}
	if [ -z "$folder" ]; then
		not_ok "$name is in a layer (add its folder to LAYERS in $0)"
		continue
	fi
	check_eq "$name ($folder/) needs nothing of an archive above it or beside it" \
		"" "$(grep "^$name " "$TEST_TMP/symbols" | paste -sd'|')"
done
finish
