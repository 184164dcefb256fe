#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""hang_harness.py - plays the agent for N dlaunch-train processes (the
spawning and channel handling of inplace_harness.py) and asks them where
they are with the control channel's `dump` (docs/worker-protocol.md):

  hang    rank --victim hangs: by DLAUNCH_DIST_FAULT=CALL:sleep|loop|read
          (set by the caller, with DLAUNCH_DIST_FAULT_RANK), or with --stop
          by SIGSTOP from here once it reports step --at-step. Then every
          rank is dumped, again every 0.2 s, until the others are seen
          inside the collective the victim never entered (or the
          deadline). Checks: each rank that can answer answers within
          --dump-timeout, with a file of the contract (pid, rank, flight,
          threads); the ranks agree on what each sequence number is; an
          injected victim's last entered collective is below every other
          rank's, all of it finished, and every other rank is inside the
          next one (entered, not finished); a stopped victim does not
          answer, and every other rank is inside a collective. Then every
          process is killed.
  dump    a healthy job: when rank 0 reports step --at-step every rank is
          dumped once; all answer, and the job then runs to its end (exit
          0 everywhere).

Prints one JSON line (the dumps' answer times, each rank's last entered
sequence number, ...). Exit 0 when the checks hold, 1 otherwise (with a
reason). Everything is bounded by --deadline; every process started here
is killed on the way out.
"""
import argparse
import json
import os
import signal
import sys
import time

from inplace_harness import Harness


def last_entered(dump):
    fl = dump.get("flight") or []
    return max((e["seq"] for e in fl), default=0)


def unfinished(dump):
    return sorted(e["seq"] for e in dump.get("flight") or []
                  if e["state"] == "entered")


def stopped(pid):
    """every thread of pid is stopped (a stop signal takes effect on each
    thread in its own time)"""
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
        for t in tasks:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "T":
                    return False
        return bool(tasks)
    except OSError:
        return False


class DumpHarness(Harness):
    def __init__(self, a):
        super().__init__(a)
        self.n_dumps = 0
        self.dump_dir = a.log + ".dumps"
        os.makedirs(self.dump_dir, exist_ok=True)
        self.result.update({"victim": a.victim, "world": a.world})

    def dump_all(self, workers):
        """one dump of every worker: {rank: {"ms", "dump" | "error"}} for
        those that answered within --dump-timeout"""
        self.n_dumps += 1
        ident = "harness-%d" % self.n_dumps
        sent = {}
        for w in workers:
            path = os.path.join(self.dump_dir,
                                "%s.rank%d.json" % (ident, w.rank))
            self.send(w, {"type": "dump", "id": ident, "path": path})
            sent[w.rank] = (w, path, time.monotonic())
        got = {}
        end = time.monotonic() + self.a.dump_timeout
        while len(got) < len(sent):
            for rank, (w, path, t0) in sent.items():
                if rank in got:
                    continue
                ans = [m for m in w.msgs if m.get("type") == "dumped"
                       and m.get("id") == ident]
                if not ans:
                    continue
                res = {"ms": round((time.monotonic() - t0) * 1e3, 1)}
                if "error" in ans[0]:
                    res["error"] = ans[0]["error"]
                else:
                    with open(path) as f:
                        res["dump"] = json.load(f)
                got[rank] = res
            left = end - time.monotonic()
            if len(got) == len(sent) or left <= 0:
                break
            self.pump(min(0.05, left))
        return got

    def check_files(self, got):
        """every answer is a file of the contract, and the ranks agree on
        what each sequence number is"""
        seen = {}
        for rank, res in got.items():
            if "error" in res:
                self.fail("rank %d could not write its dump: %s" %
                          (rank, res["error"]))
            d = res["dump"]
            w = [x for x in self.workers if x.rank == rank][0]
            if d.get("pid") != w.proc.pid or d.get("rank") != rank:
                self.fail("rank %d: dump names pid %s rank %s" %
                          (rank, d.get("pid"), d.get("rank")))
            if not isinstance(d.get("threads"), str):
                self.fail("rank %d: no threads text" % rank)
            for e in d.get("flight", []):
                key = (e["op"], e["bytes"])
                if seen.setdefault(e["seq"], key) != key:
                    self.fail("seq %d is %s on one rank and %s on rank %d"
                              % (e["seq"], seen[e["seq"]], key, rank))

    def start(self):
        a = self.a
        for r in range(a.world):
            self.workers.append(self.spawn(r, a.world, 1, None, True))

    def kill_all(self):
        for w in self.workers:
            if w.proc.poll() is None:
                os.killpg(w.proc.pid, signal.SIGKILL)
                w.proc.wait()

    def wait_hang(self, victim):
        """until the victim logs its injected hang, or is stopped here"""
        while True:
            if self.left() <= 0:
                self.fail("timed out waiting for the hang")
            for kind, w in self.pump(min(0.5, self.left())):
                if w is not victim:
                    continue
                if kind == "hang" and not self.a.stop:
                    return
                if (kind == "step" and self.a.stop
                        and w.steps[-1] >= self.a.at_step):
                    os.killpg(w.proc.pid, signal.SIGSTOP)
                    self.wait_until(lambda: stopped(w.proc.pid),
                                    "every thread of the victim stopped")
                    return
            if any(w.proc.poll() is not None for w in self.workers):
                self.fail("a rank exited before the hang")

    def stuck(self, got, victim):
        """the state the checks want, or None to dump again"""
        others = [w.rank for w in self.workers if w is not victim]
        if any(r not in got for r in others):
            self.fail("ranks %s did not answer the dump within %.1f s "
                      "(answered: %s)" % (others, self.a.dump_timeout,
                                          sorted(got)))
        if self.a.stop:
            if victim.rank in got:
                self.fail("the stopped rank answered a dump")
            if all(unfinished(got[r]["dump"]) for r in others):
                return {"victim_answered": False}
            return None
        if victim.rank not in got:
            self.fail("the hung rank did not answer the dump within %.1f s"
                      % self.a.dump_timeout)
        vd = got[victim.rank]["dump"]
        low = last_entered(vd)
        if unfinished(vd):
            self.fail("the hung rank has collectives in flight: %s" %
                      unfinished(vd))
        if "not inside a collective" not in vd["threads"]:
            self.fail("the hung rank's threads text: %r" % vd["threads"])
        if all(low + 1 in unfinished(got[r]["dump"]) and
               last_entered(got[r]["dump"]) > low for r in others):
            return {"victim_answered": True, "stuck_seq": low + 1}
        return None

    def run_hang(self):
        self.start()
        victim = self.workers[self.a.victim]
        self.wait_hang(victim)
        t_hang = time.monotonic()
        while True:
            got = self.dump_all(self.workers)
            self.check_files(got)
            verdict = self.stuck(got, victim)
            if verdict is not None:
                break
            if self.left() <= 0:
                self.fail("the other ranks were never seen stuck: %s" %
                          {r: unfinished(g["dump"]) for r, g in
                           got.items()})
            self.pump(0.2)
        self.result.update(verdict)
        self.result.update({
            "mode": "stop" if self.a.stop else "injected",
            "dumps": self.n_dumps,
            "hang_to_verdict_ms": round((time.monotonic() - t_hang) * 1e3),
            "dump_ms": {r: g["ms"] for r, g in sorted(got.items())},
            "last_entered": {r: last_entered(g["dump"])
                             for r, g in sorted(got.items())},
            "threads": {r: g["dump"]["threads"]
                        for r, g in sorted(got.items())},
        })
        self.kill_all()
        self.finish(0)

    def run_dump(self):
        self.start()
        rank0 = self.workers[0]
        self.wait_until(lambda: rank0.steps and
                        rank0.steps[-1] >= self.a.at_step, "the step")
        got = self.dump_all(self.workers)
        if len(got) != len(self.workers):
            self.fail("only ranks %s answered the dump" % sorted(got))
        self.check_files(got)
        steps_at_dump = {w.rank: len(w.steps) for w in self.workers}
        self.result.update({
            "dump_ms": {r: g["ms"] for r, g in sorted(got.items())},
            "entries": {r: len(g["dump"].get("flight", []))
                        for r, g in sorted(got.items())},
        })
        self.wait_until(lambda: all(w.proc.poll() is not None
                                    for w in self.workers), "the job's end")
        while self.pump(0.1):
            if self.left() <= 0:
                break
        codes = {w.rank: w.proc.returncode for w in self.workers}
        self.result["exit_codes"] = codes
        self.result["steps_after_dump"] = {
            w.rank: len(w.steps) - steps_at_dump[w.rank]
            for w in self.workers}
        self.result["summary"] = rank0.summary
        if any(c != 0 for c in codes.values()) or not rank0.summary:
            self.fail("the job did not finish cleanly after the dump")
        self.finish(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--train", required=True)
    p.add_argument("--mode", required=True, choices=["hang", "dump"])
    p.add_argument("--world", type=int, default=4)
    p.add_argument("--nproc-per-node", type=int, default=0,
                   help="ranks per node (LOCAL_RANK, LOCAL_WORLD_SIZE); "
                   "default: one node")
    p.add_argument("--victim", type=int, default=1)
    p.add_argument("--stop", action="store_true",
                   help="hang: SIGSTOP the victim at step --at-step "
                   "instead of waiting for its injected hang")
    p.add_argument("--at-step", type=int, default=3)
    p.add_argument("--dump-timeout", type=float, default=2.0)
    p.add_argument("--timeout", type=int, default=60)
    p.add_argument("--deadline", type=float, default=60)
    p.add_argument("--log", required=True)
    p.add_argument("args", nargs="*")
    a = p.parse_args()
    h = DumpHarness(a)
    try:
        h.run_hang() if a.mode == "hang" else h.run_dump()
    except SystemExit:
        h.kill_all()
        raise
    except BaseException as e:  # never leave a process behind
        h.kill_all()
        print(json.dumps({"error": "harness: %r" % e}))
        sys.exit(1)


if __name__ == "__main__":
    main()
