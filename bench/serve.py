"""Benchmark: ``judge serve`` latency and throughput on loopback.

    python bench/serve.py                               # SmolLM2, concurrency 1/4/16, writes bench/results/serve.json
    python bench/serve.py --requests 8 --concurrency 1,4 --json /tmp/smoke.json   # smoke test
    python bench/serve.py --model tiny --requests 2 --concurrency 1 --questions 2 --repeats 1 --json /tmp/s.json
        # a random-weight model: checks the harness in seconds, numbers mean nothing

The server runs in this process (uvicorn in a thread on a free 127.0.0.1
port) around ``Decider(--model)`` (``--engine reference``: the brute-force
``judge.testing.Reference`` as its scorer); a bounded load generator
(``c`` client threads, each with its own HTTP connection, ``--requests``
requests in all per level) sends ``POST /v1/systemone`` requests with one
``--options``-option choice question about a different support ticket each
time. Reported per concurrency level: latency p50/p95/max (ms, client side,
request sent to response parsed), decisions/s (answered questions per second
of wall time), and the mean number of requests merged per forward pass
(``x_batch_requests``).

Then the cost of ``--questions`` Q questions in one request against the
same Q questions as Q separate requests (sequential, concurrency 1): wall ms
each way; the question tokens are the same both ways, so their ratio is the
ratio of cost per question-token (target <= 1.25). The engine's own token
counts (shared prefixes counted once) are reported beside it.

What it deliberately does not do: run sys1bench/jevbench/anyjev (see
``bench/serve_suites.py``), or measure a remote network.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

LABELS = {
    "Billing": "Payments, invoices, refunds, charges",
    "Technical": "Bugs, errors, outages, integrations",
    "Account": "Login, password, profile, access",
    "Sales": "Pricing, quotes, upgrades, new contracts",
    "Shipping": "Delivery status, tracking, lost parcels",
    "Returns": "Sending items back, exchanges",
    "Security": "Fraud, phishing, suspicious activity",
    "Feedback": "Praise, complaints without a request, suggestions",
    "Legal": "Privacy requests, contracts, compliance",
    "Other": None,
}
TICKETS = [
    "I was charged twice for my March invoice and the refund still hasn't arrived.",
    "The dashboard shows a 500 error every time I open the reports tab.",
    "I forgot my password and the reset email never comes.",
    "Can I get a quote for 40 seats on the enterprise plan?",
    "My parcel was marked delivered but nothing is at my door.",
    "I want to return the blue jacket, it is too small.",
    "Someone logged into my account from another country last night.",
    "Just wanted to say your support team was fantastic this week!",
    "Please delete all personal data you hold about me under GDPR.",
    "Do you sponsor local football clubs?",
]
QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": LABELS},
    "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
    "urgent": {"type": "noul", "instructions": "Does the customer need an answer today?"},
    "anger": {"type": "score", "instructions": "How frustrated is the customer?",
              "criteria": ["Calm", "Somewhat frustrated", "Very angry"]},
    "lang": {"type": "choice", "instructions": "Which language is the ticket in?",
             "criteria": {"English": None, "German": None, "French": None, "Other": None}},
    "sentiment": {"type": "choice", "instructions": "Overall sentiment?",
                  "criteria": {"positive": None, "neutral": None, "negative": None}},
    "churn": {"type": "noul", "instructions": "Is the customer likely to cancel?"},
    "polite": {"type": "score", "instructions": "How polite is the message?", "criteria": ["Rude", "Neutral", "Polite"]},
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(decider, max_wait_ms: float):
    import uvicorn

    from judge.server.app import ServerConfig, create_app

    port = _port()
    server = uvicorn.Server(uvicorn.Config(create_app(decider, ServerConfig(max_wait_ms=max_wait_ms, max_queue=256)),
                                           host="127.0.0.1", port=port, log_level="warning"))
    th = threading.Thread(target=server.run, daemon=True)
    th.start()
    while not server.started:
        if not th.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        th.join(60)


def _pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def load_level(url: str, concurrency: int, n: int, n_options: int) -> dict:
    import httpx

    crit = dict(list(LABELS.items())[:n_options]) if n_options <= len(LABELS) else \
        {**LABELS, **{f"Queue {i:03d}": None for i in range(n_options - len(LABELS))}}
    q = {"team": {**QUESTIONS["team"], "criteria": crit}}
    lat, batch = [], []
    lock = threading.Lock()
    counter = iter(range(n))

    def worker(_):
        with httpx.Client(timeout=120) as c:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                payload = {"model": "jev-latest", "state": f"{TICKETS[i % len(TICKETS)]} (#{i})", "questions": q}
                t0 = time.perf_counter()
                r = c.post(url + "/v1/systemone", json=payload)
                dt = (time.perf_counter() - t0) * 1000
                r.raise_for_status()
                with lock:
                    lat.append(dt)
                    batch.append(r.json().get("x_batch_requests", 1))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(worker, range(concurrency)))
    wall = time.perf_counter() - t0
    return {"concurrency": concurrency, "requests": n, "options": n_options,
            "p50_ms": round(_pct(lat, 0.5), 1), "p95_ms": round(_pct(lat, 0.95), 1), "max_ms": round(max(lat), 1),
            "decisions_per_s": round(n / wall, 2), "mean_batch_requests": round(statistics.mean(batch), 2),
            "wall_s": round(wall, 2)}


def q_vs_separate(url: str, n_questions: int, repeats: int) -> dict:
    import httpx

    names = list(QUESTIONS)[:n_questions]
    one, sep, tok_one, tok_sep, c_one, c_sep = [], [], [], [], [], []
    with httpx.Client(timeout=120) as c:
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
    per_tok_one = statistics.median(a / b for a, b in zip(c_one, tok_one))
    per_tok_sep = statistics.median(a / b for a, b in zip(c_sep, tok_sep))
    return {"questions": n_questions, "repeats": repeats,
            "one_request_ms": round(statistics.median(one), 1), "separate_requests_ms": round(statistics.median(sep), 1),
            "one_request_input_tokens": int(statistics.median(tok_one)),
            "separate_requests_input_tokens": int(statistics.median(tok_sep)),
            # the same Q questions both ways, so wall time per question-token compares directly
            "ratio_per_question_token_one_vs_separate": round(statistics.median(one) / statistics.median(sep), 3),
            "engine_compute_ms_per_engine_token_one": round(per_tok_one, 4),
            "engine_compute_ms_per_engine_token_separate": round(per_tok_sep, 4),
            "speedup_wall": round(statistics.median(sep) / statistics.median(one), 2)}


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="default: the packaged SmolLM2-135M-Instruct; 'tiny': a "
                                                 "random-weight model, for a smoke run")
    p.add_argument("--engine", default="auto", choices=["auto", "reference"],
                   help="auto (judge.engine.Engine) or reference (judge.testing.Reference: brute force, slow)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--concurrency", default="1,4,16")
    p.add_argument("--requests", type=int, default=48, help="requests per concurrency level")
    p.add_argument("--options", type=int, default=10)
    p.add_argument("--questions", type=int, default=8, help="Q for one request of Q questions vs Q requests")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--max-wait-ms", type=float, default=5.0)
    p.add_argument("--json", default=str(REPO / "bench" / "results" / "serve.json"))
    a = p.parse_args(argv)

    import torch

    from bench._common import TINY_MODEL, load_bench_model

    if a.model == TINY_MODEL:
        decider = _decider(a, *load_bench_model(TINY_MODEL))
    else:
        decider = _decider(a, a.model, None)
    _ = decider.tokenizer_  # load before timing
    engine = type(decider.scorer_).__module__ + "." + type(decider.scorer_).__name__
    levels = []
    with serving(decider, a.max_wait_ms) as url:
        load_level(url, 1, 4, a.options)  # warm-up, untimed
        for c in (int(x) for x in a.concurrency.split(",")):
            levels.append(load_level(url, c, a.requests, a.options))
            print(f"  concurrency {c}: done", file=sys.stderr)
        qvs = q_vs_separate(url, a.questions, a.repeats)
    rec = {"benchmark": "serve", "model": decider.model_name, "engine": engine, "device": a.device,
           "max_wait_ms": a.max_wait_ms, "levels": levels, "q_vs_separate": qvs,
           "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                       "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "python": platform.python_version(),
                       "torch": torch.__version__},
           "target": {"p50_ms_one_10_option_question": 150, "q_in_one_vs_separate_per_token": 1.25}}
    print(f"\njudge serve on {decider.model_name} ({engine}, {a.device}, {rec['machine']['torch_threads']} torch threads)")
    print(f"{'concurrency':>11} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'decisions/s':>11} {'merged':>7}")
    for lv in levels:
        print(f"{lv['concurrency']:>11} {lv['requests']:>8} {lv['p50_ms']:>8} {lv['p95_ms']:>8} {lv['max_ms']:>8} "
              f"{lv['decisions_per_s']:>11} {lv['mean_batch_requests']:>7}")
    print(f"\n{qvs['questions']} questions: one request {qvs['one_request_ms']} ms vs {qvs['questions']} requests "
          f"{qvs['separate_requests_ms']} ms: cost per question-token one/separate = "
          f"{qvs['ratio_per_question_token_one_vs_separate']} (target <= 1.25)")
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rec, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
