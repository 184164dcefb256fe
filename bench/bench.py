#!/usr/bin/python3
"""bench.py - dlaunch's benchmarks against the tools users would otherwise
use: torchrun, PyTorch's gloo backend and PyTorch DDP (DESIGN.md section 6).

    /usr/bin/python3 bench/bench.py [--build build] [--quick] [--reps N] WHAT

WHAT is one of launch, restart, nodeloss, rdzv, dist, train, ckpt, all,
report. Each benchmark writes bench/results/WHAT.json; `report` (run at the
end of `all`) gathers them into bench/results/results.json and summary.md,
draws the PNG plots with gnuplot and prints the table of ratios.

Rules the harness keeps: both tools run the same workload on the same
machine; runs alternate between the tools (A B, B A, ...) so drift in the
machine's load hits both alike; every figure is a median with its minimum
and maximum over the repetitions; a run that fails is recorded as failed,
never dropped silently. Only the Python standard library is used here; the
PyTorch side runs under /usr/bin/python3 (Debian's python3-torch).
"""
import argparse
import datetime
import json
import os
import platform
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
PY = "/usr/bin/python3"  # the interpreter that has torch
TORCHRUN = [PY, os.path.join(ROOT, "tests", "torchrun", "torchrun")]
WORKERS = os.path.join(ROOT, "bench", "workers")


