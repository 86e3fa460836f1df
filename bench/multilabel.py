"""Multi-label answers on a *composed* set: two intents in one text, from Banking77 and CLINC150.

The four benchmark datasets are single-label, so the multi-label set is composed (say so wherever a
figure from it is quoted). Per dataset and split, seeded (``--seed``): a share of texts joins two
texts of different intents as ``"T1 Also, T2"`` (gold: both intents), the rest are single texts
(gold: their intent), and for CLINC150 a share are out-of-scope texts (gold: no label). Test draws
from the test split, validation from the validation split (Banking77's is carved from train by
`judge.datasets`), and the fit set from train: ``--per-intent`` texts per intent (16), composed the
same way, so every intent appears in about that many labelled texts.

Subcommands:

* ``select`` (validation only): fits the zero-shot logit's weights and threshold over the features of
  `judge.multilabel` (pooled logistic regression over every (text, label) pair of both datasets'
  validation sets: one weighting for any label set) and measures, on ``--yes-no`` validation texts,
  whether the language model's yes/no reading adds to them. Writes ``multilabel_select.json``; the
  weights are what `judge.multilabel.ZERO_SHOT_WEIGHTS` holds.
* ``features``: computes and caches every set's features, printing no figure.
* ``run`` (test, read once): the zero-shot classifier, the same after ``calibrate`` on validation,
  fitted on the fit set then calibrated on validation, beside the baselines a user would try: the
  embedder's similarity with one threshold chosen on validation; one-vs-rest logistic regression on
  MiniLM embeddings (C by cross-validation, threshold 0.5 and threshold per label chosen on
  validation); the single-label classifier's top-2 labels. Reports micro-/macro-F1, subset accuracy,
  the share of texts given no label beside the true share, and per-label ECE beside its noise floor.

Features are computed once per set through `judge.multilabel.label_features` (the classifier's own
path) and cached under ``bench/cache/multilabel``.

    python -m bench.multilabel select --json bench/results/multilabel_select.json
    python -m bench.multilabel run --json bench/results/multilabel.json

What it deliberately does not do: tune anything on test, or time anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = str(HERE.parent.parent / "shared" / "datasets")
CACHE = HERE / "cache" / "multilabel"
DATASETS = ("banking77", "clinc150")
#: Shares of the composed texts: two intents; no intent (CLINC150's out-of-scope texts only).
DOUBLE_SHARE, NONE_SHARE = 0.4, 0.1
SIZES = {"test": 500, "validation": 300}


def compose(name, split, *, n=None, per_intent=None, seed=0, data_dir=DATA):
    """Composed texts and their gold label lists, and the dataset's labels."""
    from judge.datasets import load

    d = load(name, split, data_dir=data_dir, **({"include_oos": True} if name == "clinc150" else {}))
    labels = [lab for lab in d.label_names if lab != "oos"]
    rng = np.random.default_rng([seed, DATASETS.index(name), ("train", "validation", "test").index(split)])
    inscope = [i for i, lab in enumerate(d.labels) if lab != "oos"]
    oos = [i for i, lab in enumerate(d.labels) if lab == "oos"]
    if per_intent is not None:  # the fit set: per_intent source texts of every intent
        by = {}
        for i in inscope:
            by.setdefault(d.labels[i], []).append(i)
        src = [int(i) for lab in labels for i in rng.choice(by[lab], min(per_intent, len(by[lab])), replace=False)]
        src = list(rng.permutation(src))
        n_double = int(round(DOUBLE_SHARE * len(src) / (1 + DOUBLE_SHARE)))  # texts, each of two sources
        n_total = len(src) - n_double
    else:
        n_total = n
        n_double = int(round(DOUBLE_SHARE * n))
        src = [int(i) for i in rng.permutation(inscope)]
    n_none = int(round(NONE_SHARE * n_total)) if oos else 0
    texts, gold = [], []
    pool = iter(src)
    for _ in range(n_double):
        a = next(pool)
        b = next(pool)
        while d.labels[b] == d.labels[a]:
            b = next(pool)
        texts.append(f"{d.texts[a].strip()} Also, {d.texts[b].strip()}")
        gold.append(sorted({d.labels[a], d.labels[b]}))
    for _ in range(n_total - n_double - n_none):
        a = next(pool, None)
        if a is None:
            break
        texts.append(d.texts[a])
        gold.append([d.labels[a]])
    for i in rng.choice(oos, min(n_none, len(oos)), replace=False) if n_none else ():
        texts.append(d.texts[int(i)])
        gold.append([])
    order = rng.permutation(len(texts))
    return [texts[i] for i in order], [gold[i] for i in order], labels


