"""Issue 20: ``judge serve`` under hostile requests and faults: bounded memory, no 5xx for a bad request.

Engine side: a state's forest split over rows (and a question's options over chunks) scores
the same as one row; the blockwise mask equals the naive one; positions past the model's
context are refused. Server side, each on a real loopback uvicorn started and stopped here:
the peak memory of the largest requests the limits allow stays under the documented bound
(a server in a subprocess, so its peak is its own); a state over the model's context, a body
over the limit, too many questions or options get a 413 that names the limit, the size and
the way out; a flood of oversized requests does not hold up a small request; a client that
disconnects has its waiting work dropped; an exception inside scoring answers 500 with a
request id and the next request succeeds; a large request is cut into jobs with unchanged
answers and served in turn with a small one; SIGTERM lets the request in flight finish.

Timing assertions compare quantities measured in the same run, with wide margins, so a
loaded machine slows both sides.
"""

from __future__ import annotations

import contextlib
import gzip
import inspect
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from judge.decisions import Decider  # noqa: E402
from judge.engine import Engine, Item, Query  # noqa: E402
from judge.server.app import ServerConfig, create_app  # noqa: E402
from judge.testing import Reference  # noqa: E402
from tests.server.test_app import CHOICE, NOUL, TICKET, _Slow, body, post, serve  # noqa: E402  (429 + Retry-After: tests/server/test_app.py)

REPO = Path(__file__).resolve().parents[2]


def _decider(model, tok=None, **kw):
    """A Decider; the label-free bias correction off where it exists (it adds content-free queries: slower, same
    bound)."""
    if "bias" in inspect.signature(Decider).parameters:
        kw.setdefault("bias", None)
    return Decider(model, tok, **kw)


def _health(url):
    return httpx.get(url + "/healthz", timeout=30).json()


# ----------------------------------------------------------------------------- engine: split rows are exact

def _queries(n_questions=6, n_options=12):
    state = "my card was charged twice and the app says pending for days now. " * 3
    return [Query((("You answer questions.\n\n", False), (state, True), (f"Question {i}: team?\nAnswer:", False)),
                  tuple(f" option {j} {'x' * (j % 3)}" for j in range(n_options))) for i in range(n_questions)]


@pytest.mark.parametrize("tokens, logits", [(150, 10_000), (100, 10_000), (64, 10_000), (70, 5), (200, 7)])
def test_split_rows_score_as_one_row(tiny_llama, tokens, logits):
    """A state's questions over several rows (its prefix cached once), one question's options over chunks:
    the same numbers as one row, within float rounding; and the same as the brute-force reference."""
    model, tok = tiny_llama
    qs = _queries()
    whole = Engine(model, tok)
    want = whole.score(qs)
    got = Engine(model, tok, max_batch_tokens=tokens, max_batch_logits=logits).score(qs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=0)
    ref = Reference(model, tok, end_id=whole.end_id_).score(qs[:2])
    for g, r in zip(got[:2], ref):
        np.testing.assert_allclose(g, r, atol=1e-4, rtol=0)


def test_plan_covers_every_option_once_within_the_budgets():
    from judge.engine.forest import build_rows
    from judge.engine.passes import plan_passes

    rng = np.random.default_rng(0)
    for trial in range(60):
        items = []
        for g in range(int(rng.integers(1, 4))):
            head = list(rng.integers(0, 50, int(rng.integers(1, 20))))
            for _ in range(int(rng.integers(1, 6))):
                ids = head + list(rng.integers(0, 50, int(rng.integers(1, 8))))
                opts = [list(rng.integers(0, 50, int(rng.integers(1, 4)))) for _ in range(int(rng.integers(1, 9)))]
                items.append(Item(ids, opts, bool(rng.integers(0, 5) == 0), g))
        root = tuple(items[0].ids[: int(rng.integers(0, 4))])
        T, P, B = int(rng.integers(40, 120)), int(rng.integers(6, 40)), int(rng.integers(1, 5))
        passes = plan_passes(items, root, max_tokens=T, max_logits=P, max_rows=B)
        seen = {}
        for p in passes:
            assert len(p.rows) <= B and p.tokens <= T and p.logits <= P, (trial, p)
            part = [Item(items[i].ids, items[i].options if o is None else [items[i].options[j] for j in o],
                         items[i].first_only, b) for b, row in enumerate(p.rows) for i, o in row]
            rows = build_rows(part, p.root)
            n = max(int(np.count_nonzero(r.fed)) for r in rows)
            reads = max(len({int(r.parent[x]) for s in r.slots for q in s.option_paths for x in q}) for r in rows)
            assert len(rows) * (len(p.root) + n) <= T and len(rows) * reads <= P, (trial, p)
            for row in p.rows:
                for i, o in row:
                    for j in (range(len(items[i].options)) if o is None else o):
                        seen[(i, j)] = seen.get((i, j), 0) + 1
        assert seen == {(i, j): 1 for i, it in enumerate(items) for j in range(len(it.options))}, trial


