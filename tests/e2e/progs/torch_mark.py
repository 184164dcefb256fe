#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch_mark.py - worker of tests/e2e/torch_launch_cases.sh; needs no torch.

    torch_mark.py --mark-dir DIR    create DIR/<RANK>
    torch_mark.py --fail            raise a RuntimeError instead

Before either, it checks that every variable a torchrun worker may read is
set, and that the launcher's own environment reached it (PARENT_MARK, which
the test exports), and prints them on one line; a missing one is an error
(exit status 1) naming it.
"""
import argparse
import os
import sys

NEEDED = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
    "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS", "PARENT_MARK",
)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mark-dir", "--mark_dir", help="where to create <RANK>")
    ap.add_argument("--fail", action="store_true", help="raise instead")
    args = ap.parse_args()
    missing = [name for name in NEEDED if name not in os.environ]
    if missing:
        sys.exit("torch_mark: not set by the launcher: " + " ".join(missing))
    print("torch_mark env " + " ".join(f"{n}={os.environ[n]}" for n in NEEDED),
          flush=True)
    rank = os.environ["RANK"]
    if args.fail:
        raise RuntimeError(f"torch_mark fails on purpose (rank {rank})")
    if not args.mark_dir:
        sys.exit("torch_mark: --mark-dir or --fail is required")
    with open(os.path.join(args.mark_dir, rank), "a"):
        pass
    print(f"torch_mark ok rank={rank}", flush=True)


if __name__ == "__main__":
    main()
