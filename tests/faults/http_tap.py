#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""http_tap.py - a transparent HTTP/1.1 proxy that logs every exchange.

Stands between one agent and dlaunch-rdzv, on the agent's host, so a case
can see what that agent itself sent and what it got back (the server keeps
no per-request log, and its /metrics count the requests of every agent
together). Each downstream connection gets its own upstream connection, so
what happens to the connections (keep-alive, a half-dead socket after a
partition) is what would have happened to the agent's own.

For each answered request one line goes to LOG (flushed at once):

  conn=N METHOD PATH for_round=R -> STATUS round=J action=A state=S

R is the round the request names (the query string's or the JSON body's,
"-" when it names none); J, A and S are the answer's JSON "round",
"action" and "state" ("-" when absent). A request whose answer never came is not logged. When the
upstream connection cannot be made, the downstream one is reset, as a
failed connect would look to the agent.

  http_tap.py --target HOST:PORT --listen HOST:PORT --log FILE

"listening on PORT" is printed on stdout once it accepts.
"""

import argparse
import asyncio
import itertools
import json
import sys
import urllib.parse

from proxy_util import rst

MAX_HEAD = 64 * 1024
MAX_BODY = 8 << 20

conn_ids = itertools.count(1)


def header(head, name):
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == name:
            return v.strip()
    return None


def content_length(head):
    v = header(head, b"content-length")
    n = int(v) if v and v.isdigit() else 0
    if n > MAX_BODY:
        raise ValueError(f"body of {n} bytes")
    return n


def json_field(body, name):
    try:
        v = json.loads(body).get(name)
    except (ValueError, AttributeError):
        return None
    return None if v is None else str(v)


def request_round(path, body):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
    if "round" in q:
        return q["round"][0]
    return json_field(body, "round") or "-"


async def handle(creader, cwriter, target, log):
    cid = next(conn_ids)
    host, port = target.rsplit(":", 1)
    try:
        sreader, swriter = await asyncio.open_connection(host, int(port))
    except OSError:
        rst(cwriter)
        return
    try:
        while True:
            head = await creader.readuntil(b"\r\n\r\n")
            body = await creader.readexactly(content_length(head))
            swriter.write(head + body)
            await swriter.drain()
            first = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            method, path = first[0], first[1] if len(first) > 1 else "?"
            rnd = request_round(path, body)
            rhead = await sreader.readuntil(b"\r\n\r\n")
            rbody = await sreader.readexactly(content_length(rhead))
            cwriter.write(rhead + rbody)
            await cwriter.drain()
            status = rhead.split(b" ", 2)[1].decode("latin-1")
            log.write(f"conn={cid} {method} {path.split('?')[0]} "
                      f"for_round={rnd} -> {status} "
                      f"round={json_field(rbody, 'round') or '-'} "
                      f"action={json_field(rbody, 'action') or '-'} "
                      f"state={json_field(rbody, 'state') or '-'}\n")
            log.flush()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
            ConnectionError, OSError, ValueError, IndexError):
        pass
    finally:
        cwriter.close()
        swriter.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    log = open(args.log, "a", encoding="utf-8")
    lhost, lport = args.listen.rsplit(":", 1)
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, args.target, log), lhost, int(lport),
        limit=MAX_HEAD)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
