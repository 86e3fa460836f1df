"""``fit``'s default head beside the baselines a user would pick: learning curves at 1, 4, 16, 64 per class and full.

The head is the library's (`judge.adaptation.fit_head_choosing` over `judge.adaptation.auto_candidates`,
what ``Classifier.fit(texts, y)`` runs): feature blocks (the answer-slot hidden state of SmolLM2-135M, the
packaged all-MiniLM-L6-v2 sentence embedding) and offsets (the exact zero-shot scores after the
label-free prior, up to ``AUTO_OFFSET_PER_CLASS`` texts per class; the embedder's text-label similarity),
the set and its L2 chosen by cross-validation on the training texts only. Beside it, on the same draws:
MiniLM + LR (logistic regression on the same embeddings, C by cross-validation) and TF-IDF + LR.
``--methods`` adds (keys of ``METHODS``):

* ``tuned`` — ``fit(..., tune_embedder="auto")``'s head (`judge.adaptation.fit_head_tuned`): every
  candidate reading the embedder also competes with the embedder tuned on each fold's texts; the
  winner refitted (the embedder tuned on the whole draw where it won);
* ``tuned-lr`` — the embedder tuned on the draw (`judge.adaptation.tune_embedder`) + LR;
* ``setfit`` — the peer: SetFit itself from the packaged MiniLM (``bench._baselines.setfit_peer``,
  ``--setfit-iterations``; not a dependency, "not run" when it is not importable).

Each row's cost: ``fit_seconds`` (mean over draws: tuning, cross-validation, the calibration on
validation) and, where the row predicts apart from fitting, ``predict_texts_per_s`` on the features
given (the language model's states and scores come from the cache: their cost is
``bench.fit_cost``'s, not counted here; a tuned embedder's encoding is counted).

* ``select`` — on ``validation500``: the auto choice against each fixed candidate set, uncalibrated
  (how the defaults are judged; never test);
* ``report`` — on ``test1000`` (TREC: its whole 500-text test split), once: the head calibrated as a user
  gets it (``calibrate()`` on ``validation500``, its post-fit default), and the baselines; accuracy with a
  bootstrap interval, ECE beside its noise floor. Draws at 1 and 4 per class: five seeded draws from
  ``pool4``; at 16 and 64: one draw of the training split; full: the whole training split.

Everything from the feature cache (bench/_fit_cache.py: ``minilm`` of every selection; ``states`` of
``train`` (or of ``pool16``, which holds every draw up to 16 per class), ``validation500``, ``test1000``; exact ``scores`` of ``pool4``, ``validation500``,
``test1000``; the content-free scores from bench/priors.py). A point whose features are not cached is
recorded as "not run: ..." with what is missing.

    python -m bench.fit_curve select --json bench/results/fit_curve_select.json
    python -m bench.fit_curve report --json bench/results/fit_curve.json

The results in the README were run one dataset and a few points at a time (the full splits take up to
20 minutes each on one thread), e.g.

    python -m bench.fit_curve report --dkeys trec --json bench/results/fit_curve_trec.json
    python -m bench.fit_curve report --dkeys banking77 --shots 1,4 --json bench/results/fit_curve_banking77_a.json
    python -m bench.fit_curve report --dkeys banking77 --shots 16,64 --json bench/results/fit_curve_banking77_b.json
    python -m bench.fit_curve report --dkeys banking77 --shots full --json bench/results/fit_curve_banking77_c.json
    (the same _a/_b/_c for clinc150 and massive)
    PYTHONPATH=<setfit installed with --target> python -m bench.fit_curve report --dkeys banking77 --shots 4 \\
        --methods default,tuned,tuned-lr,setfit,minilm,tfidf --json bench/results/fit_curve_tuned_banking77.json

What it deliberately does not do: choose anything on test.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._baselines import embed_lr, metrics, setfit_peer, tfidf_lr  # noqa: E402
from bench._fit_cache import DKEYS, classifier, path, per_class, rows  # noqa: E402
from bench.priors import content_free  # noqa: E402

DATA = str(HERE.parent.parent / "shared" / "datasets")
DATASETS = ("banking77", "clinc150", "massive", "trec")
SHOTS = (1, 4, 16, 64, "full")


def _ck(dkey, sel, kind):
    from judge.evaluation import read_checkpoint

    f = path("smollm2", dkey, sel, kind)
    if not f.exists():
        return None
    s = read_checkpoint(f).scores
    return None if np.isnan(s).any() else s


def split(dkey, sel, labels_out=None):
    """Texts, gold, labels and the cached features of a selection (None for a feature not cached)."""
    from judge.calibration import contextual_bias
    from judge.calibration.bias import AUTO_PRIOR_STRENGTH
    from judge.calibration.state import Calibration

    texts, y, labels, idx = rows(dkey, sel, DATA)
    d = {"texts": texts, "y": y, "labels": labels, "idx": idx}
    for kind in ("minilm", "states"):
        d[kind] = _ck(dkey, sel, kind) if not sel.startswith("pool") else _pool_rows(dkey, sel, idx, kind)
    s = _ck(dkey, sel, "scores")
    if s is not None:  # the offset fit() uses: the zero-shot scores after the label-free prior
        prior = contextual_bias(content_free(dkey, labels))
        s = Calibration.prior_only(tuple(labels), AUTO_PRIOR_STRENGTH * prior).transform_log(s)
    d["scores"] = s
    return d


def _pool_rows(dkey, sel, idx, kind):
    """A pool's features: from the training split's cache, else from a larger pool's (pool4 is a prefix of pool16)."""
    f = _ck(dkey, "train", kind)
    if f is not None:
        return f[idx]
    for bigger in ("pool4", "pool16", "pool64"):
        if int(bigger[4:]) < int(sel[4:]):
            continue
        f = _ck(dkey, bigger, kind)
        if f is None:
            continue
        where = {int(r): i for i, r in enumerate(rows(dkey, bigger, DATA)[3])}
        if all(int(r) in where for r in idx):
            return f[[where[int(r)] for r in idx]]
    return None


