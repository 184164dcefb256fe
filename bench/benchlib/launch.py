# SPDX-License-Identifier: Apache-2.0
"""benchlib.launch - launch and restart: N workers started (and
restarted) by dlaunch, torchrun and the floor spawner, runs alternating
between the tools."""
import os

from .common import (BenchError, WORKERS, clean_env, log, read_lines, rotate,
                     summary_stats, timed_run)


def bench_launch(b):
    """Wall time of launching N trivial workers (/bin/true) and waiting for
    them: dlaunch --standalone vs torchrun --standalone, alternating, with
    the floor beside them: the same N execs by floor_spawn, a minimal C
    spawner."""
    dl = b.bin("dlaunch")
    tr = b.torchrun()
    floor = b.bin("floor_spawn")
    sizes = [1, 4, 16]
    reps = b.nreps(3, 7)
    out = {"unit": "seconds", "reps": reps, "cases": []}
    for n in sizes:
        cmds = {
            "dlaunch": [dl, "--standalone", "--nproc-per-node", str(n),
                        "--no-python", "/bin/true"],
            "torchrun": tr + ["--standalone", "--nproc_per_node", str(n),
                              "--monitor_interval", "0.1", "--no_python",
                              "/bin/true"],
            "floor": [floor, str(n), "/bin/true"],
        }
        times = {"dlaunch": [], "torchrun": [], "floor": []}
        failures = []
        load0 = os.getloadavg()[0]
        for r in range(reps):
            for tool in rotate(["dlaunch", "torchrun", "floor"], r):
                secs, rc = timed_run(cmds[tool], b.logfile(f"launch-{tool}"),
                                     env=clean_env(), timeout=120)
                if rc != 0:
                    failures.append(f"{tool} n={n} rep {r}: exit {rc}")
                    continue
                times[tool].append(secs)
        case = {"nproc": n, "dlaunch": summary_stats(times["dlaunch"]),
                "torchrun": summary_stats(times["torchrun"]),
                "floor": summary_stats(times["floor"]),
                "loadavg": [load0, os.getloadavg()[0]],
                "failures": failures}
        add_ratios(case)
        log(f"launch n={n}: {fmt_case(case)}")
        out["cases"].append(case)
        out["commands"] = {k: " ".join(v) for k, v in cmds.items()}
    return out


def add_ratios(case):
    """torchrun's median over dlaunch's (ratio), and dlaunch's over the
    floor's (over_floor), where both sides ran."""
    if case["dlaunch"] and case["torchrun"]:
        case["ratio"] = case["torchrun"]["median"] / case["dlaunch"]["median"]
    if case["dlaunch"] and case.get("floor"):
        case["over_floor"] = (case["dlaunch"]["median"]
                              / case["floor"]["median"])


def fmt_case(case, key="median"):
    parts = []
    for tool in ("dlaunch", "torchrun", "floor"):
        if tool not in case:
            continue
        s = case.get(tool)
        parts.append(f"{tool} {s[key]:.4f}" if s else f"{tool} failed")
    if "ratio" in case:
        parts.append(f"ratio {case['ratio']:.1f}x")
    if "over_floor" in case:
        parts.append(f"dlaunch/floor {case['over_floor']:.2f}")
    if "loadavg" in case:
        parts.append("load {:.2f}-{:.2f}".format(*case["loadavg"]))
    return ", ".join(parts)


def restart_once(b, tool, n, r):
    """One restart run; returns seconds from rank 0's death to the last
    worker of the second attempt starting, from the workers' own stamps."""
    stamp = os.path.join(b.tmp, f"restart-{tool}-{n}-{r}.txt")
    worker = os.path.join(WORKERS, "restart_worker.sh")
    if tool == "dlaunch":
        cmd = [b.bin("dlaunch"), "--standalone", "--nproc-per-node", str(n),
               "--max-restarts", "1", "--no-python", worker, stamp]
    elif tool == "floor":
        # only the second attempt: "die", then the N execs
        cmd = [b.bin("floor_spawn"), "--restart", stamp, str(n), worker,
               stamp]
    else:
        cmd = b.torchrun() + ["--standalone", "--nproc_per_node", str(n),
                              "--max_restarts", "1", "--monitor_interval",
                              "0.1", "--no_python", worker, stamp]
    secs, rc = timed_run(cmd, b.logfile(f"restart-{tool}"), env=clean_env(),
                         timeout=180)
    lines = read_lines(stamp)
    die = [float(x[3]) for x in lines if x[0] == "die"]
    again = [float(x[3]) for x in lines if x[0] == "start" and x[1] == "1"]
    if rc != 0 or len(die) != 1 or len(again) != n:
        raise BenchError(f"{tool} restart n={n}: exit {rc}, {len(die)} "
                         f"deaths, {len(again)} of {n} workers restarted")
    return max(again) - die[0], cmd


def bench_restart(b):
    sizes = [1, 4, 16]
    reps = b.nreps(3, 7)
    out = {"unit": "seconds", "reps": reps, "cases": [], "commands": {}}
    for n in sizes:
        times = {"dlaunch": [], "torchrun": [], "floor": []}
        failures = []
        load0 = os.getloadavg()[0]
        for r in range(reps):
            for tool in rotate(["dlaunch", "torchrun", "floor"], r):
                try:
                    secs, cmd = restart_once(b, tool, n, r)
                    times[tool].append(secs)
                    out["commands"][tool] = " ".join(cmd)
                except BenchError as e:
                    failures.append(str(e))
        case = {"nproc": n, "dlaunch": summary_stats(times["dlaunch"]),
                "torchrun": summary_stats(times["torchrun"]),
                "floor": summary_stats(times["floor"]),
                "loadavg": [load0, os.getloadavg()[0]],
                "failures": failures}
        add_ratios(case)
        log(f"restart n={n}: {fmt_case(case)}")
        out["cases"].append(case)
    return out
