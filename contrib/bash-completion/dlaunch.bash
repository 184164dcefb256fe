# dlaunch.bash - bash completion for dlaunch, dlaunch status and dump, dlaunch-rdzv
# and dlaunch-train: their options, and the values an option takes.
#
# The build (man/man.mk) puts the option tables first, from each binary's
# own --help with DLAUNCH_HELP_FORMAT=completion: one line an option,
# "--name -s KIND WORD...", KIND flag, word (the WORDs follow), file, dir
# or value. This part only reads them.

# _dlaunch_lookup TABLE WORD: the KIND and WORDs of option WORD (its long
# name, torchrun's '_' spelling, its short name, or a prefix that names one
# option only) in _dlaunch_kind and _dlaunch_words; 1 when there is none.
_dlaunch_lookup()
{
	local table=$1 word=$2 long short kind words hits=0
	[[ $word == --* ]] && word=${word//_/-}
	while read -r long short kind words; do
		if [[ $word == "$long" || $word == "$short" ]]; then
			_dlaunch_kind=$kind _dlaunch_words=$words
			return 0
		fi
	done <<<"$table"
	while read -r long short kind words; do
		if [[ $word == --?* && $long == "$word"* ]]; then
			hits=$((hits + 1))
			_dlaunch_kind=$kind _dlaunch_words=$words
		fi
	done <<<"$table"
	[ "$hits" -eq 1 ]
}

# _dlaunch_values KIND WORDS CUR PREFIX: COMPREPLY gets the values of an
# option of that kind that start with CUR, each after PREFIX (the
# "--name=" of a word that holds both).
_dlaunch_values()
{
	local kind=$1 words=$2 cur=$3 prefix=$4 v
	case $kind in
	word) mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur") ;;
	file)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		;;
	dir)
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -d -- "$cur")
		;;
	*) COMPREPLY=() ;;
	esac
	if [ -n "$prefix" ]; then
		for v in "${!COMPREPLY[@]}"; do
			COMPREPLY[v]=$prefix${COMPREPLY[v]}
		done
	fi
}

_dlaunch()
{
	local cur=${COMP_WORDS[COMP_CWORD]} table i=1 w v
	local program=0 first_arg=0 longs long _ignored
	local _dlaunch_kind _dlaunch_words
	COMPREPLY=()
	case ${COMP_WORDS[0]##*/} in
	dlaunch-rdzv) table=$_dlaunch_table_rdzv ;;
	dlaunch-train) table=$_dlaunch_table_train ;;
	*)
		table=$_dlaunch_table_dlaunch program=1
		if [ "$COMP_CWORD" -gt 1 ] && [ "${COMP_WORDS[1]}" = status ]; then
			table=$_dlaunch_table_status program=0 i=2
		elif [ "$COMP_CWORD" -gt 1 ] && [ "${COMP_WORDS[1]}" = dump ]; then
			table=$_dlaunch_table_dump program=0 i=2
		fi
		;;
	esac
	# the words before the cursor: options and their values, then (for
	# dlaunch) the program, after which nothing is dlaunch's
	while [ "$i" -lt "$COMP_CWORD" ]; do
		w=${COMP_WORDS[i]}
		if [ "$w" = -- ] || { [[ $w != -?* ]] && [ "$program" = 1 ]; }; then
			[ "$program" = 1 ] || return 0
			compopt -o filenames 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -f -- "$cur")
			return 0
		fi
		if [[ $w == -?* && $w != *=* ]] && _dlaunch_lookup "$table" "$w" &&
			[ "$_dlaunch_kind" != flag ]; then
			# its value: the next word, or the one after a lone "="
			# (bash splits --name=value at '=' by COMP_WORDBREAKS)
			v=$((i + 1))
			if [ "${COMP_WORDS[v]-}" = = ]; then
				if [ "$v" -eq "$COMP_CWORD" ]; then
					_dlaunch_values "$_dlaunch_kind" "$_dlaunch_words" "" ""
					return 0
				fi
				v=$((v + 1))
			fi
			if [ "$v" -eq "$COMP_CWORD" ]; then
				_dlaunch_values "$_dlaunch_kind" "$_dlaunch_words" "$cur" ""
				return 0
			fi
			i=$((v + 1))
			continue
		fi
		i=$((i + 1))
	done
	if [[ $cur == --*=* ]]; then
		# --name=value as one word (no '=' in COMP_WORDBREAKS)
		_dlaunch_lookup "$table" "${cur%%=*}" || return 0
		_dlaunch_values "$_dlaunch_kind" "$_dlaunch_words" "${cur#*=}" "${cur%%=*}="
		return 0
	fi
	if [[ $cur == -* ]] || [ "$program" = 0 ]; then
		longs=""
		while read -r long _ignored; do
			longs+=" $long"
		done <<<"$table"
		mapfile -t COMPREPLY < <(compgen -W "$longs" -- "$cur")
		return 0
	fi
	# dlaunch's program (or, first, the status or dump subcommand)
	[ "$COMP_CWORD" -eq 1 ] && first_arg=1
	compopt -o filenames 2>/dev/null
	mapfile -t COMPREPLY < <(
		[ "$first_arg" = 1 ] && compgen -W "status dump" -- "$cur"
		compgen -f -- "$cur"
		[[ $cur != */* ]] && compgen -c -- "$cur"
	)
	return 0
}

complete -F _dlaunch dlaunch dlaunch-rdzv dlaunch-train
