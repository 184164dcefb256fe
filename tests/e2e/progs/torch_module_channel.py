# SPDX-License-Identifier: Apache-2.0
"""torch_module_channel.py - the dlaunch module's control channel
(python/dlaunch/, docs/worker-protocol.md) against a socket pair that plays
the agent: prints "ok - ..." / "not ok - ..." lines (torch_module.sh).
Last, a dump while the main thread is stuck in a gloo all-reduce (a peer
process joined the group and never takes part): the file names the line
the main thread is on."""
import fcntl
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import dlaunch

failed = 0


def check(what, cond):
    global failed
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    failed += 0 if cond else 1


def read_line(s):
    buf = b""
    s.settimeout(5)
    while not buf.endswith(b"\n"):
        buf += s.recv(1)
    return json.loads(buf)


def channel(agent_lines, env_round="1"):
    """a Channel whose agent answers hello with agent_lines (bytes)"""
    a, w = socket.socketpair()
    os.set_inheritable(w.fileno(), True)
    os.environ["DLAUNCH_CONTROL_FD"] = str(w.fileno())
    os.environ["DLAUNCH_ROUND"] = env_round
    if agent_lines is None:
        a.shutdown(socket.SHUT_WR)  # the agent closes its end at once
    else:
        a.sendall(agent_lines)
    ch = dlaunch.Channel()
    w.detach()
    return a, ch


a, ch = channel(b'{"type":"welcome","version":1}\n')
hello = read_line(a)
check("hello first, version 1, handles abort, membership and dump",
      hello == {"type": "hello", "version": 1,
                "handles": ["abort", "membership", "dump"]})
check("welcomed", ch.ok)
fd = int(os.environ["DLAUNCH_CONTROL_FD"])
check("the descriptor is close-on-exec",
      fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC)
# fencing: an abort of a round below DLAUNCH_ROUND is ignored
a.sendall(b'{"type":"abort","round":0,"reason":"old"}\n'
          b'{"type":"unknown","x":1}\n')
check("an abort of an older round is fenced; an unknown type ignored",
      ch.wait_abort(0.5) is None and ch.ok)
a.sendall(b'{"type":"abort","round":1,"reason":"node lost"}\n')
ab = ch.wait_abort(5)
check("abort of round 1 kept", ab is not None and ab["round"] == 1)
ch.send_aborted(1, 7)
check("aborted names the round and the step",
      read_line(a) == {"type": "aborted", "round": 1, "step": 7})
m = {"type": "membership", "round": 2, "rank": 1, "world_size": 2,
     "local_rank": 0, "local_world_size": 1, "node_rank": 1, "nnodes": 2,
     "master_addr": "127.0.0.1", "master_port": 1, "restart_count": 0,
     "store_prefix": "j/2/"}
a.sendall((json.dumps(m) + "\n").encode())
got = ch.take_membership(2, 5)
check("membership of round 2 taken, the abort it answers cleared",
      got == m and ch.wait_abort(0) is None)
a.sendall(b'{"type":"membership","round":1,"rank":0}\n')
check("a membership of a lower round is fenced",
      ch.take_membership(1, 0.5) is None)
ch.send_step(8)
check("step", read_line(a) == {"type": "step", "step": 8})
a.sendall(b"this is not json\n")
t = time.monotonic()
while ch.ok and time.monotonic() - t < 5:
    time.sleep(0.01)
check("a line that is not JSON: plain from then on", not ch.ok)

t = time.monotonic()
a, ch = channel(None)
check("the agent closes before its welcome: plain at once (%.1f s)"
      % (time.monotonic() - t), not ch.ok and time.monotonic() - t < 5)

os.environ["DLAUNCH_CONTROL_FD"] = "banana"
ch = dlaunch.Channel()
check("DLAUNCH_CONTROL_FD that is no number: plain, no crash", not ch.ok)
r, w = os.pipe()
os.environ["DLAUNCH_CONTROL_FD"] = str(w)
ch = dlaunch.Channel()
check("DLAUNCH_CONTROL_FD that is no socket: plain, no crash", not ch.ok)
del os.environ["DLAUNCH_CONTROL_FD"]
check("no DLAUNCH_CONTROL_FD: plain", not dlaunch.Channel().ok)

# --- dump: the reader thread answers while the main thread is stuck
PEER = """
import sys, time
from datetime import timedelta
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 2, False,
                      timeout=timedelta(seconds=30))
dist.init_process_group("gloo", store=store, rank=1, world_size=2,
                        timeout=timedelta(seconds=30))
time.sleep(60)  # in the group, never in the collective
"""
MARK = "STUCK" + "-HERE"
with open(__file__) as f:
    stuck_line = [i + 1 for i, t in enumerate(f) if t.rstrip().endswith(MARK)][0]
tmp = tempfile.mkdtemp()
a, ch = channel(b'{"type":"welcome","version":1}\n')
read_line(a)  # hello
a.sendall(b'{"type":"dump","id":"rel","path":"relative.json"}\n')
ans = read_line(a)
check("a dump to a relative path: answered with the reason, still welcomed",
      ans.get("id") == "rel" and "not absolute" in ans.get("error", "")
      and ch.ok)
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
peer = subprocess.Popen([sys.executable, "-c", PEER, str(port)])
store = dist.TCPStore("127.0.0.1", port, 2, True,
                      timeout=timedelta(seconds=30))
dist.init_process_group("gloo", store=store, rank=0, world_size=2,
                        timeout=timedelta(seconds=30))
seen = {}


def agent():
    """dumps until the main thread is seen in the all-reduce (20 s)"""
    end = time.monotonic() + 20
    n = 0
    try:
        while time.monotonic() < end and "dump" not in seen:
            n += 1
            path = os.path.join(tmp, "d%d.json" % n)
            t0 = time.monotonic()
            a.sendall((json.dumps({"type": "dump", "id": "d%d" % n,
                                   "path": path}) + "\n").encode())
            ans = read_line(a)
            seen["ms"] = (time.monotonic() - t0) * 1e3
            seen["answer"] = ans
            if ans != {"type": "dumped", "id": "d%d" % n}:
                break
            with open(path) as f:
                d = json.load(f)
            seen["mode"] = stat.S_IMODE(os.stat(path).st_mode)
            if 'line %d' % stuck_line in d["python"]:
                seen["dump"] = d
            time.sleep(0.1)
    finally:
        peer.kill()  # the all-reduce fails: the main thread goes on


t = threading.Thread(target=agent)
t.start()
try:
    dist.all_reduce(torch.zeros(4))  # STUCK-HERE
except RuntimeError:
    pass
t.join()
peer.wait()
d = seen.get("dump")
check("dump while the main thread is in a gloo all-reduce: the file names "
      "its line %d (answered in %.0f ms)" % (stuck_line, seen.get("ms", -1)),
      d is not None)
check("the dump file: pid, rank, 0600, and every thread (the reader's too)",
      d is not None and d["pid"] == os.getpid() and d["rank"] == 0
      and seen["mode"] == 0o600 and "dlaunch" in d["python"]
      and d["python"].count("Thread 0x") >= 2)
check("no temporary file left", not [x for x in os.listdir(tmp)
                                     if x.endswith(".tmp")])
a.sendall(b'{"type":"dump","id":"x"}\n')
t0 = time.monotonic()
while ch.ok and time.monotonic() - t0 < 5:
    time.sleep(0.01)
check("a dump without a path: plain from then on", not ch.ok)
sys.exit(1 if failed else 0)