def _features(clf, name, split, texts, which):
    from judge.experts import embedder_vectors
    from judge.multilabel import label_features

    key = hashlib.sha256(json.dumps([name, split, texts, which]).encode()).hexdigest()[:16]
    f = CACHE / f"{name}-{split}-{key}.npz"
    if f.exists():
        z = np.load(f)
        return z["F"], z["X"]
    F = label_features(clf, texts, which=which)
    X, _ = embedder_vectors(clf, texts)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(f, F=F, X=X)
    return F, X


def _classifier(labels):
    from judge import Classifier

    return Classifier(labels, multi_label=True, progress=True)


CHEAP = ("similarity", "similarity_gap", "single")


def _pooled_lr(Fs, Ys, cols):
    from sklearn.linear_model import LogisticRegression

    X = np.concatenate([F[..., cols].reshape(-1, len(cols)) for F in Fs])
    y = np.concatenate([Y.ravel() for Y in Ys])
    lr = LogisticRegression(C=100.0, max_iter=5000).fit(X, y)
    return lr


def select(args):
    from sklearn.metrics import log_loss

    from judge.multilabel import FEATURES, as_indicator, multilabel_f1

    Fs, Ys, out = [], [], {"features": list(FEATURES), "datasets": {}}
    for name in DATASETS:
        texts, gold, labels = compose(name, "validation", n=SIZES["validation"], seed=args.seed, data_dir=args.data_dir)
        clf = _classifier(labels)
        F, _ = _features(clf, name, "validation", texts, CHEAP)
        Fs.append(F)
        Ys.append(as_indicator(gold, labels))
        out["datasets"][name] = {"texts": len(texts)}
    # the rule fixed beforehand: of these feature sets, the highest mean micro-F1 over the two datasets, each set's
    # slopes a pooled logistic regression's (probabilities), its threshold the best of a grid on these same texts
    sets = {"single": [3], "similarity": [1], "similarity, gap, single": [1, 2, 3]}
    cands = {}
    for tag, cols in sets.items():
        lr = _pooled_lr(Fs, Ys, cols)
        zs = [lr.intercept_[0] + F[..., cols] @ lr.coef_[0] for F in Fs]
        grid = np.linspace(-5.0, 3.0, 81)
        f1 = [np.mean([multilabel_f1(Y, (z >= t).astype(int))["micro_f1"] for z, Y in zip(zs, Ys)]) for t in grid]
        t = float(grid[int(np.argmax(f1))])
        w = {f: 0.0 for f in FEATURES}
        w.update({FEATURES[c]: float(v) for c, v in zip(cols, lr.coef_[0])})
        per = {name: multilabel_f1(Y, (z >= t).astype(int)) for name, z, Y in zip(DATASETS, zs, Ys)}
        cands[tag] = {"weights": {"intercept": float(lr.intercept_[0]), **w}, "logit_threshold": t,
                      "threshold": float(1 / (1 + np.exp(-t))), "mean_micro_f1": float(max(f1)), "per_dataset": per}
        print(f"{tag:<26} mean micro-F1 {max(f1):.3f} at logit {t:+.1f}; " + "; ".join(
            f"{n}: micro-F1 {r['micro_f1']:.3f} empty {r['empty_share']:.3f}" for n, r in per.items()))
    best = max(cands, key=lambda k: cands[k]["mean_micro_f1"])
    print(f"chosen: {best}: {cands[best]['weights']}, threshold {cands[best]['threshold']:.4f}")
    out["candidates"], out["chosen"] = cands, best
    rows = {"fused": cands[best]["weights"], "threshold": cands[best]["threshold"]}
    out["weights"] = rows
    # the language model's yes/no reading: does it add to the cheap features? (cross-validated, Banking77)
    name = DATASETS[0]
    texts, gold, labels = compose(name, "validation", n=SIZES["validation"], seed=args.seed, data_dir=args.data_dir)
    texts, gold = texts[:args.yes_no], gold[:args.yes_no]
    clf = _classifier(labels)
    F, _ = _features(clf, name, "validation-yesno", texts, ("yes_no", *CHEAP))
    Y = as_indicator(gold, labels)
    half = len(texts) // 2
    yn = {}
    for tag, cols in (("without yes/no", [1, 2, 3]), ("with yes/no", [0, 1, 2, 3]), ("yes/no alone", [0])):
        losses, f1s = [], []
        for tr, te in ((slice(0, half), slice(half, None)), (slice(half, None), slice(0, half))):
            lr = _pooled_lr([F[tr]], [Y[tr]], cols)
            z = lr.intercept_[0] + F[te][..., cols] @ lr.coef_[0]
            p = 1 / (1 + np.exp(-z))
            losses.append(log_loss(Y[te].ravel(), p.ravel(), labels=[0, 1]))
            f1s.append(multilabel_f1(Y[te], (z >= 0).astype(int))["micro_f1"])
        yn[tag] = {"log_loss": float(np.mean(losses)), "micro_f1": float(np.mean(f1s))}
        print(f"{tag:<16} two-fold log-loss {yn[tag]['log_loss']:.4f}  micro-F1 {yn[tag]['micro_f1']:.3f}")
    out["yes_no"] = {"dataset": name, "texts": len(texts), **yn}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