def label_vectors(dkey, labels):
    from judge.encoders import SentenceEncoder
    from judge.fusion import label_texts

    clf = classifier(dkey, labels)
    return np.asarray(SentenceEncoder()(label_texts(labels, clf.label_names)), np.float64)


def draws(y, n, n_draws=5):
    if n == "full":
        return [np.arange(len(y))]
    if n <= 4:
        seen, out = set(), []
        for seed in range(n_draws):
            dd = per_class(y, n, seed)
            if tuple(dd) not in seen:
                seen.add(tuple(dd))
                out.append(dd)
        return out
    return [per_class(y, n, 0)]


def head_of(train, rows_, L, K, features=None, *, tune=None, label_txt=()):
    """The library's head on a draw of the training rows (``features``: a fixed set, else auto).

    ``tune``: None (the frozen embedder, `judge.adaptation.fit_head_choosing`), or ``fit(...,
    tune_embedder=tune)``'s head (`judge.adaptation.fit_head_tuned`: the candidates reading the embedder
    also compete with it tuned per fold on the texts, compared with ``label_txt``).
    """
    from judge.adaptation import auto_candidates, fit_head_choosing, fit_head_tuned
    from judge.adaptation.fit import parse_features
    from judge.encoders import TfidfEncoder
    from judge.fusion import label_similarity

    y = train["y"][rows_]
    cands = [features] if features else auto_candidates(len(rows_), K, "exact", embedder=True, tuned=tune is not None)
    if any("scores" in c for c in cands) and train["scores"] is None:
        return None, "not run: no cached zero-shot scores of the training rows (pool4)"
    texts = [train["texts"][i] for i in rows_]
    blocks = {"hidden": train["states"][rows_], "embed": train["minilm"][rows_]}
    tfidf = None
    if any("tfidf" in c for c in cands):
        tfidf = TfidfEncoder(analyzer="word").fit(texts)
        blocks["tfidf"] = tfidf.encode(texts)
    sim = label_similarity(lambda t: train["minilm"][rows_], [None] * len(rows_), L)
    kw = dict(scores=None if train["scores"] is None else train["scores"][rows_], similarity=sim, embedder="minilm",
              label_vectors=L, tfidf=tfidf)
    if tune is None:
        return fit_head_choosing(cands, blocks, y, K, **kw), None
    return fit_head_tuned({c: parse_features(c) for c in cands}, blocks, y, K, texts, label_txt, mode=tune, **kw), None


def frozen_head_scores(head, ev, L):
    """(n, K) log-probabilities of a head on the cached features of ``ev`` (the frozen MiniLM's embeddings)."""
    from judge.fusion import label_similarity

    sim = label_similarity(lambda t: ev["minilm"], [None] * len(ev["y"]), L)
    feats = {"hidden": ev["states"], "embed": ev["minilm"]}
    if head.tfidf is not None:
        feats["tfidf"] = head.tfidf.encode(ev["texts"])
    return head.log_proba(ev["scores"] if head.uses_scores else None, feats, sim)


def head_scores(head, ev, L):
    if head.report.get("tuned"):  # the head's own (tuned) embedder reads the texts, as predict does
        s, feats, sim = head.features_of(None, ev["texts"], None, given={"hidden": ev["states"], "scores": ev["scores"]})
        return head.log_proba(s, feats, sim)
    return frozen_head_scores(head, ev, L)


