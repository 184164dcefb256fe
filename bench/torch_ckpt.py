#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""torch_ckpt.py - what a PyTorch user does to checkpoint the same state as
bench/ckpt_bench.c: torch.save of the MLP's parameters and SGD momentum
(a state_dict of the same tensors) to a temporary file, fsync, rename,
fsync of the directory (the same durability), then torch.load.

    /usr/bin/python3 bench/torch_ckpt.py --dir DIR \\
        [--model 784-16384-16384-10] [--reps 3]

Prints one JSON object per repetition, like ckpt_bench.
"""
import argparse
import json
import os
import sys
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--model", default="784-16384-16384-10")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    widths = [int(w) for w in args.model.split("-")]
    torch.manual_seed(1)
    state = {"model": {}, "optimizer": {}}
    n = 0
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        lin = torch.nn.Linear(a, b)
        for name, p in (("weight", lin.weight), ("bias", lin.bias)):
            state["model"][f"{i}.{name}"] = p.detach()
            state["optimizer"][f"{i}.{name}"] = p.detach() * 0.5
            n += p.numel()
    os.makedirs(args.dir, exist_ok=True)
    path = os.path.join(args.dir, "ckpt.pt")
    for _ in range(args.reps):
        tmp = path + ".tmp"
        t0 = time.perf_counter()
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
        dfd = os.open(args.dir, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        t1 = time.perf_counter()
        back = torch.load(path)
        t2 = time.perf_counter()
        if not torch.equal(back["model"]["0.weight"], state["model"]["0.weight"]):
            print("torch_ckpt: checkpoint did not load back", file=sys.stderr)
            return 1
        del back
        print(json.dumps({"model": args.model, "params": n,
                          "file_bytes": os.path.getsize(path),
                          "save_s": round(t1 - t0, 4),
                          "load_s": round(t2 - t1, 4)}), flush=True)
    os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
