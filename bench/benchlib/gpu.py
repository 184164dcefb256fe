# SPDX-License-Identifier: Apache-2.0
"""benchlib.gpu - the GPU benchmark: the NCCL backend and CUDA training
against PyTorch's, on the machine's GPUs."""
import json
import os
import subprocess

from . import common
from .common import (BenchError, ROOT, clean_env, run_ranks, summary_stats,
                     timed_run)
from .train import parse_summary
from .report import fmt_s


def gpu_devices(b):
    """The names of the CUDA devices the runtime sees, as the ranks will:
    through the built dist_bench (cudaGetDeviceCount honours
    CUDA_VISIBLE_DEVICES, which nvidia-smi -L ignores); [] when it cannot
    tell."""
    try:
        p = subprocess.run([b.bin("dist_bench"), "--device-count"],
                           capture_output=True, text=True, timeout=60,
                           env=clean_env())
        got = json.loads(p.stdout)
        return [str(x) for x in got["names"]][:int(got["cuda_devices"])]
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError,
            TypeError):
        return []


def torch_has_cuda():
    p = subprocess.run([common.PY, "-c", "import torch, sys; "
                        "sys.exit(0 if torch.cuda.is_available() else 1)"],
                       capture_output=True, timeout=120)
    return p.returncode == 0


def bench_gpu(b):
    """On a machine with NVIDIA GPUs (bench/gpu_bench.sh; not part of
    `all`): NCCL communicator creation at world size 1, dlaunch-train vs
    PyTorch DDP samples/s on CUDA, and the wall time of a one-step job
    from the launcher's start (dlaunch vs torchrun)."""
    names = gpu_devices(b)
    ngpu = len(names)
    if ngpu == 0:
        raise BenchError("no CUDA device visible to the CUDA runtime "
                         "(dist_bench --device-count; check the driver "
                         "and CUDA_VISIBLE_DEVICES)")
    trainer = b.bin("dlaunch-train")
    dist_bench = b.bin("dist_bench")
    # where the Debian package is not installed (a GPU machine that has
    # no Debian archive): the IDX files tests/gpu_run.sh carries
    fm = os.environ.get("FASHION_MNIST_DIR")
    data = ["--data-dir", fm] if fm else []
    has_torch = torch_has_cuda()
    reps = b.nreps(2, 5)
    epochs = 2 if b.quick else 10
    out = {"gpus": ngpu, "gpu_names": names, "torch_cuda": has_torch,
           "python": common.PY, "failures": []}
    if not has_torch:
        out["failures"].append(f"{common.PY} has no CUDA-enabled torch: the "
                               "PyTorch side is not measured (set "
                               "--python to one that has)")
    init = {"dlaunch": [], "torch": []}
    torch_init = [common.PY, "-c", (
        "import json, time, torch, torch.distributed as d\n"
        "t = time.perf_counter()\n"
        "torch.cuda.set_device(0)\n"
        "d.init_process_group('nccl')\n"
        "x = torch.ones(1, device='cuda')\n"
        "d.all_reduce(x)\n"
        "torch.cuda.synchronize()\n"
        "print(json.dumps({'init_ms': (time.perf_counter() - t) * 1e3}))\n")]
    for r in range(reps):
        for tool in ("dlaunch", "torch"):
            if tool == "torch" and not has_torch:
                continue
            cmd = ([dist_bench, "--device", "cuda", "--init-only"]
                   if tool == "dlaunch" else torch_init)
            try:
                text = run_ranks(lambda rank: cmd, 1, b.logfile("gpu-init"),
                                 300)
                init[tool] += [json.loads(x)["init_ms"]
                               for x in text.splitlines()
                               if x.startswith("{")]
            except BenchError as e:
                out["failures"].append(f"nccl init {tool}: {e}")
    out["nccl_init_ms"] = {k: summary_stats(v) for k, v in init.items()}

    train = {"dlaunch": [], "ddp": []}
    ddp = [common.PY, os.path.join(ROOT, "bench", "ddp_mlp.py"), "--device",
           "cuda", "--epochs", str(epochs)] + data
    for r in range(b.nreps(1, 2)):
        for tool in ("dlaunch", "ddp"):
            if tool == "ddp" and not has_torch:
                continue
            cmd = ([trainer, "--device", "cuda", "--epochs", str(epochs)]
                   + data if tool == "dlaunch" else ddp)
            try:
                train[tool].append(parse_summary(run_ranks(
                    lambda rank: cmd, ngpu, b.logfile(f"gpu-train-{tool}"),
                    1800)))
            except BenchError as e:
                out["failures"].append(f"train {tool}: {e}")
    out["train"] = {k: {"samples_per_s": summary_stats(
        [x["samples_per_s"] for x in v]), "test_accuracy": summary_stats(
        [x["test_accuracy"] for x in v])} for k, v in train.items()}

    first = {"dlaunch": [], "torchrun": []}
    cmds = {"dlaunch": [b.bin("dlaunch"), "--standalone", "--nproc-per-node",
                        "1", "--no-python", trainer, "--device", "cuda",
                        "--max-steps", "1"] + data,
            "torchrun": b.torchrun() + [
             "--standalone", "--nproc_per_node", "1",
             "--monitor_interval", "0.1", "--no_python", common.PY,
             os.path.join(ROOT, "bench", "ddp_mlp.py"), "--device", "cuda",
             "--max-steps", "1"] + data}
    for r in range(reps):
        for tool in ("dlaunch", "torchrun"):
            if tool == "torchrun" and not has_torch:
                continue
            secs, rc = timed_run(cmds[tool], b.logfile(f"gpu-first-{tool}"),
                                 env=clean_env(), timeout=300)
            if rc == 0:
                first[tool].append(secs)
            else:
                out["failures"].append(f"first step {tool}: exit {rc}")
    out["one_step_job_s"] = {k: summary_stats(v) for k, v in first.items()}
    out["commands"] = {k: " ".join(v) for k, v in cmds.items()}
    rows = []
    a, t = out["nccl_init_ms"]["dlaunch"], out["nccl_init_ms"]["torch"]
    if a:
        rows.append(["gpu", "NCCL init + first all-reduce, world 1",
                     f"{a['median']:.0f} ms",
                     f"PyTorch {t['median']:.0f} ms" if t else "-",
                     t["median"] / a["median"] if t else None, "", None])
    a, t = out["train"]["dlaunch"]["samples_per_s"], \
        out["train"]["ddp"]["samples_per_s"]
    if a:
        rows.append(["gpu", f"training samples/s, {ngpu} x {names[0]}",
                     f"{a['median']:,.0f}",
                     f"PyTorch DDP {t['median']:,.0f}" if t else "-",
                     a["median"] / t["median"] if t else None, ">= 1.5x",
                     a["median"] >= 1.5 * t["median"] if t else None])
    a, t = out["one_step_job_s"]["dlaunch"], out["one_step_job_s"]["torchrun"]
    if a:
        rows.append(["gpu", "launcher start to one training step done",
                     fmt_s(a["median"]),
                     f"torchrun + DDP {fmt_s(t['median'])}" if t else "-",
                     t["median"] / a["median"] if t else None, "", None])
    out["rows"] = rows
    return out
