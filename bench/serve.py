"""Benchmark: ``judge serve`` latency, throughput, overhead and a soak, on loopback.

    python -m bench.serve --server-process                       # SmolLM2: sweeps, profile, efficiency -> bench/results/serve.json
    python -m bench.serve --server-process --soak 600 --json bench/results/serve_soak.json   # 10-minute soak at concurrency 16
    python -m bench.serve --model tiny --requests 2 --concurrency 1 --questions 2 --repeats 1 --json /tmp/s.json
        # a random-weight model: checks the harness in seconds, numbers mean nothing

The server runs in this process (uvicorn in a thread) or, with ``--server-process``, as
``judge serve`` in its own process (so the load generator's threads do not share its
interpreter, and its memory is its own). A bounded load generator (``c`` client threads,
one HTTP connection each) sends ``POST /v1/systemone`` requests about a different support
ticket each time. Question shapes come from a fixed pool and are all sent once before
timing (a server caches per-shape work, as it would in steady state).

Reported, with the 1-minute load average beside every timed figure (the machine may be shared):

* **sweeps**: p50/p95/p99/max latency (ms, client side) and decisions/s (answered questions
  per second of wall time) at each ``--concurrency``, for ``--options`` options at 1 question
  per request and for ``--per-request`` questions of 10 options per request; a cell stops
  sending after ``--cell-seconds`` and reports what it completed;
* **one 10-option question** end to end: client ms, the server's admission and scoring ms,
  and a bare forward pass of the same uncached tokens (the cached template root, then the
  rest of the prompt as one causal sequence) measured in the same run;
* **forward-pass efficiency** at concurrency 16: the server's tokens per second of scoring
  (``/healthz``: ``scored_tokens / scoring_s``) against a bare forward's over sequences of the
  same mean length;
* Q questions in one request vs Q requests (``--questions``, cost per question-token);
* **soak** (``--soak SECONDS``): concurrency 16, valid requests (every answer checked against
  the same question asked alone) mixed with hostile ones (bad JSON, over budget, over the
  context, huge and compressed-bomb bodies, unknown model, too many questions, a client that
  disconnects mid-request): lost or wrong answers, 5xx, unexpected statuses, server RSS at
  start and end.

What it deliberately does not do: run sys1bench/jevbench/anyjev (``bench/serve_suites.py``),
or measure a remote network.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench._serve_workload import QUESTIONS, TICKETS, request, shape

REPO = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _load() -> float:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else -1.0


def _pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


# ----------------------------------------------------------------------------- servers

_NO_BIAS_SERVER = """
import sys, torch, uvicorn
from judge.decisions import Decider
from judge.server.app import ServerConfig, create_app
model, port, wait, threads = sys.argv[1] or None, int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
if threads:
    torch.set_num_threads(threads)
