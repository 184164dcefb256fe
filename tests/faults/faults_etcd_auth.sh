#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_etcd_auth.sh - the etcd backend with etcd's own authentication
# when the login token expires (issue 23, cases 1 and 2).
#
# A 3-member etcd with auth on and --auth-token-ttl 2: a simple token
# unused for 2 s is refused ("invalid auth token", code 16). Lease
# keep-alives do not carry the token, so a job that runs quietly for
# longer than that finds its token expired at its next call. Three agents
# (--nnodes=2:3, one worker each, lease TTL 3 s) log in as a user limited
# to the case's key prefix:
#
#   token expired, then a worker fails: the failing node's report and
#     every call after it log in again (without the expired token, which
#     etcd refuses an Authenticate with), the job restarts everywhere
#     (restart count 1);
#   token expired, then the agents' member killed (-9): every watch
#     reconnects on another member with the expired token, is refused,
#     logs in again and resumes from its revision; a worker failure then
#     reaches every node through those watches (restart count 2);
#   the long run: quiet again, then the agent that leads the job killed
#     (-9): another takes over, the two others re-form and finish the job
#     (exit 0, SUCCEEDED), no login refused in the whole run (about ten
#     token TTLs).
source "$(dirname "$0")/lib_faults.sh"
# shellcheck source=../e2e/lib_etcd.sh
source "$FAULTS_DIR/../e2e/lib_etcd.sh"
faults_require dlaunch

if ! etcd_available; then
	skip "etcd auth faults: $ETCD_WHY"
	finish
fi

# shellcheck source=lib_etcd_faults.sh
source "$FAULTS_DIR/lib_etcd_faults.sh"

TOKEN_TTL=2
if ! etcd_cluster_start 3 --auth-token-ttl "$TOKEN_TTL"; then
	not_ok "etcd auth faults: the 3-member etcd cluster did not start"
	finish
fi
if ! etcd_enable_auth "/f$$-" dl "pw-$RANDOM$RANDOM"; then
	not_ok "etcd auth faults: could not turn authentication on"
	finish
fi
FAULTS_ETCD=$ETCD_ENDPOINTS
ETCD_CASE_CONF=$(etcd_rdzv_conf)

# token_refused I: a token unused for more than the token TTL is
# refused by member I (what the agents' token is after a quiet spell)
token_refused() {
	local tok ans
	tok=$(etcd_auth_token "$ETCD_USER" "$(cat "$ETCD_PASSWORD_FILE")" "$1") || return 1
	sleep $((TOKEN_TTL + 1))
	ans=$(_etcd_raw_curl "$1" /v3/kv/range "{\"key\":\"$(printf '/f%s-x' $$ | base64)\"}" "$tok")
	[ "$(etcd_error_code <<<"$ans")" = 16 ]
}

# undisturbed_restarted ROUND COUNT PID...: as undisturbed, with COUNT
# restarts charged
undisturbed_restarted() {
	local round=$1 count=$2
	shift 2
	pids_alive "$@" || return 1
	[ "$(job_json "$JOB" | jq -r '"\(.state) \(.round) \(.restart_count) \(.members | length)"')" = \
		"RUNNING $round $count 3" ]
}

what="login token expired"
begin_case auth
start_job
if running_after 0 3; then
	R0=$RUN
	mapfile -t pids < <(workers_of "$R0")
	# the quiet spell: two token TTLs with nothing but keep-alives, the
	# job undisturbed; meanwhile etcd shows that a token that old is dead
	check "$what: etcd refuses a token unused for ${TOKEN_TTL} s (code 16)" token_refused 1
	check "$what: for two more token TTLs the job runs quietly in round $R0" \
		holds_for $((2 * TOKEN_TTL)) undisturbed "$R0" "${pids[@]}"
	worker_cmd B 0 "exit 3"
	restarted_everywhere "$what: then a worker fails" "$R0" 1
	r1=${RUN:-$R0}
	check "$what: no agent's login was refused" \
		bash -c "! grep -h 'refused the login' '$(agent_log A)' '$(agent_log B)' '$(agent_log C)'"

	# case 2: the watches reconnect with an expired token
	mapfile -t pids < <(workers_of "$r1")
	check "$what: quiet again for two token TTLs in round $r1" \
		holds_for $((2 * TOKEN_TTL)) undisturbed_restarted "$r1" 1 "${pids[@]}"
	if etcd_member_kill 0 KILL; then
		ok "$what: member 0, the agents' member, killed (-9) with their tokens expired"
		check "$what: every agent moves on to another member" \
			wait_for 15 logs_say "etcd at ${ETCD_URLS[0]} did not answer .*; trying" A B C
		worker_cmd C 0 "exit 3"
		restarted_everywhere "$what: then a worker fails; every node hears it" "$r1" 2
	else
		not_ok "$what: could not kill member 0"
	fi
	r2=${RUN:-$r1}

	# the long run goes on: quiet again, then the agent that leads the
	# job killed (-9); another takes over, logged in with a token of
	# its own, and the two others finish the job
	L=$(the_leader)
	mapfile -t pids < <(workers_of "$r2")
	check "$what: quiet again for two token TTLs in round $r2" \
		holds_for $((2 * TOKEN_TTL)) undisturbed_restarted "$r2" 2 "${pids[@]}"
	if [ -n "$L" ] && kill -KILL "${AGENT_PID[$L]}"; then
		ok "$what: $L, the agent that leads the job, killed (-9) in round $r2"
		survivors=$(printf '%s\n' A B C | grep -vx "$L" | paste -sd ' ')
		if running_after "$r2" 2; then
			check_eq "$what: the two others run round $RUN" "$survivors" "$(nodes_of "$RUN")"
			check "$what: another agent took over the job" \
				bash -c "grep -q 'took over job auth' $(for n in $survivors; do printf "'%s' " "$(agent_log "$n")"; done)"
		else
			not_ok "$what: the two others did not re-form without $L (record: $(record))"
			show_log "$(agent_log "${survivors%% *}")"
		fi
		all_workers_done
		rcs=''
		for n in $survivors; do
			wait_agent "$n" 30
			rcs+="${AGENT_RC[$n]:-running} "
		done
		check_eq "$what: the two others exit 0 when the workers finish" "0 0" "${rcs% }"
		check_eq "$what: the job record says SUCCEEDED" SUCCEEDED "$(job_field "$JOB" .state)"
		check "$what: no agent's login was refused in the whole run" \
			bash -c "! grep -h 'refused the login' '$(agent_log A)' '$(agent_log B)' '$(agent_log C)'"
	else
		not_ok "$what: no leader to kill"
		finish_job "$what"
	fi
else
	not_ok "$what: the job did not start on three nodes (record: $(record))"
	show_log "$(agent_log A)"
fi
end_case "$what"
etcd_cluster_destroy
finish
