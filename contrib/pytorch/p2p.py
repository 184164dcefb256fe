# SPDX-License-Identifier: Apache-2.0
"""p2p.py - point-to-point messages between ranks: blocking send/recv around
a ring, then non-blocking isend/irecv in both directions at once.

Run it the same way under either launcher (any world size >= 2):

    dlaunch  --standalone --nproc-per-node 2 contrib/pytorch/p2p.py
    torchrun --standalone --nproc_per_node 2 contrib/pytorch/p2p.py

Each message carries the sender's rank, so every rank can check that what it
received came from the neighbour it expected. Each rank prints
"p2p ok rank=R world=W ..." or "p2p FAILED ..." and exits 1 when wrong.
"""
import sys

import torch
import torch.distributed as dist

N = 1024  # elements per message: bigger than one word, small enough to be quick


def payload(src, dst, tag):
    """The message rank src sends to rank dst in phase tag."""
    return torch.arange(N, dtype=torch.float32) + 1000.0 * src + 10.0 * dst + tag


def main():
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    if world < 2:
        print(f"p2p FAILED rank={rank}: needs at least 2 ranks, got {world}",
              flush=True)
        return 1
    right = (rank + 1) % world
    left = (rank - 1) % world
    errors = []

    # 1. blocking ring: even ranks send first so the ring cannot deadlock
    got = torch.empty(N, dtype=torch.float32)
    if rank % 2 == 0:
        dist.send(payload(rank, right, 1), dst=right)
        dist.recv(got, src=left)
    else:
        dist.recv(got, src=left)
        dist.send(payload(rank, right, 1), dst=right)
    if not torch.equal(got, payload(left, rank, 1)):
        errors.append(f"send/recv from rank {left}: got first element "
                      f"{got[0].item()}, expected {payload(left, rank, 1)[0].item()}")

    # 2. non-blocking: post both receives and both sends, then wait on all
    from_left = torch.empty(N, dtype=torch.float32)
    from_right = torch.empty(N, dtype=torch.float32)
    requests = [
        dist.irecv(from_left, src=left, tag=2),
        dist.irecv(from_right, src=right, tag=3),
        dist.isend(payload(rank, right, 2), dst=right, tag=2),
        dist.isend(payload(rank, left, 3), dst=left, tag=3),
    ]
    for req in requests:
        req.wait()
    if not torch.equal(from_left, payload(left, rank, 2)):
        errors.append(f"irecv from left rank {left}: got first element "
                      f"{from_left[0].item()}")
    if not torch.equal(from_right, payload(right, rank, 3)):
        errors.append(f"irecv from right rank {right}: got first element "
                      f"{from_right[0].item()}")

    dist.barrier()
    dist.destroy_process_group()
    if errors:
        for e in errors:
            print(f"p2p FAILED rank={rank} world={world}: {e}", flush=True)
        return 1
    print(f"p2p ok rank={rank} world={world} send_recv=ok isend_irecv=ok",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
