# SPDX-License-Identifier: Apache-2.0
"""elastic_inplace.py - a DDP script that re-forms in place under dlaunch
with the dlaunch module (python/dlaunch/, installed with dlaunch): when a
node is lost or one joins, the surviving processes keep their parameters
and optimizer state, form the new process group and go on; new ranks take
their state from a peer. Under torchrun, or without the module's channel,
it is a plain DDP script (a failure ends it; the launcher restarts it from
the checkpoint).

    dlaunch --nnodes 2:3 --nproc-per-node 2 --rdzv-endpoint HOST:PORT \\
        --rdzv-id job1 --max-restarts 3 \\
        contrib/pytorch/elastic_inplace.py --epochs 5 --checkpoint /tmp/ei.pt

Data: a synthetic regression set drawn from --seed (no download). Model:
a 16-32-1 MLP, SGD with momentum. The lines the script adds for dlaunch
are marked "dlaunch:".

Output:
    inplace start rank=R world=W pid=P step=S
    inplace step=S rank=R world=W loss=L          (every --log-every steps)
    inplace done rank=R world=W pid=P step=S reforms=N digest=D
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import dlaunch  # dlaunch:


def say(line):
    """Print line with one write: torchrun starts workers with python -u,
    where print() writes the text and its newline separately and the ranks'
    lines, sharing one output, can interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=960)
    ap.add_argument("--global-batch", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop (with a checkpoint) after this step; 0: no limit")
    ap.add_argument("--checkpoint", default="",
                    help="file rank 0 saves every --checkpoint-every steps; "
                    "loaded at start when it exists")
    ap.add_argument("--checkpoint-every", type=int, default=20)
    ap.add_argument("--step-ms", type=float, default=0,
                    help="sleep this long in each step (to watch it)")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--reform-timeout", type=float, default=30)
    a = ap.parse_args()

    g = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.samples, 16, generator=g)
    w = torch.randn(16, 1, generator=g)
    y = x @ w + 0.1 * torch.randn(a.samples, 1, generator=g)
    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)

    # dlaunch: the group, the DDP wrapper and the batch order
    job = dlaunch.Elastic(model, opt, num_samples=a.samples,
                          global_batch=a.global_batch, seed=a.seed,
                          reform_timeout=a.reform_timeout)
    if a.checkpoint and os.path.exists(a.checkpoint):
        job.load(a.checkpoint)
    say("inplace start rank=%d world=%d pid=%d step=%d" % (
        job.rank, job.world_size, os.getpid(), job.global_step))
    for idx in job.batches(a.epochs):        # dlaunch: this rank's samples
        if a.max_steps and job.global_step >= a.max_steps:
            break
        before = job.global_step
        with job.step():                     # dlaunch: a step it may drop
            loss = F.mse_loss(job.model(x[idx]), y[idx])
            loss.backward()
            if a.step_ms:
                time.sleep(a.step_ms / 1000)
        s = job.global_step
        if s == before:                      # dropped: the group re-formed
            continue
        if s % a.log_every == 0:
            say("inplace step=%d rank=%d world=%d loss=%.6f" % (
                s, job.rank, job.world_size, loss.item()))
        if a.checkpoint and job.rank == 0 and s % a.checkpoint_every == 0:
            job.save(a.checkpoint)
    if a.checkpoint and job.rank == 0:
        job.save(a.checkpoint)
    say("inplace done rank=%d world=%d pid=%d step=%d reforms=%d digest=%s"
        % (job.rank, job.world_size, os.getpid(), job.global_step,
           job.reforms, job.digest()))


if __name__ == "__main__":
    sys.exit(main())
