#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# torch_mark.sh DIR - worker of tests/e2e/torch_launch_cases.sh run with
# --no-python: creates DIR/$RANK (RANK must be set, DIR must exist).
[ -n "${RANK:-}" ] || { echo "torch_mark.sh: RANK is not set" >&2; exit 1; }
[ -d "${1:-}" ] || { echo "torch_mark.sh: no directory '${1:-}'" >&2; exit 1; }
echo "torch_mark.sh rank $RANK marks $1/$RANK"
: >>"$1/$RANK"
