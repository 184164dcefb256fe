#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# agent_flood.sh LINES: writes LINES numbered 100-byte lines to stdout.
exec awk -v n="$1" 'BEGIN { pad = sprintf("%90s", ""); gsub(/ /, "x", pad);
	for (i = 0; i < n; i++) printf "%08d %s\n", i, pad }'
