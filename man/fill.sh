#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fill.sh - make a man page from its template (man/*.in):
#
#   man/fill.sh TEMPLATE BINDIR VERSION DATE DOCDIR >PAGE
#
# A template line '.\" generated: PROG [SUBCOMMAND]' is replaced by the
# options of BINDIR/PROG [SUBCOMMAND] --help, which its own option table
# writes as roff when DLAUNCH_HELP_FORMAT=man (common/opt_doc.c); @VERSION@,
# @DATE@ and @DOCDIR@ are replaced everywhere. Fails when a binary fails or
# writes no option, so a page is never left without its options.
set -euo pipefail

tpl=$1 bindir=$2 version=$3 date=$4 docdir=$5

# the binaries read PET_* before the command line: a stray one in the
# build's environment must not change (or break) what they write
unset_pet=()
while IFS='=' read -r name _; do
	[[ $name == PET_* ]] && unset_pet+=(-u "$name")
done < <(env)

n_generated=0
while IFS= read -r line || [ -n "$line" ]; do
	if [[ $line == '.\" generated: '* ]]; then
		read -r -a cmd <<<"${line#'.\" generated: '}"
		out=$(env "${unset_pet[@]}" DLAUNCH_HELP_FORMAT=man \
			"$bindir/${cmd[0]}" "${cmd[@]:1}" --help) || {
			echo "fill.sh: ${cmd[*]} --help failed" >&2
			exit 1
		}
		if [[ $out != .TP* ]]; then
			echo "fill.sh: ${cmd[*]} --help wrote no man options" >&2
			exit 1
		fi
		printf '%s\n' "$out"
		n_generated=$((n_generated + 1))
		continue
	fi
	line=${line//@VERSION@/$version}
	line=${line//@DATE@/$date}
	printf '%s\n' "${line//@DOCDIR@/$docdir}"
done <"$tpl"
if [ "$n_generated" -eq 0 ]; then
	echo "fill.sh: $tpl has no '.\\\" generated:' line" >&2
	exit 1
fi
