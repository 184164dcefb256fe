# SPDX-License-Identifier: Apache-2.0
"""benchlib.common - what every benchmark shares: where things are (ROOT,
RESULTS, the Python with torch: PY, set by bench.py's --python), the
log, statistics, ports, processes (timed runs, process groups, ranks on
loopback), waiting for a condition, a dlaunch-rdzv server, the results'
files and the machine's description."""
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


# bench/benchlib/common.py: the repository is three levels up
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
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


def rotate(tools, r):
    """tools in the order of repetition r: each one first in turn, so
    drift in the machine's load hits them all alike."""
    k = r % len(tools)
    return tools[k:] + tools[:k]


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


def start_listener(b, name, logname, port_of, cpu=None):
    """Start the server b.bin(name) on 127.0.0.1, port 0 (pinned to cpu
    when given), and read back the port it bound from its log with
    port_of(logpath); returns (Popen, port, logpath)."""
    logpath = os.path.join(b.tmp, f"{logname}-{time.monotonic_ns()}.log")
    cmd = [b.bin(name), "--listen", "127.0.0.1:0"]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    logf = open(logpath, "ab")
    p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    logf.close()
    port = wait_until(lambda: p.poll() is None and port_of(logpath),
                      20, 0.01)
    if not port:
        kill_group(p)
        raise BenchError(f"{name} did not come up (see {logpath})")
    return p, port, logpath


def start_rdzv(b, logname, cpu=None):
    """Start dlaunch-rdzv on 127.0.0.1, port 0, and read back the port it
    bound from its log; returns (Popen, port)."""
    p, port, logpath = start_listener(b, "dlaunch-rdzv", logname,
                                      listening_port, cpu)
    if not wait_until(lambda: healthz(port), 20, 0.02):
        kill_group(p)
        raise BenchError(f"dlaunch-rdzv did not come up (see {logpath})")
    return p, port


def run_ranks(cmds_for_rank, world, logname, timeout, env_extra=None):
    """Start world processes (rank r runs cmds_for_rank(r)) with the
    torchrun environment (and env_extra) on a free port; returns rank 0's
    stdout."""
    port = free_port()
    procs = []
    outs = []
    errlog = open(logname, "ab")
    try:
        for r in range(world):
            env = clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                            RANK=r, WORLD_SIZE=world, LOCAL_RANK=r,
                            LOCAL_WORLD_SIZE=world, **(env_extra or {}))
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
