"""Issue 43: faults under load, counted. Every request in flight gets an answer or a clear refusal.

* SIGTERM with 32 requests in flight (``judge serve`` in a subprocess, on the tiny model saved
  to a folder, ``--drain-seconds 1``): each client reads a complete response, a 200 with the
  answers the model gives alone or a 503 that says the drain time ran out; none sees its
  connection closed without one; the process exits within 10 s of the signal.
* A client that disconnects while its request is being scored in a batch with others costs
  them nothing: they get the answers they get alone.
* A scorer that raises on one request's item fails that request only (500 with the request
  id); the others of the same batch are answered, with the answers they get alone.

Servers listen on 127.0.0.1 only and are stopped here; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from judge.decisions import Decider  # noqa: E402
from judge.server.app import ServerConfig, create_app  # noqa: E402
from judge.server.contract import SystemOneRequest, to_questions  # noqa: E402
from judge.testing import Reference  # noqa: E402
from tests.server.test_app import CHOICE, NOUL, body, post, serve  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
N_FLIGHT = 32


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(url):
    return httpx.get(url + "/healthz", timeout=30).json()


def _until(what, check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}")
        time.sleep(0.02)


def _same_answers(got: dict, alone: dict) -> None:
    """A wire answer (``/v1/systemone``) equals the Decider's own answer to the request alone."""
    for qid, a in alone.items():
        g = got[qid]
        if a.type == "noul":
            assert abs(g["noul"] - a.noul) <= 1e-5, qid
        else:
            assert g["choice"] == a.choice, qid
            for k, v in a.probabilities.items():
                assert abs(g["probabilities"][k] - v) <= 1e-5, qid


# ----------------------------------------------------------------------------- raw HTTP: sees what the client sees

def _send_all_but_the_last_byte(port: int, payload: dict) -> tuple[socket.socket, bytes]:
    data = json.dumps(payload).encode()
    raw = (b"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           + f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(raw[:-1])
    return s, raw[-1:]


def _read_response(s: socket.socket):
    """(status, headers, body) of the one response on ``s``, or ("reset" | "closed", {}, what was read)."""
    chunks = []
    try:
        while True:
            part = s.recv(65536)
            if not part:
                break
            chunks.append(part)
    except ConnectionResetError:
        return "reset", {}, b"".join(chunks)
    finally:
        s.close()
    data = b"".join(chunks)
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep or not head.startswith(b"HTTP/1.1 "):
        return "closed", {}, data
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, rest


# ----------------------------------------------------------------------------- SIGTERM with 32 in flight

def _flight_request(i: int) -> dict:
    team = {"type": "choice", "instructions": f"Which of the queues handles ticket {i}?",
            "criteria": {f"Queue {j:03d}": None for j in range(255)}}
    return body({"refund": NOUL, "team": team}, state=f"ticket #{i}: I was charged twice. " + "More words. " * 40)


@contextlib.contextmanager
def _judge_serve(model_dir, log_path, *extra):
    port = _free_port()
    with open(log_path, "wb") as log:
        p = subprocess.Popen([sys.executable, "-m", "judge.cli", "serve", "--model", model_dir, "--host", "127.0.0.1",
                              "--port", str(port), "--log-level", "warning", "--torch-threads", "1", *extra],
                             cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"judge serve did not start: {Path(log_path).read_text()[-2000:]}")
            time.sleep(0.2)
        yield url, port, p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)


def test_sigterm_with_32_requests_in_flight_answers_or_refuses_each_and_exits_within_10_s(tiny_dir, tiny_llama,
                                                                                         tmp_path, record_property):
    payloads = [_flight_request(i) for i in range(N_FLIGHT)]
    with _judge_serve(tiny_dir, tmp_path / "server.log", "--drain-seconds", "1") as (url, port, p):
        # every request is sent but its last byte, then the last bytes together: all 32 reach the server at once
        pending = [_send_all_but_the_last_byte(port, x) for x in payloads]
        for s, last in pending:
            s.sendall(last)
        _until("the 32 requests in flight", lambda: _health(url)["in_flight"] == N_FLIGHT)
        before = _health(url)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        with ThreadPoolExecutor(N_FLIGHT) as ex:
            responses = list(ex.map(lambda sl: _read_response(sl[0]), pending))
        code = p.wait(60)
        exit_s = time.monotonic() - t0
    log = (tmp_path / "server.log").read_text()
    lost = [(i, r[0], r[2][:200]) for i, r in enumerate(responses) if not isinstance(r[0], int)]
    assert not lost, f"clients left without a response: {lost}\n{log[-2000:]}"
    answered = [i for i, r in enumerate(responses) if r[0] == 200]
    refused = [i for i, r in enumerate(responses) if r[0] == 503]
    assert len(answered) + len(refused) == N_FLIGHT, [(r[0], r[2][:200]) for r in responses]
    for i in refused:
        _, headers, raw = responses[i]
        detail = json.loads(raw)["detail"]
        assert detail["error_type"] == "overloaded_error" and headers["retry-after"] == "1"
        assert re.fullmatch(r"the server is shutting down and its drain time \(1 s, --drain-seconds\) ran out before "
                            r"this request was scored; retry on another replica or after restart\.",
                            detail["message"]), detail["message"]
    decider = Decider(*tiny_llama)
    for i in answered:
        alone = decider.ask(payloads[i]["state"], to_questions(SystemOneRequest(**payloads[i])))
        _same_answers(json.loads(responses[i][2])["answers"], alone)
    assert code in (0, -signal.SIGTERM), log[-2000:]
    assert exit_s <= 10.0, f"the server took {exit_s:.1f} s to exit after SIGTERM"
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-3000:]
    figures = {"in_flight_at_signal": before["in_flight"], "answered": len(answered), "refused": len(refused),
               "exit_s": round(exit_s, 2)}
    record_property("sigterm_32_in_flight", figures)
    print(f"\nSIGTERM with 32 in flight: {figures}")