class BenchError(Exception):
    """A benchmark could not run (missing binary, failed run)."""


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def summary_stats(values):
    """Median, min, max and count of a list of numbers (None if empty)."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values),
            "max": max(values), "n": len(values),
            "values": [round(v, 6) for v in values]}


def free_port():
    """A TCP port free on 127.0.0.1 now (for tools that cannot report the
    port they bound); the kernel does not hand it out again soon."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra):
    """The caller's environment minus anything a launcher would inherit as
    a job setting, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "TORCHELASTIC_", "DLAUNCH_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                         "MASTER_PORT", "LOCAL_WORLD_SIZE", "GROUP_RANK")}
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def raise_nofile():
    """Raise the open-file limit to the hard maximum (children inherit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in (1 << 20, 65536, hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
            return want
        except (ValueError, OSError):
            continue
    return soft


def timed_run(cmd, logpath, env=None, timeout=300, cwd=None):
    """Run cmd to completion; returns (seconds, exit status). Output goes
    to logpath. A run past timeout is killed (its process group) and
    reported with status 'timeout'."""
    with open(logpath, "ab") as out:
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                             start_new_session=True)
        # p.wait(timeout=...) polls with growing sleeps (0.5 ms doubling to
        # 50 ms), which rounds a 10 ms run up to 16 or 32 ms; a blocking
        # wait is exact, and a timer thread enforces the timeout
        expired = threading.Event()

        def expire():
            expired.set()
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            rc = p.wait()
        finally:
            timer.cancel()
        secs = time.monotonic() - t0
        return secs, "timeout" if expired.is_set() else rc


def kill_group(p, sig=signal.SIGKILL):
    """Signal p's process group (it leads one: start_new_session) and reap
    p."""
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def wait_until(cond, timeout, interval=0.005):
    """Poll cond() until it returns a true value or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    return None


def read_lines(path):
    try:
        with open(path) as f:
            return [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        return []


class Bench:
    """Shared state: where the binaries are, how hard to run, a scratch
    directory for logs."""

    def __init__(self, args):
        self.build = os.path.abspath(os.path.join(ROOT, args.build))
        self.bindir = os.path.join(self.build, "bin")
        self.benchdir = os.path.join(self.build, "bench")
        self.quick = args.quick
        self.reps = args.reps
        self.ckpt_model = args.ckpt_model
        self.tmp = tempfile.mkdtemp(prefix="dlaunch-bench.")
        log(f"logs in {self.tmp}")

    def bin(self, name):
        for d in (self.bindir, self.benchdir):
            p = os.path.join(d, name)
            if os.access(p, os.X_OK):
                return p
        raise BenchError(f"{name} is not built in {self.build} "
                         f"(make BUILD={os.path.relpath(self.build, ROOT)} "
                         "all)")

    def torchrun(self):
        if not os.path.exists(TORCHRUN[1]):
            raise BenchError("tests/torchrun/torchrun is missing")
        return list(TORCHRUN)

    def nreps(self, quick, full):
        if self.reps:
            return self.reps
        return quick if self.quick else full

    def logfile(self, name):
        return os.path.join(self.tmp, name + ".log")


# ---------------------------------------------------------------- launch

def bench_launch(b):
    """Wall time of launching N trivial workers (/bin/true) and waiting for
    them: dlaunch --standalone vs torchrun --standalone, alternating."""
    dl = b.bin("dlaunch")
    tr = b.torchrun()
    sizes = [1, 4] if b.quick else [1, 4, 16]
    reps = b.nreps(3, 7)
    out = {"unit": "seconds", "reps": reps, "cases": []}
    for n in sizes:
        cmds = {
            "dlaunch": [dl, "--standalone", "--nproc-per-node", str(n),
                        "--no-python", "/bin/true"],
            "torchrun": tr + ["--standalone", "--nproc_per_node", str(n),
                              "--monitor_interval", "0.1", "--no_python",
                              "/bin/true"],
        }
        times = {"dlaunch": [], "torchrun": []}
        failures = []
        for r in range(reps):
            order = ["dlaunch", "torchrun"] if r % 2 == 0 else \
                ["torchrun", "dlaunch"]
            for tool in order:
                secs, rc = timed_run(cmds[tool], b.logfile(f"launch-{tool}"),
                                     env=clean_env(), timeout=120)
                if rc != 0:
                    failures.append(f"{tool} n={n} rep {r}: exit {rc}")
                    continue
                times[tool].append(secs)
        case = {"nproc": n, "dlaunch": summary_stats(times["dlaunch"]),
                "torchrun": summary_stats(times["torchrun"]),
                "failures": failures}
        if case["dlaunch"] and case["torchrun"]:
            case["ratio"] = (case["torchrun"]["median"]
                             / case["dlaunch"]["median"])
        log(f"launch n={n}: {fmt_case(case)}")
        out["cases"].append(case)
        out["commands"] = {k: " ".join(v) for k, v in cmds.items()}
    return out


def fmt_case(case, key="median"):
    parts = []
    for tool in ("dlaunch", "torchrun"):
        s = case.get(tool)
        parts.append(f"{tool} {s[key]:.4f}" if s else f"{tool} failed")
    if "ratio" in case:
        parts.append(f"ratio {case['ratio']:.1f}x")
    return ", ".join(parts)


# ---------------------------------------------------------------- restart

def restart_once(b, tool, n, r):
    """One restart run; returns seconds from rank 0's death to the last
    worker of the second attempt starting, from the workers' own stamps."""
    stamp = os.path.join(b.tmp, f"restart-{tool}-{n}-{r}.txt")
    worker = os.path.join(WORKERS, "restart_worker.sh")
    if tool == "dlaunch":
        cmd = [b.bin("dlaunch"), "--standalone", "--nproc-per-node", str(n),
               "--max-restarts", "1", "--no-python", worker, stamp]
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
    sizes = [4] if b.quick else [1, 4]
    reps = b.nreps(2, 5)
    out = {"unit": "seconds", "reps": reps, "cases": [], "commands": {}}
    for n in sizes:
        times = {"dlaunch": [], "torchrun": []}
        failures = []
        for r in range(reps):
            order = ["dlaunch", "torchrun"] if r % 2 == 0 else \
                ["torchrun", "dlaunch"]
            for tool in order:
                try:
                    secs, cmd = restart_once(b, tool, n, r)
                    times[tool].append(secs)
                    out["commands"][tool] = " ".join(cmd)
                except BenchError as e:
                    failures.append(str(e))
        case = {"nproc": n, "dlaunch": summary_stats(times["dlaunch"]),
                "torchrun": summary_stats(times["torchrun"]),
                "failures": failures}
        if case["dlaunch"] and case["torchrun"]:
            case["ratio"] = (case["torchrun"]["median"]
                             / case["dlaunch"]["median"])
        log(f"restart n={n}: {fmt_case(case)}")
        out["cases"].append(case)
    return out


# ---------------------------------------------------------------- node loss

def healthz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz",
                                    timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def listening_port(logpath):
    """The port in dlaunch-rdzv's "event=listening addr=HOST:PORT" line."""
    try:
        with open(logpath) as f:
            for line in f:
                if "event=listening" in line:
                    for word in line.split():
                        if word.startswith("addr="):
                            return int(word.rsplit(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def start_rdzv(b, logname, cpu=None):
    """Start dlaunch-rdzv on 127.0.0.1, port 0, and read back the port it
    bound from its log; returns (Popen, port)."""
    logpath = os.path.join(b.tmp, f"{logname}-{time.monotonic_ns()}.log")
    cmd = [b.bin("dlaunch-rdzv"), "--listen", "127.0.0.1:0"]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    logf = open(logpath, "ab")
    p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    logf.close()
    port = wait_until(lambda: p.poll() is None and listening_port(logpath),
                      20, 0.01)
    if not port or not wait_until(lambda: healthz(port), 20, 0.02):
        kill_group(p)
        raise BenchError(f"dlaunch-rdzv did not come up (see {logpath})")
    return p, port


HEARTBEAT_TIMEOUT_S = 5  # dlaunch's default (DESIGN.md section 2)
SHORT_HEARTBEAT_TIMEOUT_S = 2  # a second setting: the time follows it


def nodeloss_once(b, tool, r, hb_timeout_s=None):
    """Two agents (A, B) of one job on loopback, one gloo worker each in
    an all-reduce loop; B's whole process group (agent and worker) is
    SIGKILLed; returns seconds from the kill until A's worker of the next
    round starts and until it has done its first all-reduce."""
    stamp = os.path.join(b.tmp, f"nodeloss-{tool}-{r}.txt")
    worker = [PY, "-u", os.path.join(WORKERS, "gloo_loop.py"), stamp]
    procs = []
    server = None
    try:
        if tool == "dlaunch":
            server, port = start_rdzv(b, "nodeloss-rdzv")
            base = [b.bin("dlaunch"), "--nnodes", "1:2", "--nproc-per-node",
                    "1", "--rdzv-endpoint", f"127.0.0.1:{port}",
                    "--rdzv-id", f"nodeloss{r}", "--max-restarts", "3",
                    "--local-addr", "127.0.0.1"]
            if hb_timeout_s is not None:
                base += ["--rdzv-conf", f"heartbeat_timeout={hb_timeout_s}"]
            base.append("--no-python")
            cmds = {"A": base + worker + ["A"], "B": base + worker + ["B"]}
        else:
            port = free_port()
            base = b.torchrun() + [
                "--nnodes", "1:2", "--nproc_per_node", "1",
                "--rdzv_backend", "c10d",
                "--rdzv_endpoint", f"127.0.0.1:{port}",
                "--rdzv_id", f"nodeloss{r}", "--max_restarts", "3",
                "--monitor_interval", "0.1"]
            # A hosts the c10d store, B is the node that is lost (killing
            # the store's host would end torchrun's job outright).
            cmds = {"A": base + ["--rdzv_conf", "is_host=1", "--no_python"]
                    + worker + ["A"],
                    "B": base + ["--rdzv_conf", "is_host=0", "--no_python"]
                    + worker + ["B"]}
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


# ---------------------------------------------------------------- rdzv

def vm_field(pid, field):
    """A VmXXX field of /proc/PID/status in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return None


def bench_rdzv(b):
    """N simulated nodes join one job (min = max = N) on a fresh
    dlaunch-rdzv pinned to CPU 0; the load generator runs on CPU 1."""
    load = b.bin("rdzv_load")
    b.bin("dlaunch-rdzv")
    limit = raise_nofile()
    sizes = [256, 1024, 4096] if b.quick else [256, 1024, 4096, 16384]
    reps = b.nreps(1, 3)
    hb_seconds = 2 if b.quick else 5
    ncpu = os.cpu_count() or 1
    out = {"nofile_limit": limit, "reps": reps, "hb_seconds": hb_seconds,
           "cases": [], "failures": []}
    join_timeout = 30 if b.quick else 60
    out["join_timeout_s"] = join_timeout
    stop_reason = None
    for n in sizes:
        if stop_reason:
            out["failures"].append(f"{n} nodes: not run: {stop_reason}")
            continue
        if n + 64 > limit:
            out["failures"].append(f"{n} nodes: open-file limit {limit}")
            continue
        runs = []
        for r in range(reps):
            server, port = start_rdzv(b, "rdzv-server",
                                      cpu=0 if ncpu > 1 else None)
            try:
                rss0 = vm_field(server.pid, "VmRSS") or 0
                cmd = [load, "--endpoint", f"127.0.0.1:{port}", "--nodes",
                       str(n), "--job", f"scale{n}", "--hb-seconds",
                       str(hb_seconds), "--join-timeout", str(join_timeout)]
                if ncpu > 1:
                    cmd = ["taskset", "-c", "1"] + cmd
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=join_timeout + hb_seconds + 180)
                hwm = vm_field(server.pid, "VmHWM")
                if p.returncode != 0:
                    out["failures"].append(
                        f"{n} nodes: rdzv_load exit {p.returncode}: "
                        + p.stderr.strip()[-500:])
                    log(out["failures"][-1])
                    stop_reason = f"{n} nodes failed"
                    break
                res = json.loads(p.stdout)
                res["server_rss_start_bytes"] = rss0
                res["server_hwm_bytes"] = hwm
                runs.append(res)
                log(f"rdzv n={n}: join {res['join_ms']:.1f} ms, "
                    f"{res['heartbeats_per_s']:.0f} heartbeats/s, "
                    f"VmHWM {hwm / 2**20:.1f} MiB")
                if res["join_ms"] > join_timeout * 1000 / 4:
                    # a size this slow says what a repetition would;
                    # the next size would run into the timeout
                    stop_reason = (f"{n} nodes took "
                                   f"{res['join_ms'] / 1000:.1f} s to join")
                    break
            finally:
                kill_group(server, signal.SIGTERM)
        if runs:
            out["cases"].append({
                "nodes": n,
                "join_ms": summary_stats([x["join_ms"] for x in runs]),
                "heartbeats_per_s": summary_stats(
                    [x["heartbeats_per_s"] for x in runs]),
                "server_hwm_bytes": max(x["server_hwm_bytes"] or 0
                                        for x in runs),
                "runs": runs})
    out["command"] = ("taskset -c 0 dlaunch-rdzv --listen 127.0.0.1:PORT; "
                      "taskset -c 1 rdzv_load --endpoint 127.0.0.1:PORT "
                      f"--nodes N --hb-seconds {hb_seconds}")
    return out


# ---------------------------------------------------------------- dist

def run_ranks(cmds_for_rank, world, logname, timeout):
    """Start world processes (rank r runs cmds_for_rank(r)) with the
    torchrun environment on a free port; returns rank 0's stdout."""
    port = free_port()
    procs = []
    outs = []
    errlog = open(logname, "ab")
    try:
        for r in range(world):
            env = clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                            RANK=r, WORLD_SIZE=world, LOCAL_RANK=r,
                            LOCAL_WORLD_SIZE=world)
            f = tempfile.TemporaryFile()
            outs.append(f)
            procs.append(subprocess.Popen(
                cmds_for_rank(r), stdout=f, stderr=errlog,
                stdin=subprocess.DEVNULL, env=env, start_new_session=True))
        deadline = time.monotonic() + timeout
        for p in procs:
            left = max(1, deadline - time.monotonic())
            try:
                rc = p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                raise BenchError(f"{cmds_for_rank(0)[0]}: timed out after "
                                 f"{timeout} s")
            if rc != 0:
                raise BenchError(f"{' '.join(cmds_for_rank(0))}: exit {rc} "
                                 f"(see {logname})")
        outs[0].seek(0)
        return outs[0].read().decode()
    finally:
        for p in procs:
            if p.poll() is None:
                kill_group(p)
        for f in outs:
            f.close()
        errlog.close()


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
    gloo = [PY, os.path.join(ROOT, "bench", "gloo_bench.py")]
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


# ---------------------------------------------------------------- train, ckpt

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
    ddp = [PY, os.path.join(ROOT, "bench", "ddp_mlp.py"), "--epochs",
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
            "torch": [PY, os.path.join(ROOT, "bench", "torch_ckpt.py"),
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


# ---------------------------------------------------------------- gpu

def gpu_count():
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for x in p.stdout.splitlines() if x.startswith("GPU "))


def torch_has_cuda():
    p = subprocess.run([PY, "-c", "import torch, sys; "
                        "sys.exit(0 if torch.cuda.is_available() else 1)"],
                       capture_output=True, timeout=120)
    return p.returncode == 0


def bench_gpu(b):
    """On a machine with NVIDIA GPUs (bench/gpu_bench.sh; not part of
    `all`): NCCL communicator creation at world size 1, dlaunch-train vs
    PyTorch DDP samples/s on CUDA, and the wall time of a one-step job
    from the launcher's start (dlaunch vs torchrun)."""
    ngpu = gpu_count()
    if ngpu == 0:
        raise BenchError("no NVIDIA GPU visible (nvidia-smi -L)")
    trainer = b.bin("dlaunch-train")
    dist_bench = b.bin("dist_bench")
    has_torch = torch_has_cuda()
    reps = b.nreps(2, 5)
    epochs = 2 if b.quick else 10
    out = {"gpus": ngpu, "torch_cuda": has_torch, "python": PY,
           "failures": []}
    if not has_torch:
        out["failures"].append(f"{PY} has no CUDA-enabled torch: the "
                               "PyTorch side is not measured (set "
                               "--python to one that has)")
    init = {"dlaunch": [], "torch": []}
    torch_init = [PY, "-c", (
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
    ddp = [PY, os.path.join(ROOT, "bench", "ddp_mlp.py"), "--device",
           "cuda", "--epochs", str(epochs)]
    for r in range(b.nreps(1, 2)):
        for tool in ("dlaunch", "ddp"):
            if tool == "ddp" and not has_torch:
                continue
            cmd = ([trainer, "--device", "cuda", "--epochs", str(epochs)]
                   if tool == "dlaunch" else ddp)
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
                        "--max-steps", "1"],
            "torchrun": b.torchrun() + [
             "--standalone", "--nproc_per_node", "1",
             "--monitor_interval", "0.1", "--no_python", PY,
             os.path.join(ROOT, "bench", "ddp_mlp.py"), "--device", "cuda",
             "--max-steps", "1"]}
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
        rows.append(["gpu", f"training samples/s, {ngpu} GPU(s)",
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


# ---------------------------------------------------------------- report

GPU_BENCHES = {"gpu": bench_gpu}
BENCHES = {"launch": bench_launch, "restart": bench_restart,
           "nodeloss": bench_nodeloss, "rdzv": bench_rdzv,
           "dist": bench_dist, "train": bench_train, "ckpt": bench_ckpt}


def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short",
                                 "HEAD"], capture_output=True, text=True,
                                check=False).stdout.strip()
    except OSError:
        commit = ""
    return {"date": datetime.datetime.now(datetime.timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host_cpus": os.cpu_count(), "cpu": cpu,
            "kernel": platform.release(), "commit": commit,
            "loadavg_at_start": os.getloadavg()[0]}


def save(name, data):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".json")
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")


def load(name):
    try:
        with open(os.path.join(RESULTS, name + ".json")) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def run_one(b, name):
    meta = machine_info()
    meta["quick"] = b.quick
    log(f"{name}: running ({'quick' if b.quick else 'full'})")
    try:
        data = {**BENCHES, **GPU_BENCHES}[name](b)
    except BenchError as e:
        log(f"{name}: not run: {e}")
        data = {"error": str(e)}
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        # a harness bug or a broken tool must not lose the other results
        import traceback
        traceback.print_exc()
        log(f"{name}: failed: {type(e).__name__}: {e}")
        data = {"error": f"{type(e).__name__}: {e}"}
    data["meta"] = meta
    save(name, data)
    return data


def fmt_s(x):
    if x is None:
        return "-"
    if x < 0.01:
        return f"{x * 1000:.2f} ms"
    if x < 1:
        return f"{x * 1000:.0f} ms"
    return f"{x:.2f} s"


def plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary_rows():
    """(benchmark, case, dlaunch, reference, ratio, goal, met) rows from
    the saved results."""
    rows = []
    d = load("launch")
    if d and "cases" in d:
        for c in d["cases"]:
            dl, tr = c.get("dlaunch"), c.get("torchrun")
            ratio = c.get("ratio")
            rows.append(("launch", plural(c["nproc"], "worker"),
                         fmt_s(dl["median"]) if dl else "failed",
                         "torchrun " + (fmt_s(tr["median"]) if tr
                                        else "failed"),
                         ratio, ">= 50x",
                         ratio is not None and ratio >= 50))
    elif d:
        rows.append(("launch", "-", "not run", d.get("error", ""), None,
                     ">= 50x", False))
    d = load("restart")
    if d and "cases" in d:
        for c in d["cases"]:
            dl, tr = c.get("dlaunch"), c.get("torchrun")
            ratio = c.get("ratio")
            rows.append(("restart", plural(c["nproc"], "worker"),
                         fmt_s(dl["median"]) if dl else "failed",
                         "torchrun " + (fmt_s(tr["median"]) if tr
                                        else "failed"),
                         ratio, ">= 10x",
                         ratio is not None and ratio >= 10))
    elif d:
        rows.append(("restart", "-", "not run", d.get("error", ""), None,
                     ">= 10x", False))
    d = load("nodeloss")
    if d and "dlaunch" in d:
        for key, what in (("start_s", "survivor restarted"),
                          ("ready_s", "survivor's first all-reduce")):
            dl = d["dlaunch"].get(key)
            tr = d["torchrun"].get(key)
            ratio = (tr["median"] / dl["median"]) if dl and tr else None
            trs = ("torchrun " + fmt_s(tr["median"])) if tr else \
                "torchrun: none within the cap"
            if d["torchrun"].get(key + "_missing"):
                trs += f" ({d['torchrun'][key + '_missing']} runs never)"
            timeout = d["dlaunch_heartbeat_timeout_s"]
            judged = key == "start_s"  # ready_s adds the worker's torch import
            rows.append(("node loss", f"{what} (heartbeat timeout "
                         f"{timeout} s)",
                         fmt_s(dl["median"]) if dl else "failed", trs, ratio,
                         "<= heartbeat timeout + 1 s" if judged else "",
                         (dl is not None and dl["median"] <= timeout + 1)
                         if judged else None))
        short = d.get("dlaunch_short", {}).get("start_s")
        if short:
            timeout = d["dlaunch_short_heartbeat_timeout_s"]
            rows.append(("node loss", f"survivor restarted (heartbeat "
                         f"timeout {timeout} s)", fmt_s(short["median"]), "",
                         None, "<= heartbeat timeout + 1 s",
                         short["median"] <= timeout + 1))
    elif d:
        rows.append(("node loss", "-", "not run", d.get("error", ""), None,
                     "", False))
    d = load("rdzv")
    if d and "cases" in d:
        for c in d["cases"]:
            j = c["join_ms"]["median"]
            goal = "< 1 s" if c["nodes"] == 4096 else ""
            rows.append(("rdzv join", f"{c['nodes']} nodes",
                         fmt_s(j / 1000),
                         f"server VmHWM {c['server_hwm_bytes'] / 2**20:.1f}"
                         f" MiB; {c['heartbeats_per_s']['median']:,.0f} "
                         "heartbeats/s", None, goal,
                         j < 1000 if c["nodes"] == 4096 else None))
        if d["cases"]:
            # the goal is judged on the largest job that formed, not on
            # the smallest (lookups grow with the job)
            big = max(d["cases"], key=lambda c: c["nodes"])
            hb = big["heartbeats_per_s"]["median"]
            rows.append(("rdzv heartbeats", f"one core, job of "
                         f"{big['nodes']} nodes", f"{hb:,.0f}/s", "", None,
                         ">= 30,000/s", hb >= 30000))
        for f in d.get("failures", []):
            # "N nodes: why" (bench_rdzv's wording)
            n, _, why = f.partition(" nodes: ")
            skipped = why.startswith("not run")
            if "within" in why:
                why = "not every node assigned " + why[why.index("within"):]
            rows.append(("rdzv join", f"{n} nodes",
                         "not run" if skipped else "failed", why[:90], None,
                         "< 1 s" if n == "4096" else "",
                         None if skipped and n != "4096" else False))
    elif d:
        rows.append(("rdzv", "-", "not run", d.get("error", ""), None, "",
                     False))
    d = load("dist")
    if d and "cases" in d:
        for world in d["worlds"]:
            cs = [c for c in d["cases"]
                  if c["world"] == world and "ratio" in c]
            if not cs:
                rows.append(("all-reduce", f"{world} ranks", "failed", "",
                             None, "> 1x at every size", False))
                continue
            small, large = cs[0], cs[-1]
            worst = min(cs, key=lambda c: c["ratio"])
            rows.append(("all-reduce", f"{world} ranks, {small['bytes']} B",
                         f"{small['dlaunch']['latency_us']:.1f} us",
                         f"gloo {small['gloo']['latency_us']:.1f} us",
                         small["ratio"], "> 1x", small["ratio"] > 1))
            rows.append(("all-reduce", f"{world} ranks, "
                         f"{large['bytes'] >> 20} MiB",
                         f"{large['dlaunch']['busbw_gbps']:.2f} GB/s",
                         f"gloo {large['gloo']['busbw_gbps']:.2f} GB/s",
                         large["ratio"], "> 1x", large["ratio"] > 1))
            rows.append(("all-reduce", f"{world} ranks, worst size "
                         f"({worst['bytes']} B)", "", "", worst["ratio"],
                         "> 1x at every size", worst["ratio"] > 1))
    elif d:
        rows.append(("all-reduce", "-", "not run", d.get("error", ""), None,
                     "> 1x", False))
    for name, label in (("train", "training"), ("ckpt", "checkpoint"),
                        ("gpu", "gpu")):
        d = load(name)
        if d and "rows" in d:
            rows.extend(tuple(r) for r in d["rows"])
        elif d:
            rows.append((label, "-", "not run", d.get("error", ""), None, "",
                         None if name == "gpu" else False))
    return rows


def table_markdown(rows):
    out = ["| benchmark | case | dlaunch | reference | ratio | goal | met |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for bench, case, dl, ref, ratio, goal, met in rows:
        r = f"{ratio:.1f}x" if isinstance(ratio, (int, float)) else "-"
        m = {True: "yes", False: "**no**", None: ""}[met]
        out.append(f"| {bench} | {case} | {dl} | {ref} | {r} | {goal} | "
                   f"{m} |")
    return "\n".join(out) + "\n"


def gnuplot(script):
    try:
        subprocess.run(["gnuplot"], input=script, text=True, check=True,
                       capture_output=True, cwd=RESULTS)
    except (OSError, subprocess.CalledProcessError) as e:
        log(f"gnuplot failed: {getattr(e, 'stderr', e)}")


def plots():
    """PNG plots of what the results hold (gnuplot, png terminal)."""
    made = []
    term = "set terminal png size 800,500\n"
    d = load("launch")
    if d and d.get("cases"):
        with open(os.path.join(RESULTS, "launch.dat"), "w") as f:
            for c in d["cases"]:
                dl = c["dlaunch"]["median"] if c.get("dlaunch") else 0
                tr = c["torchrun"]["median"] if c.get("torchrun") else 0
                f.write(f"{c['nproc']} {dl} {tr}\n")
        gnuplot(term + """set output 'launch.png'
set title 'launch N trivial workers (median wall time)'
set style data histograms
set style fill solid
set logscale y
set ylabel 'seconds (log)'
set xlabel 'workers'
set key outside bottom center horizontal
plot 'launch.dat' using 2:xtic(1) title 'dlaunch', '' using 3 title 'torchrun'
""")
        made.append("launch.png")
    d = load("restart")
    if d and d.get("cases"):
        with open(os.path.join(RESULTS, "restart.dat"), "w") as f:
            for c in d["cases"]:
                dl = c["dlaunch"]["median"] if c.get("dlaunch") else 0
                tr = c["torchrun"]["median"] if c.get("torchrun") else 0
                f.write(f"{c['nproc']} {dl} {tr}\n")
        gnuplot(term + """set output 'restart.png'
set title 'worker death to every worker of the next attempt running (median)'
set style data histograms
set style fill solid
set logscale y
set ylabel 'seconds (log)'
set xlabel 'workers'
set key outside bottom center horizontal
plot 'restart.dat' using 2:xtic(1) title 'dlaunch', '' using 3 title 'torchrun'
""")
        made.append("restart.png")
    d = load("nodeloss")
    if d and d.get("dlaunch"):
        with open(os.path.join(RESULTS, "nodeloss.dat"), "w") as f:
            for key, label in (("start_s", "restarted"),
                               ("ready_s", "first-all-reduce")):
                dl = d["dlaunch"].get(key)
                tr = d["torchrun"].get(key)
                f.write(f"{label} {dl['median'] if dl else 0} "
                        f"{tr['median'] if tr else 0}\n")
        gnuplot(term + f"""set output 'nodeloss.png'
set title 'node SIGKILLed: until the survivor runs again (median)'
set style data histograms
set style fill solid
set ylabel 'seconds'
set key outside bottom center horizontal
set arrow from graph 0, first {d['dlaunch_heartbeat_timeout_s']} to graph 1, first {d['dlaunch_heartbeat_timeout_s']} nohead dt 2
plot 'nodeloss.dat' using 2:xtic(1) title 'dlaunch (dashed: its heartbeat timeout)', '' using 3 title 'torchrun c10d'
""")
        made.append("nodeloss.png")
    d = load("rdzv")
    if d and d.get("cases"):
        with open(os.path.join(RESULTS, "rdzv.dat"), "w") as f:
            for c in d["cases"]:
                f.write(f"{c['nodes']} {c['join_ms']['median']} "
                        f"{c['server_hwm_bytes'] / 2**20}\n")
        gnuplot(term + """set output 'rdzv.png'
set title 'dlaunch-rdzv: N nodes joining one job'
set logscale x 2
set xlabel 'nodes'
set ylabel 'first join to all assigned (ms)'
set y2label 'server VmHWM (MiB)'
set y2tics
set ytics nomirror
plot 'rdzv.dat' using 1:2 with linespoints title 'join time', \\
     '' using 1:3 axes x1y2 with linespoints title 'server memory'
""")
        made.append("rdzv.png")
    d = load("dist")
    if d and d.get("cases"):
        for world in d["worlds"]:
            with open(os.path.join(RESULTS, f"dist{world}.dat"), "w") as f:
                for c in d["cases"]:
                    if c["world"] != world or "ratio" not in c:
                        continue
                    f.write(f"{c['bytes']} {c['dlaunch']['latency_us']} "
                            f"{c['gloo']['latency_us']} "
                            f"{c['dlaunch']['busbw_gbps']} "
                            f"{c['gloo']['busbw_gbps']}\n")
        gnuplot(term + """set output 'dist_latency.png'
set title 'all-reduce time by size (float32 sum, loopback)'
set logscale xy
set xlabel 'bytes'
set ylabel 'microseconds'
set key left top
plot 'dist2.dat' using 1:2 with linespoints title 'dlaunch tcp, 2 ranks', \\
     'dist2.dat' using 1:3 with linespoints title 'gloo, 2 ranks', \\
     'dist4.dat' using 1:2 with linespoints title 'dlaunch tcp, 4 ranks', \\
     'dist4.dat' using 1:3 with linespoints title 'gloo, 4 ranks'
""")
        gnuplot(term + """set output 'dist_busbw.png'
set title 'all-reduce bus bandwidth 2(n-1)/n * bytes / time'
set logscale x
set xlabel 'bytes'
set ylabel 'GB/s'
set key left top
plot 'dist2.dat' using 1:4 with linespoints title 'dlaunch tcp, 2 ranks', \\
     'dist2.dat' using 1:5 with linespoints title 'gloo, 2 ranks', \\
     'dist4.dat' using 1:4 with linespoints title 'dlaunch tcp, 4 ranks', \\
     'dist4.dat' using 1:5 with linespoints title 'gloo, 4 ranks'
""")
        made += ["dist_latency.png", "dist_busbw.png"]
    return made


DOCS = os.path.join(ROOT, "docs", "benchmarks.md")
TABLE_BEGIN = "<!-- bench:table:begin (bench/bench.py report writes this) -->"
TABLE_END = "<!-- bench:table:end -->"


def first_load(metas):
    return min(metas, key=lambda x: x["date"]).get("loadavg_at_start", 0)


def run_note(results):
    """One line saying where and how the numbers in the table were made."""
    metas = [d["meta"] for d in results.values() if d and "meta" in d]
    if not metas:
        return "No results yet."
    dates = sorted(m["date"] for m in metas)
    modes = sorted({"quick" if m.get("quick") else "full" for m in metas})
    loads = [m.get("loadavg_at_start", 0) for m in metas]
    m = max(metas, key=lambda x: x["date"])
    note = (f"Runs from {dates[0]} to {dates[-1]}, commit {m['commit']}, "
            f"{'/'.join(modes)} mode, {m['host_cpus']} CPUs ({m['cpu']}), "
            f"kernel {m['kernel']}; 1-minute load average when the first "
            f"benchmark started: {first_load(metas):.1f} (later ones include "
            f"their predecessors': {min(loads):.1f} to {max(loads):.1f}).")
    # the load average decays over a minute, so a benchmark started after
    # another sees its predecessor's processes: only the first one tells
    # whether something else was running
    first = min(metas, key=lambda x: x["date"])
    busy = first.get("loadavg_at_start", 0) > 0.5 * (m["host_cpus"] or 1)
    if "quick" in modes or busy:
        note += (" **Preliminary:** " +
                 ("quick mode (fewer sizes and repetitions)" if "quick" in
                  modes else "") +
                 ("; " if "quick" in modes and busy else "") +
                 ("the machine was busy with other work" if busy else "") +
                 ". Rerun `make bench` on a quiet machine for the "
                 "measurement.")
    return note


def update_docs(table, note):
    """Replace the table between the markers in docs/benchmarks.md."""
    try:
        with open(DOCS) as f:
            text = f.read()
    except FileNotFoundError:
        return
    a, b = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if a < 0 or b < a:
        return
    text = (text[:a + len(TABLE_BEGIN)] + "\n" + note + "\n\n" + table
            + text[b:])
    with open(DOCS, "w") as f:
        f.write(text)


def report():
    rows = summary_rows()
    results = {name: load(name) for name in list(BENCHES) + ["gpu"]}
    made = plots()
    table = table_markdown(rows)
    note = run_note(results)
    with open(os.path.join(RESULTS, "summary.md"), "w") as f:
        f.write(note + "\n\n" + table)
    update_docs(table, note)
    save("results", {"summary": [list(r) for r in rows],
                     "results": results, "plots": made})
    print()
    print(note)
    print()
    print(table)
    return 0


def main():
    global PY
    ap = argparse.ArgumentParser(
        description="dlaunch benchmarks vs torchrun / gloo / PyTorch DDP")
    ap.add_argument("what", choices=list(BENCHES) + list(GPU_BENCHES)
                    + ["all", "report"])
    ap.add_argument("--build", default="build",
                    help="the build directory (default build)")
    ap.add_argument("--quick", action="store_true",
                    help="fewer sizes and repetitions (bench-quick)")
    ap.add_argument("--reps", type=int, default=0,
                    help="repetitions per case (default: per benchmark)")
    ap.add_argument("--python", default=PY,
                    help="interpreter with torch for the PyTorch side "
                    f"(default {PY})")
    ap.add_argument("--ckpt-model", default=CKPT_MODEL,
                    help="MLP widths of the checkpoint benchmark's state "
                    f"(default {CKPT_MODEL})")
    args = ap.parse_args()
    PY = args.python
    TORCHRUN[0] = PY
    if args.what == "report":
        return report()
    b = Bench(args)
    names = list(BENCHES) if args.what == "all" else [args.what]
    for name in names:
        run_one(b, name)
    return report()


if __name__ == "__main__":
    sys.exit(main())
