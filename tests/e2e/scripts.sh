#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# scripts.sh - the project's scripts are whole: every Python file in the
# tree compiles, every shell script parses, and the benchmark driver
# starts (make bench is not part of the suite, so nothing else would see a
# broken bench/bench.py before a benchmark run does).
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1

bad=
while IFS= read -r f; do
	/usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' \
		"$f" 2>>"$TEST_TMP/py.err" || bad="$bad $f"
done < <(git ls-files '*.py' tests/torchrun/torchrun 2>/dev/null || find . -name '*.py' -not -path './build/*')
check_eq "every Python file parses" "" "$bad"
[ -n "$bad" ] && sed 's/^/#   /' "$TEST_TMP/py.err" | tail -5

bad=
while IFS= read -r f; do
	bash -n "$f" 2>>"$TEST_TMP/sh.err" || bad="$bad $f"
done < <(git ls-files '*.sh' .ci/run 2>/dev/null ||
	find . -name '*.sh' -not -path './build/*')
check_eq "every shell script parses" "" "$bad"
[ -n "$bad" ] && sed 's/^/#   /' "$TEST_TMP/sh.err" | tail -5

check "bench/bench.py --help names every benchmark" bash -c \
	"/usr/bin/python3 bench/bench.py --help >'$TEST_TMP/help' &&
	 grep -q launch '$TEST_TMP/help' && grep -q restart '$TEST_TMP/help' &&
	 grep -q report '$TEST_TMP/help'"
finish