def test_blockwise_masks_equal_the_naive_mask():
    import torch

    from judge.engine.forest import Forest, row_mask
    from judge.engine.masks import remap_parents, tree_masks

    rng = np.random.default_rng(1)
    for _ in range(100):
        R = int(rng.integers(0, 6))
        rows = []
        for _ in range(int(rng.integers(1, 4))):
            f = Forest()
            for _ in range(int(rng.integers(1, 6))):
                rl = int(rng.integers(0, R + 1))
                end = f.add_path([int(t) for t in rng.integers(0, 4, int(rng.integers(1, 5)))], -1, rl)
                for _ in range(int(rng.integers(0, 3))):
                    node = end
                    for t in rng.integers(0, 4, int(rng.integers(1, 4))):
                        node = f.add(int(t), node, rl, fed=bool(rng.integers(0, 2)))
            rows.append(f)
        fed = [f.fed_nodes() for f in rows]
        N = max(len(x) for x in fed)
        for window in (None, 2, 3):
            m = tree_masks(rows, fed, R, {None: window}, "single", torch.float32, "cpu", block=int(rng.integers(1, 5)))
            assert m.shape == (len(rows), 1, N, R + N) and m.dtype == torch.float32
            for b, (row, nodes) in enumerate(zip(rows, fed)):
                n = len(nodes)
                want = np.zeros((N, R + N), bool)
                want[:n, : R + n] = row_mask(np.asarray(row.position)[nodes], remap_parents(row, nodes),
                                             np.asarray(row.root_len)[nodes], R, window)[:, : R + n]
                want[np.arange(n, N), R + np.arange(n, N)] = True
                np.testing.assert_array_equal((m[b, 0] == 0).numpy(), want)


def test_engine_refuses_positions_past_the_context(tiny_llama):
    model, tok = tiny_llama
    eng = Engine(model, tok)
    with pytest.raises(ValueError, match=r"Item 0 needs 4098 positions .* over the model's 4096-token context"):
        eng.score_items([Item([5] * 4096, [[7, 8], [9]])])
    with pytest.raises(ValueError, match=r"max_batch_tokens=16; raise max_batch_tokens"):
        Engine(model, tok, max_batch_tokens=16).score_items([Item([5] * 40, [[7], [9]])])
    with pytest.raises(ValueError, match=r"max_batch_tokens must be an int >= 2, got 0"):
        Engine(model, tok, max_batch_tokens=0)


# ----------------------------------------------------------------------------- server in a subprocess

_SERVER = r"""
import inspect, json, socket, sys, threading, time
import uvicorn
from judge.decisions import Decider
from judge.server.app import ServerConfig, create_app
kw = {"bias": None} if "bias" in inspect.signature(Decider).parameters else {}
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
app = create_app(Decider(sys.argv[1], **kw), ServerConfig(**json.loads(sys.argv[2])))
server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
th = threading.Thread(target=server.run, daemon=True); th.start()
while not server.started:
    time.sleep(0.05)
print(port, flush=True)
sys.stdin.read()
server.should_exit = True; th.join(60)
"""


@contextlib.contextmanager
def subprocess_server(model_dir, **config):
    p = subprocess.Popen([sys.executable, "-c", _SERVER, model_dir, json.dumps(config)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        line = p.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line)}", p
    finally:
        with contextlib.suppress(OSError):
            p.stdin.close()
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()