def _per_label_ece(Y, P):
    from judge.calibration.metrics import ece_noise_floor, expected_calibration_error

    eces, floors = [], []
    for k in range(Y.shape[1]):
        if Y[:, k].sum() == 0:
            continue
        pk = np.stack([1 - P[:, k], P[:, k]], axis=1)
        eces.append(expected_calibration_error(Y[:, k], pk))
        floors.append(ece_noise_floor(pk, n_resamples=50)[0])
    eces, floors = np.array(eces), np.array(floors)
    return {"median_ece": float(np.median(eces)), "median_floor": float(np.median(floors)),
            "median_ratio": float(np.median(eces / np.maximum(floors, 1e-12))), "labels": len(eces)}


def _report(Y, Pbin, P=None):
    from judge.multilabel import multilabel_f1

    r = multilabel_f1(Y, Pbin)
    r["true_empty_share"] = float((Y.sum(axis=1) == 0).mean())
    if P is not None:
        r["per_label_ece"] = _per_label_ece(Y, P)
    return r


def run(args):
    from judge.multilabel import (
        ZERO_SHOT_THRESHOLD,
        as_indicator,
        calibrate_multilabel,
        fit_multilabel,
        zero_shot_logits,
    )

    out = {"composed": True, "double_share": DOUBLE_SHARE, "none_share": NONE_SHARE, "seed": args.seed,
           "per_intent": args.per_intent, "load": os.getloadavg()[0], "datasets": {}}
    pooled = {}
    for name in DATASETS:
        sets = {}
        for split in ("train", "validation", "test"):
            kw = {"per_intent": args.per_intent} if split == "train" else {"n": SIZES[split]}
            texts, gold, labels = compose(name, split, seed=args.seed, data_dir=args.data_dir, **kw)
            clf = _classifier(labels)
            F, X = _features(clf, name, split, texts, CHEAP)
            sets[split] = (F, X, as_indicator(gold, labels))
        (_, Xtr, Ytr), (Fva, Xva, Yva), (Fte, Xte, Yte) = sets["train"], sets["validation"], sets["test"]
        rows = {}
        z = {s: zero_shot_logits(sets[s][0]) for s in sets}
        p_te = 1 / (1 + np.exp(-z["test"]))
        rows["zero-shot"] = _report(Yte, (p_te >= ZERO_SHOT_THRESHOLD).astype(int), p_te)
        cal = calibrate_multilabel(z["validation"], Yva)
        rows["zero-shot + calibrate"] = _report(Yte, cal.predict(z["test"]), cal.proba(z["test"]))
        head = fit_multilabel(np.hstack([Xtr, z["train"]]), Ytr)
        h = {s: head.logits(np.hstack([sets[s][1], z[s]])) for s in ("validation", "test")}
        ph = 1 / (1 + np.exp(-h["test"]))
        rows["fit (16/intent)"] = _report(Yte, (ph >= 0.5).astype(int), ph)
        calh = calibrate_multilabel(h["validation"], Yva)
        rows["fit + calibrate"] = _report(Yte, calh.predict(h["test"]), calh.proba(h["test"]))
        # baselines
        sim_va, sim_te = Fva[..., 1], Fte[..., 1]
        ts = np.unique(np.quantile(sim_va, np.linspace(0.5, 0.999, 200)))
        from judge.multilabel import multilabel_f1

        t_best = max(ts, key=lambda t: multilabel_f1(Yva, (sim_va >= t).astype(int))["micro_f1"])
        rows["baseline: embedder similarity >= threshold (validation)"] = _report(Yte, (sim_te >= t_best).astype(int))
        ovr = fit_multilabel(Xtr, Ytr)
        po = 1 / (1 + np.exp(-ovr.logits(Xte)))
        rows["baseline: one-vs-rest MiniLM + LR"] = _report(Yte, (po >= 0.5).astype(int), po)
        calo = calibrate_multilabel(ovr.logits(Xva), Yva)
        rows["baseline: one-vs-rest MiniLM + LR + calibrate"] = _report(Yte, calo.predict(ovr.logits(Xte)),
                                                                        calo.proba(ovr.logits(Xte)))
        single = Fte[..., 3]
        top2 = np.zeros_like(Yte)
        np.put_along_axis(top2, np.argsort(-single, axis=1)[:, :2], 1, axis=1)
        rows["baseline: single-label top-2"] = _report(Yte, top2)
        top1 = np.zeros_like(Yte)
        np.put_along_axis(top1, np.argmax(single, axis=1)[:, None], 1, axis=1)
        rows["baseline: single-label top-1"] = _report(Yte, top1)
        out["datasets"][name] = {"texts": {s: len(sets[s][2]) for s in sets}, "labels": int(Yte.shape[1]),
                                 "embedder_threshold": float(t_best), "rows": rows}
        for tag, r in rows.items():
            pooled.setdefault(tag, []).append(r)
    out["mean"] = {tag: {k: float(np.mean([r[k] for r in rs])) for k in ("micro_f1", "macro_f1", "subset_accuracy",
                                                                       "empty_share", "true_empty_share")}
                   for tag, rs in pooled.items()}
    print(f"{'':<56}{'micro-F1':>9}{'macro-F1':>9}{'subset':>8}{'empty':>7}{'true':>6}{'ECE/floor':>10}")
    for name in DATASETS:
        print(name)
        for tag, r in out["datasets"][name]["rows"].items():
            e = r.get("per_label_ece", {}).get("median_ratio")
            print(f"  {tag:<54}{r['micro_f1']:>9.3f}{r['macro_f1']:>9.3f}{r['subset_accuracy']:>8.3f}"
                  f"{r['empty_share']:>7.3f}{r['true_empty_share']:>6.3f}{'' if e is None else f'{e:>10.2f}'}")
    print("mean of the two")
    for tag, r in out["mean"].items():
        print(f"  {tag:<54}{r['micro_f1']:>9.3f}{r['macro_f1']:>9.3f}{r['subset_accuracy']:>8.3f}"
              f"{r['empty_share']:>7.3f}{r['true_empty_share']:>6.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


def features(args):
    """Compute and cache every set's features (no figure printed: test is read by ``run`` only)."""
    for name in DATASETS:
        for split in ("validation", "train", "test"):
            kw = {"per_intent": args.per_intent} if split == "train" else {"n": SIZES[split]}
            texts, _, labels = compose(name, split, seed=args.seed, data_dir=args.data_dir, **kw)
            _features(_classifier(labels), name, split, texts, CHEAP)
            print(f"{name} {split}: {len(texts)} texts cached", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=("select", "features", "run"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-intent", type=int, default=16)
    ap.add_argument("--yes-no", type=int, default=120, help="validation texts the yes/no reading is measured on")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", default=DATA)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    {"select": select, "features": features, "run": run}[args.command](args)


if __name__ == "__main__":
    main()
