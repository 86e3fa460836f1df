"""Out of scope (CLINC150) with a sentence embedder beside the LM: AUROC of in-scope vs out-of-scope texts.

CLINC150's 150 intents are in scope; its ``oos`` texts fit none. Confidence scores (higher = in scope):

* zero-shot: the LM's top probability under its default label-free prior; the packaged embedder's
  largest cosine similarity to a label's name; the fused distribution's top probability
  (``judge.fusion.DEFAULT_FUSION``); no labelled text is used;
* fitted on the full training split (in-scope texts only): ``fit``'s default head, calibrated on
  in-scope validation (its post-fit default), top probability; and the largest cosine similarity to a
  training text (nearest neighbour under the embedder).

Each score's AUROC on ``validation200`` (in scope) vs ``oos_validation`` (100) chooses within its group
(zero-shot, fitted); test: ``test200`` vs ``oos_test200``, read once. Everything from the feature cache
(bench/_fit_cache.py: ``scores``, ``states``, ``minilm`` of the four selections and ``train``).

    python -m bench.oos_fused --json bench/results/oos_fused.json

What it deliberately does not do: train on out-of-scope texts.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._fit_cache import classifier, path, rows  # noqa: E402
from bench.priors import content_free  # noqa: E402

DATA = str(HERE.parent.parent / "shared" / "datasets")
SELS = {"validation200": ("validation500", 200), "oos_validation": ("oos_validation", None),
        "test200": ("test1000", 200), "oos_test200": ("oos_test200", None)}


def feature(sel, kind):
    """A cached feature of a selection (taken from the prefix of a larger cached selection where that one is)."""
    from judge.evaluation import read_checkpoint

    src, n = SELS.get(sel, (sel, None))
    if kind == "minilm" and src.startswith("oos_test"):
        src = "oos_test"
        texts_all = rows("clinc150", "oos_test", DATA)[0]
        texts = rows("clinc150", sel, DATA)[0]
        X = read_checkpoint(path("smollm2", "clinc150", src, kind)).scores
        pos = {t: i for i, t in enumerate(texts_all)}
        return X[[pos[t] for t in texts]]
    f = path("smollm2", "clinc150", src, kind)
    if not f.exists():
        raise SystemExit(f"not cached: {kind} of clinc150 {src} (python -m bench.learning_curve cache --what {kind} "
                         f"--dkeys clinc150 --sels {src})")
    s = read_checkpoint(f).scores
    s = s[:n] if n else s
    if np.isnan(s).any():
        raise SystemExit(f"still being computed: {kind} of clinc150 {src}")
    return s


def auroc(inside, outside):
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(np.r_[np.ones(len(inside)), np.zeros(len(outside))], np.r_[inside, outside]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from judge.adaptation import auto_candidates, fit_head_choosing
    from judge.calibration import contextual_bias, softmax
    from judge.calibration.bias import AUTO_PRIOR_STRENGTH
    from judge.calibration.state import fit_resolved, resolve_bias
    from judge.encoders import SentenceEncoder, TfidfEncoder
    from judge.fusion import DEFAULT_FUSION, label_texts

    tr_texts, y_tr, labels, _ = rows("clinc150", "train", DATA)
    K = len(labels)
    clf = classifier("clinc150", labels)
    L = SentenceEncoder()(label_texts(labels, clf.label_names)).astype(np.float64)
    prior = AUTO_PRIOR_STRENGTH * contextual_bias(content_free("clinc150", labels))
    f = {sel: {k: feature(sel, k) for k in ("scores", "states", "minilm")} for sel in SELS}
    for sel in SELS:
        f[sel]["texts"] = rows("clinc150", sel if sel.startswith("oos") else SELS[sel][0], DATA)[0][
            : len(f[sel]["scores"])]
        f[sel]["sim"] = f[sel]["minilm"] @ L.T
    y_va = rows("clinc150", "validation500", DATA)[1][:200]
    scores = {}
    for sel, d in f.items():
        lm = d["scores"] - prior
        scores.setdefault("zero-shot: LM top probability (default prior)", {})[sel] = softmax(lm).max(1)
        scores.setdefault("zero-shot: embedder top similarity", {})[sel] = d["sim"].max(1)
        scores.setdefault("zero-shot: fused top probability", {})[sel] = np.exp(
            DEFAULT_FUSION.combine(lm, d["sim"])).max(1)
    # fitted on the full training split: fit's default head, calibrated on in-scope validation
    t0 = time.perf_counter()
    Etr = feature("train", "minilm")
    Htr = feature("train", "states")
    tf = TfidfEncoder(analyzer="word").fit(tr_texts)
    from judge.fusion import label_similarity

    head = fit_head_choosing(auto_candidates(len(y_tr), K, "exact", embedder=True),
                             {"hidden": Htr, "embed": Etr, "tfidf": tf.encode(tr_texts)}, y_tr, K,
                             similarity=label_similarity(lambda t: Etr, [None] * len(y_tr), L), embedder="minilm",
                             label_vectors=L, tfidf=tf)
    fit_s = time.perf_counter() - t0

    def head_lp(d):
        return head.log_proba(None, {"hidden": d["states"], "embed": d["minilm"], "tfidf": tf.encode(d["texts"])},
                              d["sim"])

    cal = fit_resolved(tuple(range(K)), head_lp(f["validation200"]), y_va, resolve_bias("auto", "exact", 1.0, "head"))
    En = Etr / np.linalg.norm(Etr, axis=1, keepdims=True)
    for sel, d in f.items():
        scores.setdefault("fitted: head top probability (calibrated)", {})[sel] = cal.transform(head_lp(d)).max(1)
        X = d["minilm"] / np.linalg.norm(d["minilm"], axis=1, keepdims=True)
        scores.setdefault("fitted: nearest training text (embedder)", {})[sel] = (X @ En.T).max(1)
    out = {"n": {s: len(d["scores"]) for s, d in f.items()}, "head": {"features": head.report["features"],
                                                                      "fit_seconds": fit_s}, "scores": {}}
    for name, by in scores.items():
        out["scores"][name] = {"validation_auroc": auroc(by["validation200"], by["oos_validation"]),
                               "test_auroc": auroc(by["test200"], by["oos_test200"])}
    chosen = {}
    for group in ("zero-shot", "fitted"):
        c = {k: v for k, v in out["scores"].items() if k.startswith(group)}
        chosen[group] = max(c, key=lambda k: c[k]["validation_auroc"])
    out["chosen_on_validation"] = chosen
    out["targets"] = {"zero-shot AUROC >= 0.85": out["scores"][chosen["zero-shot"]]["test_auroc"],
                      "fitted AUROC >= 0.93": out["scores"][chosen["fitted"]]["test_auroc"]}
    print("| score | validation AUROC | test AUROC |\n|---|---:|---:|")
    for name, r in out["scores"].items():
        mark = " **(chosen)**" if name in chosen.values() else ""
        print(f"| {name}{mark} | {r['validation_auroc']:.3f} | {r['test_auroc']:.3f} |")
    for k, v in out["targets"].items():
        print(f"target {k}: {v:.3f} -> {'met' if v >= float(k.split('>=')[1]) else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
