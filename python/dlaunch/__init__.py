# SPDX-License-Identifier: Apache-2.0
"""dlaunch - PyTorch training scripts re-form in place under dlaunch.

A script run by dlaunch gets a private channel to its agent
(docs/worker-protocol.md). With this module it keeps its process, its
parameters and its optimizer state when the job's membership changes (a
node lost, a node joining): it tears down the old process group, forms the
new one with the rank and world size the agent gives, takes the state of
the most advanced rank, re-shards its batches and goes on. The few lines a
script adds:

    import dlaunch
    job = dlaunch.Elastic(model, optimizer, num_samples=len(data),
                          global_batch=64, seed=0)
    for idx in job.batches(epochs):       # this rank's sample indices
        with job.step():                  # a step that may be dropped
            loss = loss_fn(job.model(x[idx]), y[idx])
            loss.backward()               # job.step() applies optimizer.step()

job.model is the DistributedDataParallel wrapper of the current group (it
changes at a re-form: use job.model, not a copy). Without dlaunch's channel
(torchrun, or DLAUNCH_CONTROL_FD unset) the same script runs as a plain
DDP script: a failure ends the process and the launcher restarts it.

Standard library and public torch APIs only; works with torch 1.13.
"""
import faulthandler
import gc
import hashlib
import io
import json
import os
import socket
import sys
import tempfile
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

__all__ = ["Elastic", "Channel"]

VERSION = 1
MAX_LINE = 65536


def _log(msg):
    sys.stderr.write("dlaunch[%d]: %s\n" % (os.getpid(), msg))
    sys.stderr.flush()


def _env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else default


def _first_prefix(rnd):
    """the store prefix of the round this process starts in: the one the
    agent gives the kept workers in that round's membership (a new worker
    of a re-formed round meets them under it)"""
    p = os.environ.get("DLAUNCH_STORE_PREFIX")
    if p:
        return p
    return "%s/%d/" % (os.environ.get("TORCHELASTIC_RUN_ID", "none"), rnd)


def _stacks():
    """every thread's Python stack, in faulthandler's format"""
    with tempfile.TemporaryFile() as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
        f.seek(0)
        return f.read().decode("utf-8", "replace")


