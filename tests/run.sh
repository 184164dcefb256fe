#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run.sh - run dlaunch's test suite and print one summary line.
#
#   tests/run.sh [--build DIR] [--suite default|unit|quick|e2e|faults|all]
#                [-j N] [PATTERN...]
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
#
# -j N (or --jobs N, or DLAUNCH_TEST_JOBS=N; default 1) runs up to N tests
# at once. The lines are printed in the same order as with -j 1, each once
# it and every test before it have finished. A script says in its first 30
# lines how it may share the machine:
#   "# test: heavy"  it keeps the CPUs busy (many trainers, torch DDP, a
#                    compiler): never two heavy tests at once, shared tests
#                    run beside it; heavy tests start first
#   "# test: alone"  nothing runs beside it (it times things, or cannot
#                    share what it uses): these run one by one at the end
set -u
cd "$(dirname "$0")/.."

build=build
suite=default
jobs=${DLAUNCH_TEST_JOBS:-1}
jobs_from="DLAUNCH_TEST_JOBS"
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
	-j | --jobs)
		if [ $# -lt 2 ] || [ -z "$2" ]; then
			echo "tests/run.sh: $1 needs a value" >&2
			exit 2
		fi
		jobs=$2 jobs_from=$1
		shift 2
		;;
	-j*) jobs=${1#-j} jobs_from=-j; shift ;;
	--jobs=*) jobs=${1#--jobs=} jobs_from=--jobs; shift ;;
	-h | --help)
		# the header comment, without its first line
		awk 'NR >= 3 && /^#/ { sub(/^# ?/, ""); print; next } NR >= 3 { exit }' "$0"
		exit 0
		;;
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
if ! [[ "$jobs" =~ ^[0-9]+$ ]] || [ "$jobs" -lt 1 ] || [ "$jobs" -gt 64 ]; then
	echo "tests/run.sh: $jobs_from '$jobs' is not a number of tests to run at once (1 to 64)" >&2
	exit 2
fi

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
		local lines
		lines=$(grep -E '^not ok - |^\[  FAILED  \] |^\[  ERROR   \] ' "$log" | head -n 20)
		failed_lines+=$(sed "s|^|    $name: |" <<<"$lines")$'\n'
		echo "---- failed in $log"
		sed 's/^/    /' <<<"$lines"
		echo "---- last lines of $log"
		tail -n 30 "$log" | sed 's/^/    /'
		echo "----"
	else
		printf 'ok   %-32s %3d passed %3d failed %3d skipped  %3ds\n' "$name" "$p" "$f" "$s" "$secs"
	fi
}

# The tests to run, in order: TEST_KIND (unit or script), TEST_PATH,
# TEST_NAME, TEST_LOG, TEST_MODE (shared, heavy or alone: see the top).
TEST_KIND=() TEST_PATH=() TEST_NAME=() TEST_LOG=() TEST_MODE=()
add_test() { # kind path name log mode
	TEST_KIND+=("$1") TEST_PATH+=("$2") TEST_NAME+=("$3") TEST_LOG+=("$4")
	TEST_MODE+=("$5")
}

# share_mode SCRIPT: how the script may share the machine (its header's
# "# test: heavy" or "# test: alone"; shared without one)
share_mode() {
	local m
	m=$(head -n 30 "$1" | sed -n 's/^# test: \(heavy\|alone\)$/\1/p' | head -n 1)
	echo "${m:-shared}"
}

# exec_test I RESULT: run test I, its output to its log; write
# "passed failed skipped seconds" to RESULT (through a temporary name, so
# that a reader never sees half of it). The pid of the timeout that runs
# it goes to RESULT.pid, for stop_tests.
exec_test() {
	local i=$1 result=$2 log=${TEST_LOG[$1]} start=$SECONDS rc p f s tpid
	if [ "${TEST_KIND[$i]}" = unit ]; then
		timeout -k 5 600 "${TEST_PATH[$i]}" >"$log" 2>&1 </dev/null &
	else
		# each script bounds its own waits; this is the last line of
		# defence
		timeout -k 10 900 bash "${TEST_PATH[$i]}" >"$log" 2>&1 </dev/null &
	fi
	tpid=$!
	echo "$tpid" >"$result.pid"
	wait "$tpid"
	rc=$?
	if [ "${TEST_KIND[$i]}" = unit ]; then
		p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
		f=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | awk '{s+=$4} END {print s+0}')
		s=$(grep -Eo '^\[  SKIPPED \] [0-9]+' "$log" | awk '{s+=$4} END {print s+0}')
		# a crash or timeout loses cmocka's summary: count it as a
		# failure
		if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	else
		p=$(grep -c '^ok - ' "$log")
		f=$(grep -c '^not ok - ' "$log")
		s=$(grep -c '^skip - ' "$log")
		if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
			echo "not ok - ${TEST_NAME[$i]} exited with status $rc" >>"$log"
			f=1
		fi
	fi
	echo "$p $f $s $((SECONDS - start))" >"$result.tmp"
	mv "$result.tmp" "$result"
}

