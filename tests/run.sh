#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run.sh - run dlaunch's test suite and print one summary line.
#
#   tests/run.sh [--build DIR] [--suite default|unit|quick|e2e|faults|all] [PATTERN...]
#
# Unit tests are the cmocka binaries under DIR/tests; end-to-end tests are
# the scripts tests/e2e/*.sh (and tests/faults/*.sh with --suite faults or
# all; --suite quick: the unit tests and tests/e2e/{smoke,cli_help}.sh,
# make test-quick), each printing TAP-style lines "ok - what",
# "not ok - what", "skip - what: why". The last line is "N passed, N failed, N skipped";
# the exit status is non-zero when anything failed, when a unit-test binary
# the Makefile builds (make print-unit-tests) is missing from DIR/tests, or
# when no test passed at all (everything skipped, or nothing selected): a
# build that lost its binaries must not look green. An unknown option or
# suite name is refused with exit status 2 before anything runs.
set -u
cd "$(dirname "$0")/.."

build=build
suite=default
patterns=()
while [ $# -gt 0 ]; do
	case "$1" in
	--build | --suite)
		if [ $# -lt 2 ] || [ -z "$2" ]; then
			echo "tests/run.sh: $1 needs a value" >&2
			exit 2
		fi
		[ "$1" = --build ] && build=$2 || suite=$2
		shift 2
		;;
	-h|--help) sed -n '3,16p' "$0"; exit 0 ;;
	-*) echo "tests/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	*) patterns+=("$1"); shift ;;
	esac
done

case "$suite" in
default | unit | quick | e2e | faults | all) ;;
*)
	echo "tests/run.sh: unknown suite '$suite' (one of: default, unit, quick, e2e, faults, all)" >&2
	exit 2
	;;
esac

if [ ! -d "$build" ]; then
	echo "tests/run.sh: no build directory $build (run make all tests first)"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
export DLAUNCH_BUILD=$(cd "$build" && pwd)
export DLAUNCH_BIN=$DLAUNCH_BUILD/bin
export CMOCKA_MESSAGE_OUTPUT=stdout
logdir=$DLAUNCH_BUILD/test-logs
mkdir -p "$logdir"

passed=0 failed=0 skipped=0
failures=()
failed_lines=""

selected() {
	[ ${#patterns[@]} -eq 0 ] && return 0
	local p
	for p in "${patterns[@]}"; do
		[[ "$1" == *"$p"* ]] && return 0
	done
	return 1
}

report() { # name pass fail skip seconds
	local name=$1 p=$2 f=$3 s=$4 secs=$5 log=$6
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	if [ "$f" -gt 0 ]; then
		printf 'FAIL %-32s %3d passed %3d failed %3d skipped  %3ds\n' "$name" "$p" "$f" "$s" "$secs"
		failures+=("$name")
		# the failed checks first (a long log's tail may not reach
		# them, and CI shows only part of what this prints), then the
		# context
		echo "---- failed in $log"
		failed_lines+=$(grep -E '^not ok - |^\[  FAILED  \] |^\[  ERROR   \] ' "$log" |
			head -n 20 | sed "s|^|    $name: |")$'\n'
		grep -E '^not ok - |^\[  FAILED  \] |^\[  ERROR   \] ' "$log" | head -n 20 | sed 's/^/    /'
		echo "---- last lines of $log"
		tail -n 30 "$log" | sed 's/^/    /'
		echo "----"
	else
		printf 'ok   %-32s %3d passed %3d failed %3d skipped  %3ds\n' "$name" "$p" "$f" "$s" "$secs"
	fi
}

run_unit() {
	local bin=$1 name log start rc p f
	name=$(basename "$bin")
	log=$logdir/$name.log
	start=$SECONDS
	timeout -k 5 600 "$bin" >"$log" 2>&1
	rc=$?
	p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
	f=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
	s=$(grep -Eo '^\[  SKIPPED \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
	# a crash or timeout loses cmocka's summary: count it as a failure
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	report "$name" "$p" "$f" "$s" $((SECONDS - start)) "$log"
}

run_script() {
	local script=$1 name log start rc p f s
	name=$(basename "$(dirname "$script")")/$(basename "$script" .sh)
	log=$logdir/${name//\//_}.log
	start=$SECONDS
	# each script bounds its own waits; this is the last line of defence
	timeout -k 10 900 bash "$script" >"$log" 2>&1 </dev/null
	rc=$?
	p=$(grep -c '^ok - ' "$log")
	f=$(grep -c '^not ok - ' "$log")
	s=$(grep -c '^skip - ' "$log")
	if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $name exited with status $rc" >>"$log"
		f=1
	fi
	report "$name" "$p" "$f" "$s" $((SECONDS - start)) "$log"
}

# missing NAME WHY: a test that could not run counts as one failure
missing() {
	printf 'FAIL %-32s %s\n' "$1" "$2"
	failed=$((failed + 1))
	failures+=("$1")
}

# the unit-test binaries the Makefile builds into this build directory;
# make's own chatter goes to a log, shown only when it fails
expected_unit_tests() {
	make --no-print-directory -s print-unit-tests BUILD="$build" \
		2>"$logdir/print-unit-tests.log"
}

if [ "$suite" != e2e ] && [ "$suite" != faults ]; then
	if expected=$(expected_unit_tests); then
		for name in $expected; do
			selected "$name" || continue
			[ -x "$DLAUNCH_BUILD/tests/$name" ] ||
				missing "$name" "missing: $DLAUNCH_BUILD/tests/$name is not built (build it with make tests)"
		done
	else
		missing "unit tests" "cannot list them: make print-unit-tests failed"
		sed 's/^/    /' "$logdir/print-unit-tests.log" | tail -n 20
	fi
	for bin in "$DLAUNCH_BUILD"/tests/test_*; do
		[ -x "$bin" ] || continue
		selected "$(basename "$bin")" && run_unit "$bin"
	done
fi
dirs=()
case "$suite" in
default) dirs=(tests/e2e) ;;
quick) dirs=(tests/e2e) ;;
e2e) dirs=(tests/e2e) ;;
faults) dirs=(tests/faults) ;;
all) dirs=(tests/e2e tests/faults) ;;
esac
for d in "${dirs[@]}"; do
	# tests/faults also holds helper scripts: only faults_*.sh are cases
	glob="*.sh"
	[ "$d" = tests/faults ] && glob="faults_*.sh"
	for script in "$d"/$glob; do
		[ -f "$script" ] || continue
		case "$(basename "$script")" in lib*.sh) continue ;; esac
		if [ "$suite" = quick ]; then
			case "$(basename "$script")" in smoke.sh | cli_help.sh) ;; *) continue ;; esac
		fi
		selected "$(basename "$script" .sh)" && run_script "$script"
	done
done

# a run in which nothing passed proves nothing: a wrong pattern, an empty
# build directory or a suite that skipped everything is a failure
if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
	if [ "$skipped" -gt 0 ]; then
		missing "suite" "no test passed: all $skipped skipped (see $logdir)"
	else
		missing "suite" "no test ran: nothing in --suite $suite matches${patterns[*]:+ '${patterns[*]}'} under $DLAUNCH_BUILD"
	fi
fi
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed: ${failures[*]}"
	printf '%s' "$failed_lines"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