def write_dump(path, rank):
    """the dump file of docs/worker-protocol.md ("dump"): {"pid", "rank",
    "python": every thread's stack}, written to path.tmp (0600, never
    through a link) and renamed to path; raises OSError or ValueError"""
    if not os.path.isabs(path):
        raise ValueError("dump path %r is not absolute" % path)
    data = json.dumps({"pid": os.getpid(), "rank": rank,
                       "python": _stacks()}).encode()
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
                 | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data + b"\n")
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Channel:
    """The worker side of the control channel: hello, a reader thread,
    the messages it keeps for the training loop, and the answers. A
    `dump` is answered by the reader thread itself (every thread's stack
    into the file, then `dumped`), so it is answered while the main thread
    is stuck, in a collective or anywhere else that releases the GIL."""

    def __init__(self, handles=("abort", "membership", "dump")):
        self.ok = False          # welcomed and usable
        self.rank = _env_int("RANK", 0)  # the rank a dump names
        self._cv = threading.Condition()
        self._abort = None       # the newest abort not yet acted on
        self._membership = None  # the newest membership not yet acted on
        self._fence = _env_int("DLAUNCH_ROUND", 0)
        self._closed = False
        self._wlock = threading.Lock()
        self._sock = None
        fd = os.environ.get("DLAUNCH_CONTROL_FD")
        if fd in (None, ""):
            return
        try:
            fd = int(fd)
            os.set_inheritable(fd, False)
            self._sock = socket.socket(fileno=fd)
            if self._sock.type != socket.SOCK_STREAM:
                raise OSError("not a stream socket")
        except (ValueError, OSError) as e:
            _log("DLAUNCH_CONTROL_FD=%s is no control channel (%s); "
                 "going on without one" % (os.environ["DLAUNCH_CONTROL_FD"], e))
            self._sock = None
            return
        self._welcome = threading.Event()
        self._send({"type": "hello", "version": VERSION,
                    "handles": list(handles)})
        threading.Thread(target=self._read, name="dlaunch-control",
                         daemon=True).start()
        # the agent answers at once; without a welcome the worker is plain
        self._welcome.wait(10)
        self.ok = self._welcome.is_set() and not self._closed

    def _send(self, obj):
        if self._sock is None:
            return False
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        try:
            with self._wlock:
                self._sock.sendall(line)
            return True
        except OSError as e:
            self._lost("cannot write to the agent: %s" % e)
            return False

    def _lost(self, why):
        with self._cv:
            if not self._closed:
                _log("control channel: %s; plain worker from now on" % why)
            self._closed = True
            self.ok = False
            self._cv.notify_all()
        self._welcome.set()  # wakes a wait for the welcome: none comes

    def _read(self):
        buf = b""
        while True:
            try:
                data = self._sock.recv(MAX_LINE)
            except OSError as e:
                self._lost("read failed: %s" % e)
                return
            if not data:
                self._lost("closed by the agent")
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self._handle(line)
            if len(buf) >= MAX_LINE:
                self._lost("a line past %d bytes" % MAX_LINE)
                return

    def _handle(self, line):
        try:
            msg = json.loads(line)
            if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
                raise ValueError("not an object with a type")
            t = msg["type"]
            if t in ("abort", "membership") and not isinstance(msg.get("round"), int):
                raise ValueError("%s without an integer round" % t)
            if t == "dump" and not (isinstance(msg.get("id"), str) and msg["id"]
                                    and isinstance(msg.get("path"), str)
                                    and msg["path"]):
                raise ValueError("dump without a string id and path")
        except ValueError as e:
            self._lost("bad line from the agent (%s)" % e)
            return
        if t == "dump":
            self._dump(msg["id"], msg["path"])
            return
        with self._cv:
            if t == "welcome":
                self._welcome.set()
            elif t == "abort":
                if msg["round"] >= self._fence and (
                        self._abort is None or msg["round"] > self._abort["round"]):
                    self._abort = msg
            elif t == "membership":
                if msg["round"] >= self._fence:
                    self._fence = msg["round"]
                    self._membership = msg
            self._cv.notify_all()

    def _dump(self, ident, path):
        answer = {"type": "dumped", "id": ident}
        try:
            write_dump(path, self.rank)
        except (OSError, ValueError) as e:
            _log("dump %s: cannot write %s: %s" % (ident, path, e))
            answer["error"] = "cannot write %s: %s" % (path, e)
        self._send(answer)

    def abort_pending(self):
        return self._abort is not None

    def wait_abort(self, timeout):
        """the pending abort (waiting up to timeout s), or None"""
        end = time.monotonic() + timeout
        with self._cv:
            while self._abort is None and not self._closed:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            return self._abort

    def take_membership(self, after_round, timeout):
        """the newest membership of a round >= after_round, waiting up to
        timeout s, or None; clears the abort it answers"""
        end = time.monotonic() + timeout
        with self._cv:
            while True:
                m = self._membership
                if m is not None and m["round"] >= after_round:
                    self._membership = None
                    if self._abort is not None and self._abort["round"] < m["round"]:
                        self._abort = None
                    return m
                left = end - time.monotonic()
                if left <= 0 or self._closed:
                    return None
                self._cv.wait(left)

    def send_step(self, step):
        if self.ok:
            self._send({"type": "step", "step": step})

    def send_aborted(self, rnd, step):
        return self._send({"type": "aborted", "round": rnd, "step": step})

    def send_reformed(self, rnd, step):
        return self._send({"type": "reformed", "round": rnd, "step": step})


class _Reform(Exception):
    """raised inside a step: the step is dropped and the group re-formed"""


