# SPDX-License-Identifier: Apache-2.0
# lib_docs.sh - helpers for the tests of the man pages, the completion and
# the package (sourced after lib.sh).

# the four command lines, as "PROG [SUBCOMMAND]", and their man pages
DOC_CMDS=("dlaunch" "dlaunch status" "dlaunch-rdzv" "dlaunch-train")
declare -A DOC_PAGE=([dlaunch]=dlaunch.1 ["dlaunch status"]=dlaunch.1
	[dlaunch-rdzv]=dlaunch-rdzv.8 [dlaunch-train]=dlaunch-train.1)

# help_options [--refused] PROG [SUBCOMMAND]: the long options its --help
# lists (parsed from the text, not from any table), one a line; with
# --refused, the options it refuses by name too
help_options() {
	local refused=0
	[ "$1" = --refused ] && { refused=1; shift; }
	local help
	help=$(env -u DLAUNCH_HELP_FORMAT "$BIN/$1" "${@:2}" --help) || return 1
	sed -n 's/^  \(-[a-zA-Z], \)\{0,1\}\(--[a-z0-9-]*\).*/\2/p' <<<"$help"
	[ "$refused" = 1 ] &&
		sed -n 's/^Not supported (refused): //p' <<<"$help" | grep -o -- '--[a-z0-9-]*'
	return 0
}

# help_entry PROG [SUBCOMMAND] --NAME: the help of one option as --help
# prints it, its lines joined and spaces squeezed
help_entry() {
	local name=${*: -1}
	env -u DLAUNCH_HELP_FORMAT "$BIN/$1" "${@:2:$#-2}" --help | awk -v opt="$name" '
		/^  -/ { on = ($0 ~ ("(^  |, )" opt "( |$)")); next }
		on && /^      / { sub(/^ +/, ""); text = text (text ? " " : "") $0; next }
		{ on = 0 }
		END { print text }' | tr -s ' '
}

# man_text PAGE: a man page rendered as plain text on one line, spaces
# squeezed (mandoc, else groff)
man_text() {
	if command -v mandoc >/dev/null; then
		mandoc -T ascii "$1"
	else
		groff -man -T ascii -P -c "$1" 2>/dev/null
	fi | sed 's/.\x08//g' | tr -s ' \n' '  '
}
