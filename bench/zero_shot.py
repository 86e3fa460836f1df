"""The zero-shot table: the default beside each expert, transductive, with descriptions, calibrated, and baselines.

For Banking77, CLINC150 (in scope), MASSIVE and TREC (coarse), from the feature cache
(bench/_fit_cache.py: ``scores`` of the packaged LM and ``minilm`` of ``validation500`` /
``test1000``; fill it with ``python -m bench.learning_curve cache --what scores,minilm --sels
validation500,test1000``). Every row reads no label unless it says so:

* ``LM alone``: the packaged LM's exact label scores after its label-free prior (``embedder=None``);
* ``embedder alone``: the packaged all-MiniLM-L6-v2's text-label similarity;
* ``default``: ``Classifier(labels)``, both fused (:data:`judge.fusion.DEFAULT_FUSION`);
* ``with descriptions``: the default with the labels described (bench/descriptions/, written from
  the label names and the datasets' documentation): the embedder reads ``name: description``;
* ``transductive``: the default with the label vectors moved toward the texts of the call (the
  whole test selection as one call: :mod:`judge.transductive`), also with descriptions;
* ``calibrated``: ``calibrate()`` on the validation selection (labels used: the fusion weight,
  bias and temperature), and the LM alone calibrated;
* baselines: majority class and TF-IDF + logistic regression (C=10) on the full training split (labels).

``select`` chooses the transductive rounds and step on the validation selections, each dataset's
figure read with the setting chosen on the *other* three, and measures calls of several sizes;
``test`` reads the test selections once; ``cost`` times ``predict`` of the default against the LM
alone on the same texts (warm, alternating, medians).

    python -m bench.zero_shot select --json bench/results/zero_shot_select.json
    python -m bench.zero_shot test --json bench/results/zero_shot_test.json
    python -m bench.zero_shot cost --dkeys banking77,trec --json bench/results/zero_shot_cost.json
    python -m bench.zero_shot test --model gemma3-270m --model-key gemma3 --test-sel test200 \
        --validation-sel validation100 --json bench/results/zero_shot_test_gemma.json

With another model (``--model``, its scores cached under ``--model-key``) the default is the LM alone
(weight 0, `judge.fusion.initial_fusion`); the row of :data:`judge.fusion.DEFAULT_FUSION`'s weight on that
LM shows what the weight chosen for the packaged 135M model would do to it.

What it deliberately does not do: choose anything on test.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._fit_cache import DKEYS, classifier, path, rows  # noqa: E402
from bench.priors import cached, content_free  # noqa: E402

DATA = str(HERE.parent.parent / "shared" / "datasets")
DATASETS = ("banking77", "clinc150", "massive", "trec")
GRID = tuple((r, s) for r in (3, 5, 10) for s in (0.3, 0.5, 0.7))
CALLS = (50, 100, 250, 500)


def _unit(a):
    a = np.asarray(a, np.float64)
    return a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)


def load(dkey, sel, model_key="smollm2", model=None):
    """{lm, X, L, Ld, y}: prior-corrected LM scores, text and label vectors (names; described), gold."""
    from judge.calibration import contextual_bias
    from judge.calibration.bias import AUTO_PRIOR_STRENGTH
    from judge.encoders import SentenceEncoder
    from judge.evaluation import read_checkpoint
    from judge.fusion import label_texts

    got = cached(dkey, sel, model_key)
    f = path(model_key, dkey, sel, "minilm")
    if got is None or not f.exists():
        return None
    s, y, labels = got
    ck = read_checkpoint(f)
    clf = classifier(dkey, labels)
    desc = json.loads((HERE / "descriptions" / f"{dkey}.json").read_text())
    enc = SentenceEncoder()
    lm = s - AUTO_PRIOR_STRENGTH * contextual_bias(content_free(dkey, labels, model, model_key))
    return {"lm": lm, "raw": s, "X": _unit(ck.scores), "y": y,
            "L": _unit(enc(label_texts(labels, clf.label_names))),
            "Ld": _unit(enc(label_texts(labels, clf.label_names, desc))),
            "lm_seconds": float(np.sum(read_checkpoint(path(model_key, dkey, sel, "scores")).seconds))}


def fused(d, L=None):
    from judge.fusion import DEFAULT_FUSION

    return DEFAULT_FUSION.combine(d["lm"], d["X"] @ (d["L"] if L is None else L).T)


def transduce(d, rounds, step, L=None, idx=None):
    """Fused log-probabilities after moving the label vectors toward the texts ``idx`` (one call)."""
    from judge.fusion import DEFAULT_FUSION
    from judge.transductive import refine_label_vectors

    L = d["L"] if L is None else L
    idx = np.arange(len(d["y"])) if idx is None else idx
    lm, X = d["lm"][idx], d["X"][idx]
    M = refine_label_vectors(lm, X, L, DEFAULT_FUSION, rounds=rounds, step=step)
    return DEFAULT_FUSION.combine(lm, X @ M.T)


def self_trained(d, L=None, C=10.0, keep=0.5):
    """The other method tried (self-training): a logistic head on the text vectors fitted to the most confident
    ``keep`` of each label's fused answers (pseudo-labels), its log-probabilities averaged with the fused ones."""
    from sklearn.linear_model import LogisticRegression

    z = fused(d, L)
    top, conf = z.argmax(1), z.max(1)
    chosen = np.concatenate([idx[np.argsort(-conf[idx])][:max(1, int(np.ceil(keep * len(idx))))]
                             for idx in (np.flatnonzero(top == k) for k in np.unique(top))])
    if len(np.unique(top[chosen])) < 2:
        return z
    lr = LogisticRegression(C=C, max_iter=3000).fit(d["X"][chosen], top[chosen])
    out = np.full(z.shape, -30.0)
    out[:, lr.classes_] = lr.predict_log_proba(d["X"])
    return 0.5 * z + 0.5 * out