#: The rows of the curve: the library's heads, then the baselines and the peer (``--methods`` picks by key).
METHODS = {"default": "head (fit default)", "tuned": "head (tune_embedder='auto')",
           "minilm": "MiniLM + LR", "tuned-lr": "tuned MiniLM + LR", "setfit": "SetFit", "tfidf": "TF-IDF + LR"}


def _fit_predict(method, src, d, ev, val, L, K, *, calibrate, fixed_set, label_txt, setfit_iterations, seed):
    """(proba of ev, fit seconds, predict seconds, report) of one method on one draw, or a 'not run' reason."""
    from judge.calibration.state import fit_resolved, resolve_bias

    t0 = time.perf_counter()
    rep = {}
    if method.startswith("head"):
        if method == "head (tune_embedder='auto')":
            head, why = head_of(src, d, L, K, tune="auto", label_txt=label_txt)
        else:
            head, why = head_of(src, d, L, K, fixed_set)
        if head is None:
            return why
        rep = {"features": head.report["features"], "tuned": bool(head.report.get("tuned")),
               "cv_nll": (head.report.get("features_cv") or {}).get("nll")}
        fit_s = time.perf_counter() - t0
        if calibrate:  # calibrate() on validation500, the post-fit default (its cost counted as fitting)
            cal = fit_resolved(tuple(range(K)), head_scores(head, val, L), val["y"],
                               resolve_bias("auto", "exact", 1.0, "head"))
            fit_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        s_ev = head_scores(head, ev, L)
        p = cal.transform(s_ev) if calibrate else np.exp(s_ev)
        return p, fit_s, time.perf_counter() - t1, rep
    if method == "MiniLM + LR":
        p, _ = embed_lr(src["minilm"][d], src["y"][d], ev["minilm"], K)
    elif method == "TF-IDF + LR":
        p, _ = tfidf_lr([src["texts"][i] for i in d], src["y"][d], ev["texts"], K)
    elif method == "tuned MiniLM + LR":
        from judge.adaptation import tune_embedder

        texts = [src["texts"][i] for i in d]
        enc = tune_embedder("minilm", texts, src["y"][d], random_state=seed)
        fit_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        Eev = enc(ev["texts"])
        pred_s = time.perf_counter() - t1
        t2 = time.perf_counter()
        p, _ = embed_lr(enc(texts), src["y"][d], Eev, K)
        return p, fit_s + time.perf_counter() - t2, pred_s, {"tuning_steps": enc.report["steps"]}
    else:  # SetFit
        try:
            import setfit  # noqa: F401
        except ModuleNotFoundError:
            return "not run: setfit is not installed (it is not a dependency: pip install setfit)"
        p = setfit_peer([src["texts"][i] for i in d], src["y"][d], ev["texts"], K, iterations=setfit_iterations,
                        seed=seed)
        rep = {"num_iterations": setfit_iterations}
    # the baselines fit and predict in one call: their time is all counted as fitting (predict is milliseconds
    # on given features); the frozen embeddings' own cost is the MiniLM's (the cache's), not counted here
    return p, time.perf_counter() - t0, None, rep


def point(dkey, n, ev, val, src, L, K, *, calibrate, fixed=(), methods=("default", "minilm", "tfidf"),
          label_txt=(), setfit_iterations=20, n_draws=5):
    """Every method at one point of the curve (drawn from ``src``): {method: metrics or 'not run: ...'}."""
    lm = any(m == "default" for m in methods) or bool(fixed) or "tuned" in methods
    if src["minilm"] is None or (lm and src["states"] is None):
        return {"all": f"not run: states or minilm of the training rows ({src['name']}) not cached"}
    out = {}
    sets = draws(src["y"], n, n_draws)
    names = [METHODS[m] for m in methods if m == "default"] + [f"head ({f})" for f in fixed] + \
        [METHODS[m] for m in methods if m != "default"]
    for method in names:
        probas, fits, preds, reps = [], [], [], []
        why = None
        for seed, d in enumerate(sets):
            r = _fit_predict(method, src, d, ev, val, L, K, calibrate=calibrate,
                             fixed_set=None if method == METHODS["default"] else method[6:-1],
                             label_txt=label_txt, setfit_iterations=setfit_iterations, seed=seed)
            if isinstance(r, str):
                why = r
                break
            probas.append(r[0])
            fits.append(r[1])
            preds.append(r[2])
            reps.append(r[3])
        if why is not None:
            out[method] = why
            print(f"{dkey:<10} n={n!s:<5} {method:<34} {why}", flush=True)
            continue
        per_text = None if preds[0] is None else float(np.median(preds)) / len(ev["y"])
        out[method] = metrics(ev["y"], probas, float(np.mean(fits)), per_text)
        out[method]["n_train"] = int(len(sets[0]))
        for key in ("features", "tuned", "cv_nll", "tuning_steps", "num_iterations"):
            if key in reps[0]:
                out[method][key] = [r[key] for r in reps]
        m = out[method]
        feats = ",".join(sorted(set(m.get("features", ()))))
        print(f"{dkey:<10} n={n!s:<5} {method:<34} acc {m['accuracy']:.3f} [{m['accuracy_ci'][0]:.3f}, "
              f"{m['accuracy_ci'][1]:.3f}] ECE/floor {m['ece_over_floor']:.2f} fit {np.mean(fits):6.1f} s "
              f"({len(probas)} draws) {feats}{' tuned' * any(m.get('tuned', ()))}", flush=True)
    return out


