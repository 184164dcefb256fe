# SPDX-License-Identifier: Apache-2.0
"""benchlib.reform - rounds kept in place (reform), the training loss
across a node's loss (trainloss) and the in-place trainer
(reformtrain)."""
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

from . import common
from .common import (BenchError, RESULTS, ROOT, clean_env, kill_group, log,
                     port_open, read_lines, rotate, start_rdzv, summary_stats,
                     timed_run, wait_until)
from .nodeloss import HEARTBEAT_TIMEOUT_S, two_node_cmds


CONTROL_WORKER = os.path.join(ROOT, "tests", "e2e", "progs",
                              "control_worker.py")


def reform_once(b, mode, r):
    """Two agents (A, B) of one job on loopback, two workers each that
    speak the control channel (tests/e2e/progs/control_worker.py), or the
    same program as a plain worker; B's agent and workers are SIGKILLed.
    Returns seconds from the kill until A's workers are in the next round:
    their membership (in place) or their new processes' start (restart)."""
    d = tempfile.mkdtemp(prefix=f"reform-{mode}-{r}.", dir=b.tmp)
    server, port = start_rdzv(b, "reform-rdzv")
    procs = []
    try:
        env = clean_env(CW_DIR=d, CW_MODE="normal" if mode == "in_place"
                        else "plain")
        for label in ("A", "B"):
            cmd = [b.bin("dlaunch"), "--nnodes", "1:2", "--nproc-per-node",
                   "2", "--rdzv-endpoint", f"127.0.0.1:{port}",
                   "--rdzv-id", f"reform{r}", "--max-restarts", "3",
                   "--local-addr", "127.0.0.1", "--rdzv-conf",
                   "heartbeat_interval=0.2,heartbeat_timeout=1",
                   "--shutdown-timeout", "5", "--no-python", common.PY,
                   CONTROL_WORKER]
            logf = open(b.logfile(f"reform-{mode}-{r}-{label}"), "ab")
            procs.append(subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env, DLAUNCH_NODE_ID=label),
                start_new_session=True))
            logf.close()

        def logs(prefix):
            return [os.path.join(d, f) for f in os.listdir(d)
                    if f.startswith(prefix)]

        def ready():
            want = "welcome" if mode == "in_place" else "start"
            return all(any(x[0] == want for x in read_lines(f))
                       for f in logs("")) and len(logs("")) == 4
        if not wait_until(ready, 120, 0.02):
            raise BenchError(f"reform {mode}: the workers never all ran")
        victims = [int(read_lines(f)[0][1]) for f in logs("B.")]
        kill_ns = time.time_ns()
        kill_group(procs[1])
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        def back():
            t = []
            for f in logs("A."):
                for x in read_lines(f):
                    if mode == "in_place" and x[0] == "membership":
                        t.append(int(x[-1]))
                    elif mode == "restart" and x[0] == "start" \
                            and int(x[-1]) > kill_ns:
                        t.append(int(x[-1]))
            return max(t) if len(t) == 2 else None
        t = wait_until(back, 60, 0.005)
        if t is None:
            raise BenchError(f"reform {mode}: A's workers never reached "
                             "the next round")
        kept = len(logs("A.")) == 2
        return {"s": (t - kill_ns) / 1e9, "pids_kept": kept}
    finally:
        with open(os.path.join(d, "stop"), "w"):
            pass
        for p in procs:
            kill_group(p)
        kill_group(server)


def bench_reform(b):
    """Node loss to the survivor's workers in the next round: kept and
    re-formed in place (issue 20) against stopped and started again, the
    same worker program, the same heartbeat timeout (1 s), alternating."""
    reps = b.nreps(3, 7)
    out = {"unit": "seconds", "reps": reps, "heartbeat_timeout_s": 1,
           "runs": {"in_place": [], "restart": []}, "failures": []}
    for r in range(reps):
        for mode in rotate(["in_place", "restart"], r):
            try:
                res = reform_once(b, mode, r * 2 + (mode == "restart"))
                out["runs"][mode].append(res)
                log(f"reform {mode}: {res['s']:.3f} s")
            except BenchError as e:
                out["failures"].append(str(e))
                log(str(e))
    for mode in ("in_place", "restart"):
        out[mode] = summary_stats([x["s"] for x in out["runs"][mode]])
    return out


STEP_RE = re.compile(rb"step (\d+)/\d+ loss")


