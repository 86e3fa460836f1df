"""Length normalisation of multi-token labels on the four validation splits: none, per token, per byte.

Summed log-likelihood favours short labels (lm-evaluation-harness issues 663, 1396, 2722);
``Classifier(length_norm=...)`` divides each label's exact log-probability by the tokens scored for
it or by its text's UTF-8 bytes (`judge.compiled.length_divisors`). This measures, on the seeded first
``--n`` rows of each validation split (the permutation of bench/accuracy.py), the packaged model's
accuracy under each normalisation:

* ``lm, no prior``: the argmax of the (normalised) exact scores;
* ``lm + prior``: ``Classifier(labels, embedder=None, length_norm=v)``'s answer (its label-free
  contextual prior, computed from the content-free inputs under the same normalisation);
* ``default (fused)``: ``Classifier(labels, length_norm=v)``'s answer for a call that is not
  transductive: the LM after its prior fused with the packaged MiniLM's label similarity.

Scoring is the expensive part, so each text is scored once, with ``length_norm=None``; the other
normalisations divide those scores by `judge.compiled.length_divisors` (tests/test_compiled.py checks
that this is what the classifier computes), and each row's figures go through the classifier's own
public pieces (`judge.calibrated.call_calibration`, `judge.experts.lm_offset`,
`judge.experts.embedder_vectors`, ``fusion_.combine``). A check on the first rows compares them with
``predict_proba`` of each classifier and stops the run if they differ.

    python -m bench.length_norm --n 400 --json bench/results/length_norm_validation.json

What it deliberately does not do: read test, or choose the default (the rule, fixed before the run:
a normalisation becomes the default only if it beats ``None`` on the mean over the four datasets by
more than 1 point *and* loses on none of them by more than 1 point, for the default classifier).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = str(HERE.parent.parent / "shared" / "datasets")
DATASETS = ("banking77", "clinc150", "massive", "trec")
NORMS = (None, "token", "byte")


def _softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def measure(dataset, n, data_dir, check_rows=4):
    from bench._accuracy_cache import gold
    from judge import Classifier
    from judge import datasets as ds
    from judge.calibrated import call_calibration
    from judge.compiled import length_divisors
    from judge.experts import embedder_vectors, lm_offset

    y, labels, texts = gold(dataset, "validation", data_dir, n)
    names = ds.display_names(dataset, labels) or None  # as judge evaluate names them (TREC's codes spelled out)
    base = Classifier(labels, embedder=None, method="exact", label_names=names)
    t0 = time.perf_counter()
    raw = base.decision_function(texts)
    seconds = time.perf_counter() - t0
    row = {"n": len(texts), "labels": len(labels), "score_seconds": round(seconds, 1), "variants": {}}
    for v in NORMS:
        lm_only = Classifier(labels, model=base.model_, tokenizer=base.tokenizer_, embedder=None, method="exact",
                             length_norm=v, label_names=names)
        fused = Classifier(labels, model=base.model_, tokenizer=base.tokenizer_, method="exact", length_norm=v,
                           embedder="minilm", label_names=names)  # the default's fusion (a named encoder: DEFAULT_FUSION on a model object)
        div = length_divisors(lm_only.compiled_)
        s = raw / div
        cal = call_calibration(lm_only, lm_only.prior_for(len(texts)), s)
        p_prior = cal.transform(s) if cal is not None else _softmax(s)
        X, L = embedder_vectors(fused, texts)
        p_fused = np.exp(fused.fusion_.combine(s - lm_offset(fused), X @ L.T))
        k = min(check_rows, len(texts))  # the shortcut equals each classifier's own answer
        for name, clf, p in (("lm+prior", lm_only, p_prior), ("fused", fused, p_fused)):
            want = clf.predict_proba(texts[:k], transductive=False)
            if not np.allclose(want, p[:k], atol=1e-6):
                raise SystemExit(f"{dataset} {v} {name}: the shortcut differs from predict_proba by "
                                 f"{np.abs(want - p[:k]).max():.2e}")
        row["variants"][str(v)] = {
            "lm_no_prior": float((s.argmax(1) == y).mean()),
            "lm_prior": float((p_prior.argmax(1) == y).mean()),
            "default_fused": float((p_fused.argmax(1) == y).mean()),
            "divisor_range": [float(div.min()), float(div.max())],
        }
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=DATA)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    old = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else {}
    out = {"split": "validation", "n": args.n, "rows": dict(old.get("rows", {})) if old.get("n") == args.n else {},
           "load": os.getloadavg()[0]}  # rows of other datasets kept from an earlier run of the same n
    for d in args.datasets.split(","):
        out["rows"][d] = measure(d, args.n, args.data_dir)
        print(d, json.dumps(out["rows"][d]["variants"]), flush=True)
    rows = {d: out["rows"][d] for d in DATASETS if d in out["rows"]}
    print(f"\n{'accuracy %':<26}" + "".join(f"{d:>11}" for d in rows) + f"{'mean':>9}")
    for what in ("lm_no_prior", "lm_prior", "default_fused"):
        for v in NORMS:
            vals = [100 * rows[d]["variants"][str(v)][what] for d in rows]
            print(f"{what + ' / ' + str(v):<26}" + "".join(f"{x:>11.1f}" for x in vals) + f"{np.mean(vals):>9.1f}")
    mean = {str(v): np.mean([rows[d]["variants"][str(v)]["default_fused"] for d in rows]) for v in NORMS}
    worst = {str(v): min(rows[d]["variants"][str(v)]["default_fused"] - rows[d]["variants"]["None"]["default_fused"]
                         for d in rows) for v in NORMS}
    adopt = [v for v in ("token", "byte") if mean[v] - mean["None"] > 0.01 and worst[v] >= -0.01]
    out["rule"] = "adopt a normalisation only if the default's mean beats None by > 1 point and loses nowhere by > 1"
    out["adopted"] = max(adopt, key=lambda v: mean[v]) if adopt else None
    print(f"\nrule: {out['rule']}; adopted: {out['adopted']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
