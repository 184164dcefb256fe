# SPDX-License-Identifier: Apache-2.0
"""cdp.py - a minimal Chrome DevTools Protocol client on the standard
library only: starts headless Chromium on a fresh profile, speaks the
WebSocket protocol (RFC 6455, client side: masked text frames out,
unfragmented or continued frames in) to one page target, and offers what
the status page test needs: navigate, evaluate, wait for a condition with
a deadline, set the viewport, take a screenshot."""

import base64
import json
import os
import socket
import struct
import subprocess
import time
import urllib.request


class CdpError(Exception):
    pass


class WebSocket:
    def __init__(self, url, timeout=30):
        # ws://127.0.0.1:PORT/devtools/page/ID
        rest = url[len("ws://"):]
        hostport, path = rest.split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            ("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise CdpError("websocket handshake: connection closed")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise CdpError("websocket handshake refused: %r" % head[:200])

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise CdpError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + masked)

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            if opcode == 0x8:
                raise CdpError("websocket closed by the browser")
            if opcode in (0x9, 0xA):  # ping, pong: Chromium sends none
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()


class Browser:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, chromium, profile_dir, timeout=30):
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--user-data-dir=" + profile_dir,
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        port_file = os.path.join(profile_dir, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        port = None
        while port is None:
            if self.proc.poll() is not None:
                raise CdpError("chromium exited with %d" % self.proc.returncode)
            try:
                with open(port_file) as f:
                    port = int(f.readline().strip())
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    raise CdpError("chromium did not open its DevTools port")
                time.sleep(0.05)
        targets = []
        while not any(t.get("type") == "page" for t in targets):
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port,
                                        timeout=5) as r:
                targets = json.load(r)
            if time.monotonic() > deadline:
                raise CdpError("chromium has no page target")
            time.sleep(0.05)
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = WebSocket(page["webSocketDebuggerUrl"])
        self.next_id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method,
                                 "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise CdpError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            # events (console, loads) are not needed: dropped

    def evaluate(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise CdpError("evaluate %s: %s" % (expr[:80], r["exceptionDetails"]))
        return r["result"].get("value")

    def navigate(self, url):
        self.call("Page.navigate", url=url)

    def wait(self, expr, timeout):
        """Evaluates expr every 50 ms until it is truthy; returns its value
        or None when timeout seconds passed first."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                v = self.evaluate(expr)
            except CdpError:
                v = None  # the page is between documents
            if v:
                return v
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def viewport(self, width, height, mobile):
        self.call("Emulation.setDeviceMetricsOverride", width=width,
                  height=height, deviceScaleFactor=1, mobile=mobile)

    def screenshot(self, path):
        r = self.call("Page.captureScreenshot", format="png",
                      captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
