#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""inplace_train.py - dlaunch-train's side of a node loss, side by side:
re-forming in place (issue 20) against today's path (every process stopped,
new ones started from the last checkpoint), with the same model, data,
world size and checkpoint interval, on this machine.

    /usr/bin/python3 bench/inplace_train.py [--build build] [--reps N]

Each repetition starts 3 ranks, kills rank 1 with SIGKILL at step 10 and
measures, through tests/faults/inplace_harness.py (which plays the agent
over socket pairs), the time from the kill to the first step completed
after it, and the steps lost (taken before the kill, taken again after).
The two modes alternate (A B, B A, ...); figures are medians with min and
max. What this leaves out on both sides alike: failure detection (the
heartbeat timeout) and the rendezvous round, which the agent adds; and on
the restart side, the agent's stop of the survivors (SIGTERM, grace).
Writes bench/results/inplace_train.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_once(build, mode, tmp, rep):
    name = os.path.join(tmp, "%s%d" % (mode, rep))
    cmd = [sys.executable, os.path.join(ROOT, "tests/faults/inplace_harness.py"),
           "--train", os.path.join(build, "bin/dlaunch-train"),
           "--mode", mode, "--world", "3", "--victim", "1",
           "--at-step", "10", "--ckpt-dir", name + ".ck", "--log", name,
           "--", "--data", "synthetic:8192", "--model", "256-512-512-10",
           "--global-batch", "96", "--max-steps", "30", "--seed", "7",
           "--checkpoint-every", "1", "--log-every", "1000"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    try:
        d = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        d = {"error": out.stderr[-300:]}
    if out.returncode != 0 or "change_to_step_ms" not in d:
        return {"failed": d.get("error", "no result")}
    return {"change_to_step_ms": d["change_to_step_ms"],
            "steps_lost": d["steps_lost"]}


def stats(vals):
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals), "n": len(vals)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    runs = {"shrink": [], "restart": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.reps):
            order = ["shrink", "restart"] if i % 2 == 0 else \
                ["restart", "shrink"]
            for mode in order:
                runs[mode].append(run_once(a.build, mode, tmp, i))
    result = {"what": "dlaunch-train: node loss to the first step after it "
              "(3 ranks, CPU, one killed)", "modes": {}}
    for mode, label in (("shrink", "in place"),
                        ("restart", "stop all, restart from checkpoint")):
        ok = [r for r in runs[mode] if "failed" not in r]
        failed = [r["failed"] for r in runs[mode] if "failed" in r]
        result["modes"][mode] = {
            "label": label, "failed": failed,
            "change_to_step_ms": stats([r["change_to_step_ms"] for r in ok])
            if ok else None,
            "steps_lost": stats([r["steps_lost"] for r in ok])
            if ok else None}
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "inplace_train.json"),
              "w") as f:
        json.dump(result, f, indent=1)
    print("%-36s %12s %12s %12s %6s" % ("kill -> first step", "median ms",
                                         "min", "max", "lost"))
    for mode, m in result["modes"].items():
        t = m["change_to_step_ms"]
        if t is None:
            print("%-36s failed: %s" % (m["label"], m["failed"][:1]))
            continue
        print("%-36s %12.1f %12.1f %12.1f %6g" % (
            m["label"], t["median"], t["min"], t["max"],
            m["steps_lost"]["median"]))
        if m["failed"]:
            print("  %d failed: %s" % (len(m["failed"]), m["failed"][0]))
    return 0 if all(not m["failed"] for m in result["modes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