app = create_app(Decider(model, bias=None), ServerConfig(max_wait_ms=wait, max_queue=256))
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=300)
"""

@contextlib.contextmanager
def serving(a, decider=None):
    """``(url, server pid or None)`` of a server for this run (a thread here, or ``judge serve``)."""
    import httpx

    port = _port()
    url = f"http://127.0.0.1:{port}"
    if a.server_process:
        cmd = [sys.executable, "-m", "judge.cli", "serve", "--port", str(port), "--max-wait-ms", str(a.max_wait_ms),
               "--max-queue", "256", "--log-level", "warning", "--device", a.device]
        if a.model:
            cmd += ["--model", a.model]
        if a.torch_threads:
            cmd += ["--torch-threads", str(a.torch_threads)]
        if a.bias == "off":  # the label-free bias correction off (`judge serve` has no switch for it)
            cmd = [sys.executable, "-c", _NO_BIAS_SERVER, a.model or "", str(port), str(a.max_wait_ms),
                   str(a.torch_threads or 0)]
        p = subprocess.Popen(cmd, cwd=str(REPO))
        try:
            deadline = time.time() + 600
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                        break
                if p.poll() is not None or time.time() > deadline:
                    raise RuntimeError("judge serve did not start")
                time.sleep(0.3)
            yield url, p.pid
        finally:
            p.terminate()
            p.wait(120)
        return
    import uvicorn

    from judge.server.app import ServerConfig, create_app

    server = uvicorn.Server(uvicorn.Config(create_app(decider, ServerConfig(max_wait_ms=a.max_wait_ms, max_queue=256)),
                                           host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        if not th.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield url, None
    finally:
        server.should_exit = True
        th.join(60)


# ----------------------------------------------------------------------------- load

def load_level(url: str, concurrency: int, n: int, n_options: int, n_questions: int = 1, seconds: float = 1e9) -> dict:
    import httpx

    lat, batch = [], []
    lock = threading.Lock()
    counter = iter(range(n))
    stop = time.perf_counter() + seconds

    def worker(_):
        with httpx.Client(timeout=3600) as c:
            while time.perf_counter() < stop:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                t0 = time.perf_counter()
                r = c.post(url + "/v1/systemone", json=request(i, n_options, n_questions))
                dt = (time.perf_counter() - t0) * 1000
                r.raise_for_status()
                with lock:
                    lat.append(dt)
                    batch.append(r.json().get("x_batch_requests", 1))

    load0 = _load()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(worker, range(concurrency)))
    wall = time.perf_counter() - t0
    done = len(lat)
    return {"concurrency": concurrency, "options": n_options, "questions_per_request": n_questions,
            "requests": done, "p50_ms": round(_pct(lat, 0.5), 1), "p95_ms": round(_pct(lat, 0.95), 1),
            "p99_ms": round(_pct(lat, 0.99), 1), "max_ms": round(max(lat), 1),
            "decisions_per_s": round(done * n_questions / wall, 3), "mean_batch_requests": round(statistics.mean(batch), 2),
            "wall_s": round(wall, 2), "load_avg": [load0, _load()]}


def warm_shapes(url: str, n_options_list, per_request_list) -> None:
    """Send every question shape of the run once (per-shape work is then cached, as in steady state)."""
    import httpx

    with httpx.Client(timeout=3600) as c:
        for k in range(max(per_request_list)):
            c.post(url + "/v1/systemone", json=request(10_000 + k, 10, 1) | {"questions": {"q": shape(k, 10)}})
        for n in n_options_list:
            c.post(url + "/v1/systemone", json=request(20_000 + n, n, 1))


def q_vs_separate(url: str, n_questions: int, repeats: int) -> dict:
    import httpx

    names = list(QUESTIONS)[:n_questions]
    one, sep, tok_one, tok_sep, c_one, c_sep = [], [], [], [], [], []
    with httpx.Client(timeout=3600) as c:
        for k in names:  # each shape seen once before timing (per-shape work is cached in steady state)
            c.post(url + "/v1/systemone", json={"model": "jev-latest", "state": "warm-up", "questions": {k: QUESTIONS[k]}})
        for r in range(repeats):
            state = f"{TICKETS[r % len(TICKETS)]} (run {r})"
            t0 = time.perf_counter()
            d = c.post(url + "/v1/systemone", json={"model": "jev-latest", "state": state,
                                                    "questions": {k: QUESTIONS[k] for k in names}}).json()
            one.append((time.perf_counter() - t0) * 1000)
            tok_one.append(d["x_batch_input_tokens"])
            c_one.append(d["x_compute_ms"])
            t0 = time.perf_counter()
            ms, toks = 0.0, 0
            for k in names:
                d = c.post(url + "/v1/systemone", json={"model": "jev-latest", "state": state + " ",
                                                        "questions": {k: QUESTIONS[k]}}).json()
                ms += d["x_compute_ms"]
                toks += d["x_batch_input_tokens"]
            sep.append((time.perf_counter() - t0) * 1000)
            tok_sep.append(toks)
            c_sep.append(ms)
    return {"questions": n_questions, "repeats": repeats,
            "one_request_ms": round(statistics.median(one), 1), "separate_requests_ms": round(statistics.median(sep), 1),
            "one_request_input_tokens": int(statistics.median(tok_one)),
            "separate_requests_input_tokens": int(statistics.median(tok_sep)),
            "ratio_per_question_token_one_vs_separate": round(statistics.median(one) / statistics.median(sep), 3),
            "engine_compute_ms_per_engine_token_one": round(statistics.median(a / b for a, b in zip(c_one, tok_one)), 4),
            "engine_compute_ms_per_engine_token_separate": round(statistics.median(a / b for a, b in zip(c_sep, tok_sep)), 4),
            "speedup_wall": round(statistics.median(sep) / statistics.median(one), 2)}


# ----------------------------------------------------------------------------- bare forward, profile, efficiency

def bare_forward_ms(model, root_ids, rest_ids, repeats: int, *, rows: int = 1, reads: int = 1) -> float:
    """Median ms of one plain causal forward over ``rows`` copies of ``rest_ids`` on the cached key/values of
    ``root_ids``, logits at the last ``reads`` positions of each row (1: only the last)."""
    import torch
    from transformers import DynamicCache

    from judge.models import cache_keyword

    with torch.inference_mode():
        kv = None
        if root_ids:
            cache = DynamicCache()
            model(input_ids=torch.tensor([root_ids]), use_cache=True, logits_to_keep=1,
                  **{cache_keyword(model): cache})
            kv = [(layer.keys, layer.values) for layer in cache.layers]
        x = torch.tensor([rest_ids] * rows)
        keep = 1 if reads <= 1 else torch.arange(len(rest_ids) - reads, len(rest_ids)).expand(rows, reads)
        ts = []
        for _ in range(repeats):
            cache = DynamicCache()
            for i, (k, v) in enumerate(kv or []):
                cache.update(k.expand(rows, *k.shape[1:]), v.expand(rows, *v.shape[1:]), i)
            t0 = time.perf_counter()
            model(input_ids=x, use_cache=True, logits_to_keep=keep, **{cache_keyword(model): cache})
            ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)


def one_question_profile(url: str, decider, repeats: int) -> dict:
    """One 10-option question end to end vs a bare forward of its uncached tokens, alternated in one run."""
    import httpx

    from judge.engine import Item, option_context
    from judge.engine.forest import build_rows
    from judge.server.contract import SystemOneRequest, to_questions

    eng = decider.scorer_
    model = eng.model_
    rows = []
    with httpx.Client(timeout=3600) as c:
        for r in range(repeats):
            req = request(30_000 + r, 10, 1)
            t0 = time.perf_counter()
            d = c.post(url + "/v1/systemone", json=req).json()
            client = (time.perf_counter() - t0) * 1000
            q = to_questions(SystemOneRequest(**req))["q0"]
            plan = decider.plan(req["state"], q)
            root = eng.encode(plan.pieces[:1])
            ids = eng.encode(plan.pieces)
            opts = eng.option_ids(option_context(plan.pieces), list(plan.surfaces))
            row = build_rows([Item(ids, opts)], root)[0]  # what the engine feeds after the cached root
            fed = [row.tokens[n] for n in row.fed_nodes()]
            reads = len({int(row.parent[n]) for sl in row.slots for pth in sl.option_paths for n in pth})
            rows.append({"client_ms": client, "server_total_ms": d["x_total_ms"], "admit_ms": d.get("x_admit_ms", 0.0),
                         "compute_ms": d["x_compute_ms"], "engine_tokens": d["x_batch_input_tokens"],
                         "bare_forward_ms": bare_forward_ms(model, root, fed, 3), "bare_tokens": len(fed),
                         "bare_forward_with_option_logits_ms": bare_forward_ms(model, root, fed, 3, reads=reads),
                         "read_positions": reads, "load_avg": _load()})
    med = {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}
    med["overhead_ms"] = round(med["client_ms"] - med["bare_forward_ms"], 1)
    med["repeats"] = repeats
    return med


def efficiency(url: str, decider, concurrency: int, n: int, seconds: float) -> dict:
    """Scoring tokens/s at ``concurrency`` (from /healthz) vs a bare forward's over the same mean length."""
    import httpx

    h0 = httpx.get(url + "/healthz").json()
    lv = load_level(url, concurrency, n, 10, 1, seconds)
    h1 = httpx.get(url + "/healthz").json()
    calls = h1["scoring_calls"] - h0["scoring_calls"]
    toks = h1["scored_tokens"] - h0["scored_tokens"]
    secs = h1["scoring_s"] - h0["scoring_s"]
    mean_len = max(1, round(toks / max(1, calls)))
    rows = max(1, round(lv["mean_batch_requests"]))  # one row per request (1 question each) in a call
    eng = decider.scorer_
    root = eng.encode(decider.plan(TICKETS[0], _q10()).pieces[:1])
    pool = [t for t in eng.encode([(" ".join(TICKETS) * 40, True)])][:max(1, mean_len // rows)]
    bare = bare_forward_ms(eng.model_, root, pool, 3, rows=rows)
    server_tps, bare_tps = toks / secs, rows * len(pool) / (bare / 1000)
    lv1 = load_level(url, 1, max(4, n // 4), 10, 1, seconds / 2)
    return {"concurrency": concurrency, "scoring_calls": calls, "mean_tokens_per_call": mean_len, "bare_rows": rows,
            "server_tokens_per_s": round(server_tps, 1), "bare_forward_tokens_per_s": round(bare_tps, 1),
            "efficiency": round(server_tps / bare_tps, 3), "decisions_per_s": lv["decisions_per_s"],
            "decisions_per_s_at_concurrency_1": lv1["decisions_per_s"], "load_avg": lv["load_avg"]}


def _q10():
    from judge.server.contract import SystemOneRequest, to_questions

    return to_questions(SystemOneRequest(**request(0, 10, 1)))["q0"]


# ----------------------------------------------------------------------------- soak

def soak(url: str, seconds: float, concurrency: int, pid) -> dict:
    """Valid and hostile requests for ``seconds``; every valid answer checked against the question asked alone."""
    import httpx

    shapes = {"team": QUESTIONS["team"], "refund": QUESTIONS["refund"], "anger": QUESTIONS["anger"],
              "lang": QUESTIONS["lang"], "wide": shape(3, 255)}
    states = [f"{t} (soak)" for t in TICKETS]
    alone = {}
    with httpx.Client(timeout=3600) as c:
        for s in states:
            for name, q in shapes.items():
                alone[(s, name)] = c.post(url + "/v1/systemone", json={"model": "jev-latest", "state": s,
                                                                      "questions": {name: q}}).json()["answers"][name]
    zbomb = gzip.compress(json.dumps({"model": "jev-latest", "state": "x", "questions": {"q": QUESTIONS["refund"]},
                                      "pad": "0" * (8 << 20)}).encode())
    hostile = {
        "bad_json": (b'{"model": "jev-latest", "state": ', {}, 422),
        "over_budget": (json.dumps({"model": "jev-latest", "state": "x", "questions": {
            f"q{i}": shape(i, 255) for i in range(60)}}).encode(), {}, 413),
        "over_context": (json.dumps({"model": "jev-latest", "state": "word " * 9000,
                                     "questions": {"q": QUESTIONS["refund"]}}).encode(), {}, 413),
        "huge_body": (json.dumps({"model": "jev-latest", "state": "y" * (3 << 20),
                                  "questions": {"q": QUESTIONS["refund"]}}).encode(), {}, 413),
        "gzip_bomb": (zbomb, {"Content-Encoding": "gzip"}, 413),
        "unknown_model": (json.dumps({"model": "gpt-9", "state": "x", "questions": {"q": QUESTIONS["refund"]}}).encode(),
                          {}, 404),
        "too_many_questions": (json.dumps({"model": "jev-latest", "state": "x", "questions": {
            f"q{i}": QUESTIONS["refund"] for i in range(1100)}}).encode(), {}, 413),
        "bad_type": (json.dumps({"model": "jev-latest", "state": "x", "questions": {"q": {"type": "box"}}}).encode(),
                     {}, 422),
    }
    port = int(url.rsplit(":", 1)[1])
    counts = {"valid": 0, "answers": 0, "wrong": 0, "lost": 0, "5xx": 0, "unexpected": 0, "disconnects": 0,
              **{f"hostile_{k}": 0 for k in hostile}}
    worst = [0.0]
    lock = threading.Lock()
    rss = []

    def rss_now():
        return httpx.get(url + "/healthz", timeout=60).json()["rss_bytes"]

    def add(k, n=1):
        with lock:
            counts[k] += n

    def worker(w):
        rng = random.Random(w)
        stop = time.time() + seconds
        with httpx.Client(timeout=3600) as c:
            while time.time() < stop:
                roll = rng.random()
                try:
                    if roll < 0.65:
                        s = rng.choice(states)
                        names = rng.sample(list(shapes), rng.randint(1, 3))
                        qs = {f"{n}_{rng.randint(0, 9)}": shapes[n] for n in names}
                        r = c.post(url + "/v1/systemone", json={"model": "jev-latest", "state": s, "questions": qs})
                        add("valid")
                        if r.status_code >= 500:
                            add("5xx")
                        if r.status_code != 200:
                            add("unexpected")
                            continue
                        got = r.json()["answers"]
                        for qid in qs:
                            if qid not in got:
                                add("lost")
                                continue
                            want, a = alone[(s, qid.rsplit("_", 1)[0])], got[qid]
                            pa = a.get("probabilities") or {"noul": a["noul"]}
                            pw = want.get("probabilities") or {"noul": want["noul"]}
                            diff = max(abs(pa[k] - pw[k]) for k in pw)
                            with lock:
                                worst[0] = max(worst[0], diff)
                                counts["answers"] += 1
                            if diff > 1e-4 or a.get("choice") != want.get("choice"):
                                add("wrong")
                    elif roll < 0.70:
                        sock = socket.create_connection(("127.0.0.1", port))
                        data = json.dumps({"model": "jev-latest", "state": rng.choice(states),
                                           "questions": {"q": shapes["wide"]}}).encode()
                        sock.sendall(b"POST /v1/systemone HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                     + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
                        time.sleep(rng.uniform(0.0, 0.5))
                        sock.close()
                        add("disconnects")
                    else:
                        name = rng.choice(list(hostile))
                        raw, headers, want = hostile[name]
                        r = c.post(url + "/v1/systemone", content=raw,
                                   headers={"Content-Type": "application/json", **headers})
                        add(f"hostile_{name}")
                        if r.status_code >= 500:
                            add("5xx")
                        if r.status_code != want:
                            add("unexpected")
                except httpx.HTTPError:
                    add("lost")

    rss.append(rss_now())
    t0 = time.time()
    sampler_stop = threading.Event()

    def sampler():
        while not sampler_stop.wait(10):
            rss.append(rss_now())

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(worker, range(concurrency)))
    sampler_stop.set()
    th.join()
    rss.append(rss_now())
    health = httpx.get(url + "/healthz").json()
    warm = rss[min(3, len(rss) - 1)]  # after about 30 s of load
    return {"seconds": round(time.time() - t0, 1), "concurrency": concurrency, **counts,
            "max_abs_diff_vs_alone": worst[0], "rss_start_mb": round(rss[0] / 2**20, 1),
            "rss_after_warmup_mb": round(warm / 2**20, 1), "rss_end_mb": round(rss[-1] / 2**20, 1),
            "rss_max_mb": round(max(rss) / 2**20, 1), "peak_rss_mb": round(health["peak_rss_bytes"] / 2**20, 1),
            "memory_bound_mb": round((health.get("memory_bound_bytes") or 0) / 2**20, 1),
            "server_errors": health.get("server_errors"), "cancelled_jobs": health.get("cancelled_jobs"),
            "disconnected": health.get("disconnected"), "load_avg_end": _load()}


# ----------------------------------------------------------------------------- main

def _decider(a, model, tokenizer):
    """The Decider under test: the engine, or the brute-force reference as its scorer."""
    from judge.decisions import Decider

    if a.engine == "reference":
        from judge.models import load_model
        from judge.testing import Reference

        if tokenizer is None:
            model, tokenizer = load_model(model, device=a.device)
        return Decider(scorer=Reference(model, tokenizer))
    return Decider(model, tokenizer, device=a.device) if tokenizer is None else Decider(model, tokenizer)


def _ints(s: str) -> list[int]:
    return [int(x) for x in str(s).split(",") if x]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="default: the packaged SmolLM2-135M-Instruct; 'tiny': a "
                                                 "random-weight model, for a smoke run")
    p.add_argument("--engine", default="auto", choices=["auto", "reference"],
                   help="auto (judge.engine.Engine) or reference (judge.testing.Reference: brute force, slow)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--server-process", action="store_true", help="run `judge serve` in its own process")
    p.add_argument("--concurrency", default="1,4,16,64")
    p.add_argument("--requests", type=int, default=48, help="requests per cell (at least 2 x concurrency)")
    p.add_argument("--cell-seconds", type=float, default=1e9, help="stop sending in a cell after this long")
    p.add_argument("--options", default="2,10,255", help="options of the 1-question sweep")
    p.add_argument("--per-request", default="", help="questions per request of the 10-option sweep, e.g. 1,8,64")
    p.add_argument("--questions", type=int, default=8, help="Q for one request of Q questions vs Q requests")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--profile-repeats", type=int, default=0, help="one 10-option question end to end vs bare forward")
    p.add_argument("--efficiency", type=int, default=0, metavar="C", help="forward efficiency at concurrency C")
    p.add_argument("--soak", type=float, default=0, metavar="SECONDS", help="soak instead of the sweeps")
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--torch-threads", type=int, default=None, help="torch threads (server and bare forward)")
    p.add_argument("--bias", default="default", choices=["default", "off"],
                   help="the Decider's label-free bias correction as `judge serve` sets it, or off (--server-process)")
    p.add_argument("--json", default=str(REPO / "bench" / "results" / "serve.json"))
    a = p.parse_args(argv)

    import torch

    from bench._common import TINY_MODEL, load_bench_model

    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)

    if a.server_process and a.model == TINY_MODEL:
        p.error("--server-process needs a model folder or hub id (the tiny model lives in this process only)")
    decider = _decider(a, *load_bench_model(TINY_MODEL)) if a.model == TINY_MODEL else _decider(a, a.model, None)
    _ = decider.tokenizer_  # load before timing
    engine = type(decider.scorer_).__module__ + "." + type(decider.scorer_).__name__
    rec = {"benchmark": "serve", "model": decider.model_name, "engine": engine, "device": a.device,
           "server": "process" if a.server_process else "thread", "max_wait_ms": a.max_wait_ms, "bias": a.bias,
           "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "load_avg_start": _load(),
                       "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "python": platform.python_version(),
                       "torch": torch.__version__},
           "target": {"p50_ms_one_10_option_question": 150, "efficiency_at_16": 0.8,
                      "q_in_one_vs_separate_per_token": 1.25}}
    conc = _ints(a.concurrency)
    with serving(a, None if a.server_process else decider) as (url, pid):
        load_level(url, 1, 2, 10)  # warm-up, untimed
        if a.soak:
            rec["soak"] = soak(url, a.soak, max(conc), pid)
            print(json.dumps(rec["soak"], indent=1))
        else:
            opts, per = _ints(a.options), _ints(a.per_request)
            warm_shapes(url, opts, per or [1])
            levels = []
            for n_opt in opts:
                for c in conc:
                    levels.append(load_level(url, c, max(a.requests, 2 * c if c > 1 else a.requests), n_opt, 1,
                                             a.cell_seconds))
                    print(f"  options {n_opt}, concurrency {c}: {levels[-1]}", file=sys.stderr)
            for n_q in per:
                for c in conc:
                    levels.append(load_level(url, c, max(c, min(a.requests, 2 * c)), 10, n_q, a.cell_seconds))
                    print(f"  {n_q} questions, concurrency {c}: {levels[-1]}", file=sys.stderr)
            rec["levels"] = levels
            if a.profile_repeats:
                rec["one_question"] = one_question_profile(url, decider, a.profile_repeats)
            if a.efficiency:
                rec["efficiency"] = efficiency(url, decider, a.efficiency, 4 * a.efficiency, a.cell_seconds)
            if a.questions:
                rec["q_vs_separate"] = q_vs_separate(url, a.questions, a.repeats)
            _print(rec)
    rec["machine"]["load_avg_end"] = _load()
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rec, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _print(rec) -> None:
    print(f"\njudge serve on {rec['model']} ({rec['engine']}, {rec['device']}, server in a {rec['server']}, "
          f"{rec['machine']['torch_threads']} torch threads, load {rec['machine']['load_avg_start']})")
    print(f"{'options':>7} {'q/req':>5} {'conc':>4} {'reqs':>5} {'p50 ms':>9} {'p95 ms':>9} {'p99 ms':>9} "
          f"{'decisions/s':>11} {'merged':>6} {'load':>11}")
    for lv in rec["levels"]:
        print(f"{lv['options']:>7} {lv['questions_per_request']:>5} {lv['concurrency']:>4} {lv['requests']:>5} "
              f"{lv['p50_ms']:>9} {lv['p95_ms']:>9} {lv['p99_ms']:>9} {lv['decisions_per_s']:>11} "
              f"{lv['mean_batch_requests']:>6} {str(lv['load_avg']):>11}")
    if "one_question" in rec:
        o = rec["one_question"]
        print(f"\none 10-option question: client p50 {o['client_ms']} ms (target <= 150), admission {o['admit_ms']} ms, "
              f"scoring {o['compute_ms']} ms, bare forward of its {o['bare_tokens']} uncached tokens "
              f"{o['bare_forward_ms']} ms ({o['bare_forward_with_option_logits_ms']} ms with logits at its "
              f"{o['read_positions']} read positions), overhead {o['overhead_ms']} ms (load {o['load_avg']})")
    if "efficiency" in rec:
        e = rec["efficiency"]
        print(f"concurrency {e['concurrency']}: server {e['server_tokens_per_s']} tokens/s vs bare forward "
              f"{e['bare_forward_tokens_per_s']} tokens/s over {e['mean_tokens_per_call']}-token calls: efficiency "
              f"{e['efficiency']} (target >= 0.8); decisions/s {e['decisions_per_s']} vs "
              f"{e['decisions_per_s_at_concurrency_1']} at concurrency 1")
    if "q_vs_separate" in rec:
        q = rec["q_vs_separate"]
        print(f"{q['questions']} questions: one request {q['one_request_ms']} ms vs {q['questions']} requests "
              f"{q['separate_requests_ms']} ms: cost per question-token one/separate = "
              f"{q['ratio_per_question_token_one_vs_separate']} (target <= 1.25)")


if __name__ == "__main__":
    raise SystemExit(main())
