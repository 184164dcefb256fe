#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""rdzv_hostile.py - hostile and heavy clients for dlaunch-rdzv.

Prints one TAP-style line per check ("ok - ...", "not ok - ...") for
faults_http.sh, which passes them on. Standard library only.

  rdzv_hostile.py input HOST PORT [TOKEN]   oversized, malformed, deep,
                                            wrongly typed requests; odd names
  rdzv_hostile.py auth HOST PORT TOKEN      missing / wrong / right token
  rdzv_hostile.py slow HOST PORT [TOKEN]    slow clients hold connections
                                            while others are served
  rdzv_hostile.py idle HOST PORT SECONDS    a silent client is cut off
  rdzv_hostile.py joins HOST PORT N [TOKEN] N concurrent joins of one job
  rdzv_hostile.py plain-to-tls HOST PORT CA plaintext to the TLS port, then
                                            HTTPS still works
"""

import http.client
import json
import socket
import ssl
import sys
import threading
import time

TIMEOUT = 10.0


def ok(what):
    print(f"ok - {what}", flush=True)


def not_ok(what):
    print(f"not ok - {what}", flush=True)


def check(what, cond, detail=""):
    if cond:
        ok(what)
    else:
        not_ok(f"{what}{' (' + detail + ')' if detail else ''}")
    return cond


def raw(host, port, data, read=True, timeout=TIMEOUT):
    """Send raw bytes; return (status or None, bytes read, how it ended):
    "answered" (a whole answer was read), "closed" (EOF), "reset"
    (connection reset or broken pipe) or "timeout" (nothing more came for
    `timeout` seconds, the connection still open)."""
    s = socket.create_connection((host, port), timeout=timeout)
    end = "timeout"
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            end = "reset"  # the server may close early on a hopeless request
        except socket.timeout:
            return None, b"", "timeout"  # it stopped reading, kept it open
        if not read:
            return None, b"", end
        chunks = []
        try:
            while True:
                c = s.recv(65536)
                if not c:
                    end = "closed"
                    break
                chunks.append(c)
                if b"\r\n\r\n" in b"".join(chunks):
                    head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
                    cl = 0
                    for line in head.split(b"\r\n")[1:]:
                        k, _, v = line.partition(b":")
                        if k.strip().lower() == b"content-length":
                            cl = int(v.strip() or 0)
                    if len(rest) >= cl:
                        end = "answered"
                        break
        except ConnectionResetError:
            end = "reset"
        except socket.timeout:
            end = "timeout"
        data = b"".join(chunks)
        status = None
        if data.startswith(b"HTTP/1."):
            try:
                status = int(data.split(b" ", 2)[1])
            except (IndexError, ValueError):
                pass
        return status, data, end
    finally:
        s.close()


def refused_or_closed(what, st, end):
    """A 4xx answer, or the connection closed or reset without an answer;
    silence until the timeout (the server holding the connection) fails."""
    check(f"{what}: refused with 4xx or closed",
          (st is not None and 400 <= st < 500)
          or (st is None and end in ("closed", "reset")),
          f"got {st}, connection {end}")


def request(host, port, method, path, body=None, token=None, headers=None,
            timeout=TIMEOUT):
    """One HTTP request; returns (status, parsed JSON or raw bytes)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    if token:
        h["Authorization"] = f"Bearer {token}"
    if headers:
        h.update(headers)
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    try:
        try:
            c.request(method, path, body=body, headers=h)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed before the whole body was sent
        try:
            r = c.getresponse()
            data = r.read()
        except (http.client.HTTPException, OSError) as e:
            return None, f"no answer: {e}"
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data
    finally:
        c.close()


def healthy(host, port):
    try:
        st, _ = request(host, port, "GET", "/healthz", timeout=5)
        return st == 200
    except OSError:
        return False


def join_body(node, **kw):
    b = {"node_id": node, "incarnation": "inc" + node[:40].replace("/", "_"),
         "nproc": 1, "min_nodes": 1, "max_nodes": 1, "max_restarts": 0,
         "wait_ms": 2000}
    b.update(kw)
    return b


def is_error_json(body):
    """{"error": "<message>"}, the message non-empty and not capitalised."""
    return (isinstance(body, dict) and isinstance(body.get("error"), str)
            and body["error"] != "" and not body["error"][0].isupper())


def is_libevent_413(st, body):
    """libevent 2.1 answers a body over evhttp's limit itself, before any
    handler runs and with no hook to change it, with a short HTML page;
    docs/http-api.md documents this one exception to JSON errors."""
    return st == 413 and "Request Entity Too Large" in str(body)


