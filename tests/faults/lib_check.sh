# SPDX-License-Identifier: Apache-2.0
# lib_check.sh - the checker run after every case of the reliability suite
# (sourced by lib_faults.sh).
#
#   check_case WHAT [SECONDS] [--no-workers]
#                                   the end of every case: works out from
#                                   what the case left which of the parts
#                                   below apply and runs them all, so a case
#                                   cannot leave one out (see check_case)
#   check_no_strays WHAT [SECONDS]  no process carrying the case's mark is
#                                   left but the server (waits up to SECONDS
#                                   for them to go, then names and kills them)
#   check_ranks WHAT                the workers' own records: no global rank
#                                   held twice in any round of a job (but
#                                   by a node that refilled the round after
#                                   a missed in-place re-form), ranks
#                                   below the world size, one world size, one
#                                   restart count and one master per round
#   check_members JOB WHAT          the server's job detail: node ranks
#                                   0..N-1 once each, rank offsets the sums
#                                   of the lower nodes' nproc, world size the
#                                   sum of all (no rank range overlaps), and
#                                   the workers recorded in the server's
#                                   round hold the ranks it assigned
#   check_server_jobs WHAT          check_members over every job the server
#                                   knows (in an etcd case: every job record
#                                   under the key prefix)
#   check_journal WHAT              kill -9 the server, start a new one with
#                                   the same arguments (so from its state
#                                   dir), and compare every job's state,
#                                   round, restart count, failures, members
#   check_ckpts WHAT                every checkpoint file (ckpt-*.dlck) under
#                                   $TEST_TMP written or changed since the
#                                   last check is valid (ckpt_tool.py)

