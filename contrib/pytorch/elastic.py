# SPDX-License-Identifier: Apache-2.0
"""elastic.py - a job that survives restarts: it counts steps, keeps its
progress in a state file, and after a restart picks up where it left off,
reading TORCHELASTIC_RESTART_COUNT the way torchelastic programs do.

    dlaunch  --standalone --nproc-per-node 2 --max-restarts 1 \
        contrib/pytorch/elastic.py --state /tmp/elastic.state --steps 20 \
        --fail-rank 1 --fail-step 7
    torchrun --standalone --nproc_per_node 2 --max_restarts 1 \
        contrib/pytorch/elastic.py --state /tmp/elastic.state --steps 20 \
        --fail-rank 1 --fail-step 7

Each step all-reduces (rank + 1) and adds the result to a running total;
rank 0 saves {step, total} after every step (write, fsync, rename). With
--fail-rank/--fail-step, that rank exits with status 3 at that step on the
first attempt only (TORCHELASTIC_RESTART_COUNT == 0), so the launcher must
restart the job and the second attempt must resume from the saved step.

Output lines the tests look for:
    elastic start rank=R restart_count=K max_restarts=M resume_step=S
    elastic injected failure rank=R step=S
    elastic ok rank=R world=W restart_count=K steps=N total=T
    elastic FAILED rank=R: why       (and exit status 1)
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist


def load_state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"step": 0, "total": 0.0}


def save_state(path, state):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True, help="state file (shared by the ranks)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--fail-step", type=int, default=-1)
    args = ap.parse_args()

    restart_count = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    max_restarts = int(os.environ["TORCHELASTIC_MAX_RESTARTS"])
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()

    # rank 0's view of the state file is the one everybody resumes from
    state = [load_state(args.state) if rank == 0 else None]
    dist.broadcast_object_list(state, src=0)
    state = state[0]
    print(f"elastic start rank={rank} restart_count={restart_count} "
          f"max_restarts={max_restarts} resume_step={state['step']}", flush=True)

    per_step = world * (world + 1) / 2
    for step in range(state["step"], args.steps):
        if (restart_count == 0 and rank == args.fail_rank
                and step == args.fail_step):
            print(f"elastic injected failure rank={rank} step={step}", flush=True)
            sys.stdout.flush()
            os._exit(3)
        t = torch.tensor([float(rank + 1)], dtype=torch.float64)
        dist.all_reduce(t)
        state = {"step": step + 1, "total": state["total"] + t.item()}
        dist.barrier()  # everyone has finished the step before it is recorded
        if rank == 0:
            save_state(args.state, state)
        dist.barrier()

    dist.destroy_process_group()
    expected = per_step * args.steps
    if state["total"] != expected:
        print(f"elastic FAILED rank={rank}: total {state['total']} != "
              f"expected {expected} after {args.steps} steps", flush=True)
        return 1
    print(f"elastic ok rank={rank} world={world} restart_count={restart_count} "
          f"steps={args.steps} total={int(state['total'])}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
