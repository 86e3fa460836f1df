"""Which rule should ``method="auto"`` follow? First-token vs exact label scores, on validation.

``first_token`` scores each label by its canonical first token's probability, renormalised
over the labels (what a constrained decoder commits to at its first step); ``exact`` scores
each label's whole token sequence. When every label starts with a different token the first
token alone tells them apart, and ``auto`` used to pick ``first_token`` then, also for
multi-token labels. This script measures both on validation data only, where that happens:
TREC coarse (6 labels, 5 of them multi-token, distinct first tokens) and seeded 10-label
subsets of Banking77, CLINC150 and MASSIVE whose first tokens are all distinct (validation
texts of those labels). Accuracy raw and after the batch prior (no labels used), and
seconds per text, same texts, same default prompt.

    python -m bench.first_token --data-dir ../shared/datasets --json bench/results/first_token.json
    python -m bench.first_token --model tiny --n 4 --subsets 1      # a few seconds: the script runs

Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import warnings
from pathlib import Path

import numpy as np


def _distinct_subsets(clf_factory, labels, k, n_subsets, seed):
    """Seeded k-label subsets whose default-prompt first tokens are all distinct."""
    rng = random.Random(seed)
    out, tries = [], 0
    while len(out) < n_subsets and tries < 2000:
        tries += 1
        sub = sorted(rng.sample(list(labels), k))
        firsts = [s[0] for s in clf_factory(sub, "exact").setup().label_token_ids]
        if len(set(firsts)) == k and sub not in out:
            out.append(sub)
    return out


def _accuracy(scores, y, prior):
    from judge.calibration import softmax

    p = softmax(scores)
    if prior:
        from judge.calibration import apply_bias, batch_bias

        p = softmax(apply_bias(scores, batch_bias(scores)))
    return float(np.mean(np.argmax(p, 1) == y))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default="../shared/datasets")
    ap.add_argument("--model", default=None, help="model id/folder; 'tiny' = a random tiny Llama (smoke run)")
    ap.add_argument("--n", type=int, default=100, help="validation texts per 10-label subset")
    ap.add_argument("--subsets", type=int, default=3, help="10-label subsets per dataset")
    ap.add_argument("--trec-n", type=int, default=0, help="TREC validation texts (0: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    from judge import Classifier
    from judge import datasets as ds

    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    if args.model == "tiny":
        from judge.testing import tiny_pair

        model, tok = tiny_pair()
    else:
        from judge.models import load_model

        model, tok = load_model(args.model, device="cpu")

    def make(labels, method):
        return Classifier(labels, model, tokenizer=tok, method=method, batch_size=8, progress=False)

    tasks = []
    trec = ds.load("trec", "validation", data_dir=args.data_dir)
    if args.trec_n:
        trec = trec.sample(args.trec_n, seed=0)
    tasks.append(("trec", list(trec.label_names), list(trec.texts), list(trec.labels)))
    for seed, name in enumerate(("banking77", "clinc150", "massive"), 1):
        d = ds.load(name, "validation", data_dir=args.data_dir)
        for i, sub in enumerate(_distinct_subsets(make, d.label_names, 10, args.subsets, seed=seed)):
            keep = [j for j, lab in enumerate(d.labels) if lab in sub]
            random.Random(i).shuffle(keep)
            keep = keep[: args.n]
            tasks.append((f"{name}-sub10-{i}", sub, [d.texts[j] for j in keep], [d.labels[j] for j in keep]))
    rows = []
    for name, labels, texts, gold in tasks:
        y = np.array([labels.index(g) for g in gold])
        row = {"task": name, "K": len(labels), "n": len(texts),
               "multi_token_labels": None}
        for method in ("first_token", "exact"):
            clf = make(labels, method)
            clf.setup()
            t0 = time.perf_counter()
            s = clf.decision_function(texts)
            dt = time.perf_counter() - t0
            row[f"{method}_raw"] = _accuracy(s, y, False)
            row[f"{method}_batch"] = _accuracy(s, y, True)
            row[f"{method}_s_per_text"] = dt / max(1, len(texts))
            if method == "exact":
                row["multi_token_labels"] = int(sum(len(x) > 1 for x in clf.label_token_ids))
        rows.append(row)
        print(f"{name:22s} K={row['K']:3d} n={row['n']:4d} multi={row['multi_token_labels']:2d}  "
              f"first_token {100 * row['first_token_raw']:5.1f} / {100 * row['first_token_batch']:5.1f}  "
              f"exact {100 * row['exact_raw']:5.1f} / {100 * row['exact_batch']:5.1f}  "
              f"s/text {row['first_token_s_per_text']:.3f} vs {row['exact_s_per_text']:.3f}", flush=True)
    w = np.array([r["n"] for r in rows], float)
    summary = {k: float(np.average([r[k] for r in rows], weights=w))
               for k in ("first_token_raw", "first_token_batch", "exact_raw", "exact_batch")}
    summary["wins_exact_batch"] = int(sum(r["exact_batch"] > r["first_token_batch"] for r in rows))
    summary["wins_first_token_batch"] = int(sum(r["exact_batch"] < r["first_token_batch"] for r in rows))
    print("\n| task | K | n | multi-token labels | first_token raw / batch % | exact raw / batch % | s/text first / exact |")
    print("|---|---:|---:|---:|---|---|---|")
    for r in rows:
        print(f"| {r['task']} | {r['K']} | {r['n']} | {r['multi_token_labels']} | "
              f"{100 * r['first_token_raw']:.1f} / {100 * r['first_token_batch']:.1f} | "
              f"{100 * r['exact_raw']:.1f} / {100 * r['exact_batch']:.1f} | "
              f"{r['first_token_s_per_text']:.3f} / {r['exact_s_per_text']:.3f} |")
    print(f"| weighted mean | | {int(w.sum())} | | {100 * summary['first_token_raw']:.1f} / "
          f"{100 * summary['first_token_batch']:.1f} | {100 * summary['exact_raw']:.1f} / "
          f"{100 * summary['exact_batch']:.1f} | |")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model or "smollm2-135m-instruct", "split": "validation",
                                               "rows": rows, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
