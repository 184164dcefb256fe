# SPDX-License-Identifier: Apache-2.0
"""benchlib.train - training (dlaunch-train against PyTorch DDP) and
checkpoints (the trainer's against torch.save)."""
import json
import os
import statistics
import subprocess

from . import common
from .common import BenchError, ROOT, log, run_ranks, summary_stats


def parse_summary(text):
    """The {"summary": ...} line of dlaunch-train or ddp_mlp.py."""
    for line in text.splitlines():
        if line.startswith('{"summary"'):
            return json.loads(line)["summary"]
    raise BenchError("no summary line in the trainer's output")


def bench_train(b):
    """dlaunch-train vs PyTorch DDP (bench/ddp_mlp.py), same MLP, data,
    batch and optimizer, 2 ranks with OMP_NUM_THREADS=1 each, started the
    same way (the torchrun environment set directly, no launcher)."""
    trainer = b.bin("dlaunch-train")
    epochs = 2 if b.quick else 10
    reps = b.nreps(1, 2)
    world = 2
    ddp = [common.PY, os.path.join(ROOT, "bench", "ddp_mlp.py"), "--epochs",
           str(epochs)]
    runs = {"dlaunch": [], "ddp": []}
    pauses_ms = []
    failures = []
    for r in range(reps):
        order = ["dlaunch", "ddp"] if r % 2 == 0 else ["ddp", "dlaunch"]
        for tool in order:
            ckdir = os.path.join(b.tmp, f"train-ckpt-{r}")
            logname = b.logfile(f"train-{tool}")
            # --device cpu: on a GPU machine "auto" would pick CUDA, and
            # this is the CPU comparison (gpu_bench.sh does the GPU one)
            cmd = ([trainer, "--device", "cpu", "--epochs", str(epochs),
                    "--checkpoint-dir", ckdir] if tool == "dlaunch" else ddp)
            try:
                before = os.path.getsize(logname) if os.path.exists(
                    logname) else 0
                text = run_ranks(lambda rank: cmd, world, logname, 1800)
                summ = parse_summary(text)
                runs[tool].append(summ)
                log(f"train {tool}: {summ['samples_per_s']:.0f} samples/s, "
                    f"accuracy {summ['test_accuracy']:.4f}")
                if tool == "dlaunch":
                    # rank 0 logs "checkpoint ... written in N ms": the
                    # time training stood still for it
                    with open(logname) as f:
                        f.seek(before)
                        for line in f:
                            if "written in" in line and "checkpoint" in line:
                                pauses_ms.append(float(
                                    line.split("written in")[1].split()[0]))
            except (BenchError, ValueError, KeyError) as e:
                failures.append(f"{tool}: {e}")
                log(failures[-1])
    out = {"world": world, "epochs": epochs, "reps": reps,
           "omp_num_threads": 1, "failures": failures, "runs": runs,
           "commands": {"dlaunch": " ".join([trainer, "--device", "cpu",
                                             "--epochs", str(epochs),
                                             "--checkpoint-dir DIR"]),
                        "ddp": " ".join(ddp)},
           "checkpoint_pause_ms": summary_stats(pauses_ms)}
    for tool in runs:
        out[tool] = {
            "samples_per_s": summary_stats([x["samples_per_s"]
                                            for x in runs[tool]]),
            "test_accuracy": summary_stats([x["test_accuracy"]
                                            for x in runs[tool]]),
            "wall_seconds": summary_stats([x["wall_seconds"]
                                           for x in runs[tool]])}
    dl, tr = out["dlaunch"], out["ddp"]
    rows = []
    if dl["samples_per_s"] and tr["samples_per_s"]:
        ratio = dl["samples_per_s"]["median"] / tr["samples_per_s"]["median"]
        rows.append(["training", f"{world} ranks, samples/s",
                     f"{dl['samples_per_s']['median']:,.0f}",
                     f"PyTorch DDP {tr['samples_per_s']['median']:,.0f}",
                     ratio, ">= 1.5x", ratio >= 1.5])
        da = dl["test_accuracy"]["median"] * 100
        ta = tr["test_accuracy"]["median"] * 100
        rows.append(["training", f"test accuracy after {epochs} epochs",
                     f"{da:.2f}%", f"PyTorch DDP {ta:.2f}%", None,
                     "within 0.5 point", abs(da - ta) <= 0.5 or da > ta])
    else:
        rows.append(["training", "-", "failed", "; ".join(failures)[:80],
                     None, ">= 1.5x", False])
    if pauses_ms:
        rows.append(["checkpoint", "training paused per checkpoint "
                     "(784-256-128-10)",
                     f"{statistics.median(pauses_ms):.0f} ms", "", None, "",
                     None])
    out["rows"] = rows
    return out


