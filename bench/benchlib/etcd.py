# SPDX-License-Identifier: Apache-2.0
"""benchlib.etcd - the etcd backend against torchrun's: the first round,
a killed node and, with etcd_load's simulated agents, what N joins and
a running job cost etcd, and the leader's takeover; what a lease
keep-alive costs etcd on a gRPC stream (dlaunch's) and through etcd's
JSON gateway."""
import base64
import json
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
import urllib.request

from . import common
from .common import (BenchError, ROOT, WORKERS, clean_env, free_port,
                     kill_group, load, log, raise_nofile, read_lines,
                     summary_stats, wait_until)


ETCD_BIN = "/usr/bin/etcd"  # Debian's etcd-server (3.4)
TORCHRUN_ETCD = os.path.join(ROOT, "tests", "torchrun", "torchrun_etcd")
# Failure detection alike on both sides: dlaunch's lease TTL and
# heartbeat timeout 2 s; torchrun's keep-alive 1 s x 2 attempts (its
# wrapper's TORCHRUN_KEEP_ALIVE; torch 1.13 hard-codes 5 s x 3). Last call
# 1 s on both (torchrun takes whole seconds).
ETCD_TTL_S = 2
ETCD_LAST_CALL_S = 1
TORCH_KEEP_ALIVE = "1,2"
# The simulated agents keep dlaunch's default lease: heartbeat_timeout
# (5 s) rounded up; the takeover time follows it. A case is (nodes, lease
# TTL); the takeover phase is given the TTL on top of its timeout.
# 4096 nodes take a 30 s lease: with 5 s their keep-alives alone (4096
# every 1.67 s, about 0.9 ms of etcd's CPU each at a follower: the
# keep-alive part below) would want 2.2 cores, more than this 2-core
# machine has for etcd and the simulated agents together; with 30 s
# they want 0.37. An operator sizes the TTL to etcd the same way.
LOAD_TTL_S = 5
LOAD_CASES = [(256, LOAD_TTL_S), (1024, LOAD_TTL_S), (4096, 30)]
ETCD_PARTS = ("first", "kill", "load", "keepalive")
# The keep-alive part: connections to one member renewing a lease every
# third of the default TTL, the load of that many agents; etcd's CPU over
# a window after a warm-up (the connections made), less what the idle
# cluster takes in as long
KEEPALIVE_CONNS = 500
KEEPALIVE_WARMUP_S = 5
# what one torchrun agent (python3 + torch) takes, to see how many the
# machine holds: its VmRSS with Debian 12's torch 1.13 CPU is 241 MiB, part
# of it the shared libraries' pages
TORCHRUN_AGENT_BYTES = 256 << 20