def fx_arg(args):
    """The fixed feature sets asked for (``--fixed``)."""
    return [f for f in args.fixed.split(",") if f]


def run(args, *, eval_sel, calibrate):
    from judge.adaptation import auto_candidates
    from judge.fusion import label_texts

    out = {"eval": eval_sel, "calibrated": calibrate, "methods": args.methods, "draws": args.draws, "datasets": {}}
    if "setfit" in args.methods.split(","):
        out["setfit_iterations"] = args.setfit_iterations
    shots = [s if s == "full" else int(s) for s in args.shots.split(",")]
    methods = args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise SystemExit(f"unknown --methods {unknown}; valid: {sorted(METHODS)}")
    for dkey in args.dkeys.split(","):
        ev = split(dkey, eval_sel)
        val = split(dkey, "validation500")
        pools = {p: dict(split(dkey, p), name=p) for p in ("pool4", "pool16")}
        train = dict(split(dkey, "train"), name="train")
        K = len(ev["labels"])
        L = label_vectors(dkey, ev["labels"])
        label_txt = label_texts(ev["labels"], classifier(dkey, ev["labels"]).label_names)
        lm = any(m in ("default", "tuned") for m in methods) or bool(fx_arg(args))
        if ev["minilm"] is None or (lm and (ev["states"] is None or ev["scores"] is None)):
            out["datasets"][dkey] = f"not run: features of {eval_sel} not cached"
            print(f"{dkey:<10} {out['datasets'][dkey]}")
            continue
        res = {"K": K, "n_eval": len(ev["y"]), "points": {}}
        fx = [f for f in args.fixed.split(",") if f and f != "auto"]
        if "auto" in args.fixed.split(","):
            fx = auto_candidates(1, K, "exact", embedder=True) + fx
        for n in shots:  # 1 and 4 per class: five draws from pool4; 16: pool16 (the seed-0 draw of train) if cached
            src = pools["pool4"] if n != "full" and n <= 4 else pools["pool16"] if n == 16 else train
            if src["name"] == "pool16" and (src["minilm"] is None or (lm and src["states"] is None)):
                src = train
            res["points"][str(n)] = point(dkey, n, ev, val, src, L, K, calibrate=calibrate,
                                          fixed=[f.replace("+scores", "") if n == "full" or n > 8 else f for f in fx],
                                          methods=methods, label_txt=label_txt,
                                          setfit_iterations=args.setfit_iterations, n_draws=args.draws)
        out["datasets"][dkey] = res
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("what", choices=("select", "report"))
    ap.add_argument("--dkeys", default=",".join(DATASETS), help="datasets (keys of bench/_fit_cache.DKEYS)")
    ap.add_argument("--shots", default="1,4,16,64,full", help="points of the curve (per class, or 'full')")
    ap.add_argument("--fixed", default="", help="also these fixed feature sets, comma-separated ('auto': the "
                    "auto candidates); a set's '+scores' is dropped past 8 per class, as auto does")
    ap.add_argument("--methods", default="default,minilm,tfidf",
                    help=f"rows, comma-separated keys of {sorted(METHODS)} (tuned, tuned-lr and setfit tune an "
                         "embedder per draw: minutes per point on CPU)")
    ap.add_argument("--setfit-iterations", type=int, default=20, help="SetFit's num_iterations (its default: 20)")
    ap.add_argument("--draws", type=int, default=5, help="seeded draws at 1 and 4 per class (the first N of 5; "
                    "fewer for the slow rows, read beside the others' accuracy_per_draw)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--json", help="write the results here (after every dataset)")
    args = ap.parse_args(argv)
    unknown = [d for d in args.dkeys.split(",") if d not in DKEYS]
    if unknown:
        ap.error(f"unknown dataset keys {unknown}; valid: {sorted(DKEYS)}")
    import torch

    torch.set_num_threads(args.threads)
    if args.what == "select":
        return run(args, eval_sel="validation500", calibrate=False)
    return run(args, eval_sel="test1000", calibrate=True)


if __name__ == "__main__":
    main()
