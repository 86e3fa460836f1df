"""Benchmark: sys1bench and jevbench against ``judge serve`` (loopback, the packaged SmolLM2 by default).

    python -m bench.serve_suites                                   # writes bench/results/serve_suites.json
    python -m bench.serve_suites --n 4 --framings f0 --perms 1 --jevbench-domains none   # smoke test
    python -m bench.serve_suites --model tiny --n 1 --generators support_tickets --framings f0 --perms 0 \
        --json /tmp/suites.json     # a random-weight model: the harness in seconds, numbers mean nothing

``sys1bench``: for each generator (default support_tickets, phishing_email,
log_triage) ``--n`` generated, policy-labelled items, expanded over the
``--framings`` (question paraphrases; default f0, para1, para2) and
``--perms`` option permutations, sent through sys1bench's own
``jev_typesafe`` adapter (``url: http://127.0.0.1:PORT/v1/systemone``,
``api_key: local``, ``allow_alias: true``) to a server in this process.
Reported per question, from sys1bench's scorecard: accuracy (median over
framings), ECE divided by its resampled noise floor, coverage at 5% risk,
the option-permutation argmax flip rate, p50 latency.

``jevbench``: the ``jevbench-mini`` suite restricted to ``--jevbench-domains``
(coherence checks without gold labels); its card is stored as returned. Read
it beside the accuracy numbers: a uniform model scores high on coherence.

What it deliberately does not do: the letter-readout peer (anyjev), run at
sys1bench's default sizes (hundreds of items; too slow for a 2-core CPU), or
hide small-n noise: every number carries its n.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from bench.serve import serving  # noqa: E402


def run_sys1bench(url: str, generators, n: int, framings, perms: int, concurrency: int, workdir: Path) -> dict:
    from sys1bench.adapters import get_adapter
    from sys1bench.data import framings_path
    from sys1bench.framing import expand_framings, permute_options
    from sys1bench.framing.expand import load_framings
    from sys1bench.generators import get_generator
    from sys1bench.report.scorecard import group_rows, scorecard
    from sys1bench.runners.benchmark_runner import run_items
    from sys1bench.runners.cache import ResponseCache

    adapter = get_adapter("jev_typesafe", model_id="jev-latest", url=url + "/v1/systemone", api_key="local",
                          allow_alias=True, deployment="local", timeout_s=600, max_retries=3)
    out = {}
    for g in generators:
        items = get_generator(g, n=n, seed=42).generate()
        expanded = expand_framings(items, load_framings(framings_path(g)))
        expanded = [i for i in expanded if all(q.framing_id in framings for q in i.questions.values())]
        if perms > 0:  # p0 (canonical order) plus `perms` shuffled copies
            expanded = permute_options(expanded, perms)
        cache = ResponseCache(workdir / f"cache_{g}.sqlite")
        t0 = time.perf_counter()
        rows = run_items(expanded, adapter, cache, suite="A", arm="main", concurrency=concurrency, progress=False)
        wall = time.perf_counter() - t0
        cards = {}
        for (qk,), rs in group_rows(rows, "question_key").items():
            c = scorecard(rs)
            cards[qk] = {
                "n_rows": c.get("n_rows"),
                "accuracy_median_over_framings": c.get("accuracy"),
                "accuracy_range": c.get("accuracy_range"),
                "ece_over_floor": (c.get("calibration") or {}).get("ece_over_floor"),
                "coverage_at_risk_5": (c.get("selective") or {}).get("coverage_at_risk_5"),
                "permutation_flip_rate": (c.get("permutation") or {}).get("argmax_flip_rate"),
                "framing_flip_rate": (c.get("framing") or {}).get("flip_rate_mean", (c.get("framing") or {}).get("flip_rate")),
                "p50_ms": (c.get("latency") or {}).get("p50"),
                "schema_failure_rate": c.get("schema_failure_rate"),
                "transport_failure_rate": c.get("transport_failure_rate"),
            }
        out[g] = {"items": len(items), "rows": len(expanded), "wall_s": round(wall, 1), "questions": cards}
        print(f"  sys1bench {g}: {len(expanded)} requests in {wall:.0f} s", file=sys.stderr, flush=True)
    return out


def run_jevbench(url: str, domains) -> dict:
    import jevbench as jb

    model = jb.systemone(url + "/v1/systemone", "jev-latest", api_key="local", api_key_env=None)
    t0 = time.perf_counter()
    rep = jb.evaluate(model, suite="jevbench-mini", domains=domains, cache=None)

    def get(name):
        v = getattr(rep, name, None)
        return v() if callable(v) else v

    return {"domains": domains, "wall_s": round(time.perf_counter() - t0, 1), "overall": get("overall"),
            "interval": get("interval"), "dimensions": get("dimensions"), "n_errors": len(get("errors") or []),
            "table": get("table")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=None, help="default: the packaged SmolLM2; 'tiny': a random-weight model")
    p.add_argument("--engine", default="auto")
    p.add_argument("--generators", default="support_tickets,phishing_email,log_triage")
    p.add_argument("--n", type=int, default=10)
    p.add_argument("--framings", default="f0,para1,para2")
    p.add_argument("--perms", type=int, default=2, help="shuffled option orders per row, besides the canonical one")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--jevbench-domains", default="none", help="comma list of jevbench case domains (e.g. customer_support), or none (default: one domain takes about 7 min on 1 CPU thread and yields fewer than the 5 tests per relation jevbench scores)")
    p.add_argument("--json", default=str(REPO / "bench" / "results" / "serve_suites.json"))
    p.add_argument("--workdir", default=None, help="sys1bench response caches (default: a temporary folder)")
    a = p.parse_args(argv)

    from bench._common import TINY_MODEL, load_bench_model
    from judge.decisions import Decider

    if a.model == TINY_MODEL:
        decider = Decider(*load_bench_model(TINY_MODEL), engine=a.engine)
    else:
        decider = Decider(a.model, device="cpu", engine=a.engine)
    _ = decider.tokenizer_
    import tempfile

    work = Path(a.workdir or tempfile.mkdtemp(prefix="judge-serve-suites-"))
    work.mkdir(parents=True, exist_ok=True)
    rec = {"benchmark": "serve_suites", "model": decider.model_name,
           "engine": type(decider.scorer_).__module__ + "." + type(decider.scorer_).__name__,
           "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "settings": vars(a)}
    with serving(argparse.Namespace(server_process=False, max_wait_ms=5.0), decider) as (url, _):
        rec["sys1bench"] = run_sys1bench(url, a.generators.split(","), a.n, set(a.framings.split(",")), a.perms,
                                         a.concurrency, work)
        if a.jevbench_domains != "none":
            try:
                rec["jevbench"] = run_jevbench(url, a.jevbench_domains.split(","))
            except Exception as e:  # noqa: BLE001 - record why, keep the sys1bench numbers
                rec["jevbench"] = {"error": f"{type(e).__name__}: {e}"}
    print(f"\nsys1bench on judge serve ({rec['model']}, {rec['engine']})")
    print(f"{'generator / question':<40} {'rows':>5} {'acc med':>8} {'ECE/floor':>9} {'cov@5%':>7} {'perm flip':>9}")

    def f(v):
        return "-" if v is None else f"{v:.3f}"

    for g, r in rec["sys1bench"].items():
        for qk, c in r["questions"].items():
            print(f"{g + ' / ' + qk:<40} {c['n_rows'] or 0:>5} {f(c['accuracy_median_over_framings']):>8} "
                  f"{f(c['ece_over_floor']):>9} {f(c['coverage_at_risk_5']):>7} {f(c['permutation_flip_rate']):>9}")
    if "jevbench" in rec:
        print("\njevbench:", json.dumps(rec["jevbench"], default=str)[:2000])
    out = Path(a.json)
    out.write_text(json.dumps(rec, indent=1, default=str) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