class EtcdCluster:
    """A cluster of `members` etcd processes on loopback ports (never
    2379/2380), data in a fresh directory, v2 API on for torchrun's
    backend. Use as a context manager: stopped and removed at the end."""

    def __init__(self, b, name, members=3):
        self.b = b
        self.name = name
        self.members = members
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix=f"etcd-{name}.",
                                    dir=b.etcd_dir or b.tmp)
        ports = set()
        while len(ports) < 2 * members:
            p = free_port()
            if p not in (2379, 2380):
                ports.add(p)
        ports = sorted(ports)
        self.client = ports[:members]
        self.peer = ports[members:]

    @property
    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client)

    def __enter__(self):
        cluster = ",".join(f"m{i}=http://127.0.0.1:{p}"
                           for i, p in enumerate(self.peer))
        token = f"bench-{self.name}-{os.getpid()}-{time.monotonic_ns()}"
        for i in range(self.members):
            c, p = self.client[i], self.peer[i]
            cmd = [ETCD_BIN, "--name", f"m{i}",
                   "--data-dir", os.path.join(self.dir, f"m{i}"),
                   "--listen-client-urls", f"http://127.0.0.1:{c}",
                   "--advertise-client-urls", f"http://127.0.0.1:{c}",
                   "--listen-peer-urls", f"http://127.0.0.1:{p}",
                   "--initial-advertise-peer-urls", f"http://127.0.0.1:{p}",
                   "--initial-cluster", cluster,
                   "--initial-cluster-state", "new",
                   "--initial-cluster-token", token,
                   "--enable-v2=true", "--logger", "zap",
                   "--log-level", "warn"]
            logf = open(os.path.join(self.dir, f"m{i}.log"), "ab")
            self.procs.append(subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))
            logf.close()
        if not wait_until(lambda: all(self.healthy(c) for c in self.client),
                          30, 0.05):
            self.__exit__(None, None, None)
            raise BenchError(f"etcd cluster did not come up (see "
                             f"{self.dir}/m*.log)")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            kill_group(p, signal.SIGTERM)
        self.procs = []
        subprocess.run(["rm", "-rf", "--one-file-system", self.dir],
                       check=False)

    @staticmethod
    def healthy(port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health",
                                        timeout=1) as r:
                return json.load(r).get("health") == "true"
        except (OSError, ValueError):
            return False

    def cpu_seconds(self):
        """User + system CPU time the members have used so far."""
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for p in self.procs:
            try:
                with open(f"/proc/{p.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
            except (OSError, ValueError, IndexError):
                pass
        return total

    def metric(self, name):
        """The sum over the members of one unlabelled metric."""
        total = 0.0
        for c in self.client:
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{c}/metrics", timeout=5) as r:
                    for line in r.read().decode().splitlines():
                        if line.startswith(name + " "):
                            total += float(line.split()[1])
            except OSError:
                pass
        return total

    def get(self, key):
        """The value of key (v3 API through the JSON gateway) or None."""
        body = json.dumps({"key": base64.b64encode(key.encode()).decode()})
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.client[0]}/v3/kv/range",
            data=body.encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                kvs = json.load(r).get("kvs") or []
        except (OSError, ValueError):
            return None
        return base64.b64decode(kvs[0]["value"]) if kvs else None


def cpu_pressure():
    """/proc/pressure/cpu's "some avg10": the share of the last 10 s in
    which something here waited for a CPU (the machine is shared)."""
    try:
        with open("/proc/pressure/cpu") as f:
            for word in f.readline().split():
                if word.startswith("avg10="):
                    return float(word[6:])
    except (OSError, ValueError):
        pass
    return None


def mem_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def stamp_worker(stamp):
    """A worker that appends "start PID NS" to stamp, then sleeps (exec
    keeps its pid, and dlaunch's parent-death signal, for the sleep)."""
    q = shlex.quote(stamp)
    return ["/bin/sh", "-c",
            f'echo "start $$ $(date +%s%N)" >> {q}; exec sleep 600']