report_test() { # I RESULT
	local p f s secs
	read -r p f s secs <"$2"
	report "${TEST_NAME[$1]}" "$p" "$f" "$s" "$secs" "${TEST_LOG[$1]}"
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
		name=$(basename "$bin")
		selected "$name" && add_test unit "$bin" "$name" "$logdir/$name.log" shared
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
		selected "$(basename "$script" .sh)" || continue
		name=$(basename "$d")/$(basename "$script" .sh)
		add_test script "$script" "$name" "$logdir/${name//\//_}.log" \
			"$(share_mode "$script")"
	done
done

# the results of the tests, one file each, removed at the end
resdir=$(mktemp -d "$logdir/.results.XXXXXX")
RUNNING=() # indices of the tests started and not yet seen to finish
TEST_PID=() # the pid of the subshell that runs each

# stop_tests SIGNAL: signal the tests still running (run.sh interrupted).
# TERM goes to each test itself, the child of its timeout, so that a
# script's EXIT trap has the time it needs to clean up (a TERM to the
# timeout would SIGKILL it 10 s later, leaving its namespaces behind on a
# loaded machine); a second interrupt sends KILL to their process groups
# (each timeout leads one).
stop_tests() {
	local i tpid
	for i in "${RUNNING[@]}"; do
		tpid=$(cat "$resdir/$i.pid" 2>/dev/null) || continue
		if [ "$1" = KILL ]; then
			kill -KILL -- "-$tpid" 2>/dev/null
		else
			pkill -TERM -P "$tpid" 2>/dev/null
		fi
	done
}
interrupted() {
	trap 'stop_tests KILL; rm -rf "$resdir"; exit 130' INT TERM
	echo "tests/run.sh: interrupted: stopping the tests that run (again to kill them)" >&2
	stop_tests TERM
	wait
	rm -rf "$resdir"
	exit 130
}
trap interrupted INT TERM
trap 'rm -rf "$resdir"' EXIT

if [ "$jobs" -eq 1 ]; then
	for ((i = 0; i < ${#TEST_KIND[@]}; i++)); do
		RUNNING=("$i")
		exec_test "$i" "$resdir/$i"
		RUNNING=()
		report_test "$i" "$resdir/$i"
	done
else
	# start order: the heavy tests first (one at a time, they make the
	# longest chain), the shared ones beside them, the alone ones last
	order=()
	for mode in heavy shared alone; do
		for ((i = 0; i < ${#TEST_KIND[@]}; i++)); do
			[ "${TEST_MODE[$i]}" = "$mode" ] && order+=("$i")
		done
	done
	declare -A STARTED=()
	printed=0 heavy_running=0 alone_running=0
	while [ "$printed" -lt ${#TEST_KIND[@]} ]; do
		# start what may start, the first in start order first: up to
		# $jobs at once, one heavy test at a time, an alone test on an
		# empty machine and nothing beside it
		for i in "${order[@]}"; do
			if [ ${#RUNNING[@]} -ge "$jobs" ] || [ "$alone_running" = 1 ]; then
				break
			fi
			[ -z "${STARTED[$i]:-}" ] || continue
			case "${TEST_MODE[$i]}" in
			heavy) [ "$heavy_running" = 0 ] || continue ;;
			alone)
				# alone tests come last: wait until all is done
				[ ${#RUNNING[@]} -eq 0 ] || break
				alone_running=1
				;;
			esac
			[ "${TEST_MODE[$i]}" = heavy ] && heavy_running=1
			exec_test "$i" "$resdir/$i" &
			TEST_PID[i]=$!
			STARTED[$i]=1
			RUNNING+=("$i")
		done
		# a test that ends leaves its result file; wait -n returns when
		# any of them ends (at the latest when the one not yet done does)
		still=()
		for i in "${RUNNING[@]}"; do
			[ -f "$resdir/$i" ] && continue
			if ! kill -0 "${TEST_PID[$i]}" 2>/dev/null; then
				# gone without a result (killed from outside):
				# a failure, never a silent pass
				wait "${TEST_PID[$i]}" 2>/dev/null
				if [ ! -f "$resdir/$i" ]; then
					echo "not ok - ${TEST_NAME[$i]}: its runner ended without a result" >>"${TEST_LOG[$i]}"
					echo "0 1 0 0" >"$resdir/$i"
				fi
				continue
			fi
			still+=("$i")
		done
		if [ ${#RUNNING[@]} -eq 0 ] && [ ! -f "$resdir/$printed" ]; then
			# nothing runs and the next line has no result: a bug
			# here, not a test; never spin
			echo "tests/run.sh: internal error: ${TEST_NAME[$printed]} was never started" >&2
			exit 3
		fi
		if [ ${#still[@]} -eq ${#RUNNING[@]} ] && [ ${#RUNNING[@]} -gt 0 ]; then
			wait -n
			continue
		fi
		RUNNING=("${still[@]}")
		heavy_running=0 alone_running=0
		for i in "${RUNNING[@]}"; do
			[ "${TEST_MODE[$i]}" = heavy ] && heavy_running=1
			[ "${TEST_MODE[$i]}" = alone ] && alone_running=1
		done
		# print, in the suite's order, every finished test whose
		# predecessors are all printed
		while [ "$printed" -lt ${#TEST_KIND[@]} ] && [ -f "$resdir/$printed" ]; do
			report_test "$printed" "$resdir/$printed"
			printed=$((printed + 1))
		done
	done
	wait
fi

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
