# lib_check.sh - the checker run after every case of the reliability suite
# (sourced by lib_faults.sh).
#
#   check_no_strays WHAT [SECONDS]  no process carrying the case's mark is
#                                   left but the server (waits up to SECONDS
#                                   for them to go, then names and kills them)
#   check_ranks WHAT                the workers' own records: no global rank
#                                   held twice in any round of a job, ranks
#                                   below the world size, one world size, one
#                                   restart count and one master per round
#   check_members JOB WHAT          the server's job detail: node ranks
#                                   0..N-1 once each, rank offsets the sums
#                                   of the lower nodes' nproc, world size the
#                                   sum of all (no rank range overlaps)
#   check_journal JOB DIR WHAT      kill -9 the server, start a new one from
#                                   its state dir DIR, and compare the job's
#                                   state, round, restart count and failures
#   check_case WHAT                 strays + ranks, the usual end of a case

# marked_pids: pids whose environment holds DLAUNCH_TEST_MARK=$MARK
marked_pids() {
	local f pid
	for f in /proc/[0-9]*/environ; do
		pid=${f#/proc/}
		pid=${pid%/environ}
		[ "$pid" = "$$" ] && continue
		if grep -qzx "DLAUNCH_TEST_MARK=$MARK" "$f" 2>/dev/null; then
			echo "$pid"
		fi
	done
}

# stray_pids: marked pids but the server's
stray_pids() {
	local p
	for p in $(marked_pids); do
		[ "$p" = "${RDZV_PID:-}" ] && continue
		echo "$p"
	done
}

no_strays() { [ -z "$(stray_pids)" ]; }

kill_marked() {
	local p
	for p in $(marked_pids); do
		kill -KILL "$p" 2>/dev/null
	done
}

# describe_pids PID...: "pid(state comm args)" for a message
describe_pids() {
	local p out=
	for p in "$@"; do
		out+=" $p($(ps -o stat=,args= -p "$p" 2>/dev/null | cut -c1-80))"
	done
	echo "${out# }"
}

check_no_strays() {
	local what=$1 secs=${2:-10} left
	if wait_for "$secs" no_strays; then
		ok "$what: no process of the job left"
		return 0
	fi
	left=$(stray_pids)
	# shellcheck disable=SC2086
	not_ok "$what: processes of the job left behind: $(describe_pids $left)"
	for p in $left; do kill -KILL "$p" 2>/dev/null; done
	return 1
}

# ranks_problems: one line per problem found in ranks.log
ranks_problems() {
	local f=$TEST_TMP/ranks.log
	[ -s "$f" ] || { echo "no worker records in ranks.log"; return; }
	awk '
	$1 == "none" || $2 == "none" || $6 == "none" {
		printf "worker pid %s has no DLAUNCH_ROUND/RANK/WORLD_SIZE\n", $3
		next
	}
	{
		# records of several jobs may share the file: a round is per job
		r = $9 " round " $1
		key = r " rank " $2
		if (key in holder)
			printf "job %s round %s rank %s held twice (pids %s and %s)\n", $9, $1, $2, holder[key], $3 "@" $4
		holder[key] = $3 "@" $4
		if ($2 + 0 >= $6 + 0 || $2 + 0 < 0)
			printf "job %s round %s rank %s outside world size %s\n", $9, $1, $2, $6
		if ((r in world) && world[r] != $6)
			printf "job %s round %s has world sizes %s and %s\n", $9, $1, world[r], $6
		world[r] = $6
		if ((r in rc) && rc[r] != $7)
			printf "job %s round %s has restart counts %s and %s\n", $9, $1, rc[r], $7
		rc[r] = $7
		if ((r in master) && master[r] != $8)
			printf "job %s round %s has masters %s and %s\n", $9, $1, master[r], $8
		master[r] = $8
	}' "$f"
}

check_ranks() {
	local what=$1 problems
	problems=$(ranks_problems)
	if [ -z "$problems" ]; then
		ok "$what: no rank held twice in any round ($(wc -l <"$TEST_TMP/ranks.log") worker starts)"
	else
		not_ok "$what: worker records: $(echo "$problems" | head -n 3 | tr '\n' ';')"
	fi
}

# members_problems JSON: one line per inconsistency in a job detail
members_problems() {
	jq -r '
	  (.members // []) as $m
	  | ($m | sort_by(.node_rank)) as $s
	  | [range(0; $s | length)] as $idx
	  | ( $idx[] | select($s[.].node_rank != .)
	      | "node ranks are not 0..\($s | length - 1): \([$s[].node_rank])" ),
	    ( $idx[] | select(. > 0)
	      | select($s[.].rank_offset != ($s[0:.] | map(.nproc) | add))
	      | "node \($s[.].node_id) has rank_offset \($s[.].rank_offset), expected \($s[0:.] | map(.nproc) | add)" ),
	    ( select(($s | length) > 0 and $s[0].rank_offset != 0)
	      | "node rank 0 has rank_offset \($s[0].rank_offset)" ),
	    ( select(($s | length) > 0 and .world_size != ($m | map(.nproc) | add))
	      | "world_size \(.world_size) but members hold \($m | map(.nproc) | add)" ),
	    ( $m | group_by(.node_id)[] | select(length > 1)
	      | "node \(.[0].node_id) is a member twice" )
	' 2>&1 | sort -u
}

check_members() {
	local job=$1 what=$2 json problems
	json=$(job_json "$job")
	if [ -z "$json" ]; then
		not_ok "$what: no job detail for $job from the server"
		return 1
	fi
	problems=$(echo "$json" | members_problems)
	if [ -z "$problems" ]; then
		ok "$what: server's members hold disjoint rank ranges ($(echo "$json" | jq -c '[.members[] | {n: .node_id, r: .node_rank, o: .rank_offset}]'))"
	else
		not_ok "$what: server's job detail: $(echo "$problems" | head -n 3 | tr '\n' ';')"
	fi
}

# journal_digest JSON: what must survive a restart from the journal
journal_digest() {
	jq -c '{state, round, restart_count, max_restarts, min_nodes, max_nodes,
		failures: ((.failures // []) | map({node_id, rank, exitcode})),
		members: ((.members // []) | map({node_id, node_rank, nproc, rank_offset}) | sort_by(.node_rank))}'
}

check_journal() {
	local job=$1 dir=$2 what=$3 before after
	before=$(job_json "$job" | journal_digest)
	if [ -z "$before" ]; then
		not_ok "$what: no job detail for $job before the restart"
		return 1
	fi
	kill -KILL "$RDZV_PID" 2>/dev/null
	wait_for 10 bash -c "! kill -0 $RDZV_PID" 2>/dev/null
	if ! start_rdzv ${RDZV_NS:+--ns "$RDZV_NS"} --state-dir "$dir" \
		"${RDZV_ARGS[@]}"; then
		not_ok "$what: dlaunch-rdzv does not start again from its journal"
		return 1
	fi
	after=$(job_json "$job" | journal_digest)
	if [ "$before" = "$after" ]; then
		ok "$what: journal replays to the same job ($before)"
	else
		not_ok "$what: journal replay differs: before $before, after $after"
	fi
}

check_case() {
	check_no_strays "$1" "${2:-10}"
	check_ranks "$1"
}

# check_sanitizer_logs: no AddressSanitizer, LeakSanitizer or UBSan report
# in any log of the case (the servers', agents' and workers' output); run by
# finish, so a `make check` build of the suite fails on them
check_sanitizer_logs() {
	local hits
	# nothing ran (a skipped case): nothing to claim
	compgen -G "$TEST_TMP/*.log" >/dev/null || return 0
	hits=$(grep -l -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' \
		"$TEST_TMP"/*.log 2>/dev/null)
	if [ -z "$hits" ]; then
		ok "$(basename "$0" .sh): no sanitizer report in any log"
	else
		local f
		for f in $hits; do
			not_ok "$(basename "$0" .sh): sanitizer report in $(basename "$f"): $(grep -m1 -E 'ERROR: |runtime error:' "$f" | cut -c1-200)"
			grep -A12 -m1 -E 'ERROR: |runtime error:' "$f" | sed 's/^/#   /'
		done
	fi
}
