#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# runner.sh - the suite cannot end green without testing anything:
#   - tests/run.sh over an empty build directory fails, naming each unit-test
#     binary the Makefile builds as missing;
#   - a pattern that selects nothing fails with "no test ran";
#   - a run where every test skipped fails with "no test passed", while the
#     same run with a passing test is green (the runner is not just failing);
#   - an end-to-end or fault script whose binary is missing reports
#     "not ok - ... missing: build it with make", never a skip, and so does
#     the runner that ran it;
#   - a misspelt --suite or option is refused with exit status 2 and a
#     message naming it, before any test runs; so is a -j that is not a
#     number from 1 to 64 (also through DLAUNCH_TEST_JOBS);
#   - -j 3 runs tests at once and prints the same lines, in the same order,
#     with the same summary and list of failures as -j 1; a script marked
#     "# test: heavy" never runs beside another heavy one (shared ones run
#     beside it), one marked "# test: alone" beside nothing (a copy of
#     run.sh over a tree of stand-in scripts).
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUN=$ROOT/tests/run.sh

# last_line FILE: the summary line CI reads
last_line() { tail -n 1 "$1"; }

# runner LOG ARGS...: tests/run.sh with ARGS, output to LOG; sets RC
runner() {
	local log=$1
	shift
	timeout -k 5 120 "$RUN" "$@" >"$log" 2>&1 </dev/null
	RC=$?
}

# ---- an empty build directory ----------------------------------------------
empty=$TEST_TMP/empty-build
mkdir -p "$empty/bin"
runner "$TEST_TMP/unit.log" --build "$empty" --suite unit
check "empty build: tests/run.sh --suite unit exits non-zero (status $RC)" test "$RC" -ne 0
check "empty build: test_common is named as missing" \
	grep -q "^FAIL test_common .*missing: $empty/tests/test_common is not built" "$TEST_TMP/unit.log"
expected=$(cd "$ROOT" && make --no-print-directory -s print-unit-tests BUILD="$empty" 2>/dev/null | wc -l)
check "empty build: the Makefile lists unit tests ($expected)" test "$expected" -gt 0
check_eq "empty build: every listed unit test is one failure" \
	"0 passed, $expected failed, 0 skipped" "$(last_line "$TEST_TMP/unit.log")"

# ---- a misspelt suite or option ---------------------------------------------
# refused before anything runs: exit 2, the name in the message, no summary
for args in "--suite e2ee" "--suite" "--sute e2e"; do
	# shellcheck disable=SC2086 # the words of one command line
	runner "$TEST_TMP/bad.log" --build "$empty" $args
	check_eq "bad command line '$args': tests/run.sh exits 2" 2 "$RC"
	check "bad command line '$args': it says what is wrong" \
		grep -Eq "^tests/run.sh: (unknown suite 'e2ee'|--suite needs a value|unknown option '--sute')" "$TEST_TMP/bad.log"
	check "bad command line '$args': nothing ran" \
		bash -c "! grep -Eq '^(ok|FAIL) ' '$TEST_TMP/bad.log'"
done

for args in "-j 0" "-j x" "--jobs 65" "-j"; do
	# shellcheck disable=SC2086 # the words of one command line
	runner "$TEST_TMP/bad.log" --build "$empty" $args
	check_eq "bad command line '$args': tests/run.sh exits 2" 2 "$RC"
	check "bad command line '$args': it says what is wrong" \
		grep -Eq "^tests/run.sh: (-j '(0|x)' is not a number|--jobs '65' is not a number|-j needs a value)" "$TEST_TMP/bad.log"
done
DLAUNCH_TEST_JOBS=two runner "$TEST_TMP/bad.log" --build "$empty"
check_eq "DLAUNCH_TEST_JOBS=two: tests/run.sh exits 2" 2 "$RC"
check "DLAUNCH_TEST_JOBS=two: it names the variable" \
	grep -q "^tests/run.sh: DLAUNCH_TEST_JOBS 'two' is not a number" "$TEST_TMP/bad.log"

# ---- a pattern that matches nothing -----------------------------------------
runner "$TEST_TMP/none.log" --build "$empty" --suite e2e "no-such-test-$$"
check "no match: tests/run.sh exits non-zero (status $RC)" test "$RC" -ne 0
check "no match: it says no test ran" grep -q '^FAIL suite .*no test ran' "$TEST_TMP/none.log"
check_eq "no match: the summary counts one failure" "0 passed, 1 failed, 0 skipped" \
	"$(last_line "$TEST_TMP/none.log")"

