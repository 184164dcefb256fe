# SPDX-License-Identifier: Apache-2.0
"""benchlib.rdzv - the rendezvous server under load: N simulated nodes
joining one job (rdzv_load), then the job's heartbeats measured against
bare_http, the heartbeat path's limit, the two taking turns."""
import json
import os
import signal
import subprocess

from .common import (BenchError, kill_group, log, raise_nofile,
                     start_listener, start_rdzv, summary_stats)


def bare_http_port(logpath):
    """The port in bare_http's "listening on HOST:PORT" line."""
    try:
        with open(logpath) as f:
            for line in f:
                if line.startswith("listening on "):
                    return int(line.rsplit(":", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def start_bare_http(b, cpu=None):
    """Start bench/bare_http (a libevent HTTP server that answers every
    request with a fixed body: the limit of the heartbeat path) on
    127.0.0.1, port 0; returns (Popen, port)."""
    p, port, _ = start_listener(b, "bare_http", "bare-http", bare_http_port,
                                cpu)
    return p, port


def proc_cpu_ns(pid):
    """CPU time process pid has used so far, in ns (/proc/PID/schedstat),
    or None."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def heartbeat_turn(load, port, pid, n, hb_seconds, pin, incarnation=None,
                   rnd=None):
    """One heartbeat phase of rdzv_load against the server at port
    (process pid): N connections opened first (--no-join), then 256 of
    them keep 4 heartbeats each in flight for hb_seconds. For dlaunch-rdzv
    the nodes are those of a job an earlier rdzv_load formed (incarnation,
    round). Returns heartbeats/s and the server's CPU time per heartbeat
    over the phase (from rdzv_load's "heartbeats start" line to its
    result)."""
    cmd = [load, "--endpoint", f"127.0.0.1:{port}", "--nodes", str(n),
           "--job", f"scale{n}", "--hb-seconds", str(hb_seconds),
           "--no-join"]
    if incarnation:
        cmd += ["--incarnation", incarnation, "--round", str(rnd)]
    if pin:
        cmd = ["taskset", "-c", "1"] + cmd
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True)
    cpu0 = cpu1 = None
    errs = []
    try:
        for line in p.stderr:
            if line.startswith("rdzv_load: heartbeats start"):
                cpu0 = proc_cpu_ns(pid)
                break
            errs.append(line)
        out = p.stdout.readline()
        cpu1 = proc_cpu_ns(pid)
        errs += p.stderr.readlines()
        rc = p.wait(timeout=hb_seconds + 120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if rc != 0 or not out:
        raise BenchError(f"rdzv_load on port {port}: exit {rc}: "
                         + "".join(errs).strip()[-300:])
    res = json.loads(out)
    turn = {"per_s": res["heartbeats_per_s"], "heartbeats": res["heartbeats"],
            "cpu_us": None}
    if cpu0 is not None and cpu1 is not None and res["heartbeats"]:
        turn["cpu_us"] = (cpu1 - cpu0) / 1e3 / res["heartbeats"]
    return turn


def heartbeat_turns(b, load, n, rdzv, port, incarnation, rnd, turns,
                    hb_seconds, pin):
    """dlaunch-rdzv (rdzv, port: its job of n nodes formed, incarnation,
    round rnd) and bare_http (the heartbeat path's limit: a libevent HTTP
    server answering every request with a heartbeat's answer) take turns
    under the same heartbeat phase, turns times each, the first of each
    pair alternating; both servers on CPU 0 and rdzv_load on CPU 1 when
    pin. Returns every pair (the ratio of dlaunch-rdzv's heartbeats/s to
    bare_http's, of bare_http's CPU time per heartbeat to dlaunch-rdzv's,
    the load average around the pair) and their medians and spread."""
    bare, bport = start_bare_http(b, cpu=0 if pin else None)
    pairs = []
    try:
        for i in range(turns):
            load0 = os.getloadavg()[0]
            order = ("rdzv", "bare") if i % 2 == 0 else ("bare", "rdzv")
            got = {}
            for who in order:
                if who == "rdzv":
                    got[who] = heartbeat_turn(load, port, rdzv.pid, n,
                                              hb_seconds, pin, incarnation,
                                              rnd)
                else:
                    got[who] = heartbeat_turn(load, bport, bare.pid, n,
                                              hb_seconds, pin)
            r, bb = got["rdzv"], got["bare"]
            pair = {"first": order[0], "rdzv": r, "bare": bb,
                    "ratio": r["per_s"] / bb["per_s"] if bb["per_s"] else None,
                    "cpu_ratio": (bb["cpu_us"] / r["cpu_us"]
                                  if r["cpu_us"] and bb["cpu_us"] else None),
                    "loadavg": [load0, os.getloadavg()[0]]}
            pairs.append(pair)
            log(f"rdzv n={n} heartbeats, turn {i + 1}/{turns} "
                f"({order[0]} first): dlaunch-rdzv {r['per_s']:.0f}/s, "
                f"bare libevent {bb['per_s']:.0f}/s, ratio "
                f"{pair['ratio'] or 0:.2f}; CPU per heartbeat "
                f"{r['cpu_us'] or 0:.1f} us against "
                f"{bb['cpu_us'] or 0:.1f} us; load "
                f"{pair['loadavg'][0]:.1f}-{pair['loadavg'][1]:.1f}")
    finally:
        kill_group(bare, signal.SIGTERM)

    def stats(values):
        return summary_stats([v for v in values if v is not None])
    return {"turns": pairs,
            "rdzv_per_s": stats([x["rdzv"]["per_s"] for x in pairs]),
            "bare_per_s": stats([x["bare"]["per_s"] for x in pairs]),
            "ratio": stats([x["ratio"] for x in pairs]),
            "rdzv_cpu_us": stats([x["rdzv"]["cpu_us"] for x in pairs]),
            "bare_cpu_us": stats([x["bare"]["cpu_us"] for x in pairs]),
            "cpu_ratio": stats([x["cpu_ratio"] for x in pairs])}


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
    dlaunch-rdzv pinned to CPU 0; the load generator runs on CPU 1. On
    the last repetition's server of the sizes in the heartbeat set, the
    job's heartbeats are measured against bare_http (the heartbeat path's
    limit), the two taking turns under the same load (heartbeat_turns)."""
    load = b.bin("rdzv_load")
    b.bin("dlaunch-rdzv")
    b.bin("bare_http")
    limit = raise_nofile()
    sizes = [256, 1024, 4096] if b.quick else [256, 1024, 4096, 16384]
    hb_sizes = [256, 4096] if b.quick else [256, 4096, 16384]
    reps = b.nreps(1, 3)
    turns = 3 if b.quick else 5
    hb_seconds = 2 if b.quick else 5
    pin = (os.cpu_count() or 1) > 1
    out = {"nofile_limit": limit, "reps": reps, "hb_seconds": hb_seconds,
           "hb_turns": turns, "cases": [], "failures": []}
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
        runs, hb = [], None
        load0 = os.getloadavg()[0]
        for r in range(reps):
            server, port = start_rdzv(b, "rdzv-server",
                                      cpu=0 if pin else None)
            try:
                rss0 = vm_field(server.pid, "VmRSS") or 0
                cmd = [load, "--endpoint", f"127.0.0.1:{port}", "--nodes",
                       str(n), "--job", f"scale{n}", "--hb-conns", "0",
                       "--join-timeout", str(join_timeout)]
                if pin:
                    cmd = ["taskset", "-c", "1"] + cmd
                p = subprocess.run(cmd, capture_output=True, text=True,
                                   timeout=join_timeout + 180)
                if p.returncode != 0:
                    out["failures"].append(
                        f"{n} nodes: rdzv_load exit {p.returncode}: "
                        + p.stderr.strip()[-500:])
                    log(out["failures"][-1])
                    stop_reason = f"{n} nodes failed"
                    break
                res = json.loads(p.stdout)
                res["server_rss_start_bytes"] = rss0
                # a join too slow for another repetition (a loaded
                # machine) still has its heartbeats measured
                slow = res["join_ms"] > join_timeout * 1000 / 4
                if (r == reps - 1 or slow) and n in hb_sizes:
                    try:
                        hb = heartbeat_turns(
                            b, load, n, server, port, res["incarnation"],
                            res["round"], turns, hb_seconds, pin)
                    except (BenchError, subprocess.TimeoutExpired) as e:
                        out["failures"].append(f"{n} nodes: heartbeats: "
                                               f"{e}")
                        log(out["failures"][-1])
                res["server_hwm_bytes"] = vm_field(server.pid, "VmHWM")
            finally:
                kill_group(server, signal.SIGTERM)
            runs.append(res)
            log(f"rdzv n={n}: join {res['join_ms']:.1f} ms, VmHWM "
                f"{(res['server_hwm_bytes'] or 0) / 2**20:.1f} MiB")
            if slow:
                # a size this slow says what a repetition would; the next
                # size would run into the timeout
                stop_reason = (f"{n} nodes took "
                               f"{res['join_ms'] / 1000:.1f} s to join")
                break
        if runs:
            out["cases"].append({
                "nodes": n,
                "join_ms": summary_stats([x["join_ms"] for x in runs]),
                "heartbeats": hb,
                "loadavg": [load0, os.getloadavg()[0]],
                "server_hwm_bytes": max(x["server_hwm_bytes"] or 0
                                        for x in runs),
                "runs": runs})
    out["command"] = ("taskset -c 0 dlaunch-rdzv --listen 127.0.0.1:PORT; "
                      "taskset -c 1 rdzv_load --endpoint 127.0.0.1:PORT "
                      "--nodes N --hb-conns 0 (the join); then "
                      f"{turns} times, alternating which goes first: "
                      "taskset -c 1 rdzv_load --endpoint 127.0.0.1:PORT "
                      f"--nodes N --hb-seconds {hb_seconds} --no-join "
                      "--incarnation I --round R (dlaunch-rdzv's job) and "
                      "the same against taskset -c 0 bare_http --listen "
                      "127.0.0.1:0")
    return out