def status_4xx(what, st, body, want):
    """want: a set of acceptable statuses."""
    good = st in want and (is_error_json(body) or is_libevent_413(st, body))
    detail = f"got {st} {str(body)[:120]!r}"
    check(f"{what}: {'/'.join(str(w) for w in sorted(want))} with an error "
          f"message", good, detail)


def cmd_input(host, port, token):
    join = "/v1/jobs/hostile/join"

    # bodies over the limit (default 64 KiB)
    big = json.dumps(join_body("n1", pad="x" * (70 * 1024)))
    st, body = request(host, port, "POST", join, big, token)
    status_4xx("body of 70 KiB", st, body, {413})
    st, body = request(host, port, "POST", join,
                       json.dumps(join_body("x" * (1 << 20))), token)
    status_4xx("node_id of 1 MiB (body over the limit)", st, body, {413})

    # bad Content-Length
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    for cl in ("abc", "-1", "99999999999999999999999", "1 2", "0x10"):
        st, data, end = raw(host, port, (
            f"POST {join} HTTP/1.1\r\nHost: x\r\n{auth}"
            f"Content-Type: application/json\r\nContent-Length: {cl}\r\n"
            f"Connection: close\r\n\r\n{{}}").encode())
        refused_or_closed(f"Content-Length {cl!r}", st, end)
    # Content-Length larger than what comes, then the client goes away
    s = socket.create_connection((host, port), timeout=TIMEOUT)
    s.sendall((f"POST {join} HTTP/1.1\r\nHost: x\r\n{auth}"
               "Content-Length: 1000\r\n\r\n{\"node").encode())
    s.close()
    check("short body then hang-up: server still healthy", healthy(host, port))

    # huge headers: one 1 MiB header line, and 10000 small headers
    st, data, end = raw(host, port, (
        f"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n{auth}X-Big: " + "a" * (1 << 20)
        + "\r\nConnection: close\r\n\r\n").encode())
    refused_or_closed("1 MiB header", st, end)
    st, data, end = raw(host, port, (
        f"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n{auth}"
        + "".join(f"X-H{i}: v\r\n" for i in range(10000))
        + "Connection: close\r\n\r\n").encode())
    refused_or_closed("10000 headers", st, end)
    check("after huge headers: server still healthy", healthy(host, port))

    # malformed, deep, wrongly typed JSON
    for name, b in [
            ("truncated JSON", '{"node_id": "n1", "nproc": '),
            ("not JSON", "hello"),
            ("empty body", ""),
            ("JSON with a NUL byte", '{"node_id": "n\u0000x"}'),
            ("invalid UTF-8", b'{"node_id": "\xff\xfe"}'),
            ("nested 20000 deep", "[" * 20000 + "]" * 20000),
            ("object nested 5000 deep",
             '{"a":' * 5000 + "1" + "}" * 5000),
            ("array instead of object", json.dumps([join_body("n1")])),
            ("nproc as a string", json.dumps(join_body("n1", nproc="8"))),
            ("nproc 0", json.dumps(join_body("n1", nproc=0))),
            ("nproc -1", json.dumps(join_body("n1", nproc=-1))),
            ("nproc 1e300", json.dumps(join_body("n1", nproc=1e300))),
            ("nproc 2^64", '{"node_id": "n1", "incarnation": "i", '
             '"nproc": 18446744073709551616, "min_nodes": 1, '
             '"max_nodes": 1, "max_restarts": 0}'),
            ("min_nodes above max_nodes",
             json.dumps(join_body("n1", min_nodes=3, max_nodes=2))),
            ("node_id as a number", json.dumps(join_body("n1", node_id=5))),
            ("node_id null", json.dumps(join_body("n1", node_id=None))),
            ("missing node_id", json.dumps(
                {k: v for k, v in join_body("n1").items() if k != "node_id"})),
            ("heartbeat_timeout as an object",
             json.dumps(join_body("n1", heartbeat_timeout={"s": 1}))),
            ("heartbeat_timeout \"-5s\"",
             json.dumps(join_body("n1", heartbeat_timeout="-5s"))),
            ("addr not an IP", json.dumps(join_body("n1", addr="$(id)"))),
            ("master_port 70000",
             json.dumps(join_body("n1", master_port=70000))),
    ]:
        st, body = request(host, port, "POST", join, b, token)
        status_4xx(name, st, body, {400})
    st, body = request(host, port, "POST", "/v1/jobs/hostile/report",
                       {"node_id": "n1", "incarnation": "x", "round": "one",
                        "status": "failed", "failures": "many"}, token)
    status_4xx("report with round as a string", st, body, {400, 404})

    # odd names in the body and in the path
    for name, node in [("node_id ../x", "../x"),
                       ("node_id with shell metacharacters",
                        "a;rm -rf /;$(id)`id`|x"),
                       ("node_id with a space", "a b"),
                       ("node_id starting with a dot", ".hidden"),
                       ("node_id of 129 bytes", "n" * 129),
                       ("node_id with a newline", "a\nb"),
                       ("node_id of UTF-8 letters", "n\u00e9\u4e2d")]:
        st, body = request(host, port, "POST", join, join_body(node), token)
        status_4xx(name, st, body, {400})
    for name, path in [("job ..", "/v1/jobs/../join"),
                       ("job %2e%2e%2fx", "/v1/jobs/%2e%2e%2fx/join"),
                       ("job with %00", "/v1/jobs/a%00b/join"),
                       ("job of 200 bytes", "/v1/jobs/" + "j" * 200 + "/join"),
                       ("job with ;", "/v1/jobs/a;b/join")]:
        st, body = request(host, port, "POST", path, join_body("n1"), token)
        status_4xx(f"path with {name}", st, body, {400, 404})
    st, body = request(host, port, "PUT", "/v1/jobs/hostile/kv/..%2Fpasswd",
                       "x", token)
    status_4xx("kv key ../passwd", st, body, {400, 404})
    st, body = request(host, port, "DELETE", "/v1/jobs", None, token)
    status_4xx("DELETE /v1/jobs", st, body, {404, 405})

    # after all that, the server works for a well-behaved client
    check("after the hostile input: /healthz answers", healthy(host, port))
    st, body = request(host, port, "POST", "/v1/jobs/afterall/join",
                       join_body("good-node"), token)
    check("after the hostile input: a valid join forms a round",
          st == 200 and isinstance(body, dict) and body.get("node_rank") == 0
          and body.get("world_size") == 1, f"got {st} {str(body)[:120]!r}")
    st, body = request(host, port, "GET", "/v1/jobs/hostile", None, token)
    check("no job was created by the refused requests", st == 404,
          f"got {st} {str(body)[:120]!r}")