def acc(z, y):
    return float((np.asarray(z).argmax(1) == y).mean())


def calls(d, n, fn, seed=0):
    """Accuracy when the rows are answered in seeded calls of ``n`` texts, each transduced on its own."""
    order = np.random.default_rng(seed).permutation(len(d["y"]))
    right = 0
    for a in range(0, len(order), n):
        idx = order[a:a + n]
        right += int((fn(idx).argmax(1) == d["y"][idx]).sum())
    return right / len(order)


def select(args):
    data = {k: load(k, "validation500") for k in args.dkeys.split(",")}
    missing = [k for k, v in data.items() if v is None]
    if missing:
        print(f"select: scores or minilm of validation500 not cached for {missing}; nothing chosen")
        return {"not run": missing}
    table = {k: {g: acc(transduce(d, *g), d["y"]) for g in GRID} for k, d in data.items()}
    out = {"split": "validation500", "grid": [list(g) for g in GRID], "datasets": {}}
    for k, d in data.items():
        others = [o for o in data if o != k]
        g = max(GRID, key=lambda g: (round(np.mean([table[o][g] for o in others]), 10), -g[0], -g[1]))
        row = {"default": acc(fused(d), d["y"]), "transductive (left-out choice)": table[k][g],
               "left-out choice": list(g), "self-trained head": acc(self_trained(d), d["y"]),
               "best in hindsight": max(table[k].values())}
        for n in CALLS:
            row[f"transductive, calls of {n}"] = calls(d, n, lambda idx, d=d, g=g: transduce(d, *g, idx=idx))
        out["datasets"][k] = row
        print(f"{k:<10} " + "  ".join(f"{a} {v:.3f}" if isinstance(v, float) else f"{a} {v}" for a, v in row.items()),
              flush=True)
    g = max(GRID, key=lambda g: (round(np.mean([table[k][g] for k in data]), 10), -g[0], -g[1]))
    out["all"] = list(g)
    print(f"chosen on all four: rounds {g[0]}, step {g[1]}")
    return out