def _largest_request(decider, budget):
    """Distinct 255-option questions about a short state, as many as the token budget allows."""
    from judge.server.contract import SystemOneRequest, to_questions

    qs = {}
    for i in range(200):
        q = {"type": "choice", "instructions": f"Which queue handles case {i}?",
             "criteria": {f"Queue {j:03d} {i}": None for j in range(255)}}
        trial = body({**qs, f"q{i}": q}, state="I was charged twice.")
        if decider.count_tokens(trial["state"], to_questions(SystemOneRequest(**trial)))["total"] > budget:
            break
        qs[f"q{i}"] = q
    return body(qs, state="I was charged twice.")


def test_peak_memory_of_the_largest_requests_stays_under_the_documented_bound(tiny_dir):
    """1,000 yes/no questions (the issue's +2.4 GB) and the most 255-option questions the 64k budget allows."""
    decider = _decider(tiny_dir)
    largest = _largest_request(decider, 65536)
    nouls = body({f"q{i}": {"type": "noul", "instructions": f"Is statement number {i} about billing true?"}
                  for i in range(1000)}, state="I was charged twice for my March invoice.")
    with subprocess_server(tiny_dir) as (url, _):
        assert post(url, body({"q": NOUL})).status_code == 200
        idle = _health(url)
        bound = idle["memory_bound_bytes"]
        assert bound is not None and bound < 2**30  # the tiny model: the mask and the logits dominate
        for payload in (nouls, largest):
            r = httpx.post(url + "/v1/systemone", json=payload, timeout=1800)
            assert r.status_code == 200, r.text[:300]
            assert len(r.json()["answers"]) == len(payload["questions"])
        grown = _health(url)["peak_rss_bytes"] - idle["peak_rss_bytes"]
    assert r.json()["usage"]["input_tokens"] > 60_000  # the largest: at the budget
    assert grown <= bound, f"peak grew by {grown / 2**20:.0f} MiB, over the documented {bound / 2**20:.0f} MiB"


# ----------------------------------------------------------------------------- server in a thread

@pytest.fixture(scope="module")
def decider(tiny_llama):
    return _decider(*tiny_llama)


@pytest.fixture(scope="module")
def url(decider):
    with serve(create_app(decider, ServerConfig(max_wait_ms=5))) as (u, _):
        yield u


def test_a_state_over_the_models_context_is_413(url):
    state = "word " * 5000  # under the 32k-token state budget, over the tiny model's 4,096 positions
    r = post(url, body({"q": NOUL}, state=state))
    assert r.status_code == 413, r.text[:300]
    msg = r.json()["detail"]["message"]
    assert "4096-token context (max_position_embeddings)" in msg and "shorten the state" in msg
    r = post(url, {"model": "jev-latest", "input": state, "questions": [{"type": "predicate", "instructions": "?"}]},
             path="/v1/decisions")
    assert r.status_code == 413 and "context" in r.json()["detail"]["message"]
    assert post(url, body({"q": NOUL}, state="word " * 3000)).status_code == 200  # within the context: answered


