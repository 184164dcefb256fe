#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# agent_stale.sh - an answer about an old round never acts on the new one.
#
# A scripted server (progs/agent_fake_rdzv.py) replays, deterministically,
# the race the reliability suite hits by chance: the agent's heartbeat of
# round 1 is held unanswered while the worker fails; the agent reports,
# rejoins and starts round 2; only then does the held heartbeat get its
# answer (409, "restart", naming the job's round 2, as dlaunch-rdzv answers
# a stale round). That answer is about round 1: the agent must keep round
# 2's worker running, and the job succeeds with one start per round.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/lib_agent.sh"
DL=$BIN/dlaunch
need_bin dlaunch
if ! command -v python3 >/dev/null; then
	skip "stale answers: python3 (for the scripted server) is not installed"
	finish
fi

D=$TEST_TMP/stale
mkdir -p "$D"
spawn_bg "$D/rdzv.log" env -u DLAUNCH_TEST_MARK python3 \
	"$PROGS/agent_fake_rdzv.py" "$D"
FAKE_PID=$LAST_PID
check "stale answers: scripted server listening" wait_for 10 test -s "$D/port"
port=$(cat "$D/port")

# the worker: round 1 fails while the heartbeat is held; round 2 runs
# until told to finish; each start is recorded as "ROUND PID"
cat >"$D/worker.sh" <<'EOF'
#!/bin/bash
echo "$DLAUNCH_ROUND $$" >>"$STALE_DIR/starts"
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
	for _ in $(seq 1500); do [ -e "$STALE_DIR/held" ] && break; sleep 0.02; done
	echo "failing while a heartbeat of round $DLAUNCH_ROUND is unanswered" >&2
	exit 1
fi
for _ in $(seq 1500); do [ -e "$STALE_DIR/done" ] && exit 0; sleep 0.02; done
exit 2
EOF
chmod +x "$D/worker.sh"

spawn_bg "$D/agent.log" env STALE_DIR="$D" "$DL" \
	--rdzv-endpoint "127.0.0.1:$port" --rdzv-id stale --max-restarts 3 \
	--rdzv-conf heartbeat_interval=0.05,heartbeat_timeout=2 \
	--shutdown-timeout 2 "$D/worker.sh"
dl=$LAST_PID

check "stale answers: the worker failed and the agent joined round 2" \
	wait_for 20 grep -q '^watch 2' "$D/rdzv.log"
# settled: the held answer was sent and either the agent acted on it (it
# joins a third time) or three heartbeats of round 2 followed it (the
# agent's heartbeat slot is free, so it did not wait on the old one)
settled() {
	grep -q '^join 3' "$D/rdzv.log" ||
		[ "$(sed -n '/^released/,$p' "$D/rdzv.log" | grep -c '^hb 2')" -ge 3 ]
}
check "stale answers: the held answer was sent after round 2 began" \
	wait_for 20 settled
touch "$D/done"
check "stale answers: dlaunch exits" wait_for 20 dl_exited "$dl"
check_eq "stale answers: the job succeeds" 0 "${DL_RC:-running}"
check_eq "stale answers: one start in round 1, one in round 2" "1 1" \
	"$(awk '$1 == 1' "$D/starts" | wc -l) $(awk '$1 == 2' "$D/starts" | wc -l)"
check "stale answers: the agent never rejoined during round 2" \
	bash -c "! grep -q '^join 3' '$D/rdzv.log'"
check "stale answers: no 'round 2 ended' from the old round's answer" \
	bash -c "! grep -q 'round 2 ended' '$D/agent.log'"
if [ "$FAILED" -gt 0 ]; then
	sed 's/^/# server: /' "$D/rdzv.log"
	tail -n 20 "$D/agent.log" | sed 's/^/# agent: /'
fi
{
	kill_tree "$FAKE_PID"
	wait "$FAKE_PID"
} 2>/dev/null
check "stale answers: no process of the test left" wait_for 5 no_marked_left
finish