class Elastic:
    """Owns the process group, the DDP wrapper and the batch order of a
    training loop; re-forms in place when the agent says so.

    model: the module (not wrapped); optimizer: its optimizer.
    num_samples, global_batch, seed: each epoch's order is a permutation of
    range(num_samples) drawn from seed and the epoch; each global batch of
    global_batch samples is split among the ranks by rank (global_batch must
    be a multiple of every world size the job runs at), so the order of
    samples does not depend on the world size.
    backend: "gloo" or "nccl" (device ids from LOCAL_RANK for nccl).
    timeout: seconds a collective may wait for a peer (the process group's
    timeout); reform_timeout: seconds to wait for the agent's messages and
    for the old group's teardown (match dlaunch's --reform-timeout).
    """

    def __init__(self, model, optimizer, num_samples, global_batch, seed=0,
                 backend="gloo", timeout=30.0, reform_timeout=30.0,
                 ddp_kwargs=None):
        self.raw_model = model
        self.optimizer = optimizer
        self.num_samples = int(num_samples)
        self.global_batch = int(global_batch)
        self.seed = int(seed)
        self.backend = backend
        self.timeout = float(timeout)
        self.reform_timeout = float(reform_timeout)
        self.ddp_kwargs = dict(ddp_kwargs or {})
        self.global_step = 0   # committed optimizer steps in the job
        self.epoch = 0
        self.position = 0      # samples of this epoch consumed
        self.round = _env_int("DLAUNCH_ROUND", 0)
        self.reforms = 0
        self.model = None
        self._store = None     # (addr, port, TCPStore), kept across rounds
        self._in_step = False
        self.channel = Channel()
        if self.channel.ok:
            _log("control channel open (round %d)" % self.round)
        self._form(_env_int("RANK", 0), _env_int("WORLD_SIZE", 1),
                   os.environ.get("MASTER_ADDR", "127.0.0.1"),
                   _env_int("MASTER_PORT", 29500),
                   _first_prefix(self.round))

    # -- the state a rank behind takes from the most advanced one
    def state_dict(self):
        return {"model": self.raw_model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "step": self.global_step, "epoch": self.epoch,
                "position": self.position, "seed": self.seed}

    def load_state_dict(self, sd):
        self.raw_model.load_state_dict(sd["model"])
        self.optimizer.load_state_dict(sd["optimizer"])
        self.global_step = sd["step"]
        self.epoch = sd["epoch"]
        self.position = sd["position"]

    def save(self, path):
        """write the state to path (atomically: a temporary, then rename)"""
        tmp = "%s.tmp.%d" % (path, os.getpid())
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)

    def load(self, path):
        """take the state of a checkpoint written by save(); the ranks then
        agree on the most advanced state, as after a re-form"""
        self.load_state_dict(torch.load(path))
        self._agree()

    def digest(self):
        """SHA-256 of parameters, optimizer state and position (hex)"""
        h = hashlib.sha256()
        for t in self.raw_model.state_dict().values():
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        b = io.BytesIO()
        torch.save(self.optimizer.state_dict(), b)
        h.update(b.getvalue())
        h.update(("%d %d %d" % (self.global_step, self.epoch,
                                self.position)).encode())
        return h.hexdigest()

    # -- the group
    def _store_for(self, addr, port, rank):
        """the round's key-value store: rank 0 serves it; a server this
        process already runs at that address is kept (each round's keys
        live under its own store_prefix), clients connect afresh"""
        if self._store and self._store[:2] == (addr, port):
            return self._store[2]
        # torchrun's agent serves the first round's store itself
        serve = rank == 0 and not (
            self.reforms == 0 and
            os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True")
        st = dist.TCPStore(addr, port, None, serve,
                           timedelta(seconds=self.timeout),
                           wait_for_workers=False)
        if serve:
            self._store = (addr, port, st)
        return st

    def _form(self, rank, world, addr, port, prefix):
        self.rank, self.world_size = rank, world
        self.channel.rank = rank
        if self.global_batch % world:
            raise ValueError("global batch %d is not a multiple of the world "
                             "size %d" % (self.global_batch, world))
        store = dist.PrefixStore(prefix, self._store_for(addr, port, rank))
        dist.init_process_group(self.backend, store=store, rank=rank,
                                world_size=world,
                                timeout=timedelta(seconds=self.timeout))
        kw = dict(self.ddp_kwargs)
        if self.backend == "nccl":
            dev = _env_int("LOCAL_RANK", 0)
            kw.setdefault("device_ids", [dev])
        self.model = DistributedDataParallel(self.raw_model, **kw)
        self._agree()

    def _agree(self):
        """the ranks behind take the state of the lowest rank at the
        highest committed step; then every rank checks it holds the same"""
        steps = [None] * self.world_size
        dist.all_gather_object(steps, self.global_step)
        top = max(steps)
        leader = steps.index(top)
        if any(s < top for s in steps):
            box = [self.state_dict() if self.rank == leader else None]
            dist.broadcast_object_list(box, src=leader)
            if self.global_step < top:
                self.load_state_dict(box[0])
                _log("rank %d took the state of step %d from rank %d"
                     % (self.rank, top, leader))
        digests = [None] * self.world_size
        dist.all_gather_object(digests, self.digest())
        if len(set(digests)) != 1:
            _log("rank %d: the replicas differ at step %d; exiting"
                 % (self.rank, top))
            os._exit(1)

    def _teardown(self):
        """drop the DDP wrapper and the group, bounded: torch can block in
        destroy_process_group; past reform_timeout the process exits 1 and
        the agent restarts the node"""
        done = threading.Event()

        def work():
            if os.environ.get("DLAUNCH_TEST_TEARDOWN_HANG") == "1":
                threading.Event().wait()   # testing hook: a hung teardown
            self.model = None
            gc.collect()
            dist.destroy_process_group()
            gc.collect()
            done.set()

        threading.Thread(target=work, daemon=True).start()
        if not done.wait(self.reform_timeout):
            _log("the old process group did not shut down in %.1f s; exiting "
                 "so that the agent restarts this worker" % self.reform_timeout)
            os._exit(1)

    def _reform(self, why):
        ch = self.channel
        ab = ch.wait_abort(self.reform_timeout)
        if ab is None:
            _log("%s and no abort from the agent; exiting" % why)
            os._exit(1)
        t0 = time.monotonic()
        self._teardown()
        while True:
            ab_round = ab["round"]
            if not ch.send_aborted(ab_round, self.global_step):
                os._exit(1)
            m = ch.take_membership(ab_round + 1, 2 * self.reform_timeout + 60)
            if m is None:
                _log("no membership after the abort of round %d; exiting"
                     % ab_round)
                os._exit(1)
            try:
                self.round = m["round"]
                self._form(m["rank"], m["world_size"], m["master_addr"],
                           m["master_port"], m["store_prefix"])
            except (RuntimeError, ValueError) as e:
                newer = ch.wait_abort(0)
                if newer is not None and newer["round"] >= m["round"]:
                    ab = newer
                    if dist.is_initialized():
                        self._teardown()
                    continue
                _log("forming round %d failed: %s; exiting" % (m["round"], e))
                os._exit(1)
            if ch.wait_abort(0) is not None and \
                    ch.wait_abort(0)["round"] >= m["round"]:
                ab = ch.wait_abort(0)
                self._teardown()
                continue
            break
        self.reforms += 1
        ch.send_reformed(self.round, self.global_step)
        _log("rank %d of %d: re-formed in place for round %d in %.0f ms, "
             "resuming after step %d" % (self.rank, self.world_size,
                                          self.round,
                                          (time.monotonic() - t0) * 1000,
                                          self.global_step))

    # -- the loop
    def _order(self):
        g = torch.Generator()
        g.manual_seed(self.seed * 1000003 + self.epoch)
        return torch.randperm(self.num_samples, generator=g)

    def batches(self, epochs):
        """this rank's sample indices of each global batch until epochs
        are done (a last partial global batch is dropped); a re-form
        between steps happens here"""
        per_epoch = self.num_samples // self.global_batch
        order, order_epoch = None, None
        while self.epoch < epochs:
            if self.channel.ok and self.channel.abort_pending():
                self._reform("the agent ended the round")
                continue
            if self.position >= per_epoch * self.global_batch:
                self.epoch += 1
                self.position = 0
                continue
            if order_epoch != self.epoch:
                order, order_epoch = self._order(), self.epoch
            per_rank = self.global_batch // self.world_size
            lo = self.position + self.rank * per_rank
            yield order[lo:lo + per_rank]

    def step(self):
        """a context manager around one step's forward and backward: on
        leaving it the optimizer steps and the step is committed; if a
        collective fails or the agent aborts the round, the step is
        dropped (nothing of it applied) and the group re-formed"""
        return _Step(self)


class _Step:
    def __init__(self, job):
        self.job = job

    def __enter__(self):
        j = self.job
        # buffers (batch norm statistics) change in the forward pass
        self.buffers = [b.detach().clone() for b in j.raw_model.buffers()]
        return j

    def __exit__(self, etype, exc, tb):
        j = self.job
        if etype is None:
            j.optimizer.step()
            j.optimizer.zero_grad(set_to_none=True)
            j.global_step += 1
            j.position += j.global_batch
            j.channel.send_step(j.global_step)
            return False
        if not (isinstance(exc, RuntimeError) and j.channel.ok):
            return False
        # a peer gone: the agent's abort follows; no abort, and the error
        # is the script's own: it goes up with its traceback
        if j.channel.wait_abort(j.reform_timeout) is None:
            return False
        # dropped: undo what the step changed before its collectives failed
        j.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for b, saved in zip(j.raw_model.buffers(), self.buffers):
                b.copy_(saved)
        j._reform("a collective failed (%s)" % str(exc).splitlines()[0][:200])
        return True
