#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""control_worker.py - a worker that speaks the worker side of the control
channel (docs/worker-protocol.md, version 1) for the agent's tests.

It steps every CW_STEP_MS milliseconds (sending `step`), answers `abort`
with `aborted` and `membership` with `reformed`, keeps to the fencing rule
(never acts on a round lower than one it has seen in a membership), and
exits 0 once the file $CW_DIR/stop (or $FAULT_DIR/done) exists. What happens to it is appended
to $CW_DIR/<node>.<local rank>.<pid>.log, one event a line:

    start <pid> <rank> <world size> <round> <wall ns>
    hello
    welcome
    step <n>       (every 20th step)
    abort <round>
    membership <round> <rank> <world size> <local rank> <node rank> <nnodes> <restart count> <master addr>:<port> <store prefix> <wall ns>

CW_MODE (or CW_MODE_<local rank>, which wins) picks a behaviour:
    normal        as above
    plain         never says hello
    ignore_abort  says hello, never answers abort (keeps stepping)
    hang          says hello, then neither reads nor writes again
    crash_reform  exits 3 on membership
    garbage       says hello, then a line that is not JSON
    huge          says hello, then a line of 70000 bytes
    close         says hello, reads the welcome, then closes its end
    version2      says hello with version 2
"""
import json
import os
import select
import socket
import sys
import time

D = os.environ["CW_DIR"]
LOCAL = int(os.environ["LOCAL_RANK"])
MODE = os.environ.get("CW_MODE_%d" % LOCAL, os.environ.get("CW_MODE", "normal"))
STEP_S = int(os.environ.get("CW_STEP_MS", "50")) / 1000.0
NODE = os.environ.get("DLAUNCH_NODE_ID", "node")
LOG = os.path.join(D, "%s.%d.%d.log" % (NODE, LOCAL, os.getpid()))


def record(*words):
    with open(LOG, "a") as f:
        f.write(" ".join(str(w) for w in words) + "\n")


def ranks_record(round_, rank, world, restart, master):
    """with FAULT_DIR (the reliability suite), the record of
    tests/faults/worker.sh, at start and at each membership: the checker
    proves no rank was held twice in a round, kept workers included"""
    d = os.environ.get("FAULT_DIR")
    if not d:
        return
    line = "%s %s %d %s %d %s %s %s %s\n" % (
        round_, rank, os.getpid(), os.environ.get("FAULT_NODE", NODE), LOCAL,
        world, restart, master, os.environ.get("DLAUNCH_JOB_ID", "none"))
    fd = os.open(os.path.join(d, "ranks.log"),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, line.encode())
    os.close(fd)


def stop_requested():
    return os.path.exists(os.path.join(D, "stop")) or (
        "FAULT_DIR" in os.environ and
        os.path.exists(os.path.join(os.environ["FAULT_DIR"], "done")))


record("start", os.getpid(), os.environ["RANK"], os.environ["WORLD_SIZE"],
       os.environ.get("DLAUNCH_ROUND", "?"), time.time_ns())
ranks_record(os.environ.get("DLAUNCH_ROUND", "none"), os.environ["RANK"],
             os.environ["WORLD_SIZE"],
             os.environ.get("TORCHELASTIC_RESTART_COUNT", "none"),
             "%s:%s" % (os.environ.get("MASTER_ADDR", "none"),
                        os.environ.get("MASTER_PORT", "none")))
fd = int(os.environ.get("DLAUNCH_CONTROL_FD", "-1"))
if fd < 0 or MODE == "plain":
    while not stop_requested():
        time.sleep(STEP_S)
    sys.exit(0)
os.set_inheritable(fd, False)
sock = socket.socket(fileno=fd)


def send(obj):
    sock.sendall((json.dumps(obj) + "\n").encode())


send({"type": "hello", "version": 2 if MODE == "version2" else 1,
      "handles": ["abort", "membership", "dump"]})
record("hello")
if MODE == "hang":
    while not stop_requested():
        time.sleep(0.05)
    sys.exit(0)
if MODE == "garbage":
    sock.sendall(b"this is not json\n")
elif MODE == "huge":
    sock.sendall(b'{"type":"step","step":1,"pad":"' + b"x" * 70000 + b'"}\n')
elif MODE == "close":
    sock.recv(65536)  # the welcome: the agent has taken the hello
    record("welcome")
    sock.close()
    sock = None

step = 0
seen_round = 0   # the highest round seen in a membership
aborted = False  # between abort and membership: no steps
buf = b""
next_step = time.monotonic() + STEP_S
while not stop_requested():
    timeout = max(0.0, next_step - time.monotonic())
    ready = select.select([sock], [], [], timeout)[0] if sock else \
        time.sleep(timeout)
    if ready:
        data = sock.recv(65536)
        if not data:
            record("eof")
            sock = None
            continue
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            t = msg.get("type")
            if t == "welcome":
                record("welcome")
            elif t == "abort":
                if msg["round"] < seen_round:
                    record("fenced abort", msg["round"])
                    continue
                record("abort", msg["round"])
                aborted = True
                if MODE != "ignore_abort":
                    send({"type": "aborted", "round": msg["round"],
                          "step": step})
            elif t == "membership":
                if msg["round"] < seen_round:
                    record("fenced membership", msg["round"])
                    continue
                seen_round = msg["round"]
                record("membership", msg["round"], msg["rank"],
                       msg["world_size"], msg["local_rank"],
                       msg["node_rank"], msg["nnodes"],
                       msg["restart_count"],
                       "%s:%d" % (msg["master_addr"], msg["master_port"]),
                       msg["store_prefix"], time.time_ns())
                ranks_record(msg["round"], msg["rank"], msg["world_size"],
                             msg["restart_count"],
                             "%s:%d" % (msg["master_addr"],
                                        msg["master_port"]))
                if MODE == "crash_reform":
                    sys.exit(3)
                aborted = False
                send({"type": "reformed", "round": msg["round"],
                      "step": step})
    if time.monotonic() >= next_step:
        next_step += STEP_S
        if not aborted or MODE == "ignore_abort":
            step += 1
            if step % 20 == 0:
                record("step", step)
            if sock and MODE not in ("garbage", "huge"):
                try:
                    send({"type": "step", "step": step})
                except OSError:
                    sock = None
sys.exit(0)
