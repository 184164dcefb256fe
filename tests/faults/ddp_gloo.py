# SPDX-License-Identifier: Apache-2.0
"""ddp_gloo.py - a small PyTorch DDP job over gloo for the fault suite.

    ddp_gloo.py STEPS PAUSE_S

Joins the process group from the launcher's environment (gloo, env://),
trains a linear layer with DistributedDataParallel for STEPS steps (PAUSE_S
between steps, so a host can be lost mid-run), then checks that every
replica holds the same weights. Lines the tests look for:

    ddp start rank=R world=W gloo_if=IF nccl_if=IF
    ddp step rank=R world=W step=S
    ddp ok rank=R world=W steps=N      (or "ddp FAILED ...", exit 1)
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    steps, pause = int(sys.argv[1]), float(sys.argv[2])
    dist.init_process_group(backend="gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"ddp start rank={rank} world={world} "
          f"gloo_if={os.environ.get('GLOO_SOCKET_IFNAME', '-')} "
          f"nccl_if={os.environ.get('NCCL_SOCKET_IFNAME', '-')}", flush=True)
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        # each rank its own data: only DDP's all-reduce keeps them equal
        x = torch.full((8, 4), float(rank + 1))
        loss = ((model(x) - 1.0) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"ddp step rank={rank} world={world} step={step}", flush=True)
        time.sleep(pause)
    w = model.module.weight.detach().clone()
    every = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(every, w)
    same = all(torch.equal(w, o) for o in every)
    print(f"ddp {'ok' if same else 'FAILED'} rank={rank} world={world} "
          f"steps={steps}", flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