CKPT_MODEL = "784-16384-16384-10"  # 281 M parameters: 1.05 GiB of float32


def bench_ckpt(b):
    """Write and load of a 1 GiB parameter set (plus its SGD momentum)
    through dlaunch-train's checkpoint code vs torch.save/torch.load of
    the same tensors, both fsynced; alternating."""
    tool_bin = b.bin("ckpt_bench")
    reps = b.nreps(1, 3)
    model = b.ckpt_model
    ckdir = os.path.join(b.tmp, "ckpt")
    cmds = {"dlaunch": [tool_bin, "--dir", ckdir, "--model", model,
                        "--reps", "1"],
            "torch": [common.PY, os.path.join(ROOT, "bench", "torch_ckpt.py"),
                      "--dir", ckdir + "-torch", "--model", model,
                      "--reps", "1"]}
    runs = {"dlaunch": [], "torch": []}
    failures = []
    for r in range(reps):
        order = ["dlaunch", "torch"] if r % 2 == 0 else ["torch", "dlaunch"]
        for tool in order:
            p = subprocess.run(cmds[tool], capture_output=True, text=True,
                               timeout=600)
            if p.returncode != 0:
                failures.append(f"{tool}: exit {p.returncode}: "
                                + p.stderr.strip()[-300:])
                log(failures[-1])
                continue
            for line in p.stdout.splitlines():
                runs[tool].append(json.loads(line))
            x = runs[tool][-1]
            log(f"ckpt {tool}: {x['file_bytes'] / 2**30:.2f} GiB, save "
                f"{x['save_s']:.2f} s, load {x['load_s']:.2f} s")
    for d in (ckdir, ckdir + "-torch"):
        subprocess.run(["rm", "-rf", d], check=False)
    out = {"model": model, "reps": reps, "runs": runs,
           "failures": failures,
           "commands": {k: " ".join(v) for k, v in cmds.items()},
           "note": "load right after save: the file is in the page cache"}
    rows = []
    for tool in runs:
        if not runs[tool]:
            continue
        size = runs[tool][0]["file_bytes"]
        out[tool] = {"file_bytes": size, "params": runs[tool][0]["params"]}
        for k in ("save_s", "load_s"):
            out[tool][k] = summary_stats([x[k] for x in runs[tool]])
            out[tool][k.replace("_s", "_gbps")] = \
                size / out[tool][k]["median"] / 1e9
    if "dlaunch" in out and "torch" in out:
        for k, what in (("save", "write"), ("load", "load")):
            dl, tr = out["dlaunch"], out["torch"]
            ratio = tr[k + "_s"]["median"] / dl[k + "_s"]["median"]
            rows.append(["checkpoint", f"{what} {dl['params'] * 4 / 2**30:.2f} "
                         "GiB parameters + momentum",
                         f"{dl[k + '_s']['median']:.2f} s "
                         f"({dl[k + '_gbps']:.2f} GB/s)",
                         f"torch.{k} {tr[k + '_s']['median']:.2f} s "
                         f"({tr[k + '_gbps']:.2f} GB/s)", ratio, "", None])
    else:
        rows.append(["checkpoint", "-", "failed", "; ".join(failures)[:80],
                     None, "", False])
    out["rows"] = rows
    return out
