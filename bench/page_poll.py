#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""page_poll.py - load a dlaunch-rdzv the way open status pages and a
Prometheus scraping it would, to measure what they cost the server: run it
beside `bench.py rdzv` and compare that benchmark's numbers with and
without it (docs/benchmarks.md).

    bench.py --quick rdzv >LOG 2>&1 &
    bench/page_poll.py --bench-log LOG [--pages N] [--scrape-s S] [--seconds T]

It finds the servers bench.py starts from their logs in its temporary
directory (named in LOG; one server at a time), and for each: fetches
the page's files
once, then one job list (GET /v1/jobs every 2 s) and N job pages, each
repeating what page.js does (GET the job, then its watch with
wait_ms of 2 ms a node, 2 s to 30 s), and GET /metrics every S seconds. When it ends (after T
seconds, or on SIGINT/SIGTERM) it prints what it fetched and the time the
servers spent answering it, from their own request duration histograms
(as last scraped: the last second of each server is missed)."""

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

stop = threading.Event()
counts = {"requests": 0, "bytes": 0, "errors": 0}
lock = threading.Lock()


def get(port, path, timeout=10):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path),
                                    timeout=timeout) as r:
            data = r.read()
    except (urllib.error.URLError, OSError, ValueError):
        with lock:
            counts["errors"] += 1
        return None
    with lock:
        counts["requests"] += 1
        counts["bytes"] += len(data)
    return data


def bench_dir(bench_log):
    """bench.py's temporary directory, from the "logs in DIR" line of its
    output (None until it is there)."""
    try:
        with open(bench_log) as f:
            m = re.search(r"logs in (\S+)", f.read())
    except OSError:
        return None
    return m.group(1) if m else None


def bench_servers(where, found):
    """Ports of the dlaunch-rdzv servers bench.py started, from their logs
    in its temporary directory where, added to found (port -> log)."""
    for name in os.listdir(where):
        path = os.path.join(where, name)
        if not name.startswith("rdzv-server-") or path in found.values():
            continue
        try:
            with open(path) as f:
                m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
        except OSError:
            continue
        if m:
            found[int(m.group(1))] = path


def job_list(port, alive):
    """An open job list (/): GET /v1/jobs every 2 s."""
    while not stop.is_set() and port in alive:
        get(port, "/v1/jobs")
        stop.wait(2)


def page(port, alive):
    """One open job page: the job, then its watch, over and over, at
    page.js's pace (watchMs: 2 ms a node, 2 s to 30 s). The round to
    watch and the job's size come from the job list (small), so the
    client parses no big document."""
    for f in ("/jobs/x", "/static/page.js", "/static/page.css"):
        get(port, f)
    job, rnd, nodes = None, 0, 0
    while not stop.is_set() and port in alive:
        if job is None:
            raw = get(port, "/v1/jobs")
            jobs = json.loads(raw)["jobs"] if raw else []
            if not jobs:
                stop.wait(0.2)
                continue
            job, rnd = jobs[-1]["job"], jobs[-1]["round"]
            nodes = jobs[-1]["nnodes"]
        if get(port, "/v1/jobs/" + job) is None:
            job = None
            stop.wait(0.2)
            continue
        wait_ms = min(30000, max(2000, nodes * 2))
        raw = get(port, "/v1/jobs/%s/watch?round=%d&wait_ms=%d"
                  % (job, rnd, wait_ms), timeout=wait_ms / 1000 + 5)
        if raw is None:
            continue
        ans = json.loads(raw)
        job = None  # the size again from the (small) job list
        if ans.get("state") in ("SUCCEEDED", "FAILED"):
            stop.wait(4)


# the server's own time answering the page's and Prometheus's requests,
# from its request duration histogram: port -> {endpoint: (sum_s, count)}
served = {}
SERVED_RE = re.compile(r'^dlaunch_rdzv_request_duration_seconds_(sum|count)'
                       r'\{endpoint="(job|jobs|metrics|page)"\} (\S+)$', re.M)


def scrape(port, every_s, alive):
    while not stop.is_set() and port in alive:
        raw = get(port, "/metrics")
        if raw:
            seen = {}
            for kind, ep, v in SERVED_RE.findall(raw.decode()):
                s, c = seen.get(ep, (0.0, 0))
                seen[ep] = (float(v), c) if kind == "sum" else (s, int(v))
            with lock:
                served[port] = seen
        stop.wait(every_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=2)
    ap.add_argument("--scrape-s", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--bench-log", required=True,
                    help="where bench.py's output goes")
    a = ap.parse_args()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda *_: stop.set())
    alive, found = set(), {}
    deadline = time.monotonic() + a.seconds
    while not stop.is_set() and time.monotonic() < deadline:
        where = bench_dir(a.bench_log)
        if where is None or not os.path.isdir(where):
            stop.wait(0.05)
            continue
        before = set(found)
        bench_servers(where, found)
        for port in set(found) - before:
            # bench.py runs one server at a time: the older ones are gone
            alive.clear()
            alive.add(port)
            threading.Thread(target=job_list, args=(port, alive),
                             daemon=True).start()
            for _ in range(a.pages):
                threading.Thread(target=page, args=(port, alive),
                                 daemon=True).start()
            threading.Thread(target=scrape, args=(port, a.scrape_s, alive),
                             daemon=True).start()
        stop.wait(0.05)
    stop.set()
    total = {}
    for seen in served.values():
        for ep, (s, c) in seen.items():
            t = total.setdefault(ep, [0.0, 0])
            t[0] += s
            t[1] += c
    counts["server_ms_by_endpoint"] = {
        ep: {"requests": c, "total_ms": round(s * 1e3, 1),
             "mean_ms": round(s * 1e3 / c, 3) if c else None}
        for ep, (s, c) in total.items()}
    print(json.dumps(dict(counts, servers=len(found))))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
