"""A label set per text: one ``judge.classify`` call against looping over the texts one set at a time.

Seeded Banking77 validation texts (``--n``, default 64), each given ``--k`` labels (default 10): its
gold label and ``k - 1`` others drawn at random (seeded), in a shuffled order, so nearly every text
has a set of its own. Both arms use the same classifier (the packaged model, the default fusion,
loaded once and shared):

* ``one call``: ``classify(texts, label_sets, classifier=clf)`` (one model call for every text and
  every set's content-free inputs);
* ``loop``: ``classify([text], [label_set], classifier=clf)`` per text (one call per text: what a
  user without per-text sets writes, with the model already loaded).

Each arm's answers must be equal (the run stops otherwise); texts/s is the median of ``--repeats``
runs, the ratio read within one run. Accuracy is printed for information (gold is in every set).

    python -m bench.label_sets --json bench/results/label_sets_speed.json

What it deliberately does not do: read test, or time model loading (both arms share one loaded model).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = str(HERE.parent.parent / "shared" / "datasets")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=DATA)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import torch

    from bench._accuracy_cache import gold
    from judge import Classifier, classify

    torch.set_num_threads(args.threads)
    y, labels, texts = gold("banking77", "validation", args.data_dir, args.n)
    rng = np.random.default_rng(args.seed)
    sets = []
    for g in y:
        others = rng.choice([i for i in range(len(labels)) if i != g], args.k - 1, replace=False)
        sets.append([labels[i] for i in rng.permutation([g, *others])])
    clf = Classifier(labels[:2], progress=False).setup()
    classify(texts[:1], sets[:1], classifier=clf)  # warm: the embedder and the engine's first pass
    times = {"one call": [], "loop": []}
    answers = {}
    for _ in range(args.repeats):
        t = time.perf_counter()
        answers["one call"] = classify(texts, sets, classifier=clf)
        times["one call"].append(time.perf_counter() - t)
        t = time.perf_counter()
        answers["loop"] = [classify([x], [s], classifier=clf)[0] for x, s in zip(texts, sets)]
        times["loop"].append(time.perf_counter() - t)
    diff = max(float(np.abs(a.proba - b.proba).max()) for a, b in zip(answers["one call"], answers["loop"]))
    if diff > 1e-5:
        raise SystemExit(f"the two arms' answers differ by {diff:.2e}")
    acc = float(np.mean([a.label == labels[g] for a, g in zip(answers["one call"], y)]))
    out = {"texts": len(texts), "labels_per_text": args.k, "repeats": args.repeats, "threads": args.threads,
           "load": os.getloadavg()[0], "accuracy": acc, "max_abs_difference": diff,
           "seconds": times, "texts_per_s": {k: len(texts) / statistics.median(v) for k, v in times.items()}}
    out["speedup"] = out["texts_per_s"]["one call"] / out["texts_per_s"]["loop"]
    out["speedup_per_repeat"] = [lo / one for one, lo in zip(times["one call"], times["loop"])]
    print(f"{'arm':<10}{'texts/s':>10}{'median s':>10}")
    for k, v in times.items():
        print(f"{k:<10}{out['texts_per_s'][k]:>10.2f}{statistics.median(v):>10.1f}")
    print(f"speedup (one call / loop): {out['speedup']:.2f}x; accuracy {acc:.3f}; max |difference| {diff:.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