def kill_stamped(stamp):
    """SIGKILL what is left of the workers that wrote stamp: each by the
    pid it wrote, when that pid still runs the benchmark's sleep."""
    for x in read_lines(stamp):
        if x[0] != "start" or not x[1].isdigit():
            continue
        try:
            with open(f"/proc/{x[1]}/cmdline", "rb") as f:
                if f.read().split(b"\0")[:2] != [b"sleep", b"600"]:
                    continue
            os.kill(int(x[1]), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def etcd_agents(b, tool, cluster, job, nnodes, workers, detect):
    """The command line of each agent: dlaunch's etcd backend on every
    member, or torchrun's etcd-v2 on the first (its client takes one).
    With detect, failure detection is set alike on both (ETCD_TTL_S);
    without, each keeps its default (dlaunch's lease 5 s, torchrun's
    keep-alive 5 s x 3)."""
    cmds = []
    for i, w in enumerate(workers):
        if tool == "dlaunch":
            c = (f"heartbeat_timeout={ETCD_TTL_S},lease_ttl={ETCD_TTL_S},"
                 if detect else "")
            c += f"last_call_timeout={ETCD_LAST_CALL_S},node_id=n{i}"
            cmds.append([b.bin("dlaunch"), "--rdzv-backend", "etcd",
                         "--rdzv-endpoint", cluster.endpoints,
                         "--rdzv-id", job, "--nnodes", nnodes,
                         "--nproc-per-node", "1", "--max-restarts", "3",
                         "--rdzv-conf", c,
                         "--local-addr", "127.0.0.1", "--no-python"] + w)
        else:
            cmds.append([common.PY, TORCHRUN_ETCD, "--nnodes", nnodes,
                         "--nproc_per_node", "1", "--max_restarts", "3",
                         "--rdzv_backend", "etcd-v2",
                         "--rdzv_endpoint", f"127.0.0.1:{cluster.client[0]}",
                         "--rdzv_id", job,
                         "--rdzv_conf",
                         f"last_call_timeout={ETCD_LAST_CALL_S}",
                         "--monitor_interval", "0.1", "--no_python"] + w)
    return cmds


def start_agents(b, cmds, logname, stamp, detect):
    env = clean_env(TORCHRUN_STAMP=stamp)
    if detect:
        env["TORCHRUN_KEEP_ALIVE"] = TORCH_KEEP_ALIVE
    procs = []
    logf = open(b.logfile(logname), "ab")
    try:
        for cmd in cmds:
            procs.append(subprocess.Popen(
                cmd, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=env, start_new_session=True))
    finally:
        logf.close()
    return procs


def etcd_first_once(b, tool, n, cluster, tag):
    """N agents of one job (min = max = N) started at once: seconds from
    the first agent's start to the last worker's first act. For torchrun
    also when the last agent had imported torch (agent_ready)."""
    stamp = os.path.join(b.tmp, f"etcd-first-{tool}-{n}-{tag}.txt")
    job = f"first-{tool}-{n}-{tag}"
    cmds = etcd_agents(b, tool, cluster, job, str(n),
                       [stamp_worker(stamp)] * n, False)
    cap = 60 + 3 * n
    t0 = time.time_ns()
    procs = start_agents(b, cmds, f"etcd-first-{tool}-{n}", stamp, False)
    try:
        def all_started():
            return len([x for x in read_lines(stamp)
                        if x[0] == "start"]) >= n
        done = wait_until(all_started, cap, 0.01)
        ls = read_lines(stamp)
        starts = sorted(int(x[2]) for x in ls if x[0] == "start")
        ready = sorted(int(x[2]) for x in ls if x[0] == "agent_ready")
        res = {"first_s": (starts[-1] - t0) / 1e9 if done else None,
               "workers_started": len(starts), "cap_s": cap,
               "cpu_pressure": cpu_pressure(),
               "command": " ".join(cmds[0])}
        if ready:
            res["agents_ready_s"] = (ready[-1] - t0) / 1e9
            if done:
                res["rdzv_s"] = (starts[-1] - ready[-1]) / 1e9
        if not done:
            alive = sum(p.poll() is None for p in procs)
            res["note"] = (f"{len(starts)} of {n} workers started within "
                           f"{cap} s; {alive} agents still running")
        return res
    finally:
        for p in procs:
            kill_group(p)
        kill_stamped(stamp)


def etcd_kill_once(b, tool, cluster, tag, victim):
    """Four agents (3:4 nodes), one gloo worker each all-reducing in a
    loop (bench/workers/gloo_loop.py); one agent's process group is
    SIGKILLed: the follower n3, or (victim "leader", dlaunch only) the
    agent that holds the job's leader key. Seconds from the kill until
    every survivor's worker of the next round has started, and until each
    has done its first all-reduce."""
    n = 4
    stamp = os.path.join(b.tmp, f"etcd-kill-{tool}-{victim}-{tag}.txt")
    job = f"kill-{tool}-{victim}-{tag}"
    workers = [[common.PY, "-u", os.path.join(WORKERS, "gloo_loop.py"), stamp,
                f"n{i}"] for i in range(n)]
    cmds = etcd_agents(b, tool, cluster, job, f"{n - 1}:{n}", workers, True)
    procs = start_agents(b, cmds, f"etcd-kill-{tool}", stamp, True)
    try:
        def all_ready():
            return len({x[1] for x in read_lines(stamp)
                        if x[0] == "ready"}) == n
        if not wait_until(all_ready, 180, 0.05):
            raise BenchError(f"etcd kill {tool}: the {n} workers never all "
                             f"ran (see {b.logfile('etcd-kill-' + tool)})")
        k = n - 1
        if victim == "leader":
            v = cluster.get(f"/dlaunch/{job}/leader")
            try:
                k = int(json.loads(v)["node_id"][1:])
            except (TypeError, ValueError, KeyError):
                raise BenchError(f"etcd kill: no leader key for {job}")
        kill_ns = time.time_ns()
        kill_group(procs[k])
        survivors = {f"n{i}" for i in range(n) if i != k}

        def after(what):
            def f():
                firsts = {}
                for x in read_lines(stamp):
                    if x[0] == what and x[1] in survivors \
                            and int(x[4]) > kill_ns:
                        firsts.setdefault(x[1], int(x[4]))
                return max(firsts.values()) \
                    if len(firsts) == len(survivors) else None
            return f
        cap = 90
        start = wait_until(after("start"), cap, 0.01)
        ready = wait_until(after("ready"), cap, 0.01) if start else None
        res = {"start_s": (start - kill_ns) / 1e9 if start else None,
               "ready_s": (ready - kill_ns) / 1e9 if ready else None,
               "killed": f"n{k}", "cap_s": cap,
               "cpu_pressure": cpu_pressure(),
               "command": " ".join(cmds[0])}
        if start is None:
            res["note"] = f"survivors' workers not restarted within {cap} s"
        return res
    finally:
        for p in procs:
            kill_group(p)


def log_digest(path, limit=6):
    """The warnings and errors of a log, alike ones counted once each
    (numbers and ids blanked): ["COUNT x MESSAGE", ...], most first."""
    seen = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                m = re.search(r" (error|warn): (.*)", line)
                if not m:
                    continue
                msg = re.sub(r"\b(sim)?[0-9a-f]*[0-9][0-9a-f]*\b", "N",
                             m.group(1) + ": " + m.group(2).strip())
                seen[msg] = seen.get(msg, 0) + 1
    except OSError:
        pass
    # errors first (what ended something), then the warnings
    top = sorted(seen.items(), key=lambda kv: (not kv[0].startswith("error"),
                                               -kv[1]))[:limit]
    return [f"{c} x {m}" for m, c in top]


def etcd_load_once(b, n, tag, timeout, idle_ms, ttl_s=LOAD_TTL_S):
    """etcd_load: n simulated agents on a fresh 3-member cluster."""
    with EtcdCluster(b, f"load{n}-{tag}") as cluster:
        changes0 = cluster.metric("etcd_server_leader_changes_seen_total")
        cmd = [b.bin("etcd_load"), "--endpoints", cluster.endpoints,
               "--nodes", str(n), "--job", f"load{n}",
               "--lease-ttl", str(ttl_s),
               "--last-call-ms", str(ETCD_LAST_CALL_S * 1000),
               "--timeout", str(timeout + 2 * ttl_s),
               "--idle-ms", str(idle_ms),
               "--etcd-pids", ",".join(str(p.pid) for p in cluster.procs)]
        pressure = cpu_pressure()
        errlog = os.path.join(b.tmp, f"etcd-load-{n}-{tag}.log")
        with open(errlog, "ab") as err:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err,
                               timeout=3 * (timeout + 2 * ttl_s)
                               + idle_ms / 1000 + 60)
        changes = cluster.metric("etcd_server_leader_changes_seen_total") \
            - changes0
        digest = log_digest(errlog)
        if p.returncode != 0:
            with open(errlog, "rb") as f:
                tail = f.read()[-400:].decode(errors="replace").strip()
            res = {"error": f"{n} nodes: etcd_load exit {p.returncode}: "
                            f"{tail.splitlines()[-1] if tail else ''}"}
        else:
            res = json.loads(p.stdout)
        res["cpu_pressure"] = pressure
        res["etcd_leader_changes"] = changes
        res["log"] = digest
        res["command"] = " ".join(cmd)
        if "error" in res:
            return res
        d = res["etcd_delta"]
        # a unary call is a stream started; a watch's create (or cancel)
        # is one message, on a stream of its own (through the gateway)
        # or on the agent's watch stream (gRPC)
        res["requests_per_join"] = (sum(
            v for k, v in d.items() if k.startswith("started.")
            and k not in ("started.LeaseKeepAlive", "started.Watch"))
            + d.get("msg_received.Watch", 0)) / n
        res["watch_streams_per_join"] = d.get("started.Watch", 0) / n
        # a keep-alive is one message, on a stream of its own (through the
        # gateway) or on the lease's stream (gRPC)
        res["keepalives_per_join"] = \
            d.get("msg_received.LeaseKeepAlive", 0) / n
        res["keepalive_streams_per_join"] = \
            d.get("started.LeaseKeepAlive", 0) / n
        res["proposals_per_join"] = d.get("proposals_committed", 0) / n
        res["join_etcd_cpu_ms_per_node"] = \
            1000 * res.get("join_etcd_cpu_s", 0) / n
        idle = res.get("idle")
        if idle and idle["seconds"] > 0:
            # what a running job of n nodes costs etcd: the keep-alives
            idle["keepalives_per_s"] = idle["etcd_delta"].get(
                "msg_received.LeaseKeepAlive", 0) / idle["seconds"]
            idle["etcd_cores"] = idle.get("etcd_cpu_s", 0) / idle["seconds"]
            idle["etcd_cores_per_1000_nodes"] = \
                1000 * idle["etcd_cores"] / n
        return res


