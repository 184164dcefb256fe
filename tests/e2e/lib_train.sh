# SPDX-License-Identifier: Apache-2.0
# lib_train.sh - helpers for the trainer's end-to-end tests (sourced after
# lib.sh): run N ranks of dlaunch-train under dlaunch when it is built, or
# as N hand-started processes with the worker environment otherwise, and
# read checkpoints.

TRAIN=$BIN/dlaunch-train

# free_port: a port the kernel hands out for 127.0.0.1 right now
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ranks_manual N LOG ARGS...: N processes with RANK/WORLD_SIZE/MASTER_*,
# each bounded; all output to LOG; status: the first non-zero one.
ranks_manual() {
	local n=$1 log=$2 port r rc=0 pids=()
	shift 2
	port=$(free_port)
	: >"$log"
	for ((r = 0; r < n; r++)); do
		RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n \
			MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=1 \
			timeout -k 5 120 "$TRAIN" --device cpu --timeout 20s "$@" \
			>>"$log" 2>&1 &
		pids+=($!)
	done
	for r in "${pids[@]}"; do
		wait "$r" || { [ $rc -eq 0 ] && rc=$?; }
	done
	return $rc
}

# ranks N LOG ARGS...: N ranks under dlaunch --standalone (with
# --max-restarts $MAX_RESTARTS, default 0) when it is built, else by hand.
# PLAIN=1: the ranks do not use the worker control channel (a failure
# restarts them from the checkpoint instead of re-forming in place).
ranks() {
	local n=$1 log=$2 plain=()
	shift 2
	[ "${PLAIN:-0}" = 1 ] && plain=(env -u DLAUNCH_CONTROL_FD)
	if [ -x "$BIN/dlaunch" ]; then
		OMP_NUM_THREADS=1 timeout -k 5 180 "$BIN/dlaunch" --standalone \
			--nproc-per-node "$n" --max-restarts "${MAX_RESTARTS:-0}" \
			--no-python "${plain[@]}" "$TRAIN" --device cpu --timeout 20s "$@" \
			>"$log" 2>&1
	else
		ranks_manual "$n" "$log" "$@"
	fi
}

# summary_field LOG KEY: a numeric field of the JSON summary line
summary_field() {
	grep -o '{"summary".*' "$1" | tail -n 1 |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["summary"][sys.argv[1]])' "$2"
}

# newest_ckpt DIR: the newest checkpoint file name in DIR
newest_ckpt() {
	ls "$1"/ckpt-*.dlck 2>/dev/null | sort | tail -n 1
}

# ckpt_params_maxdiff A B: the largest absolute difference between the
# parameters of two checkpoints of the same model (format: ckpt.h)
ckpt_params_maxdiff() {
	python3 - "$1" "$2" <<'PY'
import struct, sys
def params(path):
    d = open(path, "rb").read()[32:]
    (n_layers,) = struct.unpack_from("<I", d, 0)
    off = 4 + 4 * (n_layers + 1) + 4 + 48 + 8
    n_params, n_buffers = struct.unpack_from("<QQ", d, off)
    off += 16
    return struct.unpack_from("<%df" % n_params, d, off)
a, b = params(sys.argv[1]), params(sys.argv[2])
assert len(a) == len(b)
print("%.3g" % max(abs(x - y) for x, y in zip(a, b)))
PY
}

# below X LIMIT: X < LIMIT (floats)
below() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"; }
