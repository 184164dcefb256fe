# SPDX-License-Identifier: Apache-2.0
"""benchlib.dist - the collective library against PyTorch's gloo (dist)
and the flight recorder's cost (flight)."""
import json
import os
import subprocess

from . import common
from .common import BenchError, ROOT, log, run_ranks, summary_stats


DIST_SIZES_FULL = [4, 64, 1024, 16384, 262144, 1 << 20, 4 << 20, 16 << 20,
                   64 << 20, 256 << 20]
DIST_SIZES_QUICK = [4, 1024, 65536, 1 << 20, 16 << 20]


def bench_dist(b):
    sizes = DIST_SIZES_QUICK if b.quick else DIST_SIZES_FULL
    moved = (64 << 20) if b.quick else (256 << 20)
    worlds = [2, 4]
    arg = ["--sizes", ",".join(map(str, sizes)), "--max-bytes-moved",
           str(moved)]
    dist_bench = b.bin("dist_bench")
    gloo = [common.PY, os.path.join(ROOT, "bench", "gloo_bench.py")]
    out = {"sizes": sizes, "worlds": worlds, "cases": [], "failures": [],
           "commands": {"dlaunch": " ".join([dist_bench] + arg),
                        "gloo": " ".join(gloo + arg)}}
    for i, world in enumerate(worlds):
        rows = {}
        order = ["dlaunch", "gloo"] if i % 2 == 0 else ["gloo", "dlaunch"]
        for tool in order:
            cmd = [dist_bench] + arg if tool == "dlaunch" else gloo + arg
            try:
                text = run_ranks(lambda r: cmd, world,
                                 b.logfile(f"dist-{tool}"), 900)
                lines = [json.loads(x) for x in text.splitlines()
                         if x.startswith("{")]
                rows[tool] = [x for x in lines if "bytes" in x]
                # init_ms (dist_init/init_process_group + a first
                # all-reduce) is kept in the JSON but not compared: across
                # processes it mostly measures how far apart the ranks
                # started (python imports torch first); gpu_bench.sh
                # compares it at world size 1 where that does not arise
                for x in lines:
                    if "init_ms" in x:
                        out.setdefault("init_ms", {}).setdefault(
                            tool, {})[str(world)] = x["init_ms"]
            except BenchError as e:
                out["failures"].append(str(e))
                log(str(e))
        for nbytes in sizes:
            case = {"world": world, "bytes": nbytes}
            for tool in ("dlaunch", "gloo"):
                m = [x for x in rows.get(tool, []) if x["bytes"] == nbytes]
                if m:
                    case[tool] = {"latency_us": m[0]["latency_us"],
                                  "busbw_gbps": m[0]["busbw_gbps"]}
            if "dlaunch" in case and "gloo" in case:
                case["ratio"] = (case["gloo"]["latency_us"]
                                 / case["dlaunch"]["latency_us"])
                log(f"dist world={world} {nbytes} B: dlaunch "
                    f"{case['dlaunch']['latency_us']} us, gloo "
                    f"{case['gloo']['latency_us']} us, "
                    f"{case['ratio']:.2f}x")
            out["cases"].append(case)
    return out


FLIGHT_SIZES = [4, 64, 1024, 16384]


def bench_flight(b):
    """The flight recorder's cost (dlaunch-train's default, 64 entries)
    on the small all-reduces where a per-call cost would show: in each
    run, dist_bench --flight-compare alternates blocks of all-reduces
    between a group that records and one that does not (A B B A ...), so
    the machine's load hits both alike; per size the median over the
    runs of off/on (1.0: no cost; below 1: slower with the recorder), and
    the recorder's own time per collective (dist_bench --flight-cost)."""
    reps = b.nreps(3, 7)
    worlds = [2, 4]
    arg = ["--flight-compare", "--sizes", ",".join(map(str, FLIGHT_SIZES)),
           "--max-bytes-moved", str(64 << 20)]
    dist_bench = b.bin("dist_bench")
    out = {"sizes": FLIGHT_SIZES, "worlds": worlds, "reps": reps,
           "cases": [], "failures": [],
           "commands": {"compare": " ".join([dist_bench] + arg),
                        "cost": f"{dist_bench} --flight-cost"}}
    cost = []
    for r in range(reps):
        p = subprocess.run([dist_bench, "--flight-cost"], capture_output=True,
                           text=True, check=False)
        if p.returncode == 0:
            cost.append(json.loads(p.stdout)["flight_ns_per_collective"])
    out["ns_per_collective"] = summary_stats(cost)
    for world in worlds:
        got = {n: {"on": [], "off": [], "ratio": []} for n in FLIGHT_SIZES}
        for r in range(reps):
            try:
                text = run_ranks(lambda _: [dist_bench] + arg, world,
                                 b.logfile("flight"), 600)
            except BenchError as e:
                out["failures"].append(str(e))
                log(str(e))
                continue
            for x in (json.loads(t) for t in text.splitlines()
                      if t.startswith("{")):
                if x.get("bytes") in got:
                    g = got[x["bytes"]]
                    g["on"].append(x["on_us"])
                    g["off"].append(x["off_us"])
                    g["ratio"].append(x["off_over_on"])
        for n in FLIGHT_SIZES:
            case = {"world": world, "bytes": n}
            if got[n]["ratio"]:
                case["on"] = summary_stats(got[n]["on"])
                case["off"] = summary_stats(got[n]["off"])
                case["off_over_on"] = summary_stats(got[n]["ratio"])
                case["ratio"] = case["off_over_on"]["median"]
                log(f"flight world={world} {n} B: on "
                    f"{case['on']['median']:.1f} us, off "
                    f"{case['off']['median']:.1f} us, off/on median "
                    f"{case['ratio']:.3f} (min "
                    f"{case['off_over_on']['min']:.3f}, max "
                    f"{case['off_over_on']['max']:.3f})")
            out["cases"].append(case)
    return out
