#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""inplace_harness.py - plays the agent's part of the worker control channel
(docs/worker-protocol.md) for N dlaunch-train processes started here, over
socket pairs, and drives one membership change:

  abort     at step K, abort every rank and re-form with the same ranks
  shrink    at step K, SIGKILL rank X; the others re-form without it
  respawn   at step K, SIGKILL rank X; the others re-form, and a new
            process takes rank X, its checkpoint directory removed
  grow      at step K, abort every rank and re-form with one more: a new
            process without a checkpoint directory (a node joining)
  restart   at step K, SIGKILL rank X and every other process (today's
            path), start world - 1 new ones from rank 0's checkpoints
  double    at step K, abort every rank; while they form the new group the
            last rank is killed; a second abort must reach the others in
            the bootstrap, and they re-form without it
  garbage   at step K, send rank X a line that is not JSON: it must go
            on as a plain worker and the job end normally
  With --trigger fault, every mode starts when a rank logs the fault that
  DLAUNCH_DIST_FAULT injected (the caller sets it; ":kill" for the modes
  that kill), which the ranks cannot outrun: they wait for the abort.

  fault     rank X fails its ring all-reduce (DLAUNCH_DIST_FAULT, set by
            the caller); when it logs so, abort every rank and re-form
            with the same ranks

