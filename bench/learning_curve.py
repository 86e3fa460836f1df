"""From zero-shot to tuned: learning curves of ``Classifier.fit`` beside the baselines a user would pick.

Features are computed once and kept (bench/_fit_cache.py: exact zero-shot scores, answer-slot
states, mean-pooled text embeddings, resumable); every figure is derived from that cache.

    # 1. cache features (resumable; one torch thread; run in the background)
    python -m bench.learning_curve cache --what scores --dkeys trec,banking77 --sels test500,validation500,pool16
    python -m bench.learning_curve cache --what states --dkeys trec,banking77 --sels test500,validation500,train
    # 2. choose the head's features and post-fit calibration on validation (calibrated, cross-fitted),
    #    then the curves on test, once (--default-head: the head as fit/calibrate default it now)
    python -m bench.learning_curve select --json bench/results/fit_select.json
    python -m bench.learning_curve report --json bench/results/fit_learning_curve.json
    # 3. adapters (LoRA) and demonstrations: measured on the sizes that fit a CPU
    python -m bench.learning_curve lora --dkey trec --per-class 64
    python -m bench.learning_curve demos --dkey banking77 --per-class 4 --k 4
    # 4. another model: cache with --model gemma3-270m --model-key gemma3, then report --model-key gemma3

A method or point whose features are not (fully) cached is recorded as ``"not run: <reason>"``
in the JSON and the table, with the cache command that would supply it, never left out: the
head with the offset (``hidden+scores``) needs the zero-shot scores of the rows it trains on (beyond
the dataset's pool in ``POOLS`` and for the full split those are training rows: ``--what scores
--sels train``), the embeddings
baseline needs ``embed`` of ``pool64`` (up to 64 per class) or of ``train`` (the full split).

What it deliberately does not do: look at test before the defaults are chosen on validation.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from bench._baselines import embed_lr, metrics, tfidf_lr  # noqa: E402
from bench._fit_cache import DKEYS, classifier, features, path, rows  # noqa: E402
from bench._fit_helpers import POST_FIT, calibrated, cross_fit, draws, library, missing, table  # noqa: E402

DATA = str(HERE.parent.parent / "shared" / "datasets")


def cache(args) -> None:
    import torch

    torch.set_num_threads(args.threads)
    for dkey in args.dkeys.split(","):
        clf = None
        for sel in args.sels.split(","):
            texts, y, labels, idx = rows(dkey, sel, args.data_dir)
            if clf is None:
                clf = classifier(dkey, labels, args.model)
            for kind in args.what.split(","):
                t0 = time.perf_counter()
                f = features(clf, kind, texts, path(args.model_key, dkey, sel, kind), chunk=args.chunk)
                print(f"{dkey:<10} {sel:<14} {kind:<7} {f.shape} {time.perf_counter() - t0:8.1f} s", flush=True)


# ----------------------------------------------------------------------------- cached features

def load(dkey, sel, kinds, model_key="smollm2"):
    """Texts, gold and the cached features of a selection; a feature not (fully) cached is left out."""
    import numpy as np

    from judge.evaluation import read_checkpoint

    texts, y, labels, idx = rows(dkey, sel, DATA)
    out = {"texts": texts, "y": y, "labels": labels, "idx": idx}
    for kind in kinds:
        f = path(model_key, dkey, sel, kind)
        if not f.exists() and sel.startswith("pool"):  # a pool is rows of train: take them from there
            tr = load(dkey, "train", (kind,), model_key)
            if kind in tr:
                out[kind], out[kind + "_s"] = tr[kind][idx], tr[kind + "_s"][idx]
            continue
        if not f.exists():
            continue
        ck = read_checkpoint(f)
        if len(ck.scores) != len(texts) or np.isnan(ck.scores).any():
            continue  # still being computed
        out[kind], out[kind + "_s"] = ck.scores, ck.seconds
    return out


# ----------------------------------------------------------------------------- baselines

SHOTS = (1, 4, 16, 64, "full")


def curve(dkey, *, test_sel, val_sel, pool_sel, seeds=(0, 1, 2, 3, 4), split="test", features_only=None,
          full_cv=3, log=print, head_calibration=None, model_key="smollm2"):
    """Every method at every point of the learning curve of one dataset, from the cache.

    ``head_calibration(s_val, y_val, s_test)``: the heads' calibration on test (default `calibrated`,
    the zero-shot walk); ``model_key``: whose cached features (the baselines do not depend on it).
    """
    import numpy as np

    from judge.adaptation import fit_head

    head_calibration = head_calibration or (lambda a, b, c: calibrated(a, b, c)[0])
    te_sel = val_sel if split == "validation" else test_sel
    te = load(dkey, te_sel, ("scores", "states", "embed"), model_key)
    va = load(dkey, val_sel, ("scores", "states"), model_key)
    pool = load(dkey, pool_sel, ("scores", "states", "embed"), model_key)
    tr = load(dkey, "train", ("scores", "states", "embed"), model_key)  # scores/embed of train: used where cached
    emb64 = load(dkey, "pool64", ("embed",), model_key)  # the embeddings baseline: the largest pool embedded
    if "embed" not in emb64:
        emb64 = load(dkey, "pool16", ("embed",), model_key)
    K = len(te["labels"])
    y_te, y_va = te["y"], va["y"]
    out = {"dataset": dkey, "K": K, "n_test": len(y_te), "n_validation": len(y_va), "split": split,
           "pool": pool_sel, "n_train_full": len(tr["y"]), "points": {}}
    zs_pt = float(np.mean(te["scores_s"])) if "scores" in te else None
    st_pt = float(np.mean(te["states_s"])) if "states" in te else None
    sels = {"pool": pool_sel, "train": "train", "test": te_sel, "validation": val_sel}
    if "scores" in te and "scores" in va:
        p, l2 = calibrated(va["scores"], y_va, te["scores"])
        out["points"]["0"] = {"zero-shot": dict(metrics(y_te, [p], 0.0, zs_pt), calibration_l2=l2)}
        from judge.calibration import softmax

        out["points"]["0"]["zero-shot (uncalibrated)"] = metrics(y_te, [softmax(te["scores"])], 0.0, zs_pt)
    else:
        why = missing(dkey, {"test": te, "validation": va}, ("scores",), sels, model_key)
        out["points"]["0"] = {"zero-shot": why, "zero-shot (uncalibrated)": why}
        log(f"{dkey:<10} n=0     zero-shot        {why}")
    emb_rows = {int(i): j for j, i in enumerate(emb64["idx"])} if "embed" in emb64 else {}
    for n in SHOTS:
        if n == "full":
            sets = [("train", np.arange(len(tr["y"])))]
        elif n <= int(pool_sel[4:]):
            sets = [("pool", d) for d in draws(pool["y"], n, seeds)]
        else:
            sets = [("train", d) for d in draws(tr["y"], n, (0,))]
        where = sets[0][0]
        src = pool if where == "pool" else tr
        point = {}
        methods = ["head", "head (hidden)", "tf-idf + LR", "embeddings + LR"]
        for m in methods:
            if features_only and m not in features_only:
                continue  # not asked for (select compares the two heads only)
            why = None
            if m.startswith("head"):
                kinds = ("scores", "states") if m == "head" else ("states",)
                why = missing(dkey, {where: src, "test": te, "validation": va}, kinds, sels, model_key)
            elif m == "embeddings + LR":
                why = missing(dkey, {"test": te}, ("embed",), sels, model_key)
                if why is None and "embed" not in src and not (
                        emb_rows and all(int(i) in emb_rows for _, d in sets for i in src["idx"][d])):
                    sel = "train" if n == "full" else "pool64"  # pool64 holds every draw of up to 64 per class
                    why = (f"not run: the {where} rows drawn at n={n} have no cached mean-pooled embeddings (run: "
                           f"python -m bench.learning_curve cache --what embed --dkeys {dkey} --sels {sel})")
            if why is not None:
                point[m] = why
                log(f"{dkey:<10} n={n!s:<5} {m:<16} {why}")
                continue
            probas, fit_s = [], []
            for _, d in sets:
                train_idx = src["idx"][d]
                y_tr = src["y"][d]
                t0 = time.perf_counter()
                if m.startswith("head"):
                    use_s = m == "head"
                    head = fit_head(src["states"][d], y_tr, K, scores=src["scores"][d] if use_s else None,
                                    cv=full_cv if len(d) > 2000 else 5)
                    feat_s = float(src["states_s"][d].sum() + (src["scores_s"][d].sum() if use_s else 0.0))
                    fit_s.append(time.perf_counter() - t0 + feat_s)
                    s_va = head.log_proba(va["scores"] if use_s else None, va["states"])
                    s_te = head.log_proba(te["scores"] if use_s else None, te["states"])
                    # validation (select): the head's own distribution; test: calibrated on validation
                    p = np.exp(s_te) if split == "validation" else head_calibration(s_va, y_va, s_te)
                elif m == "tf-idf + LR":
                    tx = [src["texts"][i] for i in d]
                    p, _ = tfidf_lr(tx, y_tr, te["texts"], K)
                    fit_s.append(time.perf_counter() - t0)
                else:
                    X = src["embed"][d] if "embed" in src else \
                        emb64["embed"][[emb_rows[int(i)] for i in train_idx]]
                    p, _ = embed_lr(X, y_tr, te["embed"], K)
                    fit_s.append(time.perf_counter() - t0)
                probas.append(p)
            pt = {"head": (zs_pt or 0) + (st_pt or 0), "head (hidden)": st_pt}.get(m)
            point[m] = metrics(y_te, probas, float(np.mean(fit_s)), pt)
            point[m]["n_train"] = int(len(sets[0][1]))
            log(f"{dkey:<10} n={n!s:<5} {m:<16} acc {point[m]['accuracy']:.3f} "
                f"[{point[m]['accuracy_ci'][0]:.3f}, {point[m]['accuracy_ci'][1]:.3f}] "
                f"ECE/floor {point[m]['ece_over_floor']:.2f} fit {np.mean(fit_s):.1f} s ({len(probas)} draws)")
        out["points"][str(n)] = point
    return out


POOLS = {"banking77": ("test300", "validation300", "pool4"), "clinc150": ("test200", "validation200", "pool4"),
         "massive": ("test200", "validation200", "pool4"), "trec": ("test500", "validation500", "pool16"),
         "trec-fine": ("test500", "validation500", "pool16")}


SELECT_RULE = (
    "fixed before running: (1) post-fit calibration of the head: the arm of POST_FIT with the highest mean "
    "cross-fitted validation accuracy over every measured (dataset, per-class, features) point, the lowest mean "
    "NLL among those within 0.5 points of it; (2) features: under that calibration, 'hidden+scores' if its mean "
    "validation accuracy over the points where both were measured is at least that of 'hidden', else 'hidden'. "
    "The third arm was added after Banking77's first four validation rows of the first two were seen "
    "(the offset head at 1/class: 23.7% raw, 55.1% batch+fit, 23.7% temperature only; at 64/class the reverse)")


def select(args) -> None:
    """Validation only: the head's features and its post-fit calibration, both calibrated 2-fold cross-fitted.

    Every point of the learning curve up to 64 per class (draws of the dataset's pool, seeds 0-4, or
    one training draw past it), both feature sets where their features are cached, each head's
    validation scores calibrated by every arm of ``POST_FIT`` on one half and scored on the other.
    """
    import json

    import numpy as np

    from judge.adaptation import fit_head

    res, rows_ = {}, []
    for dkey in args.dkeys.split(","):
        _, v, p = POOLS[dkey]
        va, pool = load(dkey, v, ("scores", "states")), load(dkey, p, ("scores", "states"))
        tr = load(dkey, "train", ("scores", "states"))
        y_va, K = va["y"], len(va["labels"])
        res[dkey] = {}
        for n in (1, 4, 16, 64):
            where, src = ("pool", pool) if n <= int(p[4:]) else ("train", tr)
            sets = draws(src["y"], n, (0, 1, 2, 3, 4) if where == "pool" else (0,))
            for feat in ("hidden+scores", "hidden"):
                use_s = feat == "hidden+scores"
                why = missing(dkey, {where: src, "validation": va}, ("scores", "states") if use_s else ("states",),
                              {"pool": p, "train": "train", "validation": v})
                key = f"{n}/{feat}"
                if why is not None:
                    res[dkey][key] = why
                    print(f"{dkey:<10} n={n:<3} {feat:<14} {why}", flush=True)
                    continue
                raw, post = [], {name: [] for name in POST_FIT}
                for d in sets:
                    head = fit_head(src["states"][d], src["y"][d], K, scores=src["scores"][d] if use_s else None,
                                    cv=3 if len(d) > 2000 else 5)
                    s = head.log_proba(va["scores"] if use_s else None, va["states"])
                    raw.append(np.exp(s))
                    for name, how in POST_FIT.items():
                        post[name].append(cross_fit(s, y_va, how))
                res[dkey][key] = {"where": where, "draws": len(sets), "uncalibrated": metrics(y_va, raw),
                                  **{name: metrics(y_va, ps) for name, ps in post.items()}}
                rows_.append((dkey, n, feat, res[dkey][key]))
                print(f"{dkey:<10} n={n:<3} {feat:<14} raw {res[dkey][key]['uncalibrated']['accuracy']:.3f} " +
                      " ".join(f"{name.split()[0]} {res[dkey][key][name]['accuracy']:.3f}/"
                               f"{res[dkey][key][name]['nll']:.2f}" for name in POST_FIT), flush=True)
    mean = {name: (float(np.mean([r[name]["accuracy"] for *_, r in rows_])),
                   float(np.mean([r[name]["nll"] for *_, r in rows_]))) for name in POST_FIT}
    top = max(acc for acc, _ in mean.values())
    cal = min((name for name, (acc, _) in mean.items() if acc >= top - 0.005), key=lambda name: mean[name][1])
    both = {(d, n): {} for d, n, *_ in rows_}
    for d, n, feat, r in rows_:
        both[(d, n)][feat] = r[cal]["accuracy"]
    gains = [v["hidden+scores"] - v["hidden"] for v in both.values() if len(v) == 2]
    feats = "hidden+scores" if gains and np.mean(gains) >= 0 else "hidden"
    print("post-fit calibration (mean validation accuracy / NLL): " +
          ", ".join(f"{k} {v[0]:.3f} / {v[1]:.3f}" for k, v in mean.items()) + f" -> {cal!r}")
    print(f"zero-shot offset under it: {np.mean(gains):+.3f} over {len(gains)} points -> features={feats!r}")
    Path(args.json).write_text(json.dumps({"rule": SELECT_RULE, "post_fit_means": mean, "post_fit": cal,
                                           "offset_gains": gains, "features": feats, "points": res}, indent=1))


def post_fit_default():
    """(features, bias, calibration function): the head as ``fit()`` and ``calibrate()`` default it now."""
    from judge.adaptation.fit import OPTIONS
    from judge.calibration.state import AUTO_BIAS, AUTO_BIAS_AFTER_FIT

    return OPTIONS["head"]["features"], AUTO_BIAS_AFTER_FIT.get("head", AUTO_BIAS), library("auto", adaptation="head")


def report(args) -> None:
    """Test, once: every method at every point, beside the baselines; JSON and a table.

    ``--default-head``: only the head as fit() and calibrate() default it now, added beside the
    curves already in the JSON (each dataset once); the heads of a full report are calibrated
    the same way unless ``--head-calibration walk`` (the zero-shot walk, the first report's).
    """
    import json

    out = {"sizes": POOLS, "seeds": [0, 1, 2, 3, 4], "model": args.model_key, "datasets": {}}
    if Path(args.json).exists():  # datasets reported by an earlier run are kept (each is measured once)
        out = json.loads(Path(args.json).read_text())
    from judge.adaptation.fit import resolve_features

    feats, bias, how = post_fit_default()
    head_cal = None if args.head_calibration == "walk" else how
    arm = f"head (features={feats!r}), calibrate after fit: bias={bias!r}"

    def method_at(n, K, n_full):  # fit()'s features at this point (every path here scores every label)
        n_rows = n_full if n == "full" else int(n) * K
        return "head" if resolve_features(feats, n_rows, K, "exact") == "hidden+scores" else "head (hidden)"
    for dkey in args.dkeys.split(","):
        t, v, p = POOLS[dkey]
        if args.fill_baselines:  # baselines recorded "not run" whose features are cached now
            have = out["datasets"][dkey]
            todo = {m for pt in have["points"].values() for m, v in pt.items()
                    if m in ("tf-idf + LR", "embeddings + LR") and isinstance(v, str)}
            if todo:
                r = curve(dkey, test_sel=t, val_sel=v, pool_sel=p, features_only=tuple(todo),
                          model_key=args.model_key)
                for n, pt in r["points"].items():
                    for m in todo & set(pt):
                        if isinstance(have["points"][n].get(m), str):
                            have["points"][n][m] = pt[m]
        elif args.default_head:
            have = out["datasets"].get(dkey)
            if have is None or any(arm in pt for pt in have["points"].values()):
                raise SystemExit(f"{dkey}: {'not reported yet' if have is None else arm + ' already reported'} "
                                 f"in {args.json} (test is reported once)")
            r = curve(dkey, test_sel=t, val_sel=v, pool_sel=p, features_only=("head", "head (hidden)"),
                      head_calibration=how, model_key=args.model_key)
            for n, pt in r["points"].items():
                m = method_at(n, r["K"], r["n_train_full"])
                if m in pt:
                    have["points"][n][arm] = dict(pt[m], features=m) if isinstance(pt[m], dict) else pt[m]
        else:
            if dkey in out["datasets"]:
                raise SystemExit(f"{dkey} is already in {args.json} (test is reported once); remove it there to "
                                 f"redo it")
            out["datasets"][dkey] = curve(dkey, test_sel=t, val_sel=v, pool_sel=p, head_calibration=head_cal,
                                          model_key=args.model_key)
            out["datasets"][dkey]["head_calibration"] = args.head_calibration if head_cal is None else arm
        Path(args.json).write_text(json.dumps(out, indent=1))
    print(table(out))


def _merge_json(f, key, value):
    import json

    f = Path(f)
    data = json.loads(f.read_text()) if f.exists() else {}
    data[key] = value
    f.write_text(json.dumps(data, indent=1))


def _training_draw(dkey, per_class):
    from bench._fit_cache import per_class as draw

    texts, y, labels, idx = rows(dkey, "train", DATA)
    keep = range(len(y)) if per_class == "full" else draw(y, int(per_class))
    return [texts[i] for i in keep], [labels[y[i]] for i in keep], labels


def lora(args) -> None:
    """Adapters on one training draw: fit (timed), then validation and test scored by the adapted model."""
    import torch

    from judge.evaluation import score_with_checkpoint

    torch.set_num_threads(args.threads)
    t, v, _ = POOLS[args.dkey]
    texts, ylab, labels = _training_draw(args.dkey, args.per_class)
    clf = classifier(args.dkey, labels, args.model)
    if args.device:
        clf.device = args.device
    t0, cpu0 = time.perf_counter(), time.process_time()
    clf.fit(texts, ylab, method="lora", rank=args.rank, epochs=args.epochs, lr=args.lr, batch_size=args.batch_size,
            callback=lambda i: print(f"  epoch {i['epoch']} step {i['step']} loss {i['loss']:.3f}", flush=True)
            if i["step"] % 10 == 0 else None)
    fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    tag = f"lora{args.per_class}"
    got = {}
    for sel in (v, t):
        d = load(args.dkey, sel, ())
        n = args.n_eval or len(d["texts"])
        t1 = time.perf_counter()
        s = score_with_checkpoint(clf, d["texts"][:n], path("smollm2", args.dkey, sel, tag + ".scores"), chunk=32)
        got[sel] = (s, d["y"][:n], (time.perf_counter() - t1) / n)
    p, l2 = calibrated(got[v][0], got[v][1], got[t][0])
    res = metrics(got[t][1], [p], fit_s, got[t][2])
    res.update(fit_cpu_seconds=fit_cpu, n_train=len(texts), report=clf.adaptation_.report, calibration_l2=l2,
               settings={"rank": args.rank, "epochs": args.epochs, "lr": args.lr, "batch_size": args.batch_size},
               accuracy_uncalibrated=float((got[t][0].argmax(1) == got[t][1]).mean()))
    print(f"{args.dkey} lora {args.per_class}/class: acc {res['accuracy']:.3f} {res['accuracy_ci']} "
          f"ECE/floor {res['ece_over_floor']:.2f}, fit {fit_s:.0f} s, epochs kept {res['report']['epoch_kept']}")
    _merge_json(args.json, f"{args.dkey}/{args.per_class}", res)


def demos(args) -> None:
    """Demonstrations: accuracy and cost against zero-shot on the same texts (both calibrated on validation)."""
    import torch

    from judge.evaluation import score_with_checkpoint

    torch.set_num_threads(args.threads)
    t, v, p = POOLS[args.dkey]
    pool = load(args.dkey, p, ("states",))
    why = missing(args.dkey, {"pool": pool}, ("states",), {"pool": p}) or \
        missing(args.dkey, {"validation": load(args.dkey, v, ("scores",)), "test": load(args.dkey, t, ("scores",))},
                ("scores",), {"validation": v, "test": t})
    if why:  # the demonstrations' states and the zero-shot comparison come from the cache
        raise SystemExit(f"{args.dkey} demos: {why}")
    keep = draws(pool["y"], args.per_class, (0,))[0]
    labels = pool["labels"]
    clf = classifier(args.dkey, labels)
    clf.fit([pool["texts"][i] for i in keep], [labels[pool["y"][i]] for i in keep], method="demos", k=args.k,
            states=pool["states"][keep])
    zero = classifier(args.dkey, labels)
    got = {}
    for sel, n in ((v, args.n_val), (t, args.n_test)):
        d = load(args.dkey, sel, ("scores",))
        t1 = time.perf_counter()
        s = score_with_checkpoint(clf, d["texts"][:n], path("smollm2", args.dkey, sel, f"demos{args.k}x{args.per_class}.scores"),
                                  chunk=16)
        got[sel] = (s, d["scores"][:n], d["y"][:n], (time.perf_counter() - t1) / n)
    # cost on the same 16 texts, one after the other (the ratio is what survives a busy machine)
    few = load(args.dkey, t, ())["texts"][:16]
    t1 = time.perf_counter()
    zero.decision_function(few)
    zs = time.perf_counter() - t1
    t1 = time.perf_counter()
    clf.decision_function(few)
    ds = time.perf_counter() - t1
    p_d, _ = calibrated(got[v][0], got[v][2], got[t][0])
    p_z, _ = calibrated(got[v][1], got[v][2], got[t][1])
    y = got[t][2]
    res = {"demos": metrics(y, [p_d], None, ds / 16), "zero-shot": metrics(y, [p_z], None, zs / 16),
           "cost_ratio": ds / zs, "k": args.k, "per_class": args.per_class, "n_val": int(len(got[v][2])),
           "n_test": int(len(y))}
    print(f"{args.dkey} demos k={args.k} from {args.per_class}/class: acc {res['demos']['accuracy']:.3f} vs zero-shot "
          f"{res['zero-shot']['accuracy']:.3f} on the same {len(y)} texts; cost x{res['cost_ratio']:.1f}")
    _merge_json(args.json, f"{args.dkey}/k{args.k}/{args.per_class}", res)


def timing(args) -> None:
    """CPU seconds (one thread; what a busy shared machine does not distort much) of each stage of a fit.

    Features per text on ``--n`` training texts (answer-slot states; exact zero-shot scores on a quarter of
    them), and the head's fit on the full training split's cached states (cross-validated, ``--cv`` folds).
    """
    import json

    import numpy as np
    import torch

    from judge.adaptation import answer_states, fit_head

    torch.set_num_threads(1)
    texts, y, labels, idx = rows(args.dkey, "train", DATA)
    clf = classifier(args.dkey, labels).setup()
    sample = [texts[i] for i in np.random.default_rng(0).permutation(len(texts))[: args.n]]
    answer_states(clf, sample[:8])
    t0, w0 = time.process_time(), time.perf_counter()
    answer_states(clf, sample)
    states_cpu, states_wall = (time.process_time() - t0) / len(sample), (time.perf_counter() - w0) / len(sample)
    few = sample[: max(8, args.n // 4)]
    t0, w0 = time.process_time(), time.perf_counter()
    clf.decision_function(few)
    exact_cpu, exact_wall = (time.process_time() - t0) / len(few), (time.perf_counter() - w0) / len(few)
    tr = load(args.dkey, "train", ("states",))
    out = {"dataset": args.dkey, "n_train": len(tr["y"]), "states_cpu_s_per_text": states_cpu,
           "states_wall_s_per_text": states_wall, "exact_cpu_s_per_text": exact_cpu,
           "exact_wall_s_per_text": exact_wall, "n_timed_states": len(sample), "n_timed_exact": len(few)}
    if "states" in tr:
        t0, w0 = time.process_time(), time.perf_counter()
        head = fit_head(tr["states"], tr["y"], len(labels), cv=args.cv)
        out.update(head_fit_cpu_s=time.process_time() - t0, head_fit_wall_s=time.perf_counter() - w0,
                   head_l2=head.l2, cv=args.cv, states_cache_wall_s=float(tr["states_s"].sum()))
        total = out["states_cpu_s_per_text"] * len(tr["y"]) + out["head_fit_cpu_s"]
        out["fit_hidden_cpu_s_total"] = total
        out["fit_hidden_plus_scores_cpu_s_total"] = total + exact_cpu * len(tr["y"])
        print(f"{args.dkey}: full-split fit, one core: states {states_cpu:.3f} CPU-s/text x {len(tr['y'])} + head "
              f"{out['head_fit_cpu_s']:.0f} CPU-s = {total / 60:.1f} CPU-min (features='hidden'); with the exact "
              f"zero-shot scores ({exact_cpu:.2f} CPU-s/text) {out['fit_hidden_plus_scores_cpu_s_total'] / 60:.1f} CPU-min")
    print(json.dumps(out, indent=1))
    _merge_json(args.json, args.dkey, out)


def calibration_check(args) -> None:
    """Validation only: the default post-fit calibration's effect on the fitted head's accuracy.

    The head (default features) fitted on one ``--per-class`` training draw; its validation scores
    calibrated 2-fold cross-fitted (fit on one seeded half of the validation rows, applied to the
    other), by the default walk (`calibrated`) and by temperature alone; `metrics` of each.
    """
    import json

    from judge.adaptation import fit_head

    out = {}
    for dkey in args.dkeys.split(","):
        va = load(dkey, POOLS[dkey][1], ("states",))
        tr = load(dkey, "train", ("states",))
        d = draws(tr["y"], args.per_class, (0,))[0]
        head = fit_head(tr["states"][d], tr["y"][d], len(va["labels"]), cv=3)
        s, y = head.log_proba(None, va["states"]), va["y"]
        cal, temp = (cross_fit(s, y, POST_FIT[name]) for name in ("batch prior + fitted bias + T", "temperature only"))
        out[dkey] = {"n_per_class": args.per_class, "n_validation": len(y),
                     "raw_accuracy": float((s.argmax(1) == y).mean()),
                     "default (batch prior + fitted bias + T)": metrics(y, [cal]),
                     "temperature only": metrics(y, [temp])}
        print(dkey, {k: v["accuracy"] if isinstance(v, dict) else v for k, v in out[dkey].items()}, flush=True)
    Path(args.json).write_text(json.dumps(out, indent=1))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=DATA)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cache", help="compute and keep features (resumable)")
    c.add_argument("--what", default="scores", help="scores, states, embed (comma-separated)")
    c.add_argument("--dkeys", default=",".join(DKEYS))
    c.add_argument("--sels", default="test500,validation500")
    c.add_argument("--model", default=None)
    c.add_argument("--model-key", default="smollm2")
    c.add_argument("--chunk", type=int, default=64)
    c.add_argument("--threads", type=int, default=1)
    c.set_defaults(func=cache)
    se = sub.add_parser("select", help="validation only: the head's default features")
    se.add_argument("--dkeys", default=",".join(DKEYS))
    se.add_argument("--json", default=str(HERE / "results" / "fit_select.json"))
    se.set_defaults(func=select)
    rp = sub.add_parser("report", help="test once: the learning curves beside the baselines")
    rp.add_argument("--dkeys", default=",".join(DKEYS))
    rp.add_argument("--json", default=str(HERE / "results" / "fit_learning_curve.json"))
    rp.add_argument("--model-key", default="smollm2", help="whose cached features (cache --model-key)")
    rp.add_argument("--head-calibration", choices=("default", "walk"), default="default",
                    help="heads calibrated as calibrate() does after fit (default) or by the zero-shot walk")
    rp.add_argument("--fill-baselines", action="store_true",
                    help="run the baselines recorded 'not run' whose features are cached now (nothing else)")
    rp.add_argument("--default-head", action="store_true",
                    help="add only the head as fit()/calibrate() default it, beside datasets already reported")
    rp.set_defaults(func=report)
    lo = sub.add_parser("lora", help="LoRA adapters on one training draw (CPU: small draws; GPU: --device cuda)")
    lo.add_argument("--dkey", required=True)
    lo.add_argument("--per-class", default="16", help="N per class, or full")
    lo.add_argument("--rank", type=int, default=8)
    lo.add_argument("--epochs", type=int, default=3)
    lo.add_argument("--lr", type=float, default=5e-4)
    lo.add_argument("--batch-size", type=int, default=8)
    lo.add_argument("--n-eval", type=int, default=None, help="first N validation and test rows only")
    lo.add_argument("--device", default=None)
    lo.add_argument("--model", default=None)
    lo.add_argument("--threads", type=int, default=1)
    lo.add_argument("--json", default=str(HERE / "results" / "fit_lora.json"))
    lo.set_defaults(func=lora)
    de = sub.add_parser("demos", help="k nearest training texts in the prompt: accuracy and cost")
    de.add_argument("--dkey", required=True)
    de.add_argument("--per-class", type=int, default=4)
    de.add_argument("--k", type=int, default=4)
    de.add_argument("--n-val", type=int, default=100)
    de.add_argument("--n-test", type=int, default=100)
    de.add_argument("--threads", type=int, default=1)
    de.add_argument("--json", default=str(HERE / "results" / "fit_demos.json"))
    de.set_defaults(func=demos)
    ti = sub.add_parser("timing", help="CPU seconds of each stage of a fit on the full training split")
    ti.add_argument("--dkey", default="banking77")
    ti.add_argument("--n", type=int, default=256)
    ti.add_argument("--cv", type=int, default=3)
    ti.add_argument("--json", default=str(HERE / "results" / "fit_timing.json"))
    ti.set_defaults(func=timing)
    cc = sub.add_parser("calcheck", help="validation only: post-fit calibration's effect on the head's accuracy")
    cc.add_argument("--dkeys", default="clinc150,banking77")
    cc.add_argument("--per-class", type=int, default=64)
    cc.add_argument("--json", default=str(HERE / "results" / "fit_calibration_check.json"))
    cc.set_defaults(func=calibration_check)
    args = p.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
