"""Benchmark: what a fitted decision profile costs a served request (the same question with and without it).

    python -m bench.serve_profile --json bench/results/serve_profile.json
    python -m bench.serve_profile --model tiny --requests 8 --repeats 1 --json /tmp/p.json   # the harness, in seconds

Two apps on the same model (the packaged SmolLM2-135M-Instruct by default), in this process through
FastAPI's TestClient (no network): a plain `Decider` and one with a `DecisionProfile` fitted by
`fit_profile` on ``--train`` labelled states (a 4-option choice whose label a planted word decides;
``features="hidden"``, the answer-slot state alone, so the figure is the LM's own cost and not a
sentence embedder's). Each repeat sends ``--requests`` requests about different states to both,
alternating, one at a time, after warming each app up; reported per app: client p50/p95 ms, the
server's passes through the decoder per request (a counting hook on ``model.get_decoder()``: the
scoring pass, and a pass of its own for hidden states where one runs) and its scored tokens per request
(``/healthz``), and the ratio profile/plain of the p50s. Medians over ``--repeats`` repeats, with the
1-minute load average (the machine may be shared).

What it deliberately does not do: measure concurrency (bench/serve.py does), or accuracy
(bench/decisions_profiles.py does).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

WORDS = ["invoice", "parcel", "screen", "password", "branch", "statement", "router", "voucher", "meeting", "driver"]
RULE = {"walrus": "o0", "zebra": "o1", "heron": "o2", "otter": "o3"}  # the planted word decides the label
OPTIONS = {"o0": "billing", "o1": "technical support", "o2": "sales", "o3": "account security"}


def _states(n: int, seed: int) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        word, label = list(RULE.items())[i % len(RULE)]
        words = list(rng.choice(WORDS, 8))
        words.insert(int(rng.integers(0, 8)), word)
        out.append(("Customer message: " + " ".join(words) + ".", label))
    return out


def _pct(xs, q) -> float:
    return float(np.percentile(xs, q))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="default: the packaged SmolLM2-135M-Instruct; 'tiny': random weights")
    p.add_argument("--train", type=int, default=40, help="labelled states the profile is fitted on")
    p.add_argument("--requests", type=int, default=40, help="timed requests per app per repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the server's scoring thread alone)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)

    import torch
    from fastapi.testclient import TestClient

    from judge.decisions import Choice, Decider, fit_profile
    from judge.server.app import ServerConfig, create_app

    torch.set_num_threads(a.threads)
    if a.model == "tiny":
        from judge.testing import tiny_pair

        model, tok = tiny_pair()
    else:
        from bench._common import load_bench_model

        model, tok = load_bench_model(a.model)
    question = Choice(OPTIONS, "Which team should handle this message?")
    wire_q = {"type": "choice", "instructions": "Which team should handle this message?", "criteria": OPTIONS}
    rows = [(s, {"q": question}, {"q": list(OPTIONS).index(y)}) for s, y in _states(a.train, 0)]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        profile = fit_profile(rows, Decider(model, tok), cv=4, features="hidden")
    fit_s = time.perf_counter() - t0
    forwards = [0]  # passes through the decoder: the scoring pass and any pass of its own for hidden states
    model.get_decoder().register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    apps = {"plain": create_app(Decider(model, tok), ServerConfig(max_wait_ms=0, served_name="m")),
            "profile": create_app(Decider(model, tok, profile=profile), ServerConfig(max_wait_ms=0, served_name="m"))}
    runs = []
    with TestClient(apps["plain"]) as plain, TestClient(apps["profile"]) as prof:
        clients = {"plain": plain, "profile": prof}
        for c in clients.values():  # warm: content-free priors, the template root
            for s, _ in _states(3, 99):
                assert c.post("/v1/systemone", json={"model": "m", "state": s, "questions": {"q": wire_q}}).status_code == 200
        for r in range(a.repeats):
            ms = {n: [] for n in clients}
            fw = {n: 0 for n in clients}
            tokens0 = {n: c.get("/healthz").json()["scored_tokens"] for n, c in clients.items()}
            right = {n: 0 for n in clients}
            for s, y in _states(a.requests, 1000 + r):
                for n, c in clients.items():
                    f0, t = forwards[0], time.perf_counter()
                    res = c.post("/v1/systemone", json={"model": "m", "state": s, "questions": {"q": wire_q}})
                    ms[n].append((time.perf_counter() - t) * 1000)
                    fw[n] += forwards[0] - f0
                    assert res.status_code == 200, res.text
                    right[n] += res.json()["answers"]["q"]["choice"] == y
            tokens = {n: (c.get("/healthz").json()["scored_tokens"] - tokens0[n]) / a.requests for n, c in clients.items()}
            runs.append({n: {"p50_ms": _pct(ms[n], 50), "p95_ms": _pct(ms[n], 95), "forwards_per_request": fw[n] / a.requests,
                             "scored_tokens_per_request": tokens[n], "accuracy": right[n] / a.requests}
                         for n in clients} | {"load_1min": round(os.getloadavg()[0], 2)})
    med = {n: {k: statistics.median(run[n][k] for run in runs) for k in runs[0][n]} for n in ("plain", "profile")}
    ratio = med["profile"]["p50_ms"] / med["plain"]["p50_ms"]
    print(f"{'app':8} {'p50 ms':>8} {'p95 ms':>8} {'forwards/req':>13} {'tokens/req':>11} {'accuracy':>9}")
    for n in ("plain", "profile"):
        m = med[n]
        print(f"{n:8} {m['p50_ms']:8.1f} {m['p95_ms']:8.1f} {m['forwards_per_request']:13.2f} "
              f"{m['scored_tokens_per_request']:11.1f} {m['accuracy']:9.3f}")
    print(f"profile / plain p50: {ratio:.3f}  (profile fitted on {a.train} states in {fit_s:.1f} s; "
          f"load {[r['load_1min'] for r in runs]})")
    out = {"model": a.model or "smollm2-135m-instruct", "train": a.train, "requests": a.requests, "repeats": a.repeats,
           "threads": a.threads, "fit_s": fit_s, "median": med, "p50_ratio_profile_over_plain": ratio, "runs": runs,
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
