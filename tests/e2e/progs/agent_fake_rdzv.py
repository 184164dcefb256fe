#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""agent_fake_rdzv.py - a scripted rendezvous server for one dlaunch agent.

    agent_fake_rdzv.py DIR

Speaks just enough of docs/http-api.md for a job of one node with one
worker, and holds one answer back to replay the race where an answer about
an old round reaches the agent after it has joined a new one:

  round 1  the first heartbeat is held (DIR/held appears; the test's worker
           then fails), the failure report answers "restart"
  round 2  once the agent watches round 2 (it has taken the new
           assignment), the held heartbeat is answered: 409, round 2,
           action "restart", as dlaunch-rdzv answers a stale round
  then     heartbeats of round 2 answer "continue"; a success report ends
           the job (SUCCEEDED, "stop"); any further join ends it FAILED

Writes its port to DIR/port and one line per event to stdout ("join 2",
"hb 1 held", "released", "hb 2", "watch 2", "report 2 succeeded", ...).
Standard library only; exits on its own after 60 s.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

DIR = sys.argv[1]
LOCK = threading.Condition()
S = {"round": 0, "state": "WAITING", "joins": 0, "held": False}
RELEASE = threading.Event()


def event(line):
    print(line, flush=True)


def status(action):
    return {"round": S["round"], "state": S["state"], "action": action,
            "restart_count": S["round"] - 1}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, code, obj):
        body = json.dumps(obj).encode()
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            event("answer lost (the agent closed the connection)")

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def do_POST(self):
        what = self.path.rsplit("/", 1)[-1]
        b = self.body()
        if what == "join":
            self.join()
        elif what == "heartbeat":
            self.heartbeat(b.get("round"))
        elif what == "report":
            self.report(b.get("round"), b.get("status"))
        elif what == "leave":
            self.answer(200, {"state": S["state"], "round": S["round"]})
        else:
            self.answer(404, {"error": "no such path"})

    def do_GET(self):
        q = parse_qs(urlparse(self.path).query)
        if "/watch" not in self.path:
            self.answer(200, {"failures": []})
            return
        r = int(q["round"][0])
        wait_s = int(q.get("wait_ms", ["30000"])[0]) / 1000
        event(f"watch {r}")
        if r == 2:
            RELEASE.set()
        with LOCK:
            LOCK.wait_for(lambda: S["round"] != r or
                          S["state"] in ("SUCCEEDED", "FAILED"), wait_s)
            running = S["round"] == r and S["state"] == "RUNNING"
            ended = S["state"] in ("SUCCEEDED", "FAILED")
            self.answer(200, status("continue" if running else
                                    "stop" if ended else "restart"))

    def join(self):
        with LOCK:
            S["joins"] += 1
            event(f"join {S['joins']}")
            if S["joins"] > 2:
                # the old round's answer restarted round 2: the bug
                S["state"] = "FAILED"
                LOCK.notify_all()
                self.answer(410, {"error": "job ended", "state": "FAILED",
                                  "action": "stop", "round": S["round"]})
                return
            S["round"] = S["joins"]
            S["state"] = "RUNNING"
            LOCK.notify_all()
            r = S["round"]
        self.answer(200, {
            "job": "stale", "round": r, "state": "RUNNING", "node_rank": 0,
            "nnodes": 1, "nproc": 1, "rank_offset": 0, "world_size": 1,
            "master_addr": "127.0.0.1", "master_port": 29555,
            "restart_count": r - 1, "max_restarts": 3,
            "heartbeat_interval_ms": 50, "heartbeat_timeout_ms": 2000,
            "members": []})

    def heartbeat(self, r):
        with LOCK:
            hold = r == 1 and not S["held"]
            if hold:
                S["held"] = True
        if hold:
            event("hb 1 held")
            open(os.path.join(DIR, "held"), "w").close()
            RELEASE.wait(30)
            event("released")
            with LOCK:
                self.answer(409, dict(status("restart"), error=(
                    f"stale round {r} (job stale is at round "
                    f"{S['round']})")))
            return
        event(f"hb {r}")
        with LOCK:
            if r != S["round"]:
                self.answer(409, dict(status("restart"),
                                      error=f"stale round {r}"))
            else:
                self.answer(200, status(
                    "stop" if S["state"] in ("SUCCEEDED", "FAILED")
                    else "continue"))

    def report(self, r, st):
        event(f"report {r} {st}")
        with LOCK:
            if r != S["round"]:
                self.answer(409, dict(status("restart"),
                                      error=f"stale round {r}"))
                return
            if st == "succeeded":
                S["state"] = "SUCCEEDED"
            else:
                S["state"] = "RESTARTING"
                S["round"] += 1
            LOCK.notify_all()
            self.answer(200, status("stop" if st == "succeeded"
                                    else "restart"))


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    tmp = os.path.join(DIR, "port.tmp")
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, os.path.join(DIR, "port"))
    threading.Timer(60, os._exit, (3,)).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()
