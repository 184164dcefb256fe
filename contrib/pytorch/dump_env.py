# SPDX-License-Identifier: Apache-2.0
"""dump_env.py - write the environment a launcher gave this worker to a JSON
file, so that two launchers can be compared variable for variable.

    dlaunch  --standalone --nproc-per-node 2 contrib/pytorch/dump_env.py OUTDIR
    torchrun --standalone --nproc_per_node 2 contrib/pytorch/dump_env.py OUTDIR

Each worker writes OUTDIR/env.<RANK>.json (the whole environment, plus the
worker's argv, pid, working directory and whether TORCHELASTIC_ERROR_FILE's folder exists) and prints
"dump_env ok rank=R file=PATH". It does not need torch, and exits 1 with
"dump_env FAILED ..." when RANK is missing or the file cannot be written.
"""
import json
import os
import sys


def main():
    if len(sys.argv) != 2:
        print("dump_env FAILED: usage: dump_env.py OUTDIR", flush=True)
        return 1
    outdir = sys.argv[1]
    rank = os.environ.get("RANK")
    if rank is None or not rank.isdigit():
        print(f"dump_env FAILED: RANK is {rank!r}, not a rank", flush=True)
        return 1
    path = os.path.join(outdir, f"env.{rank}.json")
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
    record = {
        "env": dict(os.environ),
        "argv": sys.argv,
        "pid": os.getpid(),
        "cwd": os.getcwd(),
        # the launcher reads this file after a failure: its folder must exist
        # (or be creatable) while the worker runs
        "error_file_dir_exists": bool(error_file)
        and os.path.isdir(os.path.dirname(error_file)),
    }
    try:
        os.makedirs(outdir, exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(record, f, sort_keys=True, indent=1)
        os.rename(tmp, path)
    except OSError as e:
        print(f"dump_env FAILED rank={rank}: cannot write {path}: {e}", flush=True)
        return 1
    print(f"dump_env ok rank={rank} file={path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
