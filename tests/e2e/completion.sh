#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# completion.sh - the bash completion the build makes (man/man.mk), driven
# as bash drives it (COMP_WORDS and COMP_CWORD set, the function called,
# COMPREPLY read): it offers every option each command's --help lists
# (parsed from the --help text) and nothing else; the values of the
# enumerated options, each of which the binary accepts; files and
# directories where a file or directory is wanted; the status subcommand;
# and nothing of dlaunch's once the program has begun.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_docs.sh"
need_bin dlaunch dlaunch-rdzv dlaunch-train

FILE=$DLAUNCH_BUILD/completion/dlaunch
if [ ! -s "$FILE" ]; then
	not_ok "$FILE missing: build it with make"
	finish
fi
bash -n "$FILE"
check "the completion file is valid bash" test $? -eq 0
# shellcheck source=/dev/null
source "$FILE"
check "it registers _dlaunch for the three commands" \
	bash -c "source '$FILE' && complete -p dlaunch dlaunch-rdzv dlaunch-train | grep -c _dlaunch | grep -qx 3"

# offer WORD...: COMPREPLY for the cursor at the end of WORD... (the last
# word is the one being completed), sorted, one a line
offer() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMPREPLY=()
	_dlaunch
	printf '%s\n' "${COMPREPLY[@]}" | sort
}
offers_only() { # WHAT EXPECTED(sorted, space-separated) WORD...
	local what=$1 want=$2
	shift 2
	check_eq "$what" "$want" "$(offer "$@" | tr '\n' ' ' | sed 's/ $//')"
}

# every option of --help, and nothing more
for cmd in "${DOC_CMDS[@]}"; do
	read -r -a argv <<<"$cmd"
	want=$(help_options "${argv[@]}" | sort | tr '\n' ' ' | sed 's/ $//')
	offers_only "$cmd --<TAB>: every option of --help ($(wc -w <<<"$want")), no other" \
		"$want" "${argv[@]}" --
done
offers_only "dlaunch --rdzv-b<TAB>" "--rdzv-backend" dlaunch --rdzv-b
offers_only "dlaunch-rdzv --max-<TAB>" "--max-body --max-header --max-jobs --max-nodes" \
	dlaunch-rdzv --max-

# enumerated values: what the completion offers, and that each is a value
# the binary takes (parsed before --help stops it; a bad one exits 2)
offers_only "dlaunch --rdzv-backend <TAB>" "c10d dlaunch etcd etcd-v1 etcd-v2 etcd-v3 static" \
	dlaunch --rdzv-backend ""
offers_only "dlaunch --rdzv-backend et<TAB>" "etcd etcd-v1 etcd-v2 etcd-v3" \
	dlaunch --rdzv-backend et
offers_only "dlaunch --rdzv-backend=et<TAB> (bash splits at '=')" "etcd etcd-v1 etcd-v2 etcd-v3" \
	dlaunch --rdzv-backend = et
offers_only "dlaunch --rdzv-backend=<TAB> (bash splits at '=')" "c10d dlaunch etcd etcd-v1 etcd-v2 etcd-v3 static" \
	dlaunch --rdzv-backend =
offers_only "dlaunch --rdzv-backend=c<TAB> (one word)" "--rdzv-backend=c10d" \
	dlaunch --rdzv-backend=c
offers_only "dlaunch --redirects <TAB>" "0 1 2 3" dlaunch --redirects ""
offers_only "dlaunch -r <TAB>" "0 1 2 3" dlaunch -r ""
offers_only "dlaunch --tee <TAB>" "0 1 2 3" dlaunch --tee ""
offers_only "dlaunch --nproc_per_node <TAB> (torchrun's spelling)" "auto cpu gpu" \
	dlaunch --nproc_per_node ""
