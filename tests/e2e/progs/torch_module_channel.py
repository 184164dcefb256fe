# SPDX-License-Identifier: Apache-2.0
"""torch_module_channel.py - the dlaunch module's control channel
(python/dlaunch/, docs/worker-protocol.md) against a socket pair that plays
the agent: prints "ok - ..." / "not ok - ..." lines (torch_module.sh)."""
import fcntl
import json
import os
import socket
import sys
import time

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
check("hello first, version 1, handles abort, membership and preempt",
      hello == {"type": "hello", "version": 1,
                "handles": ["abort", "membership", "preempt"]})
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

# preempt: the welcome's grace, the first stop step kept
a, ch = channel(b'{"type":"welcome","version":1,"preempt_grace_ms":60000}\n')
read_line(a)
check("the agent's preempt grace is read from its welcome",
      ch.ok and ch.preempt_grace == 60.0)
a.sendall(b'{"type":"preempt","step":42}\n{"type":"preempt","step":7}\n')
t = time.monotonic()
while ch.preempt_step is None and time.monotonic() - t < 5:
    time.sleep(0.01)
time.sleep(0.1)
check("preempt: the first stop step stands", ch.preempt_step == 42 and ch.ok)
a.sendall(b'{"type":"preempt","step":-1}\n')
t = time.monotonic()
while ch.ok and time.monotonic() - t < 5:
    time.sleep(0.01)
check("a preempt with a negative step: plain from then on", not ch.ok)

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
sys.exit(1 if failed else 0)
