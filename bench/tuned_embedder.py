"""The embedder tuned on the labelled texts (`judge.adaptation.tune_embedder`) against the frozen one, and SetFit.

On validation only (how the default is chosen; test is never read here). Per dataset and number of
texts per class (the seed-0 draw of the training split, `bench._fit_cache.per_class`), each row is a
logistic regression (C by cross-validation, `bench._baselines.embed_lr`) on the sentence embeddings of:

* ``MiniLM + LR`` — the packaged all-MiniLM-L6-v2, frozen;
* ``tuned MiniLM + LR`` — the same model after `judge.adaptation.tune_embedder` on the draw
  (in-batch negatives, the library's defaults);
* ``SetFit`` — the peer, ``setfit`` itself (when installed: it is not a dependency) on the same draw
  with its cosine-similarity pairs and its own logistic head, ``num_iterations`` as given
  (its default, 20, takes tens of minutes per point on 2 CPU cores).

Accuracy on the first 500 rows of the seeded validation permutation, and the seconds each row took
(tuning and encoding included), printed and written as JSON.

    PYTHONPATH=<setfit installed with --target> python -m bench.tuned_embedder --dkeys banking77,clinc150,massive,trec \\
        --shots 4,16 --setfit-iterations 2 --json bench/results/tuned_embedder_select.json
    python -m bench.tuned_embedder head --mode auto --shots 16 --json bench/results/tuned_embedder_head_select.json

``head``: the library's head as ``fit`` builds it past 8 per class (`judge.adaptation.auto_candidates`:
the answer-slot states, MiniLM and TF-IDF blocks, no offsets), with the frozen embedder and with
``tune_embedder`` (`judge.adaptation.fit_head_tuned`), uncalibrated, on validation500.

What it deliberately does not do: read a test split, or time the language model (the head's other
blocks are the same with either embedder).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench._baselines import embed_lr, setfit_peer
from bench._fit_cache import per_class, rows

DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def point(dkey, shots, *, setfit_iterations, data, seed=0):
    from judge.adaptation import tune_embedder
    from judge.encoders import SentenceEncoder

    tr_texts, tr_y, labels, _ = rows(dkey, "train", data)
    ev_texts, ev_y, _, _ = rows(dkey, "validation500", data)
    idx = per_class(tr_y, shots, seed)
    texts, y = [tr_texts[i] for i in idx], tr_y[idx]
    K = len(labels)
    out = {"n_train": len(idx), "labels": K}
    t0 = time.perf_counter()
    enc = SentenceEncoder()
    p, _ = embed_lr(enc(texts), y, enc(ev_texts), K)
    out["MiniLM + LR"] = {"accuracy": float((p.argmax(1) == ev_y).mean()), "seconds": time.perf_counter() - t0}
    t0 = time.perf_counter()
    tuned = tune_embedder("minilm", texts, y, random_state=seed)
    p, _ = embed_lr(tuned(texts), y, tuned(ev_texts), K)
    out["tuned MiniLM + LR"] = {"accuracy": float((p.argmax(1) == ev_y).mean()), "seconds": time.perf_counter() - t0,
                                "steps": tuned.report["steps"], "tuning_seconds": tuned.report["seconds"]}
    if setfit_iterations:
        try:
            import setfit  # noqa: F401
        except ModuleNotFoundError:
            out["SetFit"] = "not run: setfit is not installed (pip install setfit)"
        else:
            t0 = time.perf_counter()
            pred = setfit_peer(texts, y, ev_texts, K, iterations=setfit_iterations, seed=seed).argmax(1)
            out["SetFit"] = {"accuracy": float((pred == ev_y).mean()), "seconds": time.perf_counter() - t0,
                             "num_iterations": setfit_iterations}
    return out


def head_point(dkey, shots, mode, *, data, seed=0):
    """The library's head (``fit``'s candidates past 8 per class: blocks, no offsets) with the frozen embedder and with
    ``tune_embedder=mode``, uncalibrated, on validation500; the answer-slot states computed here for the draw."""
    from bench._fit_cache import classifier
    from judge.adaptation import answer_states, auto_candidates, fit_head_choosing, fit_head_tuned
    from judge.adaptation.fit import parse_features
    from judge.encoders import SentenceEncoder, TfidfEncoder

    if shots <= 8:
        raise SystemExit("head runs past 8 per class, where fit's candidates take no zero-shot offset (the "
                         "offsets need every training text scored exactly, which this script does not cache)")
    tr_texts, tr_y, labels, _ = rows(dkey, "train", data)
    ev_texts, ev_y, _, _ = rows(dkey, "validation500", data)
    idx = per_class(tr_y, shots, seed)
    texts, y = [tr_texts[i] for i in idx], tr_y[idx]
    K = len(labels)
    clf = classifier(dkey, labels)
    t0 = time.perf_counter()
    H, Hev = answer_states(clf, texts), answer_states(clf, ev_texts)
    enc = SentenceEncoder()
    E, Eev = np.asarray(enc(texts), np.float64), np.asarray(enc(ev_texts), np.float64)
    out = {"n_train": len(idx), "states_seconds": time.perf_counter() - t0}
    cands = auto_candidates(len(idx), K, "exact", embedder=True)
    tfidf = TfidfEncoder(analyzer="word").fit(texts)
    blocks = {"hidden": H, "embed": E, "tfidf": tfidf.encode(texts)}

    def accuracy(head, E_ev):
        feats = {"hidden": Hev, "embed": E_ev, "tfidf": tfidf.encode(ev_texts)}
        return float((head.log_proba(None, feats, None).argmax(1) == ev_y).mean())

    t0 = time.perf_counter()
    head = fit_head_choosing(cands, blocks, y, K, embedder="minilm", tfidf=tfidf, random_state=seed)
    out["head (frozen)"] = {"accuracy": accuracy(head, Eev), "fit_seconds": time.perf_counter() - t0,
                            "features": head.report["features"]}
    t0 = time.perf_counter()
    th = fit_head_tuned({c: parse_features(c) for c in cands}, blocks, y, K, texts, [], mode=mode,
                        embedder="minilm", tfidf=tfidf, random_state=seed)
    fit_s = time.perf_counter() - t0
    E_ev = np.asarray(th.embedder(ev_texts), np.float64) if th.report["tuned"] else Eev
    out[f"head (tune_embedder={mode!r})"] = {
        "accuracy": accuracy(th, E_ev), "fit_seconds": fit_s, "tuned": th.report["tuned"],
        "features": th.report["features"], "cv_nll": th.report["features_cv"]["nll"]}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", default="embedder", choices=("embedder", "head"),
                    help="embedder: LR on each embedder, and SetFit; head: fit's head frozen vs tuned (cached features)")
    ap.add_argument("--mode", default="auto", help="head: tune_embedder's value (True or auto)")
    ap.add_argument("--dkeys", default="banking77,clinc150,massive,trec")
    ap.add_argument("--shots", default="4,16")
    ap.add_argument("--setfit-iterations", type=int, default=0, help="0: SetFit not run")
    ap.add_argument("--setfit-shots", default="4", help="the points SetFit runs at (it is slow on CPU)")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    results = json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    for dkey in args.dkeys.split(","):
        for shots in [int(s) for s in args.shots.split(",")]:
            if args.what == "head":
                mode = True if args.mode == "True" else args.mode
                r = head_point(dkey, shots, mode, data=args.data)
                results.setdefault(dkey, {})[str(shots)] = r
                for name, v in r.items():
                    if isinstance(v, dict):
                        print(f"{dkey:<10} {shots:>3}/class {name:<28} acc {v['accuracy']:.3f} "
                              f"{v['fit_seconds']:7.1f} s {v.get('features', '')} "
                              f"{'tuned' if v.get('tuned') else ''}", flush=True)
                if args.json:
                    args.json.write_text(json.dumps(results, indent=1))
                continue
            it = args.setfit_iterations if str(shots) in args.setfit_shots.split(",") else 0
            r = point(dkey, shots, setfit_iterations=it, data=args.data)
            results.setdefault(dkey, {})[str(shots)] = r
            for name in ("MiniLM + LR", "tuned MiniLM + LR", "SetFit"):
                v = r.get(name)
                if isinstance(v, dict):
                    print(f"{dkey:<10} {shots:>3}/class {name:<20} acc {v['accuracy']:.3f} {v['seconds']:7.1f} s",
                          flush=True)
                elif v:
                    print(f"{dkey:<10} {shots:>3}/class {name:<20} {v}", flush=True)
            if args.json:
                args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