offers_only "dlaunch --start-method <TAB>" "fork forkserver spawn" dlaunch --start-method ""
offers_only "dlaunch-train --device <TAB>" "auto cpu cuda" dlaunch-train --device ""
offers_only "dlaunch-train --dev c<TAB> (a prefix it takes)" "cpu cuda" dlaunch-train --dev c
offers_only "dlaunch-train --backend <TAB>" "auto nccl tcp" dlaunch-train --backend ""
offers_only "dlaunch-train --lr-schedule <TAB>" "constant cosine" dlaunch-train --lr-schedule ""
offers_only "dlaunch-rdzv --log-level <TAB>" "debug error info warn" dlaunch-rdzv --log-level ""
offers_only "dlaunch status --rdzv-backend <TAB>" "c10d dlaunch etcd etcd-v1 etcd-v2 etcd-v3" \
	dlaunch status --rdzv-backend ""
offers_only "a value with no words: nothing" "" dlaunch --nnodes ""

refused=""
for spec in "dlaunch --rdzv-backend" "dlaunch --redirects" "dlaunch --tee" \
	"dlaunch --nproc-per-node" "dlaunch --start-method" \
	"dlaunch-train --device" "dlaunch-train --backend" \
	"dlaunch-train --lr-schedule" "dlaunch-rdzv --log-level"; do
	read -r prog opt <<<"$spec"
	for v in $(offer "$prog" "$opt" ""); do
		"$BIN/$prog" "$opt" "$v" --help >/dev/null 2>&1 || refused+=" $prog $opt $v"
	done
	"$BIN/$prog" "$opt" no-such-value --help >/dev/null 2>&1
	[ $? -eq 2 ] || refused+=" ($prog $opt no-such-value was taken)"
done
check_eq "each value offered is taken by the binary, and a made-up one is refused" "" "$refused"
"$BIN/dlaunch" status --rdzv-backend no-such-value --rdzv-endpoint 127.0.0.1:1 >"$TEST_TMP/out" 2>&1
check_eq "dlaunch status --rdzv-backend no-such-value: exit 2" 2 $?

# files and directories
mkdir -p "$TEST_TMP/dir/sub"
: >"$TEST_TMP/dir/token"
offers_only "dlaunch --rdzv-token-file <TAB>: files" "$TEST_TMP/dir/sub $TEST_TMP/dir/token" \
	dlaunch --rdzv-token-file "$TEST_TMP/dir/"
offers_only "dlaunch --log-dir <TAB>: directories only" "$TEST_TMP/dir/sub" \
	dlaunch --log-dir "$TEST_TMP/dir/"
offers_only "dlaunch-rdzv --state-dir <TAB>: directories only" "$TEST_TMP/dir/sub" \
	dlaunch-rdzv --state-dir "$TEST_TMP/dir/"

# the status subcommand, and the program
check "dlaunch st<TAB> offers status" bash -c "grep -qx status <(
	source '$FILE'; COMP_WORDS=(dlaunch st); COMP_CWORD=1; _dlaunch
	printf '%s\n' \"\${COMPREPLY[@]}\")"
offers_only "dlaunch status --rdzv-<TAB>: status's options, not dlaunch's" \
	"--rdzv-backend --rdzv-ca --rdzv-conf --rdzv-endpoint --rdzv-id --rdzv-token-file" \
	dlaunch status --rdzv-
offers_only "dlaunch --standalone train.py --ep<TAB>: the program's, not dlaunch's" "" \
	dlaunch --standalone "$TEST_TMP/dir/token" --ep
offers_only "dlaunch --nnodes 2 --rdzv-id job --<TAB> still offers dlaunch's" "$(help_options dlaunch | sort | tr '\n' ' ' | sed 's/ $//')" \
	dlaunch --nnodes 2 --rdzv-id job --
offers_only "dlaunch --nproc-per-node 2 $TEST_TMP/dir/t<TAB>: the program, a file" \
	"$TEST_TMP/dir/token" dlaunch --nproc-per-node 2 "$TEST_TMP/dir/t"
finish
