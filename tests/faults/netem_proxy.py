#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""netem_proxy.py - a TCP proxy that makes a bad network, in user space.

The kernel here has no sch_netem, so `tc qdisc ... netem delay 200ms loss
20%` cannot be used. This proxy stands between the agents and dlaunch-rdzv
and does to each TCP connection what such a network does to it, as seen by
the application:

  * delay: every chunk of bytes, in each direction, is delivered DELAY ms
    after it was read (order kept), so a request/answer pair costs 2*DELAY.
  * loss: a lost segment is retransmitted by TCP after a retransmission
    timeout; the application sees the bytes late, not missing. Each chunk is
    held back, with probability LOSS, for one more RTO (max(200 ms, 2*DELAY),
    Linux's floor and a round trip), and again with the same probability
    (a lost retransmission doubles the wait), up to 3 times.
  * with probability RESET per connection, the connection is reset (RST) at
    a random moment within its first seconds: what an application sees when
    loss outlasts its own timeouts or a middlebox gives up.

With --http1-only it is also a front that speaks HTTP/1.1 only, as many
load balancers and proxies do: a connection that opens with HTTP/2's
preface (prior knowledge, as gRPC over plain TCP does) is answered "505
HTTP Version Not Supported" and closed; anything else is relayed.

It listens on 127.0.0.1 (port 0: any; the port is printed on stdout as
"listening on PORT") and forwards to TARGET_HOST:TARGET_PORT. The seed makes
the random choices repeatable. Statistics go to stderr at exit.

  netem_proxy.py --target 127.0.0.1:29400 --delay-ms 200 --loss 0.2 \
                 --reset 0.05 --seed 7
"""

import argparse
import asyncio
import random
import signal
import sys

from proxy_util import rst

stats = {"connections": 0, "chunks": 0, "retransmits": 0, "resets": 0,
         "h2_refused": 0}
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


async def pump(reader, writer, args, rng, rto, stop):
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def read_side():
        while True:
            try:
                data = await reader.read(65536)
            except (ConnectionError, OSError):
                data = b""
            due = loop.time() + args.delay_ms / 1000.0
            extra = 0.0
            for _ in range(3):
                if data and rng.random() < args.loss:
                    extra = extra * 2 if extra else rto
                    stats["retransmits"] += 1
                else:
                    break
            await queue.put((due + extra, data))
            if not data:
                return

    async def write_side():
        last_due = 0.0
        while True:
            due, data = await queue.get()
            # a held-back chunk also holds back what follows it (TCP order)
            last_due = max(last_due, due)
            wait = last_due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                try:
                    writer.write_eof()
                except (OSError, RuntimeError):
                    pass
                return
            stats["chunks"] += 1
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                return

    r = asyncio.ensure_future(read_side())
    w = asyncio.ensure_future(write_side())
    done, pending = await asyncio.wait(
        [w, stop], return_when=asyncio.FIRST_COMPLETED)
    for t in (r, w):
        t.cancel()


async def refuse_h2(creader, cwriter):
    """The first bytes of a connection (the part of HTTP/2's preface they
    match); answers and closes it when they are the whole preface."""
    head = b""
    while len(head) < len(H2_PREFACE) and H2_PREFACE.startswith(head):
        try:
            data = await creader.read(len(H2_PREFACE) - len(head))
        except (ConnectionError, OSError):
            data = b""
        if not data:
            break
        head += data
    if head == H2_PREFACE:
        stats["h2_refused"] += 1
        print(f"netem_proxy: HTTP/2 refused ({stats['h2_refused']})",
              file=sys.stderr, flush=True)
        cwriter.write(b"HTTP/1.1 505 HTTP Version Not Supported\r\n"
                      b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        try:
            await cwriter.drain()
        except (ConnectionError, OSError):
            pass
        cwriter.close()
        return None
    return head


async def handle(creader, cwriter, args, rng):
    stats["connections"] += 1
    host, port = args.target.rsplit(":", 1)
    head = b""
    if args.http1_only:
        head = await refuse_h2(creader, cwriter)
        if head is None:
            return
    try:
        sreader, swriter = await asyncio.open_connection(host, int(port))
    except OSError:
        rst(cwriter)
        return
    if head:
        swriter.write(head)
    rto = max(0.2, 2 * args.delay_ms / 1000.0)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    if rng.random() < args.reset:
        def reset_now():
            if not stop.done():
                stats["resets"] += 1
                stop.set_result(True)
        loop.call_later(rng.uniform(0.0, 3.0), reset_now)
    up = asyncio.ensure_future(pump(creader, swriter, args, rng, rto, stop))
    down = asyncio.ensure_future(pump(sreader, cwriter, args, rng, rto, stop))
    await asyncio.wait([up, down], return_when=asyncio.ALL_COMPLETED)
    if stop.done():
        rst(cwriter)
        rst(swriter)
    else:
        stop.cancel()
        cwriter.close()
        swriter.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--listen-port", type=int, default=0)
    ap.add_argument("--delay-ms", type=float, default=200)
    ap.add_argument("--loss", type=float, default=0.2)
    ap.add_argument("--reset", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--http1-only", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, args, rng), "127.0.0.1", args.listen_port)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on {port}", flush=True)
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, lambda: done.done() or done.set_result(1))
    await done
    server.close()
    print(f"netem_proxy: {stats}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
