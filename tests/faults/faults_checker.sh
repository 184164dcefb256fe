#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# faults_checker.sh - the checker checks: every other case trusts
# lib_check.sh to fail when a process is left, a rank is held twice, the
# server's members overlap, the workers hold other ranks than the server
# assigned or a checkpoint is damaged, so here it is shown each of those and
# must say so (and stay quiet on clean input). No dlaunch binary is needed.
source "$(dirname "$0")/lib_faults.sh"

# a stray: a marked process the "job" left behind
spawn_bg "$TEST_TMP/stray.log" env DLAUNCH_TEST_MARK="$MARK" sleep 1000
stray=$LAST_PID
wait_for 5 bash -c "grep -qzx 'DLAUNCH_TEST_MARK=$MARK' /proc/$stray/environ"
found=$(stray_pids)
check_eq "checker: finds a marked process left behind" "$stray" "$found"
out=$(check_no_strays "inner" 1)
check "checker: check_no_strays reports it as not ok" \
	bash -c "grep -q '^not ok - inner: processes of the job left behind: $stray' <<<'$out'"
check "checker: and kills it" wait_for 5 pids_dead "$stray"
check "checker: an unmarked process is not counted" bash -c "! grep -qw $$ <<<'$(marked_pids)'"

# worker records
printf '%s\n' "1 0 100 A 0 4 0 h:1 j" "1 1 101 A 1 4 0 h:1 j" "1 2 102 B 0 4 0 h:1 j" \
	"1 3 103 B 1 4 0 h:1 j" "2 0 104 A 0 2 1 h:2 j" "2 1 105 C 0 2 1 h:2 j" \
	"1 0 200 X 0 1 0 h:9 other" >"$TEST_TMP/ranks.log"
check_eq "checker: clean records (two jobs) give no problem" "" "$(ranks_problems)"
echo "2 1 106 B 0 2 1 h:2 j" >>"$TEST_TMP/ranks.log"
check "checker: a rank held twice in a round is found" \
	bash -c "grep -q 'job j round 2 rank 1 held twice (pids 105@C and 106@B)' <<<'$(ranks_problems)'"
echo "3 5 107 B 0 4 2 h:3 j" >>"$TEST_TMP/ranks.log"
check "checker: a rank outside the world size is found" \
	bash -c "grep -q 'job j round 3 rank 5 outside world size 4' <<<'$(ranks_problems)'"
echo "3 1 108 A 0 4 3 h:3 j" >>"$TEST_TMP/ranks.log"
check "checker: two restart counts in one round are found" \
	bash -c "grep -q 'job j round 3 has restart counts 2 and 3' <<<'$(ranks_problems)'"
echo "none none 109 A 0 none none none:none none" >>"$TEST_TMP/ranks.log"
check "checker: a worker without RANK is found" \
	bash -c "grep -q 'worker pid 109 has no' <<<'$(ranks_problems)'"
# a node that refilled a round after a missed in-place re-form: its ranks
# of that round have a second holder on that node, and only there
printf '%s\n' "4 0 110 A 0 2 4 h:4 j" "4 1 111 B 0 2 4 h:4 j" "4 0 112 A 0 2 4 h:4 j" \
	>"$TEST_TMP/ranks.log"
check "checker: without the agent's word, a rank held twice on one node is found" \
	bash -c "grep -q 'job j round 4 rank 0 held twice (pids 110@A and 112@A)' <<<'$(ranks_problems)'"
echo '2026-11-28T01:00:00.000Z dlaunch[1] info: job=j round=4 event=round_entered recovery=restarted why="the in-place re-form failed"' \
	>"$TEST_TMP/agent.A.2.log"
check_eq "checker: a round node A refilled (its agent says so) is no problem" "" "$(ranks_problems)"
echo "4 1 113 A 1 2 4 h:4 j" >>"$TEST_TMP/ranks.log"
check "checker: a second holder on another node than the refilling one is found" \
	bash -c "grep -q 'job j round 4 rank 1 held twice (pids 111@B and 113@A)' <<<'$(ranks_problems)'"
mv "$TEST_TMP/agent.A.2.log" "$TEST_TMP/agent.B.log"
check "checker: the refill of node B does not cover node A" \
	bash -c "grep -q 'job j round 4 rank 0 held twice (pids 110@A and 112@A)' <<<'$(ranks_problems)'"
