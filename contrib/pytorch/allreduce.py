# SPDX-License-Identifier: Apache-2.0
"""allreduce.py - the smallest distributed PyTorch program: join the process
group from the launcher's environment and sum one tensor across all ranks.

Run it the same way under either launcher (2 processes on this machine):

    dlaunch  --standalone --nproc-per-node 2 contrib/pytorch/allreduce.py
    torchrun --standalone --nproc_per_node 2 contrib/pytorch/allreduce.py

(torchrun 1.13 knows only the underscore spellings such as --nproc_per_node;
dlaunch takes both. On Debian 12 with Python 3.11 use tests/torchrun/torchrun
in place of torchrun, and PYTHON_EXEC=/usr/bin/python3 with either launcher
when the first python3 on PATH has no torch.)

Every rank contributes rank + 1, so the sum is W * (W + 1) / 2. Each rank
prints "allreduce ok rank=R world=W sum=S" or "allreduce FAILED ..." and
exits 1 when the value is wrong.
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    # env:// reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE
    dist.init_process_group(backend="gloo", init_method="env://")
    rank = dist.get_rank()
    world = dist.get_world_size()
    if rank != int(os.environ["RANK"]) or world != int(os.environ["WORLD_SIZE"]):
        print(f"allreduce FAILED rank={rank}: process group disagrees with "
              f"RANK={os.environ['RANK']} WORLD_SIZE={os.environ['WORLD_SIZE']}",
              flush=True)
        return 1

    value = torch.tensor([float(rank + 1)], dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    ok = value.item() == expected
    dist.barrier()
    dist.destroy_process_group()
    if not ok:
        print(f"allreduce FAILED rank={rank} world={world}: "
              f"sum {value.item()} != expected {expected}", flush=True)
        return 1
    print(f"allreduce ok rank={rank} world={world} sum={int(value.item())} "
          f"local_rank={os.environ['LOCAL_RANK']} "
          f"group_rank={os.environ['GROUP_RANK']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
