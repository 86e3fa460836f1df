"""``fit``'s default head beside the baselines a user would pick: learning curves at 1, 4, 16, 64 per class and full.

The head is the library's (`judge.adaptation.fit_head_choosing` over `judge.adaptation.auto_candidates`,
what ``Classifier.fit(texts, y)`` runs): feature blocks (the answer-slot hidden state of SmolLM2-135M, the
packaged all-MiniLM-L6-v2 sentence embedding) and offsets (the exact zero-shot scores after the
label-free prior, up to ``AUTO_OFFSET_PER_CLASS`` texts per class; the embedder's text-label similarity),
the set and its L2 chosen by cross-validation on the training texts only. Beside it, on the same draws:
MiniLM + LR (logistic regression on the same embeddings, C by cross-validation) and TF-IDF + LR.

* ``select`` — on ``validation500``: the auto choice against each fixed candidate set, uncalibrated
  (how the defaults are judged; never test);
* ``report`` — on ``test1000`` (TREC: its whole 500-text test split), once: the head calibrated as a user
  gets it (``calibrate()`` on ``validation500``, its post-fit default), and the baselines; accuracy with a
  bootstrap interval, ECE beside its noise floor. Draws at 1 and 4 per class: five seeded draws from
  ``pool4``; at 16 and 64: one draw of the training split; full: the whole training split.

Everything from the feature cache (bench/_fit_cache.py: ``minilm`` of every selection; ``states`` of
``train``, ``validation500``, ``test1000``; exact ``scores`` of ``pool4``, ``validation500``,
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

What it deliberately does not do: choose anything on test.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._baselines import embed_lr, metrics, tfidf_lr  # noqa: E402
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
    src = "train" if sel.startswith("pool") else sel
    d = {"texts": texts, "y": y, "labels": labels, "idx": idx}
    for kind in ("minilm", "states"):
        f = _ck(dkey, src, kind)
        d[kind] = None if f is None else (f[idx] if src != sel else f)
    s = _ck(dkey, sel, "scores")
    if s is not None:  # the offset fit() uses: the zero-shot scores after the label-free prior
        prior = contextual_bias(content_free(dkey, labels))
        s = Calibration.prior_only(tuple(labels), AUTO_PRIOR_STRENGTH * prior).transform_log(s)
    d["scores"] = s
    return d


def label_vectors(dkey, labels):
    from judge.encoders import SentenceEncoder
    from judge.fusion import label_texts

    clf = classifier(dkey, labels)
    return np.asarray(SentenceEncoder()(label_texts(labels, clf.label_names)), np.float64)


def draws(y, n):
    if n == "full":
        return [np.arange(len(y))]
    if n <= 4:
        seen, out = set(), []
        for seed in range(5):
            dd = per_class(y, n, seed)
            if tuple(dd) not in seen:
                seen.add(tuple(dd))
                out.append(dd)
        return out
    return [per_class(y, n, 0)]


def head_of(train, rows_, L, K, features=None):
    """The library's head on a draw of the training rows (``features``: a fixed set, else auto)."""
    from judge.adaptation import auto_candidates, fit_head_choosing
    from judge.fusion import label_similarity

    y = train["y"][rows_]
    cands = [features] if features else auto_candidates(len(rows_), K, "exact", embedder=True)
    if any("scores" in c for c in cands) and train["scores"] is None:
        return None, "not run: no cached zero-shot scores of the training rows (pool4)"
    from judge.encoders import TfidfEncoder

    blocks = {"hidden": train["states"][rows_], "embed": train["minilm"][rows_]}
    tfidf = None
    if any("tfidf" in c for c in cands):
        texts = [train["texts"][i] for i in rows_]
        tfidf = TfidfEncoder(analyzer="word").fit(texts)
        blocks["tfidf"] = tfidf.encode(texts)
    sim = label_similarity(lambda t: train["minilm"][rows_], [None] * len(rows_), L)
    head = fit_head_choosing(cands, blocks, y, K, scores=None if train["scores"] is None else train["scores"][rows_],
                             similarity=sim, embedder="minilm", label_vectors=L, tfidf=tfidf)
    return head, None