# marked_pids: pids whose environment holds DLAUNCH_TEST_MARK=$MARK. One
# grep reads every environ (a grep per process took seconds on a busy
# machine, and wait_for polls this); processes gone meanwhile are ignored.
marked_pids() {
	grep -lzx -- "DLAUNCH_TEST_MARK=$MARK" /proc/[0-9]*/environ 2>/dev/null |
		sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx -- "$$"
	return 0
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

# refilled_rounds: "JOB ROUND NODE" for each round whose workers a node's
# agent started again after a missed in-place re-form (docs/reliability.md,
# "Survivors keep running"): the node kills its workers and starts them
# afresh in the same round, so its ranks of that round have a second holder
# once the first is gone. The node is the NODE of $TEST_TMP/agent.NODE.log
# or agent.NODE.N.log (the names lib_faults.sh's cases give agent logs).
refilled_rounds() {
	local f node
	for f in "$TEST_TMP"/agent.*.log; do
		[ -f "$f" ] || continue
		node=${f##*/agent.}
		node=${node%.log}
		node=${node%.[0-9]*}
		sed -n 's/.* job=\([^ ]*\) round=\([0-9]*\) event=round_entered recovery=restarted why="the in-place re-form failed".*/\1 \2 '"$node"'/p' "$f"
	done
}

# ranks_problems: one line per problem found in ranks.log. A rank held
# twice in a round is a problem unless both holders ran on one node and
# that node refilled the round (refilled_rounds).
ranks_problems() {
	local f=$TEST_TMP/ranks.log
	[ -s "$f" ] || { echo "no worker records in ranks.log"; return; }
	awk -v refills="$(refilled_rounds | tr '\n' ';')" '
	BEGIN { n = split(refills, rf, ";"); for (i = 1; i <= n; i++) refilled[rf[i]] = 1 }
	$1 == "none" || $2 == "none" || $6 == "none" {
		printf "worker pid %s has no DLAUNCH_ROUND/RANK/WORLD_SIZE\n", $3
		next
	}
	{
		# records of several jobs may share the file: a round is per job
		r = $9 " round " $1
		key = r " rank " $2
		if ((key in holder) &&
		    !(node[key] == $4 && (($9 " " $1 " " $4) in refilled)))
			printf "job %s round %s rank %s held twice (pids %s and %s)\n", $9, $1, $2, holder[key], $3 "@" $4
		holder[key] = $3 "@" $4
		node[key] = $4
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

# workers_of_round JOB JSON: the worker records (ranks.log) of the round
# JOB's detail JSON shows, when that detail has members (a round that ended
# has none)
workers_of_round() {
	local round
	[ -s "$TEST_TMP/ranks.log" ] || return 0
	round=$(jq -r 'select((.members // []) | length > 0) | .round' <<<"$2" 2>/dev/null)
	[ -n "$round" ] || return 0
	awk -v j="$1" -v r="$round" '$9 == j && $1 == r' "$TEST_TMP/ranks.log"
}

# workers_vs_members_problems JOB JSON: one line per worker of the round
# JSON (JOB's detail) shows whose rank or world size is not what the server
# assigned to its node (rank_offset + local_rank, world_size)
workers_vs_members_problems() {
	local world members
	world=$(jq -r '.world_size // empty' <<<"$2" 2>/dev/null)
	members=$(jq -r '(.members // []) | map("\(.node_id):\(.rank_offset)") | join(" ")' \
		<<<"$2" 2>/dev/null)
	workers_of_round "$1" "$2" | awk -v w="$world" -v m="$members" '
	BEGIN {
		n = split(m, a, " ")
		for (i = 1; i <= n; i++) {
			split(a[i], f, ":")
			off[f[1]] = f[2]
		}
	}
	{
		if (!($4 in off)) {
			printf "round %s: worker %s of node %s, which is not a member\n", $1, $3, $4
			next
		}
		if ($2 != off[$4] + $5)
			printf "round %s: worker %s of node %s local rank %s holds rank %s, the server assigned %s\n", $1, $3, $4, $5, $2, off[$4] + $5
		if ($6 != w)
			printf "round %s: worker %s has world size %s, the server says %s\n", $1, $3, $6, w
	}'
}

# job_problems JOB JSON: members_problems and workers_vs_members_problems
# of JOB's detail JSON
job_problems() {
	if [ -z "$2" ]; then
		echo "no job detail for $1 from the server"
		return
	fi
	echo "$2" | members_problems
	workers_vs_members_problems "$1" "$2"
}

check_members() {
	local job=$1 what=$2 json problems
	json=$(job_json "$job")
	problems=$(job_problems "$job" "$json")
	if [ -z "$problems" ]; then
		ok "$what: server's members hold disjoint rank ranges ($(echo "$json" | jq -c '[.members[] | {n: .node_id, r: .node_rank, o: .rank_offset}]'))"
	else
		not_ok "$what: server's job detail of $job: $(echo "$problems" | head -n 3 | tr '\n' ';')"
	fi
}

# server_jobs: the names of every job the server knows
server_jobs() { rdzv_curl /v1/jobs -f 2>/dev/null | jq -r '.jobs[].job' 2>/dev/null; }

check_server_jobs() {
	local what=$1 list jobs job json problems='' n=0 workers=0
	local src="the server's detail of its" nolist="the server does not list its jobs"
	local bad="server's job detail"
	if [ -n "${FAULTS_ETCD:-}" ]; then
		src="the job records in etcd, all"
		nolist="the job records in etcd cannot be listed"
		bad="job records in etcd"
	fi
	if ! list=$(jobs_list_json 2>&1) ||
		! jobs=$(jq -r '.jobs[].job' <<<"$list" 2>&1); then
		not_ok "$what: $nolist: $(head -c 200 <<<"$list")"
		return 1
	fi
	for job in $jobs; do
		n=$((n + 1))
		json=$(job_json "$job")
		problems+=$(job_problems "$job" "$json" | sed "s/^/job $job: /")$'\n'
		workers=$((workers + $(workers_of_round "$job" "$json" | wc -l)))
	done
	problems=$(sed '/^$/d' <<<"$problems")
	if [ -z "$problems" ]; then
		if [ "$workers" -gt 0 ]; then
			workers="the $workers worker(s) recorded in their current rounds hold the ranks it assigned"
		else
			workers="no worker recorded in their current rounds to compare"
		fi
		ok "$what: $src $n job(s): node ranks 0..N-1, disjoint rank ranges; $workers"
	else
		not_ok "$what: $bad: $(echo "$problems" | head -n 3 | tr '\n' ';')"
	fi
}

# journal_digest JSON: what must survive a restart from the journal
journal_digest() {
	jq -c '{state, round, restart_count, max_restarts, min_nodes, max_nodes,
		failures: ((.failures // []) | map({node_id, rank, exitcode})),
		members: ((.members // []) | map({node_id, node_rank, nproc, rank_offset}) | sort_by(.node_rank))}'
}

# all_jobs_digest: "job digest" per job the server knows, sorted
all_jobs_digest() {
	local job
	for job in $(server_jobs | sort); do
		echo "$job $(job_json "$job" | journal_digest)"
	done
}

check_journal() {
	local what=$1 before after
	before=$(all_jobs_digest)
	if [ -z "$before" ]; then
		not_ok "$what: no job on the server before the restart from its journal"
		return 1
	fi
	kill -KILL "$RDZV_PID" 2>/dev/null
	wait_for 10 bash -c "! kill -0 $RDZV_PID" 2>/dev/null
	{ wait "$RDZV_PID"; } 2>/dev/null
	if ! start_rdzv ${RDZV_NS:+--ns "$RDZV_NS"} "${RDZV_START_ARGS[@]}"; then
		not_ok "$what: dlaunch-rdzv does not start again from its journal"
		return 1
	fi
	after=$(all_jobs_digest)
	if [ "$before" = "$after" ]; then
		ok "$what: the journal replays to the same $(wc -l <<<"$before") job(s): state, round, restarts, failures, members ($(awk '{print $1}' <<<"$before" | paste -sd ' ' | head -c 200))"
	else
		not_ok "$what: journal replay differs: before $(tr '\n' ' ' <<<"$before"), after $(tr '\n' ' ' <<<"$after")"
	fi
}

# checkpoints already verified, by "path mtime size"
declare -A CKPT_SEEN=()

# ckpt_sig FILE: what changes when FILE is written again
ckpt_sig() { stat -c '%n %y %s' "$1" 2>/dev/null; }

check_ckpts() {
	local what=$1 f out files=()
	while IFS= read -r f; do
		[ -n "${CKPT_SEEN[$(ckpt_sig "$f")]:-}" ] || files+=("$f")
	done < <(find "$TEST_TMP" -name 'ckpt-*.dlck' -type f 2>/dev/null | sort)
	[ ${#files[@]} -gt 0 ] || return 0
	if out=$("$PY" "$FAULTS_DIR/ckpt_tool.py" verify "${files[@]}" 2>&1); then
		ok "$what: the ${#files[@]} checkpoint(s) written in the case are valid"
	else
		not_ok "$what: damaged checkpoints left: $(grep -v ': step [0-9]*$' <<<"$out" | head -n 3 | sed "s|$TEST_TMP/||g" | tr '\n' ';')"
	fi
	for f in "${files[@]}"; do CKPT_SEEN[$(ckpt_sig "$f")]=1; done
}

# the case in progress: the server starts, and whether agents ran, since
# the last new_case or check_case
CASE_RDZV_STARTS=0
CASE_AGENTS=0

# check_case WHAT [SECONDS] [--no-workers]: the checker every case ends
# with. What applies is worked out from what the case left:
#   - no process of the job left (check_no_strays, waiting up to SECONDS);
#   - the workers' records (check_ranks) when any worker recorded itself;
#     when the case ran agents and none did, that is a failure unless the
#     case says --no-workers (no worker was meant to start);
#   - the server's detail of every job it knows (check_server_jobs) while
#     a server runs; a server started in the case that is gone by now is a
#     failure (cases check before stop_rdzv); in an etcd case (FAULTS_ETCD
#     set, see lib_faults.sh) the job records in etcd instead;
#   - with --state-dir, the journal: kill -9 and replay (check_journal);
#   - every checkpoint written since the last check (check_ckpts).
check_case() {
	local what=$1 secs=10 no_workers=0
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		--no-workers) no_workers=1 ;;
		*) secs=$1 ;;
		esac
		shift
	done
	check_no_strays "$what" "$secs"
	if [ -s "$TEST_TMP/ranks.log" ]; then
		check_ranks "$what"
	elif [ "$CASE_AGENTS" = 1 ] && [ "$no_workers" = 0 ]; then
		not_ok "$what: the case ran agents but no worker recorded itself in ranks.log"
	fi
	if [ -n "${FAULTS_ETCD:-}" ]; then
		check_server_jobs "$what"
	elif [ -n "${RDZV_PID:-}" ] && alive "$RDZV_PID"; then
		check_server_jobs "$what"
		[ -n "${RDZV_STATE_DIR:-}" ] && check_journal "$what"
	elif [ "${RDZV_STARTS:-0}" -gt "$CASE_RDZV_STARTS" ]; then
		not_ok "$what: dlaunch-rdzv is gone before the checker could read its jobs"
		show_log "$RDZV_LOG"
	fi
	check_ckpts "$what"
	case_begin
}

# case_begin: what check_case looks at starts from here
case_begin() {
	CASE_RDZV_STARTS=${RDZV_STARTS:-0}
	CASE_AGENTS=0
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
