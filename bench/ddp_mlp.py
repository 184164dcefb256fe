#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ddp_mlp.py - the PyTorch DDP counterpart of dlaunch-train's default job,
for the training benchmark: same model (Linear 784-256-128-10 with ReLU),
same global batch split over the ranks, same SGD (lr 0.05, momentum 0.9,
weight decay 5e-4 on every parameter; cosine decay of the rate to 0 over
all the epochs' steps, computed per step, or --lr-schedule constant), same data
(Fashion-MNIST IDX files, pixels scaled by 1/255 and normalised with mean
0.2860 and std 0.3530), same sampling (one permutation per epoch shared by
all ranks, each rank taking its contiguous share of each global batch, the
last batch partial), loss = mean cross entropy over the global batch.

    torchrun ... bench/ddp_mlp.py [--epochs 10] [--global-batch 128] ...
    (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

--device cuda trains on GPU LOCAL_RANK with the nccl backend (the GPU
benchmark, bench/gpu_bench.sh); --max-steps stops early.

samples/s counts what dlaunch-train's does: the time of the training
steps (batch gathering, forward, backward with DDP's all-reduce, optimizer
step), without evaluation. Rank 0 ends with one JSON line
{"summary": {...}} with the same keys as dlaunch-train's.
"""
import argparse
import gzip
import json
import math
import os
import struct
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    t = torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8)
    return t.reshape(dims)


def load(data_dir, split):
    def find(stem):
        for name in (stem, stem + ".gz"):
            p = os.path.join(data_dir, name)
            if os.path.exists(p):
                return p
        raise FileNotFoundError(f"{stem} not found in {data_dir}")
    x = read_idx(find(f"{split}-images-idx3-ubyte")).reshape(-1, 784).float()
    y = read_idx(find(f"{split}-labels-idx1-ubyte")).long()
    return (x / 255.0 - MEAN) / STD, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=DATA_DIR)
    ap.add_argument("--model", default="784-256-128-10")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--global-batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--lr-schedule", choices=["cosine", "constant"],
                    default="cosine")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop after this many steps (0: all epochs)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: GPU LOCAL_RANK with the nccl backend")
    args = ap.parse_args()

    t_start = time.perf_counter()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dev = torch.device("cpu")
    if args.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    train_x, train_y = (t.to(dev) for t in load(args.data_dir, "train"))
    test_x, test_y = (t.to(dev) for t in load(args.data_dir, "t10k"))

    torch.manual_seed(args.seed)
    widths = [int(w) for w in args.model.split("-")]
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(*layers).to(dev),
        device_ids=[dev] if args.device == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr,
                          momentum=args.momentum,
                          weight_decay=args.weight_decay)

    n, gb = train_x.shape[0], args.global_batch
    total_steps = (n + gb - 1) // gb * args.epochs
    steps = samples = 0
    train_secs = 0.0
    loss = torch.tensor(0.0)
    first_step_s = None
    for epoch in range(args.epochs):
        if args.max_steps and steps >= args.max_steps:
            break
        g = torch.Generator()
        g.manual_seed(args.seed * 1000003 + epoch)
        perm = torch.randperm(n, generator=g).to(dev)
        for off in range(0, n, gb):
            if args.max_steps and steps >= args.max_steps:
                break
            t0 = time.perf_counter()
            b = min(gb, n - off)
            lo, hi = b * rank // world, b * (rank + 1) // world
            idx = perm[off + lo:off + hi]
            x, y = train_x[idx], train_y[idx]
            if args.lr_schedule == "cosine":
                for group in opt.param_groups:
                    group["lr"] = args.lr * 0.5 * (
                        1.0 + math.cos(math.pi * steps / total_steps))
            opt.zero_grad(set_to_none=True)
            # DDP averages the ranks' gradients; scaling each rank's sum
            # by world / b makes that the mean over the global batch.
            loss = F.cross_entropy(model(x), y, reduction="sum") * world / b
            loss.backward()
            opt.step()
            if args.device == "cuda":
                torch.cuda.synchronize(dev)
            train_secs += time.perf_counter() - t0
            if first_step_s is None:
                first_step_s = time.perf_counter() - t_start
            steps += 1
            samples += b
    model.eval()
    with torch.no_grad():
        out = model.module(test_x)
        test_loss = F.cross_entropy(out, test_y).item()
        acc = (out.argmax(1) == test_y).float().mean().item()
    if rank == 0:
        print(json.dumps({"summary": {
            "steps": steps, "epochs": args.epochs, "world_size": world,
            "global_batch": gb, "samples_per_s": round(samples / train_secs,
                                                       1),
            "train_seconds": round(train_secs, 3),
            "wall_seconds": round(time.perf_counter() - t_start, 3),
            "final_loss": loss.item() / world, "test_loss": test_loss,
            "test_accuracy": acc, "device": args.device,
            "first_step_seconds": first_step_s}}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