def test_bodies_over_the_limit_are_413_compressed_or_not(url):
    limit = ServerConfig().max_body_bytes
    huge = json.dumps(body({"q": NOUL}, state="x" * (40 * 2**20))).encode()  # 40 MB, identity
    r = httpx.post(url + "/v1/systemone", content=huge, headers={"Content-Type": "application/json"}, timeout=120)
    assert r.status_code == 413, r.text[:300]
    msg = r.json()["detail"]["message"]
    assert f"limit of {limit} bytes (max_body_bytes)" in msg and str(len(huge)) in msg and "split it" in msg
    assert r.headers["x-request-id"]
    bomb = gzip.compress(json.dumps(body({"q": NOUL}, pad="0" * (limit * 2))).encode())  # small, decodes over
    r = httpx.post(url + "/v1/systemone", content=bomb, timeout=60,
                   headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    assert r.status_code == 413 and "decoded request body is over" in r.json()["detail"]["message"]
    # the largest body the limit allows is answered (unknown top-level fields are ignored)
    ok = body({"q": NOUL}, pad="")
    ok["pad"] = "y" * (limit - len(json.dumps(ok).encode()))
    raw = json.dumps(ok).encode()
    assert len(raw) == limit
    r = httpx.post(url + "/v1/systemone", content=raw, headers={"Content-Type": "application/json"}, timeout=60)
    assert r.status_code == 200, r.text[:300]


def test_limits_on_questions_and_options_name_themselves(decider):
    with serve(create_app(decider, ServerConfig(max_questions=5, max_options=300))) as (u, _):
        many = post(u, body({f"q{i}": NOUL for i in range(6)}))
        at = post(u, body({f"q{i}": NOUL for i in range(5)}))  # exactly at the limit: answered
        wide = post(u, body({"q": {"type": "choice", "criteria": {f"o{i}": None for i in range(301)}}}))
        floor = post(u, body({"q": {"type": "choice", "criteria": {f"o{i}": None for i in range(255)}}}))
        wide_d = post(u, {"model": "jev-latest", "input": "x", "questions": [
            {"type": "choice", "instructions": "?", "choices": [{"value": f"o{i}"} for i in range(301)]}]},
            path="/v1/decisions")
    assert many.status_code == 413 and "6 questions, over this server's limit of 5 per request (max_questions)" \
        in many.json()["detail"]["message"]
    assert wide.status_code == 413 and "301 options, over this server's limit of 300 per question (max_options)" \
        in wide.json()["detail"]["message"]
    assert wide_d.status_code == 413 and "(max_options)" in wide_d.json()["detail"]["message"]
    assert floor.status_code == 200 and len(floor.json()["answers"]["q"]["probabilities"]) == 255
    assert at.status_code == 200 and sorted(at.json()["answers"]) == [f"q{i}" for i in range(5)]
    with pytest.raises(ValueError, match=r"max_options=100\): the contract requires at least 255"):
        ServerConfig(max_options=100)


def test_a_flood_of_oversized_requests_does_not_hold_up_a_small_one(url):
    """Four requests of 200 questions x 255 options (over the 64k-token budget) are refused off the scoring
    thread; a small request sent behind them is answered about as fast as alone."""
    over = body({f"q{i}": {"type": "choice", "instructions": f"Which queue {i}?",
                           "criteria": {f"Queue {j:03d} option": None for j in range(255)}}
                 for i in range(200)})
    small = body({"q": CHOICE}, state="My parcel never arrived.")

    def timed(payload):
        t0 = time.perf_counter()
        r = post(url, payload)
        return r, time.perf_counter() - t0

    alone = sorted(timed(small)[1] for _ in range(3))[1]
    r, t_over = timed(over)
    assert r.status_code == 413 and "max_request_tokens" in r.json()["detail"]["message"]
    with ThreadPoolExecutor(5) as ex:
        flood = [ex.submit(timed, over) for _ in range(4)]
        time.sleep(0.3)
        r_small, behind = timed(small)
        codes = [f.result()[0].status_code for f in flood]
    assert codes == [413] * 4 and r_small.status_code == 200
    assert behind <= 2 * alone + t_over + 3.0, (behind, alone, t_over)


def _raw_request(port, payload) -> socket.socket:
    data = json.dumps(payload).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    return s


def test_a_client_that_disconnects_has_its_waiting_work_dropped(tiny_llama):
    d = _decider(*tiny_llama, scorer=_Slow(*tiny_llama, 0.25))
    with serve(create_app(d, ServerConfig(max_batch_questions=1, max_wait_ms=0))) as (u, _):
        port = int(u.rsplit(":", 1)[1])
        s = _raw_request(port, body({f"q{i}": {"type": "noul", "instructions": f"Is {i} odd?"} for i in range(30)}))
        deadline = time.time() + 60
        while _health(u)["jobs"] < 2 and time.time() < deadline:  # warm-up was one job; the request has started
            time.sleep(0.05)
        s.close()
        time.sleep(1.5)
        h1 = _health(u)
        time.sleep(1.0)
        h2 = _health(u)
        t0 = time.perf_counter()
        after = post(u, body({"q": NOUL}))
        wait = time.perf_counter() - t0
    assert h1["disconnected"] == 1 and h1["cancelled_jobs"] >= 20, h1
    assert h2["jobs"] == h1["jobs"] and h1["jobs"] <= 12, (h1, h2)  # nothing more of it was scored
    assert after.status_code == 200 and wait < 30


def test_an_exception_inside_scoring_is_500_with_an_id_and_the_server_keeps_serving(tiny_llama, caplog):
    d = _decider(*tiny_llama, scorer=_Slow(*tiny_llama, 0.0, boom="BOOM"))
    with serve(create_app(d, ServerConfig(max_wait_ms=0))) as (u, _):
        bad = post(u, body({"q": NOUL}, state="BOOM goes the scorer"))
        good = post(u, body({"q": NOUL}))
        h = _health(u)
    assert bad.status_code == 500, bad.text
    rid = bad.headers["x-request-id"]
    detail = bad.json()["detail"]
    assert detail["error_type"] == "api_error" and f"Request id {rid}" in detail["message"]
    assert "fault of the server, not of the request" in detail["message"]
    assert good.status_code == 200 and good.headers["x-request-id"] != rid
    assert h["server_errors"] == 1


def test_a_large_request_is_cut_into_jobs_with_the_same_answers(decider):
    qs = {f"q{i}": {"type": "noul", "instructions": f"Is statement {i} about a refund?"} for i in range(12)}
    qs["team"] = CHOICE
    from judge.server.contract import SystemOneRequest, to_questions

    wire = body(qs)
    alone = {qid: decider.ask(TICKET, {qid: q})[qid] for qid, q in to_questions(SystemOneRequest(**wire)).items()}
    with serve(create_app(decider, ServerConfig(max_batch_tokens=150))) as (u, _):
        r = post(u, wire).json()
    assert r["x_jobs"] > 2
    assert r["usage"]["input_tokens"] == decider.count_tokens(TICKET, to_questions(SystemOneRequest(**wire)))["total"]
    for qid, a in alone.items():
        got = r["answers"][qid]
        if a.type == "noul":
            assert abs(got["noul"] - a.noul) <= 1e-5, qid
        for k, v in a.probabilities.items() if a.type != "noul" else ():
            assert abs(got["probabilities"][k] - v) <= 1e-5, qid


def test_a_small_request_is_served_in_turn_with_a_large_one(tiny_llama):
    d = _decider(*tiny_llama, scorer=_Slow(*tiny_llama, 0.2))
    with serve(create_app(d, ServerConfig(max_batch_questions=1, max_wait_ms=0))) as (u, _):
        with ThreadPoolExecutor(2) as ex:
            big = ex.submit(lambda: (post(u, body({f"q{i}": {"type": "noul", "instructions": f"{i}?"}
                                                   for i in range(20)})), time.perf_counter()))
            time.sleep(0.5)
            small = ex.submit(lambda: (post(u, body({"q": NOUL})), time.perf_counter()))
            (rb, tb), (rs, ts) = big.result(), small.result()
    assert rb.status_code == rs.status_code == 200
    assert ts < tb - 1.0  # the small one did not wait for the 20 jobs of the large one


def test_sigterm_lets_the_request_in_flight_finish(tiny_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "judge.cli", "serve", "--model", tiny_dir, "--port", str(port),
                          "--log-level", "warning"], cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    u = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(u + "/healthz", timeout=5).status_code == 200:
                    break
            if time.time() > deadline or p.poll() is not None:
                raise RuntimeError(p.stdout.read().decode()[-2000:] if p.poll() is not None else "no start")
            time.sleep(0.2)
        out = {}
        big = body({f"q{i}": {"type": "choice", "instructions": f"Which queue {i}?",
                              "criteria": {f"Queue {j:03d} {i}": None for j in range(255)}} for i in range(2)},
                   state="word " * 300)
        t = threading.Thread(target=lambda: out.setdefault("r", httpx.post(u + "/v1/systemone", json=big,
                                                                             timeout=600)))
        t.start()
        while _health(u)["running"] == 0 and t.is_alive():
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        t.join(600)
        code = p.wait(120)
    finally:
        if p.poll() is None:
            p.kill()
    assert out["r"].status_code == 200 and len(out["r"].json()["answers"]) == 2
    assert code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once drained


def test_docstring_examples_run():
    import doctest

    import judge.engine.passes
    import judge.server.admission

    for mod in (judge.server.admission, judge.engine.passes):
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert res.failed == 0 and res.attempted >= 1, mod.__name__
