"""What ``fit`` costs: the head's optimiser beside scikit-learn's, and ``Classifier.fit`` end to end.

Two parts, each printing a table and writing JSON (``--json``):

* ``head``: the head's fit on fixed, seeded features (`judge.adaptation.head.fit_head`, ``l2`` given,
  so one optimisation, and with ``l2=None``: the cross-validated choice over the grid) beside
  scikit-learn's ``LogisticRegression`` (lbfgs, ``C = 1 / l2``) on the same features without offsets
  (the head with its zero-shot offset is the same problem plus one block of fixed margins scikit-learn
  cannot take). Medians of ``--repeats`` runs; the issue's target is the head within 3x.
* ``fit``: ``Classifier(labels).fit(texts, y)`` with its defaults on seeded Banking77 training texts
  (``--labels`` labels, ``--per-class`` texts each), the packaged model, one call timed (and its phases:
  the head's report).

    python -m bench.fit_cost head --json bench/results/fit_cost_head.json
    python -m bench.fit_cost fit --labels 4 --per-class 7 --json bench/results/fit_cost_fit.json
    python -m bench.fit_cost fit --labels 77 --per-class 8 --tune-embedder auto --json bench/results/fit_cost_fit_616_tuned.json

Run it from a base commit's checkout too to compare (it uses public names only). What it deliberately
does not do: measure accuracy (bench/learning_curve.py does).
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
SHAPES = ((28, 4, 576), (616, 77, 576), (2000, 77, 960))


def _time(repeats, fn, *a, **kw):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(*a, **kw)
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def head(args):
    import warnings

    from sklearn.linear_model import LogisticRegression

    from judge.adaptation.head import fit_head

    rows = []
    for n, K, d in SHAPES:
        rng = np.random.default_rng(n)
        y = np.concatenate([np.arange(K), rng.integers(0, K, n - K)])
        centres = rng.normal(0, 1, (K, d))
        X = centres[y] + rng.normal(0, 2.0, (n, d))
        s = rng.normal(0, 1, (n, K)) + 1.5 * np.eye(K)[y]
        l2 = 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_plain = _time(args.repeats, fit_head, X, y, K, l2=l2)
            t_off = _time(args.repeats, fit_head, X, y, K, scores=s, l2=l2)
            t_cv = _time(max(1, args.repeats // 2), fit_head, X, y, K, scores=s)
            Xs = (X - X.mean(0)) / X.std(0)
            t_sk = _time(args.repeats, LogisticRegression(C=1.0 / l2, max_iter=1000).fit, Xs, y)
        row = {"n": n, "K": K, "d": d, "head (no offset) s": t_plain, "head with offset s": t_off,
               "head, l2 by CV s": t_cv, "sklearn LogisticRegression s": t_sk, "head / sklearn": t_plain / t_sk}
        rows.append(row)
        print("  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    return {"part": "head", "repeats": args.repeats, "load": os.getloadavg()[0], "rows": rows}


def fit(args):
    import warnings

    import torch

    from judge import Classifier
    from judge.datasets import load

    torch.set_num_threads(args.threads)
    d = load("banking77", "train", data_dir=args.data_dir)
    rng = np.random.default_rng(args.seed)
    labels = sorted(rng.choice(sorted(set(d.labels)), args.labels, replace=False).tolist())
    texts, y = [], []
    for lab in labels:
        idx = [i for i, v in enumerate(d.labels) if v == lab]
        for i in rng.choice(idx, args.per_class, replace=False):
            texts.append(d.texts[i])
            y.append(lab)
    clf = Classifier(labels)
    clf.setup()  # the model's load is not fit's cost
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        opts = {"tune_embedder": args.tune_embedder} if args.tune_embedder is not False else {}
        if args.max_seconds:
            opts["max_seconds"] = args.max_seconds
        clf.fit(texts, y, **opts)
        total = time.perf_counter() - t
    rep = getattr(clf.adaptation_, "report", None) or {}
    out = {"part": "fit", "texts": len(texts), "labels": len(labels), "seconds": total, "threads": args.threads,
           "tune_embedder": args.tune_embedder, "max_seconds": args.max_seconds, "tuned": rep.get("tuned"),
           "load": os.getloadavg()[0], "features": getattr(clf.adaptation_, "features", None),
           "report_timings": {k: v for k, v in rep.items() if "second" in k or k.endswith("_s")}}
    print(json.dumps(out, indent=1))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("part", choices=("head", "fit"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--labels", type=int, default=4)
    ap.add_argument("--per-class", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=DATA)
    ap.add_argument("--tune-embedder", choices=("False", "True", "auto"), default="False",
                    help="fit: fit(..., tune_embedder=...) (the tuned-embedder candidate)")
    ap.add_argument("--max-seconds", type=float, default=None, help="fit: fit(..., max_seconds=...)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    args.tune_embedder = {"False": False, "True": True}.get(args.tune_embedder, args.tune_embedder)
    out = {"head": head, "fit": fit}[args.part](args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
