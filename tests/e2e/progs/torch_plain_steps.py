# SPDX-License-Identifier: Apache-2.0
"""torch_plain_steps.py - a DDP-style worker that does not use the dlaunch
module: the process group from the environment, one all-reduce a step,
rank 0 keeps the step in a state file, and after a restart every rank
resumes from it (torch_inplace.sh: a script without the module recovers
by restart, as under torchrun).

    torch_plain_steps.py STATE STEPS STEP_MS
Prints "plain start rank=R world=W pid=P restart_count=K step=S", every
10th step "plain step=S rank=R world=W", and "plain done rank=R world=W
pid=P step=S".
"""
import os
import sys
import time

import torch
import torch.distributed as dist

state, steps, step_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
step = int(open(state).read()) if os.path.exists(state) else 0
t = torch.tensor([step])
dist.broadcast(t, 0)
step = int(t.item())
print("plain start rank=%d world=%d pid=%d restart_count=%s step=%d" % (
    rank, world, os.getpid(), os.environ.get("TORCHELASTIC_RESTART_COUNT"),
    step), flush=True)
while step < steps:
    x = torch.ones(4)
    dist.all_reduce(x)
    time.sleep(step_ms / 1000)
    step += 1
    if rank == 0:
        with open(state + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(state + ".tmp", state)
    if step % 10 == 0:
        print("plain step=%d rank=%d world=%d" % (step, rank, world),
              flush=True)
print("plain done rank=%d world=%d pid=%d step=%d" % (
    rank, world, os.getpid(), step), flush=True)
