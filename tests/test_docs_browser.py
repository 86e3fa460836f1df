"""The built site in a real browser: the landing page, a reference page and a gallery page open in
headless Chromium without a console error, an uncaught exception or a resource that fails to load.

The pages are served over HTTP on loopback (as a reader's browser gets them, not as ``file://``
URLs, whose fetches browsers refuse), and the browser is driven through the DevTools protocol
with a small WebSocket client from the standard library, so the check needs nothing installed
but Chromium (Debian: ``apt-get install chromium``); without it the test skips, saying so. The
site is the one tests/test_docs.py builds, once per session (1.5-2.5 minutes from a clean
checkout); the browser part takes a few seconds.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
from urllib.parse import urlsplit

import pytest

from tests.test_docs import built_site

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PAGES = ("index.html", "reference/generated/judge.Classifier.html", "auto_examples/plot_your_own_labels.html")


@pytest.fixture(scope="module")
def browser():
    path = next((p for p in map(shutil.which, BROWSERS) if p), None)
    if path is None:
        pytest.skip(f"no Chromium found ({', '.join(BROWSERS)}): install one (Debian: apt-get install chromium) "
                    "to open the built site in a real browser")
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return built_site(tmp_path_factory)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the test reports what failed; the server's log adds nothing
        pass


@pytest.fixture(scope="module")
def served(site):
    build, html = site
    if build.returncode != 0:
        pytest.skip("the site did not build: tests/test_docs.py says why")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class DevTools:
    """A DevTools protocol session over one WebSocket (RFC 6455: masked client frames, text only)."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"DevTools handshake refused: {head[:200]!r}")
        self.buffer = head.split(b"\r\n\r\n", 1)[1]
        self.next_id = 0

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the browser closed the DevTools connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def send(self, method: str, **params) -> int:
        self.next_id += 1
        payload = json.dumps({"id": self.next_id, "method": method, "params": params}).encode()
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
        return self.next_id

    def receive(self) -> dict:
        message = b""
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            data = self._read(n)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError("the browser closed the DevTools connection")
            if opcode in (0x1, 0x0):
                message += data
                if first & 0x80:  # the last fragment
                    return json.loads(message)

    def call(self, method: str, **params) -> dict:
        """Send a command and return its result; events that arrive meanwhile go to ``self.events``."""
        wanted = self.send(method, **params)
        while True:
            msg = self.receive()
            if msg.get("id") == wanted:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def close(self):
        self.sock.close()


def problems_of(events: list[dict]) -> list[str]:
    """Console errors and assertions, uncaught exceptions, and error log entries (a failed load)."""
    out = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description", "")))
                                                             for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"uncaught: {d.get('exception', {}).get('description') or d.get('text')} ({d.get('url', '')})")
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            if urlsplit(entry.get("url", "")).path == "/favicon.ico":
                continue  # the browser asks the host's root for an icon no page links to
            out.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
    return out


def test_pages_open_in_chromium_without_console_errors(browser, served):
    profile = tempfile.mkdtemp(prefix="judge-docs-chromium-")
    proc = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        port, deadline, seen = None, time.time() + 60, []
        while port is None:  # Chromium prints where DevTools listens on stderr once it is up
            line = proc.stderr.readline()
            seen.append(line)
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
            elif (not line and proc.poll() is not None) or time.time() > deadline:
                pytest.fail(f"{browser} did not start DevTools: {''.join(seen)[-2000:]}")
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe from filling
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30).read())
        page = next(t for t in targets if t.get("type") == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        tools.events = []
        for domain in ("Page", "Runtime", "Log"):
            tools.call(f"{domain}.enable")
        found = {}
        for name in PAGES:
            tools.events = []
            tools.call("Page.navigate", url=f"{served}/{name}")
            end = time.time() + 30
            while not any(e.get("method") == "Page.loadEventFired" for e in tools.events):
                if time.time() > end:
                    pytest.fail(f"{name} did not finish loading in 30 s")
                tools.events.append(tools.receive())
            settle = tools.send("Runtime.evaluate", expression="new Promise(r => setTimeout(r, 500))",
                                awaitPromise=True)  # late scripts: the theme's, MathJax's
            while True:
                msg = tools.receive()
                if msg.get("id") == settle:
                    break
                tools.events.append(msg)
            title = tools.call("Runtime.evaluate", expression="document.title")["result"]["value"]
            assert "trie-judge" in title, (name, title)
            found[name] = problems_of(tools.events)
        tools.close()
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(profile, ignore_errors=True)
    bad = {name: p for name, p in found.items() if p}
    assert not bad, json.dumps(bad, indent=1)[:4000]
