"""Honest accuracy: prompt and bias variants on validation, the chosen default on test, a cascade.

Scoring is the expensive part, so it is done once and kept: for each (model,
dataset, variant, split) the raw per-label log-probabilities of the first rows
of a seeded permutation of the split are written to ``--cache`` by
`judge.evaluation.score_with_checkpoint` (``SPLIT.npz``: resumable chunk by
chunk, keyed by the classifier's fingerprint and each text, with the seconds
each row took; ``SPLIT.json``: the labels, the column order, the scoring
path), beside the content-free inputs' scores for contextual bias
(``content_free.npy``). Every figure of the report is then computed from those
matrices: bias variants, temperature, ECE and its noise floor, bootstrap
intervals, coverage at a target risk, the cascade curve.

    # score (resumable; run several at once, one torch thread each)
    python -m bench.accuracy score --dataset banking77 --split validation --n 200 --variants default,lower
    # smoke run: a random-weight model, 4 texts (numbers mean nothing)
    python -m bench.accuracy score --dataset trec --n 4 --model tiny --cache /tmp/acc-cache
    # choose the default on validation, then report test once
    python -m bench.accuracy select --json bench/results/accuracy_select.json
    python -m bench.accuracy report --json bench/results/accuracy.json

Variants are ``+``-joined flags: ``default`` (the packaged prompt), ``lower``
(label names lower-cased, so no capitalised label sorts first), ``completion``
(completion prompt instead of the chat template), ``nolist`` (labels not listed
in the prompt), ``intent`` (other instruction wording), ``desc`` (TREC: the
official class descriptions in the list), ``rot`` (the list rotated by K/2;
averaged with the unrotated list it is rotation averaging over 2 orders),
``think`` (think-then-answer).

What it deliberately does not do: look at test before the choice is made on
validation (``report`` reads test once, for the chosen default), or score a row
twice for the same classifier (one whose fingerprint changed is scored again).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._accuracy_cache import (  # noqa: E402  (the cache: which rows, where kept, how read back)
    AVERAGES,
    cache_dir,
    dataset_key,
    gold,
    letters_scores,
    load_scores,
    load_split,
    permutation,
    variant_scores,
)
from bench._accuracy_prompts import (  # noqa: E402  (the classifiers: models, prompt variants)
    MODELS,
    TREC_DESCRIPTIONS,  # noqa: F401  (still importable as bench.accuracy.TREC_DESCRIPTIONS)
    build,
)

DEFAULT_CACHE = HERE / "cache" / "accuracy"
CONTENT_FREE = ("N/A", "", "[MASK]")


def score(args) -> None:
    import torch

    from judge.evaluation import score_with_checkpoint

    torch.set_num_threads(args.threads)

    shared = {}
    variants = []
    for v in args.variants.split(","):
        if v == "letters@all":
            k = len(load_split(args.dataset, "test", args.data_dir, args.granularity, args.subset).label_names)
            variants += [f"letters@{r}" for r in range(k)]
        else:
            variants.append(v)
    if args.model == "tiny":
        from bench._common import load_bench_model

        shared["model"], shared["tok"] = load_bench_model("tiny")
    for variant in variants:
        data = load_split(args.dataset, args.split, args.data_dir, args.granularity, args.subset)
        labels = list(data.label_names)
        n = min(args.n, len(data)) if args.n else len(data)
        perm = permutation(len(data))
        dkey = dataset_key(args.dataset, args.granularity, args.subset)
        d = cache_dir(args.cache, args.model, dkey, variant)
        d.mkdir(parents=True, exist_ok=True)
        have, meta = load_scores(args.cache, args.model, dkey, variant, args.split)
        if have is not None and meta["labels"] != labels:
            raise SystemExit(f"{d}: cached for other labels")
        if have is not None and len(have) >= n and (d / "content_free.npy").exists():
            print(f"{args.model}/{dkey}/{variant}/{args.split}: {len(have)} rows cached", flush=True)
            continue
        clf, cols = build(args.dataset, labels, variant, shared.get("model"), shared.get("tok"), args.model)
        clf.setup()
        shared.setdefault("model", clf.model_)
        shared.setdefault("tok", clf.tokenizer_)
        meta = {"labels": labels, "columns": cols.tolist(), "method": clf.method_,
                "prefix": clf.prompt_prefix_[-300:], "path": clf.engine_.path_}
        (d / f"{args.split}.json").write_text(json.dumps(meta))
        if not (d / "content_free.npy").exists():
            np.save(d / "content_free.npy", clf.content_free_scores(CONTENT_FREE)[:, cols])
        print(f"{args.model}/{dkey}/{variant}/{args.split}: scoring {n} rows", file=sys.stderr, flush=True)
        texts = list(data.texts)
        score_with_checkpoint(clf, [texts[i] for i in perm[:n]], d / f"{args.split}.npz", chunk=args.chunk)


# ------------------------------------------------------------------ analysis
DATASETS = ("banking77", "clinc150", "massive", "trec")
PROMPTS = ("default", "lower", "lower+nolist", "lower+intent", "lower+rot", "lower+completion",
           "lower+completion+nolist", "lower+completion+intent", "lower+completion+rot", "rotavg(chat)",
           "rotavg(completion)", "ensemble(completion)")
BIASES = ("none", "contextual", "batch", "contextual+fit", "batch+fit")


def fit_calibration(kind, s_fit, y_fit, cf, *, l2=1.0):
    """The library's Calibration of a bias variant fitted on (s_fit, y_fit): an unsupervised prior
    (``contextual`` from the content-free scores ``cf``, ``batch`` from ``s_fit``), then, for ``+fit``, a
    residual bias fitted with the temperature (``Calibration.fit(fit_bias=l2)``), else the temperature alone."""
    from judge.calibration.state import Calibration, prior_bias

    fit = kind.endswith("+fit")
    prior = kind[:-4] if fit else kind
    bias = prior_bias(None if prior == "none" else prior, s_fit, cf)
    labels = tuple(str(k) for k in range(s_fit.shape[1]))
    return Calibration.fit(labels, s_fit, y_fit, bias=bias, bias_method=kind, fit_bias=l2 if fit else None)


def cv_predictions(kind, s, y, cf, folds=5, seed=0, l2=1.0):
    """Out-of-fold calibrated probabilities (every row predicted by a fit that never saw it)."""
    out = np.zeros_like(s)
    fold = np.random.default_rng(seed).permutation(len(y)) % folds
    for f in range(folds):
        tr, te = fold != f, fold == f
        out[te] = fit_calibration(kind, s[tr], y[tr], cf, l2=l2).transform(s[te])
    return out


def macro_f1(y, pred, k):
    from sklearn.metrics import f1_score

    return float(f1_score(y, pred, average="macro", labels=np.arange(k), zero_division=0))


def select(args) -> None:
    """Every prompt variant x bias variant on the validation rows all variants share; pick the best mean."""
    from judge import calibration as cal

    rows, table = [], {}
    for d in DATASETS:
        got = {v: variant_scores(args.cache, "smollm2", d, v, "validation") for v in PROMPTS}
        got = {v: g for v, g in got.items() if g[0] is not None and len(g[0]) >= args.min_n}
        if not got:
            continue
        m = min(len(g[0]) for g in got.values())
        y, labels, _ = gold(d, "validation", args.data_dir, m)
        for v, (s, cf, meta) in got.items():
            s = s[:m]
            for kind in BIASES:
                l2s = (1.0, 10.0, 100.0) if kind.endswith("+fit") else (None,)
                for l2 in l2s:
                    p = cv_predictions(kind, s, y, cf, l2=l2 or 1.0)
                    name = kind if l2 is None else f"{kind}(l2={l2:g})"
                    rec = {"dataset": d, "prompt": v, "bias": name, "n": int(m),
                           "accuracy": float((p.argmax(1) == y).mean()),
                           "macro_f1": macro_f1(y, p.argmax(1), len(labels)),
                           "ece_cv": cal.expected_calibration_error(y, p),
                           "seconds_per_text": meta["seconds_per_text"]}
                    rows.append(rec)
                    table[(d, v, name)] = rec
    present = [d for d in DATASETS if any(k[0] == d for k in table)]
    prompts = [v for v in PROMPTS if all((d, v, "contextual") in table for d in present)]
    missing = [v for v in PROMPTS if v not in prompts]
    if missing:
        print(f"(not scored on every dataset, left out: {', '.join(missing)})")
    biases = sorted({r["bias"] for r in rows})
    print("validation accuracy, out-of-fold (5-fold) where a fit uses labels; n per dataset: "
          + ", ".join(f"{d}={table[(d, 'default', 'none')]['n']}" for d in present if (d, "default", "none") in table))
    head = f"{'prompt':<18} {'bias':<22} " + " ".join(f"{d[:9]:>9}" for d in present) + f" {'mean':>7}"
    print(head)
    means = []
    for v in prompts:
        for b in biases:
            accs = [table[(d, v, b)]["accuracy"] for d in present]
            means.append((float(np.mean(accs)), v, b))
            print(f"{v:<18} {b:<22} " + " ".join(f"{a:9.3f}" for a in accs) + f" {np.mean(accs):7.3f}")
    single = [x for x in means if x[1] not in AVERAGES]
    multi = max((x for x in means if x[1] in AVERAGES), default=None)
    if multi:
        print(f"best averaged prompt (several passes per text): prompt={multi[1]} bias={multi[2]} ({multi[0]:.3f})")
    best = max(single)
    print(f"best single-pass prompt on validation (the default; mean accuracy over {', '.join(present)}): prompt={best[1]} bias={best[2]} ({best[0]:.3f})")
    think = []
    for d in ("massive", "trec"):
        for base in ("lower+completion+nolist", "lower"):
            a, cfa, ma = variant_scores(args.cache, "smollm2", d, base, "validation")
            t, cft, mt = variant_scores(args.cache, "smollm2", d, base + "+think", "validation")
            if a is None or t is None:
                continue
            m = min(len(a), len(t))
            y, _, _ = gold(d, "validation", args.data_dir, m)
            for name, s_, cf_, meta in ((base, a[:m], cfa, ma), (base + "+think", t[:m], cft, mt)):
                p = cv_predictions(best[2].split("(")[0], s_, y, cf_, l2=_parse_bias(best[2])[1])
                think.append({"dataset": d, "prompt": name, "n": int(m), "bias": best[2],
                              "accuracy": float((p.argmax(1) == y).mean()),
                              "seconds_per_text": meta["seconds_per_text"]})
    if think:
        print("think-then-answer (64 tokens of reasoning), same validation rows:")
        for r in think:
            print(f"  {r['dataset']:<8} {r['prompt']:<32} n={r['n']} acc {r['accuracy']:.3f} "
                  f"({r['seconds_per_text']:.2f} s/text, shared machine)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "think": think,
            "rows": rows, "best": {"prompt": best[1], "bias": best[2], "mean_accuracy": best[0]},
            "best_averaged": {"prompt": multi[1], "bias": multi[2], "mean_accuracy": multi[0]} if multi else None,
            "rule": "highest mean validation accuracy over the datasets, single-pass prompts; out-of-fold where "
                    "a fit uses labels"}, indent=1))


def _parse_bias(name):
    """``"batch+fit(l2=10)"`` -> ("batch+fit", 10.0)."""
    if "(l2=" in name:
        kind, l2 = name.split("(l2=")
        return kind, float(l2.rstrip(")"))
    return name, 1.0


TEST_SPLIT = "test"  # report --test-split validation exercises the report without looking at test


def calibrated(model_key, dkey, prompt, bias, cache, data_dir, dataset, granularity=None, subset=None,
               n_test=None, n_val=None):
    """Test probabilities (raw and calibrated on all cached validation rows), gold, fit and timing."""
    from judge.calibration import softmax

    sv, cf, mv = variant_scores(cache, model_key, dkey, prompt, "validation")
    st, _, mt = variant_scores(cache, model_key, dkey, prompt, TEST_SPLIT)
    if sv is None or st is None:
        return None
    sv, st = sv[:n_val], st[:n_test]
    yv, labels, _ = gold(dataset, "validation", data_dir, len(sv), granularity, subset)
    yt, _, _ = gold(dataset, TEST_SPLIT, data_dir, len(st), granularity, subset)
    kind, l2 = _parse_bias(bias)
    c = fit_calibration(kind, sv, yv, cf, l2=l2)
    return {"raw": softmax(st), "cal": c.transform(st), "val_cal": c.transform(sv), "y": yt, "yv": yv,
            "labels": labels, "temperature": float(c.temperature), "n_val": len(sv), "n_test": len(st),
            "seconds_per_text": mt["seconds_per_text"]}


def _threshold_point(cal, pv, yv, pt, yt, target):
    """Threshold certified on validation (Clopper-Pearson, 95%) for ``target``, applied to test."""
    try:
        t = cal.select_threshold(yv, pv, target_accuracy=target, confidence=0.95)
    except Exception as err:  # no threshold certifies it
        return {"target": target, "threshold": None, "coverage": 0.0, "selective_accuracy": None, "note": str(err)[:120]}
    keep = pt.max(1) >= t
    return {"target": target, "threshold": float(t), "coverage": float(keep.mean()),
            "selective_accuracy": float((pt.argmax(1)[keep] == yt[keep]).mean()) if keep.any() else None}


def report(args) -> None:
    """Test once: the chosen default on the four datasets (+ TREC fine), the cascade, the letter readout."""
    from judge import calibration as cal

    global TEST_SPLIT
    TEST_SPLIT = args.test_split
    chosen = json.loads(Path(args.select).read_text())["best"]
    prompt, bias = args.prompt or chosen["prompt"], args.bias or chosen["bias"]
    out = {"test_split": TEST_SPLIT, "prompt": prompt, "bias": bias, "datasets": {}, "cascade": {}, "letters": {}}
    print(f"chosen on validation: prompt={prompt}, bias={bias}")
    print(f"{'dataset':<12} {'n':>4} {'K':>4} {'acc [95% CI]':>20} {'maj':>6} {'unif':>6} {'F1':>6} "
          f"{'ECE raw':>8} {'ECE cal':>8} {'floor':>6} {'ratio':>6} {'cov@.5':>7} {'cov@.7':>7}")
    for d, gran in [(d, None) for d in DATASETS] + [("trec", "fine")]:
        dkey = dataset_key(d, gran)
        r = calibrated("smollm2", dkey, prompt, bias, args.cache, args.data_dir, d, gran, n_test=args.n_test)
        if r is None:
            print(f"{dkey:<12} (not scored)")
            continue
        rep_raw = cal.calibration_report(r["y"], r["raw"])
        rep = cal.calibration_report(r["y"], r["cal"])
        points = [_threshold_point(cal, r["val_cal"], r["yv"], r["cal"], r["y"], t) for t in (0.5, 0.7)]
        out["datasets"][dkey] = {"n_test": r["n_test"], "n_validation": r["n_val"], "K": len(r["labels"]),
                                 "temperature": r["temperature"], "uncalibrated": rep_raw, "calibrated": rep,
                                 "threshold_points": points, "seconds_per_text": r["seconds_per_text"]}
        lo, hi = rep["accuracy_ci"]
        print(f"{dkey:<12} {r['n_test']:>4} {len(r['labels']):>4} {rep['accuracy']:7.1%} [{lo:5.1%},{hi:5.1%}] "
              f"{rep['majority']['accuracy']:6.1%} {rep['uniform']:6.1%} {rep['macro_f1']:6.3f} {rep_raw['ece']:8.3f} "
              f"{rep['ece']:8.3f} {rep['ece_floor']:6.3f} {rep['ece_over_floor']:6.2f} "
              f"{rep['coverage_at_accuracy']['0.5']:7.1%} {rep['coverage_at_accuracy']['0.7']:7.1%}")
        for pnt in points:
            sa = "n/a" if pnt["selective_accuracy"] is None else f"{pnt['selective_accuracy']:.1%}"
            print(f"{'':<12}   threshold certified on validation for {pnt['target']}: "
                  f"test coverage {pnt['coverage']:.1%}, accuracy on answered {sa}")

    # ---- cascade: SmolLM2 first, Gemma-3-270M on the least confident rows (and the reverse)
    tfile = Path(args.timing)
    timing_ = json.loads(tfile.read_text())["datasets"] if tfile.exists() else {}
    out["timing"] = "bench/accuracy.py timing (both models, same texts, one after the other)" if timing_ else \
        "chunk times of the scoring runs (machine shared: not comparable between models)"
    print(f"\ncascade (test rows both models scored; seconds per text: {out['timing']})")
    for d in DATASETS:
        a = calibrated("smollm2", d, prompt, bias, args.cache, args.data_dir, d, n_test=args.n_cascade)
        g = calibrated("gemma3", d, prompt, bias, args.cache, args.data_dir, d, n_test=args.n_cascade)
        g_listed = calibrated("gemma3", d, "lower", bias, args.cache, args.data_dir, d, n_test=args.n_cascade)
        if a is None or g is None:
            print(f"{d:<10} (gemma not scored)")
            continue
        if d in timing_:
            a["seconds_per_text"] = timing_[d]["smollm2"]["seconds_per_text"]
            g["seconds_per_text"] = timing_[d]["gemma3"]["seconds_per_text"]
        m = min(len(a["y"]), len(g["y"]))
        y = a["y"][:m]
        res = {"n": m, "smollm2": {"accuracy": float((a["cal"][:m].argmax(1) == y).mean()),
                                   "seconds_per_text": a["seconds_per_text"]},
               "gemma3": {"accuracy": float((g["cal"][:m].argmax(1) == y).mean()),
                          "seconds_per_text": g["seconds_per_text"], "prompt": prompt}}
        if g_listed is not None and len(g_listed["y"]) >= m:
            res["gemma3_listed_prompt"] = {"accuracy": float((g_listed["cal"][:m].argmax(1) == y).mean()),
                                           "prompt": "lower+completion (labels listed)"}
        for order, (first, second) in {"smollm2->gemma3": (a, g), "gemma3->smollm2": (g, a)}.items():
            conf = first["cal"][:m].max(1)
            p1, p2 = first["cal"][:m].argmax(1), second["cal"][:m].argmax(1)
            rank = np.argsort(conf, kind="stable")  # least confident first
            curve = []
            for f in np.linspace(0, 1, 11):
                routed = np.zeros(m, bool)
                routed[rank[:int(round(f * m))]] = True
                pred = np.where(routed, p2, p1)
                curve.append({"routed": float(routed.mean()), "accuracy": float((pred == y).mean()),
                              "seconds_per_text": first["seconds_per_text"] + routed.mean() * second["seconds_per_text"]})
            pts = []
            for t in (0.5, 0.7):
                tp = _threshold_point(cal, first["val_cal"], first["yv"], first["cal"][:m], y, t)
                thr = tp["threshold"] if tp["threshold"] is not None else 1.01
                routed = conf < thr
                pred = np.where(routed, p2, p1)
                pts.append({"target": t, "threshold": tp["threshold"], "routed": float(routed.mean()),
                            "accuracy": float((pred == y).mean()),
                            "seconds_per_text": first["seconds_per_text"] + routed.mean() * second["seconds_per_text"]})
            res[order] = {"curve": curve, "threshold_points": pts}
        out["cascade"][d] = res
        print(f"{d:<10} n={m}: smollm2 {res['smollm2']['accuracy']:.1%} ({a['seconds_per_text']:.2f} s/text), "
              f"gemma3 {res['gemma3']['accuracy']:.1%} ({g['seconds_per_text']:.2f} s/text)")
        for order in ("smollm2->gemma3", "gemma3->smollm2"):
            c = res[order]["curve"]
            print(f"   {order}: " + " ".join(f"{x['routed']:.0%}:{x['accuracy']:.1%}" for x in c[::2]))
            for pnt in res[order]["threshold_points"]:
                print(f"      threshold for {pnt['target']}: routes {pnt['routed']:.0%}, accuracy {pnt['accuracy']:.1%}, "
                      f"{pnt['seconds_per_text']:.2f} s/text")

    # ---- letter readout vs ours, same model, same rows
    print("\nletter readout (A, B, C ... averaged over every rotation) vs ours, SmolLM2, calibrated the same way")
    for d, k, sub in [("trec", 6, None), ("banking77", 10, 10), ("massive", 10, 10)]:
        dkey = dataset_key(d, None, sub)
        lv, cfv, _ = letters_scores(args.cache, "smollm2", dkey, "validation", k)
        lt, _, meta = letters_scores(args.cache, "smollm2", dkey, TEST_SPLIT, k)
        if lv is None or lt is None:
            print(f"{dkey:<14} (letters not scored)")
            continue
        gv = gold(d, "validation", args.data_dir, len(lv), subset=sub)
        gt = gold(d, TEST_SPLIT, args.data_dir, len(lt), subset=sub)
        kind, l2 = _parse_bias(bias)
        row = {"n_test": len(lt), "K": k, "majority": float(np.bincount(gt[0]).max() / len(gt[0]))}
        from judge.calibration import softmax

        for name, sv_, st_ in (("letters_rotavg", lv, lt), ("letters_single", None, meta["single"])):
            if sv_ is None:
                p = softmax(st_)
            else:
                p = fit_calibration(kind, sv_, gv[0], cfv, l2=l2).transform(st_)
            rep = cal.calibration_report(gt[0], p)
            row[name] = {"accuracy": rep["accuracy"], "accuracy_ci": rep["accuracy_ci"], "ece": rep["ece"],
                         "ece_floor": rep["ece_floor"], "macro_f1": rep["macro_f1"]}
        row["letters_rotavg"]["seconds_per_text"] = meta["seconds_per_text"]
        ours = calibrated("smollm2", dkey, prompt, bias, args.cache, args.data_dir, d, subset=sub, n_test=len(lt))
        if ours is not None and ours["n_test"] == len(lt):
            rep = cal.calibration_report(ours["y"], ours["cal"])
            row["ours"] = {"accuracy": rep["accuracy"], "accuracy_ci": rep["accuracy_ci"], "ece": rep["ece"],
                           "ece_floor": rep["ece_floor"], "macro_f1": rep["macro_f1"],
                           "seconds_per_text": ours["seconds_per_text"]}
        out["letters"][dkey] = row
        txt = "  ".join(f"{n}: acc {v['accuracy']:.1%} ECE {v['ece']:.3f}" for n, v in row.items() if isinstance(v, dict))
        print(f"{dkey:<14} n={len(lt)} K={k}  {txt}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


def _calibrated_classifier(dataset, variant, model_key, bias, cache, data_dir, target):
    """A real Classifier of ``variant`` calibrated from the cached validation scores (no rescoring)."""
    sv, _, _ = variant_scores(cache, model_key, dataset, variant, "validation")
    yv, labels, vtexts = gold(dataset, "validation", data_dir, len(sv))
    clf, cols = build(dataset, labels, variant, model_key=model_key)
    own = np.empty_like(sv)
    own[:, cols] = sv  # cached columns are in dataset label order; the classifier's in its own
    kind, l2 = _parse_bias(bias)
    clf.calibrate(vtexts, [labels[i] for i in yv], scores=own, bias=kind, bias_l2=l2, target_accuracy=target)
    return clf, labels


def cascade_check(args) -> None:
    """Run judge.Cascade for real on the first test texts and compare with the curve from cached scores."""
    import torch

    from judge import Cascade

    torch.set_num_threads(args.threads)
    chosen = json.loads(Path(args.select).read_text())["best"]
    small, labels = _calibrated_classifier(args.dataset, chosen["prompt"], "smollm2", chosen["bias"], args.cache,
                                           args.data_dir, args.target)
    big, _ = _calibrated_classifier(args.dataset, chosen["prompt"], "gemma3", chosen["bias"], args.cache, args.data_dir,
                                    None)
    y, _, texts = gold(args.dataset, "test", args.data_dir, args.n)
    cas = Cascade(small, big)
    t0 = time.perf_counter()
    pred = cas.predict(texts)
    secs = time.perf_counter() - t0
    a = calibrated("smollm2", args.dataset, chosen["prompt"], chosen["bias"], args.cache, args.data_dir, args.dataset,
                   n_test=args.n)
    g = calibrated("gemma3", args.dataset, chosen["prompt"], chosen["bias"], args.cache, args.data_dir, args.dataset,
                   n_test=args.n)
    routed = a["cal"].max(1) < small.threshold_
    cached = np.array(labels, dtype=object)[np.where(routed, g["cal"].argmax(1), a["cal"].argmax(1))]
    gold_lab = np.array(labels, dtype=object)[y]
    rec = {"dataset": args.dataset, "n": args.n, "target": args.target, "threshold": small.threshold_,
           "routed": cas.route_stats_["fallback_fraction"], "routed_from_cache": float(routed.mean()),
           "agreement_with_cached": float(np.mean(pred == cached)), "accuracy": float(np.mean(pred == gold_lab)),
           "seconds": secs, "route_stats": cas.route_stats_}
    print(json.dumps(rec, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(rec, indent=1))


def timing(args) -> None:
    """Seconds per text of each model on the same test texts, measured one after the other on a quiet machine.

    The scoring runs that fill the cache share the machine with each other, so
    their chunk times are not comparable between models; the cascade's cost
    uses these instead (median of ``--repeats`` runs after a warm-up).
    """
    import torch

    torch.set_num_threads(args.threads)
    chosen = json.loads(Path(args.select).read_text())["best"]
    out = {"threads": args.threads, "n": args.n, "repeats": args.repeats, "datasets": {}}
    for d in DATASETS:
        _, labels, texts = gold(d, "test", args.data_dir, args.n + 4)
        rec = {}
        for model_key, variant in (("smollm2", chosen["prompt"]), ("gemma3", chosen["prompt"])):
            clf, _ = build(d, labels, variant, model_key=model_key)
            clf.decision_function(texts[:4])  # warm-up: load, root cache, first kernels
            runs = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                clf.decision_function(texts[4:])
                runs.append((time.perf_counter() - t0) / args.n)
            rec[model_key] = {"seconds_per_text": float(np.median(runs)), "runs": runs}
            del clf
        out["datasets"][d] = rec
        print(f"{d:<10} " + "  ".join(f"{k}: {v['seconds_per_text']:.3f} s/text" for k, v in rec.items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score", help="score a split under variants (cached, resumable)")
    s.add_argument("--dataset", required=True)
    s.add_argument("--granularity", choices=["coarse", "fine"], default=None)
    s.add_argument("--split", default="validation")
    s.add_argument("--n", type=int, default=None, help="first N of the seeded permutation (default: all)")
    s.add_argument("--variants", default="default", help="comma list; letters@R = letter readout, rotation R; "
                   "letters@all = every rotation")
    s.add_argument("--subset", type=int, default=None, help="only the texts of a seeded draw of K labels")
    s.add_argument("--model", choices=sorted(MODELS), default="smollm2")
    s.add_argument("--chunk", type=int, default=50)
    s.add_argument("--threads", type=int, default=1)
    se = sub.add_parser("select", help="compare variants on validation (cached scores)")
    se.add_argument("--json", default=None)
    se.add_argument("--min-n", type=int, default=200, help="leave out variants scored on fewer validation rows")
    rp = sub.add_parser("report", help="test once: chosen default, cascade, letter readout")
    rp.add_argument("--select", default=str(HERE / "results" / "accuracy_select.json"))
    rp.add_argument("--prompt", default=None)
    rp.add_argument("--bias", default=None)
    rp.add_argument("--n-test", type=int, default=None)
    rp.add_argument("--n-cascade", type=int, default=None)
    rp.add_argument("--json", default=None)
    rp.add_argument("--timing", default=str(HERE / "results" / "accuracy_timing.json"))
    rp.add_argument("--test-split", default="test", help="'validation' exercises the report code without test data")
    cc = sub.add_parser("cascade-check", help="a real Cascade run vs the cached curve")
    cc.add_argument("--dataset", default="massive")
    cc.add_argument("--n", type=int, default=30)
    cc.add_argument("--target", type=float, default=0.7)
    cc.add_argument("--threads", type=int, default=2)
    cc.add_argument("--select", default=str(HERE / "results" / "accuracy_select.json"))
    cc.add_argument("--json", default=None)
    tm = sub.add_parser("timing", help="seconds per text of both models on the same texts, quiet machine")
    tm.add_argument("--n", type=int, default=24)
    tm.add_argument("--repeats", type=int, default=2)
    tm.add_argument("--threads", type=int, default=2)
    tm.add_argument("--select", default=str(HERE / "results" / "accuracy_select.json"))
    tm.add_argument("--json", default=str(HERE / "results" / "accuracy_timing.json"))
    for q in (s, se, rp, cc, tm):
        q.add_argument("--data-dir", default=os.environ.get("JUDGE_DATA_DIR", str(HERE.parent.parent / "shared" / "datasets")))
        q.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = p.parse_args(argv)
    {"score": score, "select": select, "report": report, "cascade-check": cascade_check, "timing": timing}[args.cmd](args)


if __name__ == "__main__":
    main()