def bench_etcd(b):
    """dlaunch's etcd backend against torchrun's etcd-v2 on the same
    3-member etcd (first round for N agents, an agent's kill), then dlaunch
    alone with etcd_load's simulated agents (first round, requests per
    join, leader takeover)."""
    if not os.access(ETCD_BIN, os.X_OK):
        raise BenchError(f"{ETCD_BIN} is missing (contrib/install-deps.sh "
                         "installs etcd-server)")
    b.bin("dlaunch")
    b.bin("etcd_load")
    limit = raise_nofile()
    has_etcd_py = subprocess.run([common.PY, "-c", "import etcd"],
                                 capture_output=True).returncode == 0
    reps = b.nreps(1, 3)
    sizes = [4, 16] if b.quick else [4, 16, 32, 64]
    out = {"reps": reps, "nofile_limit": limit,
           "settings": {
               "dlaunch": "--rdzv-backend etcd with all three members as "
                          f"endpoints, last_call_timeout={ETCD_LAST_CALL_S};"
                          " first round: default lease (5 s); kill: "
                          f"lease_ttl={ETCD_TTL_S}, heartbeat_timeout="
                          f"{ETCD_TTL_S}",
               "torchrun": "--rdzv_backend etcd-v2 (python3-etcd) on the "
                           "first member, last_call_timeout="
                           f"{ETCD_LAST_CALL_S}, monitor_interval=0.1; "
                           "first round: default keep-alive (5 s x 3); "
                           f"kill: keep-alive {TORCH_KEEP_ALIVE} (interval "
                           "s, attempts: torch 1.13's hard-coded 5,3 "
                           "replaced by tests/torchrun/torchrun_etcd)",
               "etcd": "3 members on loopback, etcd "
                       + subprocess.run([ETCD_BIN, "--version"],
                                        capture_output=True, text=True)
                       .stdout.split("\n")[0].split()[-1]
                       + ", --enable-v2, data on "
                       + ("tmpfs " + b.etcd_dir if b.etcd_dir
                          else "the disk (" + b.tmp + ")")},
           "first": [], "kill": {}, "load": [], "failures": []}
    if not has_etcd_py:
        out["failures"].append("python3-etcd missing: torchrun's etcd-v2 "
                               "not run")
    # how many torchrun agents this machine's memory holds now
    out["torchrun_agents_memory_holds"] = int(0.8 * mem_available()
                                              / TORCHRUN_AGENT_BYTES)

    out["keepalive"] = {}
    parts = b.etcd_parts
    old = load("etcd") or {}
    carried = [p for p in ETCD_PARTS if p not in parts]
    if carried:
        # parts not run this time keep the last run's results, marked
        out["carried"] = {"parts": carried, "from": old.get("meta", {})}
        for p in carried:
            out[p] = old.get(p, out[p])
        if "load" in carried:
            for k in ("requests_per_join_growth", "load_settings"):
                if k in old:
                    out[k] = old[k]

    # 1. first round, N agents, alternating
    torch_stop = None if has_etcd_py else "python3-etcd missing"
    for n in (sizes if "first" in parts else []):
        case = {"nodes": n, "runs": {"dlaunch": [], "torchrun": []}}
        tools = ["dlaunch", "torchrun"]
        need = n * TORCHRUN_AGENT_BYTES
        if torch_stop is None and need > 0.8 * mem_available():
            torch_stop = (f"{n} torchrun agents need about "
                          f"{need >> 20} MiB, more than this machine has "
                          "free")
        if torch_stop:
            case["torchrun_not_run"] = torch_stop
            tools = ["dlaunch"]
        try:
            with EtcdCluster(b, f"first{n}") as cluster:
                for r in range(reps):
                    for tool in (tools if r % 2 == 0 else tools[::-1]):
                        res = etcd_first_once(b, tool, n, cluster, r)
                        case["runs"][tool].append(res)
                        log(f"etcd first round {tool} n={n}: "
                            f"{res['first_s']} s"
                            + (f" (agents ready {res['agents_ready_s']:.2f}"
                               " s)" if "agents_ready_s" in res else ""))
        except BenchError as e:
            out["failures"].append(str(e))
            log(str(e))
        for tool in ("dlaunch", "torchrun"):
            runs = case["runs"][tool]
            vals = [x["first_s"] for x in runs if x["first_s"] is not None]
            case[tool] = summary_stats(vals)
            case[tool + "_failed"] = len(runs) - len(vals)
            rd = [x["rdzv_s"] for x in runs if "rdzv_s" in x]
            if rd:
                case[tool + "_rdzv_s"] = summary_stats(rd)
        if case["dlaunch"] and case["torchrun"]:
            case["ratio"] = case["torchrun"]["median"] / \
                case["dlaunch"]["median"]
        if "torchrun" in tools and case["torchrun_failed"] and not torch_stop:
            torch_stop = f"torchrun failed at {n} agents"
        out["first"].append(case)

    # 2. one agent killed, alternating
    kinds = ["dlaunch", "torchrun", "dlaunch_leader"] if has_etcd_py \
        else ["dlaunch", "dlaunch_leader"]
    runs = {k: [] for k in kinds}
    try:
        with EtcdCluster(b, "kill") as cluster:
            for r in range(reps if "kill" in parts else 0):
                for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                    tool = "dlaunch" if kind.startswith("dlaunch") else kind
                    victim = "leader" if kind == "dlaunch_leader" \
                        else "follower"
                    try:
                        res = etcd_kill_once(b, tool, cluster, r, victim)
                    except BenchError as e:
                        out["failures"].append(str(e))
                        log(str(e))
                        continue
                    runs[kind].append(res)
                    log(f"etcd kill {kind}: start {res['start_s']} s, "
                        f"ready {res['ready_s']} s")
    except BenchError as e:
        out["failures"].append(str(e))
        log(str(e))
    for kind in (kinds if "kill" in parts else []):
        s = {"runs": runs[kind]}
        for key in ("start_s", "ready_s"):
            vals = [x[key] for x in runs[kind] if x[key] is not None]
            s[key] = summary_stats(vals)
            s[key + "_missing"] = len(runs[kind]) - len(vals)
        out["kill"][kind] = s
    d, t = out["kill"].get("dlaunch"), out["kill"].get("torchrun")
    if d and t and d["start_s"] and t["start_s"]:
        out["kill"]["ratio"] = t["start_s"]["median"] / d["start_s"]["median"]

    # 3. a keep-alive's cost, stream against gateway
    if "keepalive" in parts:
        try:
            out["keepalive"] = keepalive_cost(b)
        except (BenchError, subprocess.TimeoutExpired, OSError,
                ValueError) as e:
            out["keepalive"] = {"error": str(e)}
            out["failures"].append(f"keepalive: {e}")

    # 4. simulated agents
    timeout = 60 if b.quick else 120
    idle_ms = 3000 if b.quick else 5000
    if "load" not in parts:
        return out
    out["load_settings"] = (f"lease TTL {LOAD_TTL_S} s (keep-alive every "
                            f"{LOAD_TTL_S / 3:.2f} s) unless the case says "
                            f"otherwise, min nodes N-1, last "
                            f"call {ETCD_LAST_CALL_S} s, idle window "
                            f"{idle_ms / 1000:.0f} s or two keep-alive "
                            "periods when longer; all nodes started at "
                            "once; etcd_load spreads them over processes "
                            "by the open-file limit")
    for n, ttl in LOAD_CASES:
        runs = []
        # three runs: the takeover's goal holds in every run, not in most
        for r in range(b.nreps(1, 3)):
            try:
                # the idle window holds whole keep-alive periods (each
                # node renews every TTL/3): half of one counts the
                # renewals of whichever nodes fall in it, and nodes that
                # joined together renew together
                win = max(idle_ms, -(-2000 * ttl // 3))
                res = etcd_load_once(b, n, r, timeout, win, ttl)
            except (BenchError, subprocess.TimeoutExpired) as e:
                res = {"error": f"{n} nodes: {e}"}
            runs.append(res)
            if "error" in res:
                out["failures"].append(res["error"])
                log(res["error"])
                break  # a repetition would say the same, more slowly
            tk = res.get("takeover", {})
            log(f"etcd load n={n} ttl={ttl}: first round "
                f"{res['join_ms']:.0f} ms, "
                f"{res['requests_per_join']:.2f} requests/join, takeover "
                f"{tk.get('reformed_ms', -1):.0f} ms "
                f"({res['processes']} processes)")
        case = {"nodes": n, "lease_ttl_s": ttl, "runs": runs,
                "failed": sum("error" in x for x in runs)}
        runs = [x for x in runs if "error" not in x]
        if runs:
            case["join_ms"] = summary_stats([x["join_ms"] for x in runs])
            # agents whose round loop ended (a real agent would have
            # exited), most in one run
            case["nodes_failed"] = max(len(x.get("nodes_failed", []))
                                       for x in runs)
            for key in ("requests_per_join", "proposals_per_join",
                        "keepalives_per_join", "join_etcd_cpu_ms_per_node"):
                case[key] = summary_stats([x[key] for x in runs])
            cores = [x["idle"]["etcd_cores_per_1000_nodes"] for x in runs
                     if "etcd_cores_per_1000_nodes" in x.get("idle", {})]
            if cores:
                case["idle_etcd_cores_per_1000_nodes"] = summary_stats(cores)
            for key in ("new_leader_ms", "reformed_ms"):
                case["takeover_" + key] = summary_stats(
                    [x["takeover"][key] for x in runs
                     if x["takeover"][key] >= 0])
        # runs whose takeover never had every survivor in a new round
        # (etcd_load failed in that phase): the goal is every run
        case["takeover_failed"] = sum(
            "error" in x and "takeover:" in x["error"]
            for x in case["runs"])
        out["load"].append(case)
    per = [c["requests_per_join"]["median"] for c in out["load"]
           if c.get("requests_per_join")
           and c.get("lease_ttl_s", LOAD_TTL_S) == LOAD_TTL_S]
    if per:
        out["requests_per_join_growth"] = max(per) / min(per)
    return out


def _post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def _keepalives(cluster):
    """LeaseKeepAlive messages the members have received (one a renewal,
    on a stream or through the gateway), summed."""
    total = 0.0
    for c in cluster.client:
        with urllib.request.urlopen(f"http://127.0.0.1:{c}/metrics",
                                    timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("grpc_server_msg_received_total{") \
                        and 'grpc_method="LeaseKeepAlive"' in line:
                    total += float(line.split()[-1])
    return total


def keepalive_once(b, cluster, port, mode, seconds, idle_cores):
    """etcd_keepalive against member port: etcd's CPU per renewal."""
    lease = _post(port, "/v3/lease/grant", {"TTL": 3600})["ID"]
    cmd = [b.bin("etcd_keepalive"), "--mode", mode,
           "--url", f"http://127.0.0.1:{port}", "--lease", str(lease),
           "--conns", str(KEEPALIVE_CONNS),
           "--interval-ms", str(LOAD_TTL_S * 1000 // 3),
           "--seconds", str(KEEPALIVE_WARMUP_S + seconds + 1)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(KEEPALIVE_WARMUP_S)
        c0, k0, t0 = cluster.cpu_seconds(), _keepalives(cluster), \
            time.monotonic()
        time.sleep(seconds)
        c1, k1, t1 = cluster.cpu_seconds(), _keepalives(cluster), \
            time.monotonic()
        stdout, _ = p.communicate(timeout=seconds + 60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    res = json.loads(stdout) if stdout.strip() else {}
    res["exit"] = p.returncode
    res["command"] = " ".join(cmd)
    res["keepalives"] = k1 - k0
    res["etcd_cpu_s"] = c1 - c0
    res["window_s"] = t1 - t0
    if p.returncode != 0 or res["keepalives"] <= 0:
        raise BenchError(f"etcd_keepalive {mode} failed: {res}")
    res["etcd_ms_per_keepalive"] = 1000 * (
        res["etcd_cpu_s"] - idle_cores * res["window_s"]) / res["keepalives"]
    return res


def keepalive_cost(b):
    """etcd's CPU per lease keep-alive: KEEPALIVE_CONNS connections to a
    follower, then to the leader, each renewing every third of the TTL, on
    a gRPC stream each (as dlaunch's agents) and through the JSON gateway
    (as they did before), taking turns on one fresh 3-member cluster."""
    b.bin("etcd_keepalive")
    seconds = 10 if b.quick else 20
    reps = b.nreps(1, 3)
    out = {"conns": KEEPALIVE_CONNS, "interval_ms": LOAD_TTL_S * 1000 // 3,
           "window_s": seconds, "warmup_s": KEEPALIVE_WARMUP_S,
           "reps": reps, "runs": []}
    with EtcdCluster(b, "keepalive") as cluster:
        leader = None
        for port in cluster.client:
            st = _post(port, "/v3/maintenance/status", {})
            if st["header"]["member_id"] == st["leader"]:
                leader = port
        if leader is None:
            raise BenchError("no etcd member says it leads")
        follower = next(p for p in cluster.client if p != leader)
        c0, t0 = cluster.cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        idle = (cluster.cpu_seconds() - c0) / (time.monotonic() - t0)
        out["idle_etcd_cores"] = idle
        for where, port in (("follower", follower), ("leader", leader)):
            for r in range(reps):
                for mode in ("gateway", "stream"):
                    res = keepalive_once(b, cluster, port, mode, seconds,
                                         idle)
                    res["member"] = where
                    out["runs"].append(res)
                    log(f"etcd keep-alive at the {where}, {mode}: "
                        f"{res['etcd_ms_per_keepalive']:.3f} ms of etcd "
                        f"CPU each ({res['keepalives']:.0f} in "
                        f"{res['window_s']:.1f} s)")
            for mode in ("gateway", "stream"):
                out[f"{where}_{mode}_ms"] = summary_stats(
                    [x["etcd_ms_per_keepalive"] for x in out["runs"]
                     if x["member"] == where and x["mode"] == mode])
            out[f"{where}_ratio"] = (out[f"{where}_gateway_ms"]["median"]
                                     / out[f"{where}_stream_ms"]["median"])
    return out