def head_scores(head, ev, L):
    from judge.fusion import label_similarity

    sim = label_similarity(lambda t: ev["minilm"], [None] * len(ev["y"]), L)
    feats = {"hidden": ev["states"], "embed": ev["minilm"]}
    if head.tfidf is not None:
        feats["tfidf"] = head.tfidf.encode(ev["texts"])
    return head.log_proba(ev["scores"] if head.uses_scores else None, feats, sim)


def point(dkey, n, ev, val, pool, train, L, K, *, calibrate, fixed=()):
    """Every method at one point of the curve: {method: metrics or 'not run: ...'}."""
    from judge.calibration.state import fit_resolved, resolve_bias

    src = pool if (n != "full" and n <= 4) else train
    if src["states"] is None or src["minilm"] is None:
        return {"all": "not run: states or minilm of the training rows not cached"}
    out = {}
    sets = draws(src["y"], n)
    for method in ("head (fit default)", *[f"head ({f})" for f in fixed], "MiniLM + LR", "TF-IDF + LR"):
        probas, secs, chosen = [], [], []
        why = None
        for d in sets:
            t0 = time.perf_counter()
            if method.startswith("head"):
                fixed_set = None if method == "head (fit default)" else method[6:-1]
                head, why = head_of(src, d, L, K, fixed_set)
                if head is None:
                    break
                chosen.append(head.report["features"])
                s_ev = head_scores(head, ev, L)
                if calibrate:
                    cal = fit_resolved(tuple(range(K)), head_scores(head, val, L), val["y"],
                                       resolve_bias("auto", "exact", 1.0, "head"))
                    p = cal.transform(s_ev)
                else:
                    p = np.exp(s_ev)
            elif method == "MiniLM + LR":
                p, _ = embed_lr(src["minilm"][d], src["y"][d], ev["minilm"], K)
            else:
                p, _ = tfidf_lr([src["texts"][i] for i in d], src["y"][d], ev["texts"], K)
            secs.append(time.perf_counter() - t0)
            probas.append(p)
        if why is not None:
            out[method] = why
            print(f"{dkey:<10} n={n!s:<5} {method:<34} {why}", flush=True)
            continue
        out[method] = metrics(ev["y"], probas, float(np.mean(secs)))
        out[method]["n_train"] = int(len(sets[0]))
        if chosen:
            out[method]["features"] = chosen
        m = out[method]
        print(f"{dkey:<10} n={n!s:<5} {method:<34} acc {m['accuracy']:.3f} [{m['accuracy_ci'][0]:.3f}, "
              f"{m['accuracy_ci'][1]:.3f}] ECE/floor {m['ece_over_floor']:.2f} {np.mean(secs):6.1f} s "
              f"({len(probas)} draws){' ' + ','.join(sorted(set(chosen))) if chosen else ''}", flush=True)
    return out


def run(args, *, eval_sel, calibrate):
    from judge.adaptation import auto_candidates

    out = {"eval": eval_sel, "calibrated": calibrate, "datasets": {}}
    shots = [s if s == "full" else int(s) for s in args.shots.split(",")]
    for dkey in args.dkeys.split(","):
        ev = split(dkey, eval_sel)
        val = split(dkey, "validation500")
        train = split(dkey, "train")
        pool = split(dkey, "pool4")
        K = len(ev["labels"])
        L = label_vectors(dkey, ev["labels"])
        if ev["states"] is None or ev["minilm"] is None or ev["scores"] is None:
            out["datasets"][dkey] = f"not run: features of {eval_sel} not cached"
            print(f"{dkey:<10} {out['datasets'][dkey]}")
            continue
        res = {"K": K, "n_eval": len(ev["y"]), "points": {}}
        fx = [f for f in args.fixed.split(",") if f and f != "auto"]
        if "auto" in args.fixed.split(","):
            fx = auto_candidates(1, K, "exact", embedder=True) + fx
        for n in shots:
            res["points"][str(n)] = point(dkey, n, ev, val, pool, train, L, K, calibrate=calibrate,
                                          fixed=[f.replace("+scores", "") if n == "full" or n > 8 else f for f in fx])
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
