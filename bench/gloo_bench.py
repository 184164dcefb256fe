#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gloo_bench.py - PyTorch gloo all-reduce latency and bus bandwidth, the
counterpart of bench/dist_bench.c (same sizes, iteration formula, timing
and output), run with /usr/bin/python3 (PyTorch 1.13 CPU).

    MASTER_ADDR=127.0.0.1 MASTER_PORT=P RANK=r WORLD_SIZE=n \\
        /usr/bin/python3 bench/gloo_bench.py [--sizes 4,1024] \\
        [--max-bytes-moved 268435456]

First line: init_ms, init_process_group plus a first one-element
all-reduce (dist_bench measures the same). Per size: warm-up, barrier, timed loop of in-place float32 sum
all-reduces; the slowest rank's time counts (all-reduce MAX). Rank 0 prints
one JSON object per size.
"""
import argparse
import json
import sys
import time

import torch
import torch.distributed as dist


def iters_for(nbytes, max_moved):
    return max(5, min(1000, max_moved // max(nbytes, 1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes",
                    default="4,64,1024,16384,262144,1048576,4194304,16777216")
    ap.add_argument("--max-bytes-moved", type=int, default=256 << 20)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.all_reduce(torch.zeros(1))
    if rank == 0:
        print(json.dumps({"impl": "torch-gloo", "world": world,
                          "init_ms": round((time.perf_counter() - t0) * 1e3,
                                           3)}), flush=True)
    buf = (torch.arange(max(sizes) // 4, dtype=torch.float32) + rank) % 7 * 0.25
    for nbytes in sizes:
        t = buf[: nbytes // 4]
        iters = iters_for(nbytes, args.max_bytes_moved)
        warm = min(20, max(2, iters // 10))
        for _ in range(warm):
            dist.all_reduce(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        secs = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(secs, op=dist.ReduceOp.MAX)
        per = secs.item() / iters
        if rank == 0:
            print(json.dumps({
                "impl": "torch-gloo", "world": world, "bytes": nbytes,
                "iters": iters, "latency_us": round(per * 1e6, 3),
                "busbw_gbps": round(2.0 * (world - 1) / world * nbytes / per
                                    / 1e9, 4)}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