def trainloss_once(b, mode, r):
    """Two nodes (A, B) of one dlaunch-train job on loopback, two ranks
    each, a checkpoint every 50 steps; B's agent and workers are
    SIGKILLed while rank 0 trains. mode: in_place (dlaunch; the trainer
    speaks the control channel), restart (dlaunch; the trainer is made
    plain by unsetting DLAUNCH_CONTROL_FD, so the survivors are stopped and
    resume from the checkpoint) or torchrun (its c10d backend). Returns
    seconds from the kill to rank 0's first completed step after it, and
    the steps lost (done before the kill and done again after it)."""
    ck = tempfile.mkdtemp(prefix=f"trainloss-{mode}-{r}.", dir=b.tmp)
    train = [b.bin("dlaunch-train"), "--data", "synthetic:16384", "--model",
             "64-128-10", "--epochs", "100", "--global-batch", "64",
             "--log-every", "1", "--checkpoint-every", "50",
             "--checkpoint-dir", ck, "--timeout", "60s"]
    procs, lines = {}, {"A": [], "B": []}
    server = None
    try:
        extra = ["--rdzv-conf", f"heartbeat_timeout={HEARTBEAT_TIMEOUT_S}",
                 "--shutdown-timeout", "5"]
        # restart: the trainer made plain, so the survivors are stopped
        # and resume from the checkpoint
        prefix = ["env", "-u", "DLAUNCH_CONTROL_FD"] if mode == "restart" \
            else []
        cmds, server, port = two_node_cmds(
            b, "torchrun" if mode == "torchrun" else "dlaunch",
            f"trainloss{r}", 2, train, dlaunch_extra=extra,
            prog_prefix=prefix)

        def reader(label, pipe):
            for line in iter(pipe.readline, b""):
                m = STEP_RE.search(line)
                if m:
                    lines[label].append((time.time_ns(), int(m.group(1))))
        for label in ("A", "B"):
            p = subprocess.Popen(cmds[label], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=clean_env(),
                                 start_new_session=True)
            procs[label] = p
            threading.Thread(target=reader, args=(label, p.stdout),
                             daemon=True).start()
            if mode == "torchrun" and label == "A":
                if not wait_until(lambda: port_open(port), 60, 0.02):
                    raise BenchError("torchrun agent A did not open its "
                                     "c10d store")
        # past the first checkpoint, so a restart has one to resume from
        if not wait_until(lambda: any(s >= 120 for _, s in lines["A"])
                          or any(s >= 120 for _, s in lines["B"]), 180,
                          0.01):
            raise BenchError(f"trainloss {mode}: training never reached "
                             "step 120")
        keep = "A" if lines["A"] else "B"
        lost = "B" if keep == "A" else "A"
        victims = children_of(procs[lost].pid)
        workers = set(children_of(procs[keep].pid))
        kill_ns = time.time_ns()
        kill_group(procs[lost])
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # lines read just after the kill may have been printed before it:
        # training stops at the kill and starts again after a pause, so the
        # first line after a gap of over 0.3 s that ends after the kill is
        # the first step of the next round
        def first_after():
            ls = list(lines[keep])
            for i in range(1, len(ls)):
                if ls[i][0] > kill_ns and ls[i][0] - ls[i - 1][0] > 3e8:
                    return ls[i - 1][1], ls[i]
            return None
        got = wait_until(first_after, 150, 0.005)
        if got is None:
            raise BenchError(f"trainloss {mode}: rank 0 did not train "
                             "again within 150 s")
        before, (t, s) = got
        return {"s": (t - kill_ns) / 1e9, "last_step_before": before,
                "first_step_after": s, "steps_lost": max(0, before - s + 1),
                "survivor_workers_kept":
                    workers <= set(children_of(procs[keep].pid))}
    finally:
        for p in procs.values():
            kill_group(p)
        if server is not None:
            kill_group(server, signal.SIGTERM)


def children_of(pid):
    """The pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == pid:
            out.append(int(d))
    return out


def bench_trainloss(b):
    """Node loss to training again with dlaunch-train (2 nodes x 2 ranks,
    one node killed): re-formed in place vs stopped and restarted from the
    last checkpoint (every 50 steps) vs torchrun, alternating."""
    reps = b.nreps(1, 3)
    modes = ["in_place", "restart", "torchrun"]
    out = {"unit": "seconds", "reps": reps,
           "dlaunch_heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S,
           "checkpoint_every": 50,
           "runs": {m: [] for m in modes}, "failures": []}
    for r in range(reps):
        for mode in rotate(modes, r):
            try:
                res = trainloss_once(b, mode, r)
                out["runs"][mode].append(res)
                log(f"trainloss {mode}: {res['s']:.3f} s, "
                    f"{res['steps_lost']} step(s) lost, workers kept: "
                    f"{res['survivor_workers_kept']}")
            except BenchError as e:
                out["failures"].append(str(e))
                log(str(e))
    for m in modes:
        out[m] = {"s": summary_stats([x["s"] for x in out["runs"][m]]),
                  "steps_lost": summary_stats(
                      [x["steps_lost"] for x in out["runs"][m]])}
    return out


def bench_reformtrain(b):
    """The re-form by itself, on dlaunch-train's side: bench/inplace_train.py
    (3 ranks, one killed, the agent played over socket pairs, so neither
    side includes failure detection or the rendezvous round): in place vs
    every process stopped and restarted from the checkpoint."""
    reps = b.nreps(3, 10)
    cmd = [common.PY, os.path.join(ROOT, "bench", "inplace_train.py"),
           "--build", b.build, "--reps", str(reps)]
    secs, rc = timed_run(cmd, b.logfile("reformtrain"), env=clean_env(),
                         timeout=900)
    path = os.path.join(RESULTS, "inplace_train.json")
    if rc != 0 or not os.path.exists(path):
        raise BenchError(f"inplace_train.py failed ({rc}); see "
                         f"{b.logfile('reformtrain')}")
    with open(path) as f:
        out = json.load(f)
    out["reps"] = reps
    return out
