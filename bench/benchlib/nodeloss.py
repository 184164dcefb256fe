# SPDX-License-Identifier: Apache-2.0
"""benchlib.nodeloss - a node lost: two nodes, one killed, the time until
the survivors' workers run again (dlaunch and torchrun)."""
import os
import signal
import subprocess
import time

from . import common
from .common import (BenchError, WORKERS, clean_env, free_port, kill_group,
                     log, port_open, read_lines, start_rdzv, summary_stats,
                     wait_until)


HEARTBEAT_TIMEOUT_S = 5  # dlaunch's default (DESIGN.md section 2)
SHORT_HEARTBEAT_TIMEOUT_S = 2  # a second setting: the time follows it


def two_node_cmds(b, launcher, name, nproc, prog, dlaunch_extra=(),
                  prog_prefix=()):
    """The commands of two nodes, A and B, of one job on loopback running
    prog (a command, --no-python) with nproc workers each: under dlaunch
    against a dlaunch-rdzv started here (dlaunch_extra: more dlaunch
    options; prog_prefix: a command put before prog, such as env -u ...),
    or under torchrun's c10d backend with A hosting the store (killing the
    store's host ends torchrun's job outright, so B is the node to lose).
    Returns (cmds, server or None, port)."""
    if launcher == "torchrun":
        port = free_port()
        base = b.torchrun() + [
            "--nnodes", "1:2", "--nproc_per_node", str(nproc),
            "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"127.0.0.1:{port}",
            "--rdzv_id", name, "--max_restarts", "3",
            "--monitor_interval", "0.1"]
        return ({"A": base + ["--rdzv_conf", "is_host=1", "--no_python"]
                 + list(prog),
                 "B": base + ["--rdzv_conf", "is_host=0", "--no_python"]
                 + list(prog)}, None, port)
    server, port = start_rdzv(b, f"{name}-rdzv")
    base = [b.bin("dlaunch"), "--nnodes", "1:2", "--nproc-per-node",
            str(nproc), "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", name, "--max-restarts", "3",
            "--local-addr", "127.0.0.1"] + list(dlaunch_extra)
    base += ["--no-python"] + list(prog_prefix) + list(prog)
    return {"A": base, "B": base}, server, port


def nodeloss_once(b, tool, r, hb_timeout_s=None):
    """Two agents (A, B) of one job on loopback, one gloo worker each in
    an all-reduce loop; B's whole process group (agent and worker) is
    SIGKILLed; returns seconds from the kill until A's worker of the next
    round starts and until it has done its first all-reduce."""
    stamp = os.path.join(b.tmp, f"nodeloss-{tool}-{r}.txt")
    worker = [common.PY, "-u", os.path.join(WORKERS, "gloo_loop.py"), stamp]
    procs = []
    server = None
    try:
        extra = []
        if hb_timeout_s is not None:
            extra = ["--rdzv-conf", f"heartbeat_timeout={hb_timeout_s}"]
        cmds, server, port = two_node_cmds(b, tool, f"nodeloss{r}", 1,
                                           worker, dlaunch_extra=extra)
        cmds = {k: v + [k] for k, v in cmds.items()}
        for label in ("A", "B"):
            logf = open(b.logfile(f"nodeloss-{tool}-{label}"), "ab")
            procs.append(subprocess.Popen(
                cmds[label], stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=clean_env(),
                start_new_session=True))
            logf.close()
            if tool == "torchrun" and label == "A":
                if not wait_until(lambda: port_open(port), 60, 0.02):
                    raise BenchError("torchrun agent A did not open its "
                                     "c10d store")

        def both_ready():
            ls = read_lines(stamp)
            return ({x[1] for x in ls if x[0] == "ready"} == {"A", "B"})
        if not wait_until(both_ready, 180, 0.05):
            raise BenchError(f"{tool} nodeloss: workers never both ran "
                             f"(see {b.logfile('nodeloss-' + tool + '-A')})")
        kill_ns = time.time_ns()
        kill_group(procs[1])

        def after(what):
            def f():
                ls = read_lines(stamp)
                t = [int(x[4]) for x in ls
                     if x[0] == what and x[1] == "A" and int(x[4]) > kill_ns]
                return min(t) if t else None
            return f
        cap = 150
        start = wait_until(after("start"), cap, 0.01)
        ready = wait_until(after("ready"), cap, 0.01) if start else None
        res = {"start_s": (start - kill_ns) / 1e9 if start else None,
               "ready_s": (ready - kill_ns) / 1e9 if ready else None,
               "cap_s": cap, "commands": {k: " ".join(v)
                                           for k, v in cmds.items()}}
        if start is None:
            res["note"] = f"survivor's worker not restarted within {cap} s"
        return res
    finally:
        for p in procs:
            kill_group(p)
        if server is not None:
            kill_group(server, signal.SIGTERM)


def bench_nodeloss(b):
    reps = b.nreps(1, 3)
    out = {"unit": "seconds", "reps": reps,
           "dlaunch_heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
           "torchrun_note": "c10d backend, keep-alive 5 s x 3, last call "
                            "30 s (torch 1.13 defaults)",
           "dlaunch_short_heartbeat_timeout_s": SHORT_HEARTBEAT_TIMEOUT_S,
           "runs": {"dlaunch": [], "torchrun": [], "dlaunch_short": []},
           "failures": []}
    for r in range(reps):
        order = ["dlaunch", "torchrun", "dlaunch_short"] if r % 2 == 0 \
            else ["dlaunch_short", "torchrun", "dlaunch"]
        for tool in order:
            try:
                if tool == "dlaunch_short":
                    res = nodeloss_once(b, "dlaunch", r + 100,
                                        SHORT_HEARTBEAT_TIMEOUT_S)
                else:
                    res = nodeloss_once(b, tool, r)
                out["runs"][tool].append(res)
                log(f"nodeloss {tool}: start {res['start_s']} s, "
                    f"ready {res['ready_s']} s")
            except BenchError as e:
                out["failures"].append(str(e))
                log(str(e))
    for tool in ("dlaunch", "torchrun", "dlaunch_short"):
        for key in ("start_s", "ready_s"):
            vals = [x[key] for x in out["runs"][tool] if x[key] is not None]
            out.setdefault(tool, {})[key] = summary_stats(vals)
            out[tool][key + "_missing"] = len(out["runs"][tool]) - len(vals)
    return out
