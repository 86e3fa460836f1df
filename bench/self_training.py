"""Self-training (``fit(texts, y, unlabelled=...)``, `judge.adaptation.self_train`) against the head alone.

On validation only (how the settings are chosen; no test split is read here). Per dataset and number
of labelled texts per class (the seed-0 draw of the training split, `judge.adaptation.per_class_indices`):

* the labelled texts: that draw; the **unlabelled** texts: ``--unlabelled`` other training texts
  (a seeded sample of the rest of the split), their labels dropped before anything reads them;
* ``head``: ``fit``'s head with its defaults (``features="auto"``) on the labelled texts alone;
* ``self-trained (share s, rounds r)``: the same head after `judge.adaptation.self_train` on the
  unlabelled texts, for each setting of the grid.

Accuracy on the first 500 rows of the seeded validation permutation (as bench/tuned_embedder.py),
uncalibrated, and the self-training's own seconds (the features of the unlabelled texts are one
``predict``'s worth of work: their LM pass is timed apart, as seconds per text). For the record only,
the pseudo-labels' accuracy against the unlabelled texts' true labels (never given to the fit).

    python -m bench.self_training --dkeys trec,banking77,massive,clinc150 --shots 4 \\
        --json bench/results/self_training_select.json

The language model's features (zero-shot scores after the prior, answer-slot states: one pass)
are cached in ``bench/cache/self_training/`` (git-ignored) so the grid reruns cheaply.

What it deliberately does not do: read a test split, or calibrate.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench._fit_cache import DKEYS, load_rows

HERE = Path(__file__).resolve().parent
DATA = HERE.parent.parent / "shared" / "datasets"
CACHE = HERE / "cache" / "self_training"
GRID = ((0.25, 1), (0.5, 1), (1.0, 1), (0.5, 2), (1.0, 3))


def _lm_features(clf, texts, key):
    """(scores after the prior, answer-slot states, seconds per text) of ``texts``, cached under ``key``."""
    from judge.calibrated import offset_scores

    CACHE.mkdir(parents=True, exist_ok=True)
    f = CACHE / f"{key}.npz"
    if f.exists():
        z = np.load(f)
        if z["n"] == len(texts):
            return z["scores"], z["states"], float(z["per_text"])
    t = time.perf_counter()
    s, H = offset_scores(clf, texts, states=True)
    per_text = (time.perf_counter() - t) / len(texts)
    np.savez(f, scores=s, states=H, per_text=per_text, n=len(texts))
    return s, H, per_text


def run_one(dkey, shots, n_unlabelled, seed=0):
    import warnings

    from judge import Classifier
    from judge import datasets as ds
    from judge.adaptation import fit_adaptation, per_class_indices, self_train
    from judge.adaptation.fit import AUTO_OFFSET_PER_CLASS

    tr_texts, tr_y, labels, _ = load_rows(dkey, "train", DATA)
    va_texts, va_y, _, _ = load_rows(dkey, "validation", DATA, n=500)
    lab = per_class_indices(tr_y, shots, seed)
    rest = np.setdiff1d(np.arange(len(tr_y)), lab)
    unl = np.sort(np.random.default_rng(seed).permutation(rest)[:n_unlabelled])
    L_texts, L_y = [tr_texts[i] for i in lab], tr_y[lab]
    U_texts, U_gold = [tr_texts[i] for i in unl], tr_y[unl]  # U_gold: for the pseudo-labels' report only
    names = ds.display_names(DKEYS[dkey][0], labels)
    clf = Classifier(labels, label_names=names or None, progress=True)
    clf.setup()
    every = L_texts + U_texts + va_texts
    S, H, per_text = _lm_features(clf, every, f"{dkey}_{shots}_{n_unlabelled}_{seed}")
    nl, nu = len(L_texts), len(U_texts)
    cut = {"L": slice(0, nl), "U": slice(nl, nl + nu), "V": slice(nl + nu, None)}

    def no_scoring(_):
        raise AssertionError("every LM feature is cached")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        given = {"scores": S[cut["L"]]} if nl <= AUTO_OFFSET_PER_CLASS * len(labels) else {}  # as fit's "auto"
        head = fit_adaptation(clf, L_texts, [labels[i] for i in L_y], base_scores=no_scoring, states={"hidden": H[cut["L"]]},
                              random_state=seed, **given)
        head_s = time.perf_counter() - t
    feats = {k: head.features_of(clf, [every[i] for i in range(len(every))[c]], no_scoring,
                                 given={"hidden": H[c], "scores": S[c]}) for k, c in cut.items()}
    acc = float((head.log_proba(*feats["V"]).argmax(1) == va_y).mean())
    row = {"dataset": dkey, "shots": shots, "n_labelled": nl, "n_unlabelled": nu, "features": head.features,
           "head_accuracy": acc, "head_seconds": head_s, "lm_seconds_per_text": per_text, "settings": []}
    print(f"{dkey} {shots}/class  head {acc:.3f} ({head.features}; fit {head_s:.1f} s)")
    for share, rounds in GRID:
        t = time.perf_counter()
        st = self_train(head, feats["L"], L_y, feats["U"], share=share, rounds=rounds)
        secs = time.perf_counter() - t
        a = float((st.log_proba(*feats["V"]).argmax(1) == va_y).mean())
        first = head.log_proba(*feats["U"]).argmax(1)
        pseudo_acc = float((first == U_gold).mean())
        row["settings"].append({"share": share, "rounds": rounds, "accuracy": a, "gain": a - acc, "seconds": secs,
                                "pseudo": st.report["self_training"]["pseudo"],
                                "head_accuracy_on_unlabelled": pseudo_acc})
        print(f"   share {share:<4} rounds {rounds}  {a:.3f} ({a - acc:+.3f})  {secs:.1f} s")
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--dkeys", default="trec,banking77,massive,clinc150")
    ap.add_argument("--shots", default="4")
    ap.add_argument("--unlabelled", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = [run_one(d, int(s), args.unlabelled, args.seed) for s in args.shots.split(",") for d in args.dkeys.split(",")]
    print("\nmean gain per setting over the datasets:")
    for j, (share, rounds) in enumerate(GRID):
        gains = [r["settings"][j]["gain"] for r in rows]
        print(f"   share {share:<4} rounds {rounds}: {np.mean(gains):+.4f} (min {min(gains):+.4f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "grid": GRID, "unlabelled": args.unlabelled,
                                               "seed": args.seed}, indent=1))
    return rows


if __name__ == "__main__":
    main()