# ---- every test skipped, then one passing -----------------------------------
# a stand-in unit test named like no real one, so only it is selected
fake=$TEST_TMP/fake-build
mkdir -p "$fake/tests"
printf '#!/bin/sh\necho "[  SKIPPED ] 1 test(s), listed below:"\n' >"$fake/tests/test_zzrunner"
chmod +x "$fake/tests/test_zzrunner"
runner "$TEST_TMP/skip.log" --build "$fake" --suite unit test_zzrunner
check "all skipped: tests/run.sh exits non-zero (status $RC)" test "$RC" -ne 0
check "all skipped: it says no test passed" \
	grep -q '^FAIL suite .*no test passed: all 1 skipped' "$TEST_TMP/skip.log"
check_eq "all skipped: the summary" "0 passed, 1 failed, 1 skipped" \
	"$(last_line "$TEST_TMP/skip.log")"
printf '#!/bin/sh\necho "[  PASSED  ] 1 test(s)."\n' >"$fake/tests/test_zzrunner"
runner "$TEST_TMP/pass.log" --build "$fake" --suite unit test_zzrunner
check_eq "one passing test: tests/run.sh exits 0" 0 "$RC"
check_eq "one passing test: the summary" "1 passed, 0 failed, 0 skipped" \
	"$(last_line "$TEST_TMP/pass.log")"

# ---- -j: tests at once, the same report --------------------------------------
# stand-in unit tests: two pass, one fails; each waits (20 s at most) for
# a file the next one writes when it starts, so under -j 3 they prove that
# they ran at once (under -j 1, ZZ_WAIT=0: they do not wait)
jobs_dir=$TEST_TMP/jobs
mkdir -p "$jobs_dir"
for t in a b c; do
	case $t in a) next=b ;; b) next=c ;; c) next=a ;; esac
	result='[  PASSED  ] 1 test(s).'
	[ "$t" = b ] && result='[  FAILED  ] 1 test(s), listed below:'
	cat >"$fake/tests/test_zzjobs_$t" <<EOF
#!/bin/bash
touch "$jobs_dir/$t.started"
for ((i = 0; i < \${ZZ_WAIT:-1000}; i++)); do
	[ -e "$jobs_dir/$next.started" ] && break
	sleep 0.02
done
[ -e "$jobs_dir/$next.started" ] && touch "$jobs_dir/$t.saw_$next"
echo "$result"
EOF
	chmod +x "$fake/tests/test_zzjobs_$t"
