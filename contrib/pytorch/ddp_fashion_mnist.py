# SPDX-License-Identifier: Apache-2.0
"""ddp_fashion_mnist.py - data-parallel training of an MLP on Fashion-MNIST
with DistributedDataParallel, the way a PyTorch user writes it: the process
group comes from the launcher's environment, a DistributedSampler (with
set_epoch) splits the data, rank 0 saves a checkpoint every epoch, and after
a restart every rank resumes from it.

    dlaunch  --standalone --nproc-per-node 2 --max-restarts 1 \
        contrib/pytorch/ddp_fashion_mnist.py --epochs 2 --checkpoint /tmp/fm.pt
    torchrun --standalone --nproc_per_node 2 --max_restarts 1 \
        contrib/pytorch/ddp_fashion_mnist.py --epochs 2 --checkpoint /tmp/fm.pt

Data: the IDX files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist, or --data DIR), read with gzip + numpy;
nothing is downloaded. Model: 784-256-128-10 MLP with dropout, SGD with
momentum. Seeds: the model is initialised from --seed on every rank (DDP
also broadcasts rank 0's parameters), per-rank randomness (dropout) is
seeded with --seed + rank, and the sampler's shuffle with --seed and the
epoch, so all ranks agree on the permutation.

Checkpoint (rank 0, end of every epoch, written to a temporary file and
renamed): {"model": model.module.state_dict(), "optimizer": ..., "epoch": E}.
On start, every rank loads it when it exists and continues at epoch E + 1.

Output lines the tests look for:
    ddp start rank=R world=W pid=P restart_count=K resume_epoch=E
    ddp progress rank=R epoch=E step=S/N loss=L
    ddp saved epoch=E path=P                      (rank 0)
    ddp epoch=E test_accuracy=A                   (rank 0, A in percent)
    ddp ok rank=R world=W epochs=N accuracy=A     (A >= --min-accuracy)
    ddp FAILED rank=R: why                        (and exit status 1)
"""
import argparse
import gc
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path, header_bytes):
    """The payload of a gzipped IDX file as uint8, header skipped."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, dtype=np.uint8, offset=header_bytes)


def load_split(data_dir, prefix, limit):
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"), 8)
    images = images.reshape(-1, 28 * 28)
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.astype(np.float32) / 255.0)
    x = (x - 0.2860) / 0.3530  # Fashion-MNIST's mean and standard deviation
    y = torch.from_numpy(labels.astype(np.int64))
    return TensorDataset(x, y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = self.drop(F.relu(self.fc1(x)))
        x = self.drop(F.relu(self.fc2(x)))
        return self.fc3(x)


def evaluate(model, dataset, rank, world):
    """Accuracy on the whole test set, each rank scoring its shard."""
    model.eval()
    x, y = dataset.tensors
    shard = slice(rank, len(y), world)
    with torch.no_grad():
        pred = model(x[shard]).argmax(dim=1)
        counts = torch.tensor([(pred == y[shard]).sum().item(), len(pred)],
                              dtype=torch.float64)
    dist.all_reduce(counts)
    model.train()
    return 100.0 * counts[0].item() / counts[1].item()


def save_checkpoint(path, model, optimizer, epoch):
    tmp = f"{path}.tmp"
    torch.save({"model": model.module.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch}, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-limit", type=int, default=0,
                    help="use the first N training images (0: all 60000)")
    ap.add_argument("--checkpoint", default="", help="checkpoint file (rank 0 writes)")
    ap.add_argument("--min-accuracy", type=float, default=80.0,
                    help="fail unless the final test accuracy (percent) reaches it")
    ap.add_argument("--log-every", type=int, default=50)
    args = ap.parse_args()

    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    restart_count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    train = load_split(args.data, "train", args.train_limit)
    test = load_split(args.data, "t10k", 0)

    torch.manual_seed(args.seed)  # the same initial model on every rank
    model = DDP(MLP())
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    torch.manual_seed(args.seed + rank)  # per-rank randomness (dropout)

    start_epoch = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint, map_location="cpu")
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
    print(f"ddp start rank={rank} world={world} pid={os.getpid()} "
          f"restart_count={restart_count} resume_epoch={start_epoch}", flush=True)

    sampler = DistributedSampler(train, num_replicas=world, rank=rank,
                                 shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    accuracy = None
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on all ranks
        started = time.monotonic()
        for step, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if step % args.log_every == 0:
                print(f"ddp progress rank={rank} epoch={epoch} "
                      f"step={step}/{len(loader)} loss={loss.item():.4f}", flush=True)
        accuracy = evaluate(model, test, rank, world)
        if rank == 0:
            print(f"ddp epoch={epoch} test_accuracy={accuracy:.2f} "
                  f"seconds={time.monotonic() - started:.1f}", flush=True)
            if args.checkpoint:
                save_checkpoint(args.checkpoint, model, optimizer, epoch)
                print(f"ddp saved epoch={epoch} path={args.checkpoint}", flush=True)
        dist.barrier()  # nobody starts the next epoch before the save

    if accuracy is None:  # resumed after the last epoch: score the model we have
        accuracy = evaluate(model, test, rank, world)
    # Free the DDP model before destroying the process group, not after.
    # DDP's Reducer holds a reference to the gloo process group, and in
    # torch 1.13 (Debian's) a Reducer is destroyed with the GIL held. Left
    # to die at main()'s return, it drops the group's last reference, so
    # ~ProcessGroupGloo joins gloo's worker threads with the GIL held; a
    # worker that has not yet dropped its last work (evaluate()'s all_reduce,
    # whose `counts` tensor keeps its Python object alive) then blocks taking
    # the GIL in ~TensorImpl -> destroy_pyobj_if_needed: a deadlock after
    # "ddp ok", seen on a loaded machine. (Forced with an all_reduce the
    # peer joins late, gdb shows the main thread in Reducer::~Reducer ->
    # ~ProcessGroupGloo -> thread::join and the worker in
    # ProcessGroupGloo::runLoop -> PyEval_AcquireThread.) Freed first, the
    # Reducer leaves the last reference to destroy_process_group(), whose
    # Python handles release the GIL while they destroy the group.
    del model, optimizer
    gc.collect()  # the Reducer is gone even if the module sat in a cycle
    dist.destroy_process_group()
    if accuracy < args.min_accuracy:
        print(f"ddp FAILED rank={rank}: test accuracy {accuracy:.2f}% is below "
              f"{args.min_accuracy:.2f}%", flush=True)
        return 1
    print(f"ddp ok rank={rank} world={world} epochs={args.epochs} "
          f"accuracy={accuracy:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
