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
#     message naming it, before any test runs.
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