done
# saw_count: how many stand-ins saw the next one start
saw_count() {
	local f n=0
	for f in "$jobs_dir"/*.saw_*; do [ -e "$f" ] && n=$((n + 1)); done
	echo "$n"
}
# report_of LOG: the lines of a report without the seconds each test took
report_of() { sed -E 's/ +[0-9]+s$//' "$1"; }
ZZ_WAIT=0 runner "$TEST_TMP/j1.log" --build "$fake" --suite unit test_zzjobs
rc1=$RC
rm -f "$jobs_dir"/*
runner "$TEST_TMP/j3.log" --build "$fake" --suite unit -j 3 test_zzjobs
check_eq "-j 3: the same exit status as -j 1 (1: one failed)" "1 1" "$rc1 $RC"
check_eq "-j 3: the same lines in the same order as -j 1" \
	"$(report_of "$TEST_TMP/j1.log")" "$(report_of "$TEST_TMP/j3.log")"
check_eq "-j 3: the summary" "2 passed, 1 failed, 0 skipped" "$(last_line "$TEST_TMP/j3.log")"
check "-j 3: the failed test is listed at the end" \
	grep -q '^failed: test_zzjobs_b$' "$TEST_TMP/j3.log"
check_eq "-j 3: the three ran at once (each saw the next one start)" 3 \
	"$(saw_count)"
rm -f "$jobs_dir"/*
DLAUNCH_TEST_JOBS=3 runner "$TEST_TMP/j3env.log" --build "$fake" --suite unit test_zzjobs
check_eq "DLAUNCH_TEST_JOBS=3: the three ran at once" 3 "$(saw_count)"

# heavy and alone: a copy of run.sh in a tree of its own (it runs the
# scripts of the tree it lies in), with a Makefile that lists no unit test.
# Each stand-in script writes its start and end (microseconds); h1 (heavy)
# waits until the shared s2 has ended, and s2 until h1 has started (else a
# quick s2 could end before h1's first line), so a runner that let another
# test beside h1 would have started h2 (heavy) or the alone one meanwhile
tree=$TEST_TMP/tree
mkdir -p "$tree/tests/e2e" "$fake/test-logs"
cp "$RUN" "$tree/tests/run.sh"
printf 'print-unit-tests:\n\t@true\n' >"$tree/Makefile"
stand_in() { # NAME MODE [WAIT_FOR_FILE]
	{
		echo '#!/bin/bash'
		[ "$2" = shared ] || echo "# test: $2"
		echo "echo \"start \${EPOCHREALTIME//[.,]/}\" >'$jobs_dir/$1.times'"
		if [ -n "${3:-}" ]; then
			echo "for ((i = 0; i < 1000; i++)); do [ -e '$jobs_dir/$3' ] && break; sleep 0.02; done"
			echo "[ -e '$jobs_dir/$3' ] && echo 'ok - $1 saw $3' || echo 'not ok - $1 did not see $3'"
		else
			echo "echo 'ok - $1'"
		fi
		echo "echo \"end \${EPOCHREALTIME//[.,]/}\" >>'$jobs_dir/$1.times'"
		[ "$1" = s2 ] && echo "touch '$jobs_dir/s2.done'"
	} >"$tree/tests/e2e/$1.sh"
}
rm -f "$jobs_dir"/*
stand_in a_alone alone
stand_in h1 heavy s2.done
stand_in h2 heavy
stand_in s1 shared
stand_in s2 shared h1.times
timeout -k 5 120 "$tree/tests/run.sh" --build "$fake" --suite e2e -j 3 \
	>"$TEST_TMP/modes.log" 2>&1 </dev/null
check_eq "heavy/alone: exit 0" 0 $?
check_eq "heavy/alone: the lines in the suite's order" \
	"e2e/a_alone e2e/h1 e2e/h2 e2e/s1 e2e/s2" \
	"$(awk '$1 == "ok" || $1 == "FAIL" {print $2}' "$TEST_TMP/modes.log" | tr '\n' ' ' | sed 's/ $//')"
check_eq "heavy/alone: the summary" "5 passed, 0 failed, 0 skipped" "$(last_line "$TEST_TMP/modes.log")"
# overlap A B: the runs of stand-ins A and B overlapped in time
overlap() {
	local a0 a1 b0 b1
	a0=$(awk '$1 == "start" {print $2}' "$jobs_dir/$1.times")
	a1=$(awk '$1 == "end" {print $2}' "$jobs_dir/$1.times")
	b0=$(awk '$1 == "start" {print $2}' "$jobs_dir/$2.times")
	b1=$(awk '$1 == "end" {print $2}' "$jobs_dir/$2.times")
	[ "$a0" -lt "$b1" ] && [ "$b0" -lt "$a1" ]
}
check "heavy/alone: a shared test ran beside the heavy h1" overlap h1 s2
if overlap h1 h2; then
	not_ok "heavy/alone: the two heavy tests ran at once"
else
	ok "heavy/alone: the two heavy tests did not run at once"
fi
alone_beside=""
for t in h1 h2 s1 s2; do
	overlap a_alone "$t" && alone_beside+=" $t"
done
check_eq "heavy/alone: nothing ran beside the alone test" "" "$alone_beside"

# ---- scripts whose binary is missing ----------------------------------------
# script_missing WHAT SCRIPT BIN: SCRIPT with an empty $BIN says BIN is
# missing as a failure, with no skip, and exits non-zero
script_missing() {
	local what=$1 script=$2 bin=$3 rc
	DLAUNCH_BIN=$empty/bin timeout -k 5 60 bash "$ROOT/$script" \
		>"$TEST_TMP/script.log" 2>&1 </dev/null
	rc=$?
	check "$what: exits non-zero (status $rc)" test "$rc" -ne 0
	check "$what: not ok naming $bin" grep -q \
		"^not ok - .*$empty/bin/$bin missing: build it with make" "$TEST_TMP/script.log"
	check "$what: no skip" bash -c "! grep -q '^skip - ' '$TEST_TMP/script.log'"
}
script_missing "train_cli without dlaunch-train" tests/e2e/train_cli.sh dlaunch-train
script_missing "agent_rdzv without its binaries" tests/e2e/agent_rdzv.sh dlaunch-rdzv
script_missing "faults_http without dlaunch-rdzv" tests/faults/faults_http.sh dlaunch-rdzv
script_missing "cli_help without its binaries" tests/e2e/cli_help.sh dlaunch-train
script_missing "smoke without its binaries" tests/e2e/smoke.sh dlaunch-keeper

runner "$TEST_TMP/e2e.log" --build "$empty" --suite e2e train_cli
check "runner over train_cli without dlaunch-train exits non-zero (status $RC)" \
	test "$RC" -ne 0
check_eq "runner over train_cli without dlaunch-train: one failure, no skip" \
	"0 passed, 1 failed, 0 skipped" "$(last_line "$TEST_TMP/e2e.log")"
finish
