#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gloo_loop.py FILE LABEL - the worker of the node-loss benchmark.

Appends "start LABEL RESTART_COUNT RANK NS" to FILE as its first act (NS:
time.time_ns(), wall clock, comparable across processes), then forms a
gloo process group from the torchrun environment, appends "ready LABEL
RESTART_COUNT RANK NS" after its first all-reduce, and all-reduces a small
tensor every 10 ms until it is stopped or a peer disappears (then it exits
non-zero, as a training step would).
"""
import os
import sys
import time

path, label = sys.argv[1], sys.argv[2]
restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
rank = os.environ.get("RANK", "0")


def mark(what):
    with open(path, "a") as f:
        f.write(f"{what} {label} {restart} {rank} {time.time_ns()}\n")


mark("start")
import torch  # noqa: E402  (the start mark comes before the slow import)
import torch.distributed as dist  # noqa: E402

torch.set_num_threads(1)
dist.init_process_group("gloo")
t = torch.ones(16)
dist.all_reduce(t)
mark("ready")
while True:
    dist.all_reduce(t)
    time.sleep(0.01)