def cmd_auth(host, port, token):
    st, body = request(host, port, "GET", "/v1/jobs")
    status_4xx("no token", st, body, {401})
    st, body = request(host, port, "GET", "/v1/jobs", token="wrong" + token)
    status_4xx("wrong token", st, body, {401})
    st, body = request(host, port, "GET", "/v1/jobs", token=token[:-1])
    status_4xx("token missing its last byte", st, body, {401})
    st, body = request(host, port, "GET", "/v1/jobs", token=token + "x")
    status_4xx("token with a byte more", st, body, {401})
    st, body = request(host, port, "GET", "/v1/jobs",
                       headers={"Authorization": f"Basic {token}"})
    status_4xx("Basic instead of Bearer", st, body, {401})
    st, body = request(host, port, "POST", "/v1/jobs/authjob/join",
                       join_body("n1"), token="wrong")
    status_4xx("join with a wrong token", st, body, {401})
    st, body = request(host, port, "GET", "/v1/jobs/authjob", None, token)
    check("the refused join created no job", st == 404, f"got {st}")
    st, body = request(host, port, "GET", "/v1/jobs", token=token)
    check("right token: 200", st == 200, f"got {st}")
    check("/healthz needs no token", healthy(host, port))


def cmd_slow(host, port, token):
    # 200 clients that send a request line and then one header byte every
    # half second, and 50 that connect and send nothing
    socks = []
    for i in range(250):
        try:
            s = socket.create_connection((host, port), timeout=5)
            if i < 200:
                s.sendall(b"POST /v1/jobs/slow/join HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        except OSError as e:
            not_ok(f"slow clients: connection {i} refused: {e}")
            break
    stop = threading.Event()

    def dribble():
        while not stop.is_set():
            for s in socks[:200]:
                try:
                    s.send(b"X")
                except OSError:
                    pass
            stop.wait(0.5)

    t = threading.Thread(target=dribble, daemon=True)
    t.start()
    worst = 0.0
    fails = 0
    try:
        for i in range(20):
            t0 = time.monotonic()
            try:
                st, body = request(host, port, "POST",
                                   f"/v1/jobs/fast{i}/join",
                                   join_body(f"fast{i}"), token, timeout=5)
                if st != 200:
                    fails += 1
            except OSError:
                fails += 1
            worst = max(worst, time.monotonic() - t0)
        check(f"250 slow clients connected: 20 other clients served "
              f"(worst {worst:.2f} s)", fails == 0 and worst < 2.0,
              f"{fails} failed")
    finally:
        stop.set()
        t.join()
        for s in socks:
            s.close()
    check("after the slow clients: server still healthy", healthy(host, port))


def cmd_idle(host, port, limit_s):
    """A client that sends half a request and then nothing must be cut off
    by the server's --idle-timeout (limit_s) without hurting others."""
    t0 = time.monotonic()
    s = socket.create_connection((host, port), timeout=limit_s + 5)
    s.sendall(b"POST /v1/jobs/idle/join HTTP/1.1\r\nHost: x\r\nContent-")
    closed = False
    try:
        s.recv(1024)  # EOF or an error answer: either way it was cut off
        closed = True
    except (ConnectionResetError, socket.timeout):
        closed = False
    took = time.monotonic() - t0
    s.close()
    check(f"a client silent mid-request is disconnected after the idle "
          f"timeout ({took:.1f} s, limit {limit_s} s)",
          closed and took < limit_s + 4, "still open")


def cmd_joins(host, port, n, token):
    results = [None] * n
    start = threading.Barrier(n)

    def one(i):
        node = f"node{i:03d}"
        body = join_body(node, nproc=2, min_nodes=n, max_nodes=n,
                         last_call_timeout=30, wait_ms=20000)
        try:
            start.wait(10)
            st, b = request(host, port, "POST", "/v1/jobs/many/join", body,
                            token, timeout=40)
            while st == 202:
                st, b = request(host, port, "POST", "/v1/jobs/many/join",
                                body, token, timeout=40)
            results[i] = (st, b)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            results[i] = (None, str(e))

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    took = time.monotonic() - t0
    good = [r[1] for r in results
            if r and r[0] == 200 and isinstance(r[1], dict)]
    check(f"{n} concurrent joins: all answered 200 ({took:.1f} s)",
          len(good) == n,
          f"{len(good)} good; e.g. {[r for r in results if not r or r[0] != 200][:2]!r:.200}")
    if len(good) != n:
        return
    ranks = sorted(b.get("node_rank") for b in good)
    check(f"{n} concurrent joins: node ranks 0..{n - 1}, each once",
          ranks == list(range(n)))
    rounds = {b.get("round") for b in good}
    worlds = {b.get("world_size") for b in good}
    check("one round, world size 2n", len(rounds) == 1 and worlds == {2 * n},
          f"rounds {rounds} worlds {worlds}")
    offs = all(b.get("rank_offset") == 2 * b.get("node_rank") for b in good)
    check("rank offsets are 2 x node rank (no overlap)", offs)
    masters = {(b.get("master_addr"), b.get("master_port")) for b in good}
    check("every node got the same master", len(masters) == 1, str(masters))


def cmd_plain_to_tls(host, port, ca):
    st, data, end = raw(host, port,
                        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", timeout=5)
    check("plaintext HTTP to the TLS port gets no HTTP answer and is closed",
          (st is None and end in ("closed", "reset")) or st == 400,
          f"got {st} {data[:80]!r}, connection {end}")
    # a client that connects and sends garbage, then a TLS record with junk
    raw(host, port, b"\x16\x03\x01\x00\x05hello" * 100, timeout=5)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    c = http.client.HTTPSConnection(host, port, timeout=TIMEOUT, context=ctx)
    try:
        c.request("GET", "/healthz")
        r = c.getresponse()
        check("HTTPS still served after the plaintext clients",
              r.status == 200, f"got {r.status}")
    except OSError as e:
        not_ok(f"HTTPS still served after the plaintext clients ({e})")
    finally:
        c.close()


def main():
    a = sys.argv[1:]
    if not a:
        print(__doc__)
        return 2
    cmd, host, port = a[0], a[1], int(a[2])
    if cmd == "input":
        cmd_input(host, port, a[3] if len(a) > 3 else None)
    elif cmd == "auth":
        cmd_auth(host, port, a[3])
    elif cmd == "slow":
        cmd_slow(host, port, a[3] if len(a) > 3 else None)
    elif cmd == "idle":
        cmd_idle(host, port, float(a[3]))
    elif cmd == "joins":
        cmd_joins(host, port, int(a[3]), a[4] if len(a) > 4 else None)
    elif cmd == "plain-to-tls":
        cmd_plain_to_tls(host, port, a[3])
    else:
        print(f"rdzv_hostile.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
