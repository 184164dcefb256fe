#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gloo_hang.py - the PyTorch worker of the hang sweep (bench/hang_bench.sh
torch, tests/e2e/agent_hang.sh; docs/hangs.md).

A plain gloo training script as a user writes it for torchrun: the group
from the environment, a small linear model trained on synthetic data, its
gradients all-reduced by hand every step (what DDP does), "step N loss X"
printed every 10 steps. No dlaunch module, no control channel: its
Python stacks come from dlaunch's sitecustomize (faulthandler on SIGUSR2).

The fault, for the rank GLOO_HANG_RANK names (default 1):
GLOO_HANG=STEP:KIND hangs before the all_reduce of step STEP, KIND one of
  sleep  time.sleep for an hour
  loop   a busy loop
  read   a blocking read of a fifo nobody writes (it is opened for reading
         and writing, so no end of file comes)
Each on a line of its own marked "HANG-LINE KIND", so that a test finds
the line a report must show. Without GLOO_HANG it trains until stopped
(the sweep's SIGSTOP kind stops it from outside). The fifo is made in
GLOO_HANG_DIR (default the system's temporary directory).
"""
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist


def hang_read(rank):
    base = os.environ.get("GLOO_HANG_DIR") or tempfile.gettempdir()
    path = os.path.join(base, f"gloo_hang.{os.getpid()}.fifo")
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR)
    os.unlink(path)
    print(f"rank {rank}: reading {path}", flush=True)
    os.read(fd, 1)  # HANG-LINE read


def hang(kind, rank, step):
    print(f"rank {rank}: hanging ({kind}) before the all_reduce of step "
          f"{step}", flush=True)
    if kind == "sleep":
        time.sleep(3600)  # HANG-LINE sleep
    elif kind == "loop":
        n = 0
        while n >= 0: n += 1  # HANG-LINE loop # noqa: E701
    elif kind == "read":
        hang_read(rank)


def fault():
    """(step, kind) of this rank's hang, or (None, None)."""
    spec = os.environ.get("GLOO_HANG", "")
    if not spec:
        return None, None
    step, _, kind = spec.partition(":")
    if kind not in ("sleep", "loop", "read") or not step.isdigit():
        sys.exit(f"gloo_hang.py: GLOO_HANG={spec}: want STEP:sleep|loop|read")
    if os.environ.get("GLOO_HANG_RANK", "1") != os.environ.get("RANK"):
        return None, None
    return int(step), kind


def main():
    hang_step, hang_kind = fault()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(4096, 32, generator=g)
    y = torch.randint(0, 4, (4096,), generator=g)
    loss_fn = torch.nn.CrossEntropyLoss()
    step = 0
    while True:
        step += 1
        idx = torch.randint(0, 4096, (32,), generator=g)
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        if step == hang_step:
            hang(hang_kind, rank, step)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        opt.step()
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(0.01)  # the data loader's share of a step


if __name__ == "__main__":
    main()