Prints one JSON line: the ranks' aborted and reformed steps, whether the
survivors kept their processes, rank 0's summary. Exit 0 when the job ran
to the end, 1 otherwise (with a reason). Everything is bounded by
--deadline; every process started here is killed on the way out.
"""
import argparse
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Worker:
    def __init__(self, rank):
        self.rank = rank
        self.proc = None
        self.sock = None
        self.buf = b""
        self.out = b""
        self.steps = []
        self.msgs = []
        self.hello = False
        self.aborted = None
        self.reformed = None
        self.summary = None
        self.log = None


class Harness:
    def __init__(self, a):
        self.a = a
        self.sel = selectors.DefaultSelector()
        self.workers = []
        self.deadline = time.monotonic() + a.deadline
        self.round = 1
        self.port = free_port()
        self.t_change = None  # when the membership change began
        self.result = {"mode": a.mode}

    def spawn(self, rank, world, round_, ckpt_dir, fault_env):
        w = Worker(rank)
        parent, child = socket.socketpair()
        env = dict(os.environ)
        # nodes of --nproc-per-node ranks each (default: one node)
        per_node = getattr(self.a, "nproc_per_node", None) or world
        env.update({
            "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank % per_node),
            "LOCAL_WORLD_SIZE": str(per_node),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self.port),
            "DLAUNCH_CONTROL_FD": str(child.fileno()),
            "DLAUNCH_CONTROL_VERSION": "1", "DLAUNCH_ROUND": str(round_),
            "OMP_NUM_THREADS": "1",
        })
        if not fault_env:
            env.pop("DLAUNCH_DIST_FAULT", None)
        args = [self.a.train, "--device", "cpu", "--timeout",
                "%ds" % self.a.timeout] + self.a.args
        if ckpt_dir:
            args += ["--checkpoint-dir", ckpt_dir]
        w.log = open("%s.rank%d.%d" % (self.a.log, rank, round_), "wb")
        w.proc = subprocess.Popen(args, env=env, pass_fds=[child.fileno()],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT,
                                  start_new_session=True)
        child.close()
        w.sock = parent
        parent.setblocking(False)
        os.set_blocking(w.proc.stdout.fileno(), False)
        self.sel.register(parent, selectors.EVENT_READ, (w, "ctl"))
        self.sel.register(w.proc.stdout, selectors.EVENT_READ, (w, "out"))
        return w

    def send(self, w, msg):
        try:
            w.sock.sendall((json.dumps(msg) + "\n").encode())
        except OSError:
            pass

    def pump(self, timeout):
        """reads what is there; returns the events seen"""
        events = []
        for key, _ in self.sel.select(timeout):
            w, kind = key.data
            try:
                data = os.read(key.fileobj.fileno(), 65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self.sel.unregister(key.fileobj)
                continue
            if kind == "out":
                w.log.write(data)
                w.log.flush()
                w.out += data
                while b"\n" in w.out:
                    line, w.out = w.out.split(b"\n", 1)
                    if line.startswith(b'{"summary"'):
                        w.summary = json.loads(line)["summary"]
                    if b"DLAUNCH_DIST_FAULT: failing" in line:
                        events.append(("fault", w))
                    if b"DLAUNCH_DIST_FAULT: hanging" in line:
                        events.append(("hang", w))
                continue
            w.buf += data
            while b"\n" in w.buf:
                line, w.buf = w.buf.split(b"\n", 1)
                m = json.loads(line)
                w.msgs.append(m)
                t = m["type"]
                if t == "hello":
                    w.hello = True
                    assert m["handles"] == ["abort", "membership", "dump"], m
                    self.send(w, {"type": "welcome", "version": 1})
                elif t == "step":
                    w.steps.append(m["step"])
                    events.append(("step", w))
                elif t == "aborted":
                    w.aborted = m
                elif t == "reformed":
                    w.reformed = m
                elif t == "dumped":
                    events.append(("dumped", w))
        return events

    def left(self):
        return self.deadline - time.monotonic()

    def wait_until(self, cond, what):
        while not cond():
            if self.left() <= 0:
                self.fail("timed out waiting for " + what)
            self.pump(min(0.5, self.left()))

    def fail(self, why):
        self.result["error"] = why
        self.finish(1)

    def finish(self, status):
        for w in self.workers:
            if w.proc.poll() is None and status != 0:
                os.killpg(w.proc.pid, signal.SIGKILL)
            try:
                w.proc.wait(timeout=max(1, self.left()))
            except subprocess.TimeoutExpired:
                os.killpg(w.proc.pid, signal.SIGKILL)
                w.proc.wait()
                self.result.setdefault("error", "rank %d did not exit" %
                                       w.rank)
                status = 1
        print(json.dumps(self.result))
        sys.exit(status)

    def reform(self, survivors, respawn_rank=None, grow=0):
        """abort the survivors, re-form them (ranks in list order) and a
        respawned process at respawn_rank, or grow new processes at the
        highest ranks"""
        old_round = self.round
        if self.t_change is None:
            self.t_change = time.monotonic()
        for w in survivors:
            self.send(w, {"type": "abort", "round": old_round,
                          "reason": "harness: " + self.a.mode})
        self.wait_until(lambda: all(w.aborted for w in survivors),
                        "aborted")
        t_abort = time.monotonic()
        self.round += 1
        self.port = free_port()
        world = len(survivors) + (1 if respawn_rank is not None else 0)
        world += grow
        ranks = [r for r in range(world) if r != respawn_rank]
        for w, r in zip(survivors, ranks):
            w.rank = r
            self.send(w, {
                "type": "membership", "round": self.round, "rank": r,
                "world_size": world, "local_rank": r,
                "local_world_size": world, "node_rank": 0, "nnodes": 1,
                "master_addr": "127.0.0.1", "master_port": self.port,
                "restart_count": self.round - 1,
                "store_prefix": "harness/%d/" % self.round})
        if respawn_rank is not None:
            d = self.a.ckpt_dir + ".rank%d" % respawn_rank
            subprocess.run(["rm", "-rf", d], check=True)
            self.workers.append(self.spawn(respawn_rank, world, self.round,
                                           d, False))
        for r in range(world - grow, world):
            self.workers.append(self.spawn(r, world, self.round, None,
                                           False))
        self.wait_until(lambda: all(w.reformed for w in survivors),
                        "reformed")
        steps = sorted({w.reformed["step"] for w in survivors})
        self.result.update({
            "aborted_steps": [w.aborted["step"] for w in survivors],
            "aborted_rounds": [w.aborted["round"] for w in survivors],
            "reformed_steps": steps,
            "reformed_rounds": sorted({w.reformed["round"]
                                       for w in survivors}),
            "reform_ms": round((time.monotonic() - t_abort) * 1e3, 1),
            "change_to_reformed_ms": round(
                (time.monotonic() - self.t_change) * 1e3, 1),
            "world_after": world,
        })

    def double(self, first):
        """a worker crashes during the re-form: the others are forming a
        group that will never be whole; a second abort must reach them
        inside the bootstrap, and they re-form without it"""
        self.t_change = time.monotonic()
        for w in first:
            self.send(w, {"type": "abort", "round": 1, "reason": "first"})
        self.wait_until(lambda: all(w.aborted for w in first), "aborted")
        victim = first[-1]
        others = first[:-1]
        self.port = free_port()
        for w in others:
            self.send(w, {
                "type": "membership", "round": 2, "rank": w.rank,
                "world_size": len(first), "local_rank": w.rank,
                "local_world_size": len(first), "node_rank": 0,
                "nnodes": 1, "master_addr": "127.0.0.1",
                "master_port": self.port, "restart_count": 1,
                "store_prefix": "harness/2/"})
        os.killpg(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait()
        self.sel.unregister(victim.sock)
        for w in others:
            w.aborted = None
        self.round = 2
        t0 = time.monotonic()
        self.reform(others)
        self.result["second_abort_to_reformed_ms"] = round(
            (time.monotonic() - t0) * 1e3, 1)

    def restart(self, first, victim):
        """today's path: every process stopped, world - 1 new ones resume
        from rank 0's checkpoint directory"""
        self.t_change = time.monotonic()
        for w in first:
            if w.proc.poll() is None:
                os.killpg(w.proc.pid, signal.SIGKILL)
            w.proc.wait()
            self.sel.unregister(w.sock)
            if w.proc.stdout in self.sel.get_map():
                self.sel.unregister(w.proc.stdout)
        self.round += 1
        self.port = free_port()
        d = self.a.ckpt_dir + ".rank0"
        for r in range(len(first) - 1):
            self.workers.append(self.spawn(r, len(first) - 1, self.round,
                                           d, False))
        self.result["world_after"] = len(first) - 1

    def first_step_after(self, top):
        """time from the change to the first step taken after it"""
        new = [w for w in self.workers if w.proc.poll() is None]
        base = {id(w): len(w.steps) for w in new}
        self.wait_until(lambda: any(len(w.steps) > base[id(w)]
                                    for w in new), "a step after the change")
        t = time.monotonic()
        step = min(w.steps[base[id(w)]] for w in new
                   if len(w.steps) > base[id(w)])
        self.result["change_to_step_ms"] = round(
            (t - self.t_change) * 1e3, 1)
        self.result["steps_before"] = top
        self.result["steps_lost"] = top - (step - 1)

    def run(self):
        a = self.a
        for r in range(a.world):
            d = a.ckpt_dir + ".rank%d" % r if a.ckpt_dir else None
            self.workers.append(self.spawn(r, a.world, 1, d, True))
        first = list(self.workers)
        pids = {w.rank: w.proc.pid for w in first}
        done = False
        while not done:
            if self.left() <= 0:
                self.fail("timed out before the membership change")
            for kind, w in self.pump(min(0.5, self.left())):
                if done:
                    break
                if (a.mode == "garbage" and kind == "step"
                        and w.rank == a.victim and w.steps[-1] >= a.at_step):
                    w.sock.sendall(b"this is not json\n")
                    done = True
                elif a.mode == "fault" and kind == "fault":
                    self.reform(first)
                    done = True
                elif ((kind == "fault" and a.trigger == "fault") or
                      (kind == "step" and a.trigger == "step"
                       and a.mode != "fault" and w.rank == a.victim
                       and w.steps[-1] >= a.at_step)):
                    top = max(max(x.steps or [0]) for x in first)
                    w = first[a.victim]
                    if a.mode == "abort":
                        self.reform(first)
                    elif a.mode == "double":
                        self.double(first)
                    elif a.mode == "restart":
                        self.restart(first, w)
                    elif a.mode == "grow":
                        self.reform(first, grow=1)
                    else:  # it may have killed itself (DLAUNCH_DIST_FAULT)
                        if w.proc.poll() is None:
                            os.killpg(w.proc.pid, signal.SIGKILL)
                        w.proc.wait()
                        self.sel.unregister(w.sock)
                        survivors = [x for x in first if x is not w]
                        self.reform(survivors, a.victim
                                    if a.mode == "respawn" else None)
                    done = True
                    self.first_step_after(top)
            if not done and all(w.proc.poll() is not None for w in first):
                self.fail("the job ended before the membership change")
        # to the end
        live = [w for w in self.workers if w.proc.returncode is None]
        self.wait_until(lambda: all(w.proc.poll() is not None
                                    for w in live), "the job's end")
        while self.pump(0.1) or any(self.sel.get_map().values()):
            if self.left() <= 0:
                break
        codes = {w.rank: w.proc.returncode for w in live}
        self.result["exit_codes"] = codes
        # the survivors are the processes started at the beginning
        self.result["survivor_pids_kept"] = sorted(
            w.proc.pid for w in first if w.proc.returncode == 0)
        self.result["new_processes"] = len(live) - len(
            [w for w in first if w in live])
        rank0 = [w for w in live if w.rank == 0]
        self.result["summary"] = rank0[0].summary if rank0 else None
        ok = all(c == 0 for c in codes.values()) and self.result["summary"]
        if not ok:
            self.fail("the job did not finish cleanly")
        self.finish(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--mode", required=True,
                   choices=["abort", "shrink", "respawn", "fault",
                            "garbage", "grow", "restart", "double"])
    p.add_argument("--world", type=int, default=3)
    p.add_argument("--at-step", type=int, default=3)
    p.add_argument("--trigger", choices=["step", "fault"], default="step",
                   help="start the change when the victim reports step "
                   "--at-step, or when a rank logs its DLAUNCH_DIST_FAULT "
                   "(deterministic: the ranks wait for the abort)")
    p.add_argument("--victim", type=int, default=1)
    p.add_argument("--timeout", type=int, default=10)
    p.add_argument("--deadline", type=float, default=60)
    p.add_argument("--ckpt-dir", default="")
    p.add_argument("--log", required=True)
    p.add_argument("args", nargs="*")
    a = p.parse_args()
    h = Harness(a)
    try:
        h.run()
    except SystemExit:
        raise
    except BaseException as e:  # never leave a process behind
        for w in h.workers:
            if w.proc.poll() is None:
                os.killpg(w.proc.pid, signal.SIGKILL)
                w.proc.wait()
        print(json.dumps({"error": "harness: %r" % e}))
        sys.exit(1)


if __name__ == "__main__":
    main()
