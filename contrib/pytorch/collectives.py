# SPDX-License-Identifier: Apache-2.0
"""collectives.py - the collective operations a data-parallel program uses:
broadcast, reduce, all-reduce (sum, max, min) and all-gather.

Run it the same way under either launcher:

    dlaunch  --standalone --nproc-per-node 2 contrib/pytorch/collectives.py
    torchrun --standalone --nproc_per_node 2 contrib/pytorch/collectives.py

Every result is known in advance from the ranks alone, so each rank checks
its own. Each rank prints "collectives ok rank=R world=W ..." or one
"collectives FAILED ..." line per wrong result and exits 1.
"""
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    errors = []

    def expect(what, got, want):
        if not torch.equal(got, want):
            errors.append(f"{what}: got {got.tolist()[:4]}, expected {want.tolist()[:4]}")

    # broadcast from the last rank: everyone ends with its tensor
    src = world - 1
    t = torch.full((8,), float(rank)) if rank == src else torch.zeros(8)
    dist.broadcast(t, src=src)
    expect(f"broadcast from rank {src}", t, torch.full((8,), float(src)))

    # reduce (sum) to rank 0: only the destination's result is defined
    t = torch.full((8,), float(rank + 1))
    dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    if rank == 0:
        expect("reduce sum to rank 0", t, torch.full((8,), world * (world + 1) / 2))

    # all-reduce with several operators
    sums = torch.arange(16, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(sums, op=dist.ReduceOp.SUM)
    expect("all_reduce sum", sums,
           torch.arange(16, dtype=torch.float64) * (world * (world + 1) / 2))
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    expect("all_reduce max", t, torch.tensor([float(world - 1)]))
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    expect("all_reduce min", t, torch.tensor([0.0]))

    # all-gather: slot i holds rank i's tensor
    mine = torch.tensor([rank, rank * rank], dtype=torch.int64)
    gathered = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(gathered, mine)
    for i, g in enumerate(gathered):
        expect(f"all_gather slot {i}", g, torch.tensor([i, i * i], dtype=torch.int64))

    # all_gather_object: the ranks agree on who is who
    names = [None] * world
    dist.all_gather_object(names, f"rank{rank}")
    if names != [f"rank{i}" for i in range(world)]:
        errors.append(f"all_gather_object: got {names}")

    dist.barrier()
    dist.destroy_process_group()
    if errors:
        for e in errors:
            print(f"collectives FAILED rank={rank} world={world}: {e}", flush=True)
        return 1
    print(f"collectives ok rank={rank} world={world} broadcast=ok reduce=ok "
          f"all_reduce=ok all_gather=ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
