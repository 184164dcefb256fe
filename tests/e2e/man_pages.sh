#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# man_pages.sh - the man pages the build makes (man/man.mk) are clean for
# mandoc -Tlint and groff -ww, and say what --help says: every option each
# command's --help lists (parsed from the --help text) is in its page,
# with its help text word for word, its default included; the options
# refused by name too. They are made from the binaries' own tables, so a
# page that lagged behind its binary would fail here.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_docs.sh"
need_bin dlaunch dlaunch-rdzv dlaunch-train

MAN=$DLAUNCH_BUILD/man
for page in dlaunch.1 dlaunch-train.1 dlaunch-rdzv.8; do
	if [ ! -s "$MAN/$page" ]; then
		not_ok "$MAN/$page missing: build it with make"
		finish
	fi
done

for page in dlaunch.1 dlaunch-train.1 dlaunch-rdzv.8; do
	if command -v mandoc >/dev/null; then
		mandoc -T lint -W style "$MAN/$page" >"$TEST_TMP/lint" 2>&1
		rc=$?
		check "$page: mandoc -Tlint reports nothing (rc $rc)" \
			test "$rc" -eq 0 -a ! -s "$TEST_TMP/lint"
		sed 's/^/# /' "$TEST_TMP/lint" | head -n 20
	else
		skip "$page: mandoc -Tlint: mandoc is not installed (contrib/install-deps.sh installs it)"
	fi
	if command -v groff >/dev/null; then
		# formatted for real: -z would skip the warnings of line filling
		groff -man -ww -T ascii "$MAN/$page" 2>"$TEST_TMP/lint" >/dev/null
		rc=$?
		check "$page: groff -ww warns of nothing (rc $rc)" \
			test "$rc" -eq 0 -a ! -s "$TEST_TMP/lint"
		sed 's/^/# /' "$TEST_TMP/lint" | head -n 20
	else
		skip "$page: groff -ww: groff is not installed"
	fi
	head -n 12 "$MAN/$page" | grep -q '^\.TH .*"dlaunch [0-9][^"]*"'
	check "$page: .TH names dlaunch's version" test $? -eq 0
done

# the check has teeth: a page that lost an option's entry fails the same
# comparison as below (its help text is nowhere else in the page)
nospace() { tr -d ' \n'; }
sed '/^\\fB\\-\\-max\\-body/,+2d' "$MAN/dlaunch-rdzv.8" >"$TEST_TMP/lost.8"
man_text "$TEST_TMP/lost.8" | nospace >"$TEST_TMP/lost.txt"
check "a page without --max-body's entry lacks its help text" \
	bash -c "! grep -qF -- '$(help_entry dlaunch-rdzv --max-body | nospace)' '$TEST_TMP/lost.txt'"

for cmd in "${DOC_CMDS[@]}"; do
	read -r -a argv <<<"$cmd"
	page=${DOC_PAGE[$cmd]}
	man_text "$MAN/$page" >"$TEST_TMP/page.txt"
	nospace <"$TEST_TMP/page.txt" >"$TEST_TMP/page.nospace"
	opts=$(help_options --refused "${argv[@]}")
	n=$(wc -w <<<"$opts")
	check "$cmd --help lists options ($n)" test "$n" -ge 7
	missing="" drifted=""
	for opt in $opts; do
		grep -qF -- "$opt" "$TEST_TMP/page.txt" || missing+=" $opt"
		text=$(help_entry "${argv[@]}" "$opt" | nospace)
		[ -z "$text" ] && continue # a refused option has no help
		grep -qF -- "$text" "$TEST_TMP/page.nospace" || drifted+=" $opt"
	done
	check_eq "$cmd: every option of --help is in $page" "" "$missing"
	check_eq "$cmd: the help text and default of each is in $page as --help has it" "" "$drifted"
done

# the hand-written sections are there
for page in dlaunch.1 dlaunch-train.1 dlaunch-rdzv.8; do
	missing=""
	for section in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" \
		ENVIRONMENT FILES EXAMPLES "SEE ALSO"; do
		grep -Eq "^\.SH \"?${section}\"?\$" "$MAN/$page" || missing+=" $section"
	done
	check_eq "$page: has its hand-written sections (description, exit status, environment, files, examples, see also)" "" "$missing"
done
finish
