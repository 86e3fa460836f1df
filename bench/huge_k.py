"""K = 100,000 ICD-like codes end to end on SmolLM2 with the decode path.

Prints and writes (``--json``) the automaton build time, decode time per text,
the labels returned, and the peak RSS of the process. Run:

    python bench/huge_k.py --k 100000 --n 3 --json bench/results/huge_k.json
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time


def icd_codes(k: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < k:
        code = f"{rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ')}{rng.randint(0, 99):02d}"
        if rng.random() < 0.9:
            code += "." + "".join(rng.choice("0123456789X") for _ in range(rng.randint(1, 4)))
        out.add(code)
    return sorted(out)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", type=int, default=100_000)
    p.add_argument("--n", type=int, default=3, help="texts to classify")
    p.add_argument("--top-k", type=int, default=3)
    p.add_argument("--json", default=None)
    args = p.parse_args()

    from judge import Classifier
    from judge.models import load_model

    model, tok = load_model(device="cpu")
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
