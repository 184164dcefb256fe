#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch_init_method.py - worker of tests/e2e/torch_launch_cases.sh.

    torch_init_method.py --init-method tcp://HOST:PORT|env:// [--rank R]
                         [--world-size N]

Joins a gloo process group through that init method (rank and world size
default to RANK and WORLD_SIZE), all-reduces a vector of world-size zeros
with a 1 at its own rank and checks that every element came out 1, i.e.
that each rank took part once. Prints "init_method ok rank=R world=N ..."
or "init_method FAILED ..." (exit status 1).
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--init-method", "--init_method", required=True)
ap.add_argument("--rank", type=int, default=int(os.environ.get("RANK", -1)))
ap.add_argument("--world-size", "--world_size", type=int,
                default=int(os.environ.get("WORLD_SIZE", -1)))
args = ap.parse_args()

dist.init_process_group("gloo", init_method=args.init_method, rank=args.rank,
                        world_size=args.world_size,
                        timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
votes = torch.zeros(world, dtype=torch.int64)
votes[rank] = 1
dist.all_reduce(votes)
good = votes.tolist() == [1] * world
scheme = args.init_method.split(":", 1)[0]
print(f"init_method {'ok' if good else 'FAILED'} rank={rank} world={world} "
      f"method={scheme} votes={votes.tolist()} "
      f"launched={dist.is_torchelastic_launched()}", flush=True)
dist.destroy_process_group()
sys.exit(0 if good else 1)