# ----------------------------------------------------------------------------- one batch, one bad neighbour

class _Gated(Reference):
    """The reference's exact scores, with a pause on the calls that score the blocker or several requests
    (so a batch can be caught while it runs) and a fault on every call that scores a ``BOOM`` state."""

    def __init__(self, model, tok, pause):
        super().__init__(model, tok)
        self.pause, self.calls = pause, []

    def score(self, queries, **kw):
        marks = {m for q in queries for t, _ in q.pieces for m in re.findall(r"ticket #\d+|blocker|BOOM", t)}
        self.calls.append(marks)
        if "BOOM" in marks:
            raise RuntimeError("injected fault: the scorer fails on this item")
        if "blocker" in marks or len(marks) > 1:
            time.sleep(self.pause)
        return super().score(queries, **kw)


def _blocker(url, ex):
    """A request whose scoring holds the scoring thread: the requests sent meanwhile are queued, then batched."""
    blocker = ex.submit(post, url, body({"a": NOUL, "b": CHOICE}, state="blocker"))
    _until("the blocker to be scored", lambda: _health(url)["running"] == 1)
    return blocker


def _alone(tiny_llama, payloads):
    d = Decider(scorer=Reference(*tiny_llama))
    return [d.ask(x["state"], to_questions(SystemOneRequest(**x))) for x in payloads]


def test_a_client_that_disconnects_mid_batch_costs_the_others_nothing(tiny_llama):
    scorer = _Gated(*tiny_llama, pause=1.5)
    states = [f"ticket #{i}: I was charged twice for order {i}." for i in range(6)]
    with serve(create_app(Decider(scorer=scorer), ServerConfig(max_wait_ms=0))) as (u, _):
        port = int(u.rsplit(":", 1)[1])
        payloads = [body({"a": NOUL, "b": CHOICE}, state=s) for s in states]
        with ThreadPoolExecutor(6) as ex:
            blocker = _blocker(u, ex)
            victim, last = _send_all_but_the_last_byte(port, payloads[0])
            victim.sendall(last)
            _until("the victim to be queued", lambda: _health(u)["waiting"] == 1)
            others = [ex.submit(post, u, x) for x in payloads[1:]]
            _until("the batch of six to be scored", lambda: _health(u)["running"] == 6)
            victim.close()  # mid-batch
            got = [f.result() for f in others]
            assert blocker.result().status_code == 200
        health = _health(u)
        after = post(u, body({"a": NOUL}, state="ticket #99: and after?"))
    assert {f"ticket #{i}" for i in range(6)} in scorer.calls  # the six were scored in one call
    assert [r.status_code for r in got] == [200] * 5 and all(r.json()["x_batch_requests"] == 6 for r in got)
    for r, alone in zip(got, _alone(tiny_llama, payloads[1:])):
        _same_answers(r.json()["answers"], alone)
    assert health["disconnected"] == 1 and health["server_errors"] == 0 and after.status_code == 200


def test_a_scorer_that_raises_on_one_item_fails_that_request_only(tiny_llama, caplog):
    scorer = _Gated(*tiny_llama, pause=1.0)
    states = [f"ticket #{i}: I was charged twice for order {i}." for i in range(5)] + ["ticket #5: BOOM"]
    with serve(create_app(Decider(scorer=scorer), ServerConfig(max_wait_ms=0))) as (u, _):
        payloads = [body({"a": NOUL, "b": CHOICE}, state=s) for s in states]
        with ThreadPoolExecutor(7) as ex:
            blocker = _blocker(u, ex)
            futures = [ex.submit(post, u, x) for x in payloads]
            _until("the six to be queued", lambda: _health(u)["waiting"] == 6)
            got = [f.result() for f in futures]
            assert blocker.result().status_code == 200
        health = _health(u)
    assert {f"ticket #{i}" for i in range(6)} | {"BOOM"} in scorer.calls  # the six were in one batch, which failed
    *good, bad = got
    assert [r.status_code for r in good] == [200] * 5
    for r, alone in zip(good, _alone(tiny_llama, payloads[:5])):
        _same_answers(r.json()["answers"], alone)
    assert bad.status_code == 500, bad.text
    detail = bad.json()["detail"]
    assert detail["error_type"] == "api_error" and f"Request id {bad.headers['x-request-id']}" in detail["message"]
    assert "RuntimeError" in detail["message"] and "fault of the server, not of the request" in detail["message"]
    assert health["server_errors"] == 1