def _calibrated(va, te, L_va=None, L_te=None):
    """(fused + calibrate on validation, LM alone + calibrate on validation): test accuracies."""
    from judge.calibration.state import fit_resolved, resolve_bias
    from judge.fusion import fit_fusion

    K = te["lm"].shape[1]
    sim_va, sim_te = va["X"] @ (va["L"] if L_va is None else L_va).T, te["X"] @ (te["L"] if L_te is None else L_te).T
    fus = fit_fusion(va["lm"], sim_va, va["y"])
    res = resolve_bias("auto", "exact", 1.0)
    cal = fit_resolved(tuple(range(K)), fus.combine(va["lm"], sim_va), va["y"], res)
    cal_lm = fit_resolved(tuple(range(K)), va["raw"], va["y"], res)
    return acc(cal.transform(fus.combine(te["lm"], sim_te)), te["y"]), acc(cal_lm.transform(te["raw"]), te["y"]), fus


def _baselines(dkey, te_y, K, sel="test1000"):
    """Majority class and TF-IDF (1-2 grams) + logistic regression (C=10, fixed: a grid search over C on
    CLINC150's 15,000 training texts outlasted this script's budget) on the full training split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    tr_texts, tr_y, _, _ = rows(dkey, "train", DATA)
    te_texts = rows(dkey, sel, DATA)[0]
    major = np.bincount(tr_y, minlength=K).argmax()
    pipe = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                         LogisticRegression(C=10.0, max_iter=1000)).fit(list(tr_texts), tr_y)
    return float((te_y == major).mean()), float((pipe.predict(list(te_texts)) == te_y).mean())


def test(args):
    from scipy.special import softmax

    from judge.calibration.metrics import ece_noise_floor, expected_calibration_error
    from judge.encoders import SentenceEncoder

    sel = json.loads(Path(args.selection).read_text())
    rounds, step = sel["all"]
    tsel, vsel, mkey = args.test_sel, args.validation_sel, args.model_key
    other = mkey != "smollm2"  # another LM: its default is the LM alone (weight 0) until calibrate
    out = {"split": tsel, "validation": vsel, "model": args.model or "smollm2-135m-instruct",
           "transductive": {"rounds": rounds, "step": step}, "datasets": {}}
    for k in args.dkeys.split(","):
        te, va = load(k, tsel, mkey, args.model), load(k, vsel, mkey, args.model)
        if te is None or va is None:
            out["datasets"][k] = f"not run: scores or minilm of {tsel} / {vsel} not cached"
            continue
        y, K = te["y"], te["lm"].shape[1]
        z = te["lm"] if other else fused(te)
        p = softmax(z, axis=1)
        gold_top = np.bincount(y, minlength=K).max() / len(y)
        cal_f, cal_lm, fus = _calibrated(va, te)
        t0 = time.perf_counter()
        zt = transduce(te, rounds, step)
        t_trans = time.perf_counter() - t0
        texts = rows(k, tsel, DATA)[0]
        enc = SentenceEncoder()
        enc(texts[:8])
        t0 = time.perf_counter()
        enc(texts)
        t_embed = time.perf_counter() - t0
        row = {
            "n": len(y), "K": K,
            "LM alone": acc(te["lm"], y), "embedder alone": acc(te["X"] @ te["L"].T, y),
            "default (fused)" if not other else "default (weight 0: the LM alone)": acc(z, y),
            **({"DEFAULT_FUSION's weight on this LM (not the default)": acc(fused(te), y)} if other else {}),
            "with descriptions": acc(fused(te, te["Ld"]), y),
            "transductive": acc(zt, y),
            "transductive, with descriptions": acc(transduce(te, rounds, step, L=te["Ld"]), y),
            "self-trained head (tried)": acc(self_trained(te), y),
            "default + calibrate (validation)": cal_f, "calibrated fusion weight": fus.weight,
            "LM alone + calibrate (validation)": cal_lm,
        }
        row["majority (train)"], row["TF-IDF + LR (full train)"] = _baselines(k, y, K, tsel)
        best = max(row["LM alone"], row["embedder alone"])
        row["default minus best single expert"] = acc(z, y) - best
        row["default minus the LM alone"] = acc(z, y) - row["LM alone"]
        row["default / its calibrated"] = acc(z, y) / cal_f
        share = np.bincount(z.argmax(1), minlength=K).max() / len(y)
        row["top answer share"], row["top share limit"] = float(share), float(max(2 * gold_top, 0.2))
        row["ECE (uncalibrated default)"] = float(expected_calibration_error(y, p))
        row["ECE noise floor"] = float(ece_noise_floor(p)[0])
        row["LM seconds per text"] = te["lm_seconds"] / len(y)
        row["embedder seconds per text"] = t_embed / len(y)
        row["default cost / LM alone"] = (te["lm_seconds"] + t_embed) / te["lm_seconds"]
        row["transductive seconds per call (after scoring)"] = t_trans
        out["datasets"][k] = row
        print(f"\n{k} (n={len(y)}, K={K})")
        for a, v in row.items():
            print(f"  {a:<48} {v:.3f}" if isinstance(v, float) else f"  {a:<48} {v}")
    return out


def cost(args):
    """Seconds of ``predict`` with the default (fused) and with ``embedder=None``, same texts, warm, alternating."""
    import statistics

    import torch

    from judge import Classifier
    from judge import datasets as ds

    torch.set_num_threads(args.threads)
    out = {"n": args.n, "repeats": args.repeats, "threads": args.threads, "datasets": {}}
    for k in args.dkeys.split(","):
        texts, _, labels, _ = rows(k, f"test{args.n}", DATA)
        names = ds.display_names(DKEYS[k][0], labels) or None
        clfs = {"default": Classifier(labels, label_names=names, progress=False),
                "LM alone": Classifier(labels, label_names=names, progress=False, embedder=None)}
        for c in clfs.values():
            c.predict(texts[:4])  # load, compile, embed the labels
        runs = {a: [] for a in clfs}
        for _ in range(args.repeats):
            for a, c in clfs.items():
                t0 = time.perf_counter()
                c.predict(texts)
                runs[a].append(time.perf_counter() - t0)
        med = {a: statistics.median(v) for a, v in runs.items()}
        out["datasets"][k] = {"runs": runs, "median": med, "default / LM alone": med["default"] / med["LM alone"]}
        print(f"{k:<10} default {med['default']:.2f} s  LM alone {med['LM alone']:.2f} s  "
              f"ratio {med['default'] / med['LM alone']:.3f}", flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("what", choices=("select", "test", "cost"))
    ap.add_argument("--dkeys", default=",".join(DATASETS), help="datasets (keys of bench/_fit_cache.DKEYS)")
    ap.add_argument("--selection", default=str(HERE / "results" / "zero_shot_select.json"),
                    help="test: the select results (the transductive setting)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--n", type=int, default=64, help="cost: texts per call")
    ap.add_argument("--repeats", type=int, default=3, help="cost: runs per setting (medians)")
    ap.add_argument("--threads", type=int, default=2, help="cost: torch threads")
    ap.add_argument("--model-key", default="smollm2", help="test: whose cached scores (learning_curve cache --model-key)")
    ap.add_argument("--model", default=None, help="test: that model (its content-free prior), e.g. gemma3-270m")
    ap.add_argument("--test-sel", default="test1000", help="test: the test selection")
    ap.add_argument("--validation-sel", default="validation500", help="test: the validation selection (calibrate)")
    args = ap.parse_args(argv)
    unknown = [d for d in args.dkeys.split(",") if d not in DKEYS]
    if unknown:
        ap.error(f"unknown dataset keys {unknown}; valid: {sorted(DKEYS)}")
    out = {"select": select, "test": test, "cost": cost}[args.what](args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