rm -f "$TEST_TMP/ranks.log" "$TEST_TMP/agent.B.log"

# the server's members
good='{"world_size": 5, "members": [
 {"node_id": "A", "node_rank": 0, "nproc": 2, "rank_offset": 0},
 {"node_id": "B", "node_rank": 1, "nproc": 3, "rank_offset": 2}]}'
check_eq "checker: consistent members give no problem" "" "$(echo "$good" | members_problems)"
bad='{"world_size": 5, "members": [
 {"node_id": "A", "node_rank": 0, "nproc": 2, "rank_offset": 0},
 {"node_id": "B", "node_rank": 1, "nproc": 3, "rank_offset": 1}]}'
check "checker: overlapping rank ranges are found" \
	bash -c "grep -q 'node B has rank_offset 1, expected 2' <<<'$(echo "$bad" | members_problems)'"
bad='{"world_size": 4, "members": [
 {"node_id": "A", "node_rank": 0, "nproc": 2, "rank_offset": 0},
 {"node_id": "B", "node_rank": 0, "nproc": 2, "rank_offset": 2}]}'
check "checker: a node rank given twice is found" \
	bash -c "grep -q 'node ranks are not 0..1' <<<'$(echo "$bad" | members_problems)'"
bad='{"world_size": 9, "members": [
 {"node_id": "A", "node_rank": 0, "nproc": 2, "rank_offset": 0}]}'
check "checker: a wrong world size is found" \
	bash -c "grep -q 'world_size 9 but members hold 2' <<<'$(echo "$bad" | members_problems)'"

# the workers' records against the server's detail of their round
printf '%s\n' "4 0 300 A 0 4 0 h:1 k" "4 1 301 A 1 4 0 h:1 k" "4 2 302 B 0 4 0 h:1 k" \
	"4 3 303 B 1 4 0 h:1 k" "3 0 299 B 0 2 0 h:1 k" >"$TEST_TMP/ranks.log"
detail='{"round": 4, "world_size": 4, "members": [
 {"node_id": "A", "node_rank": 0, "nproc": 2, "rank_offset": 0},
 {"node_id": "B", "node_rank": 1, "nproc": 2, "rank_offset": 2}]}'
check_eq "checker: workers holding the ranks the server assigned give no problem" "" \
	"$(workers_vs_members_problems k "$detail")"
check_eq "checker: only the workers of the detail's round are compared" 4 \
	"$(workers_of_round k "$detail" | wc -l)"
swapped='{"round": 4, "world_size": 4, "members": [
 {"node_id": "B", "node_rank": 0, "nproc": 2, "rank_offset": 0},
 {"node_id": "A", "node_rank": 1, "nproc": 2, "rank_offset": 2}]}'
check "checker: a worker holding another rank than the server assigned is found" \
	bash -c "grep -q 'worker 300 of node A local rank 0 holds rank 0, the server assigned 2' <<<'$(workers_vs_members_problems k "$swapped")'"
only_a='{"round": 4, "world_size": 4, "members": [
 {"node_id": "A", "node_rank": 0, "nproc": 2, "rank_offset": 0}]}'
check "checker: a worker of a node that is not a member is found" \
	bash -c "grep -q 'worker 302 of node B, which is not a member' <<<'$(workers_vs_members_problems k "$only_a")'"
rm -f "$TEST_TMP/ranks.log"

# checkpoints: a damaged one is reported, once; nothing to say without any
mkdir -p "$TEST_TMP/ck"
out=$(check_ckpts "inner")
check_eq "checker: no checkpoint, nothing claimed" "" "$out"
printf 'DLTRCKPT but not a checkpoint' >"$TEST_TMP/ck/ckpt-000000000001.dlck"
out=$(check_ckpts "inner")
check "checker: a damaged checkpoint is reported as not ok" \
	bash -c "grep -q '^not ok - inner: damaged checkpoints left: ck/ckpt-000000000001.dlck' <<<'$out'"
rm -rf "$TEST_TMP/ck"

# a dead-check without pids proves nothing: it must not pass
if pids_dead; then not_ok "checker: pids_dead with no pid fails"; else ok "checker: pids_dead with no pid fails"; fi
if pids_dead ""; then not_ok "checker: pids_dead with an empty pid fails"; else ok "checker: pids_dead with an empty pid fails"; fi
finish
