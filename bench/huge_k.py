"""K = 100,000 ICD-like codes end to end on SmolLM2 with the decode path.

Prints and writes (``--json``) the automaton build time, decode time per text,
the labels returned, and the peak RSS of the process. The codes are
`judge.testing.icd_codes` (the one generator, shared with the tests and
bench/masks.py). Run:

    python -m bench.huge_k --k 100000 --n 3 --json bench/results/huge_k.json
    python -m bench.huge_k --model tiny --k 1000 --n 1      # smoke run (seconds; numbers mean nothing)

What it deliberately does not do: compare with peers (bench/masks.py does), or
score every label exactly (the decode path returns the top ``--top-k``).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

__all__ = ["main", "peak_rss_mb"]  # and icd_codes (see __getattr__)


def __getattr__(name):
    """``icd_codes``: `judge.testing.icd_codes` (tests import it from here), loaded on first use so
    ``--help`` does not wait for judge.testing's transformers import."""
    if name == "icd_codes":
        from judge.testing import icd_codes

        return icd_codes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=None, help="default: the packaged SmolLM2; 'tiny': a random-weight model")
    p.add_argument("--k", type=int, default=100_000)
    p.add_argument("--n", type=int, default=3, help="texts to classify")
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from bench._common import load_bench_model
    from judge import Classifier
    from judge.testing import icd_codes

    model, tok = load_bench_model(args.model, device="cpu")
    rss_model = peak_rss_mb()
    labels = icd_codes(args.k)
    texts = ["Type 2 diabetes mellitus with hyperglycemia", "Fracture of the neck of the right femur",
             "Acute bronchitis due to respiratory syncytial virus"][: args.n]
    clf = Classifier(labels, model, tokenizer=tok, top_k=args.top_k)
    clf.setup()
    t0 = time.perf_counter()
    clf.engine_.vocab_.byte_trie()  # per-tokenizer setup, timed apart from the label set's compile
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    auto = clf.automaton_
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores = clf.decision_function(texts)
    decode_s = time.perf_counter() - t0
    pred = clf.predict(texts)
    found = [[labels[j] for j in (-row).argsort()[: args.top_k] if row[j] > -float("inf")] for row in scores]
    rec = {"K": args.k, "method": clf.method_, "tokenizer_setup_ms": setup_s * 1000,
           "automaton_build_ms": build_s * 1000,
           "automaton_mb": auto.memory_bytes / 1e6, "nodes": auto.n_nodes, "edges": auto.n_edges,
           "seconds_per_text": decode_s / len(texts), "valid": bool(set(pred) <= set(labels)),
           "predictions": list(pred), "top": found, "peak_rss_mb": peak_rss_mb(),
           "peak_rss_after_model_mb": rss_model}
    for k, v in rec.items():
        print(f"{k:>24}: {v}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rec, fh, indent=2)


if __name__ == "__main__":
    main()
