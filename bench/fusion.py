"""Zero-shot fusion of the LM's exact label scores with a sentence embedder's label similarity.

Two experts read each text: the language model's exact label log-probabilities after its
label-free prior (``Classifier``'s default, contextual at ``AUTO_PRIOR_STRENGTH``), and the
packaged all-MiniLM-L6-v2's cosine similarity between the text and each label's text (its name;
``name: description`` where the labels are described). The fused score is
``(1 - w) * log_softmax(lm) + w * log_softmax(similarity / tau)``, label-free.

``select`` chooses ``(w, tau)`` on the validation splits **leaving one dataset out**: for each
dataset, the pair with the highest mean validation accuracy over the *other* datasets, so no
dataset's own labels choose its weights; the library default (``judge.fusion.DEFAULT_FUSION``) is the
pair chosen on all four. ``test`` reads each dataset's test rows once with its left-out pair and
with the library default, beside each expert alone and the calibrated (``calibrate()`` on
validation, the fusion weight refitted by out-of-fold NLL) figures. Everything from the feature
cache (bench/_fit_cache.py: ``scores`` and ``minilm`` of ``validation500`` / ``test1000``).

    python -m bench.fusion select --json bench/results/fusion_select.json
    python -m bench.fusion test --json bench/results/fusion_test.json          # once, after select

What it deliberately does not do: tune anything on test.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._fit_cache import DKEYS, classifier, path  # noqa: E402
from bench.priors import cached, content_free  # noqa: E402

DATA = str(HERE.parent.parent / "shared" / "datasets")
DATASETS = ("banking77", "clinc150", "massive", "trec")
WEIGHTS = tuple(round(w, 2) for w in np.linspace(0.0, 1.0, 11))
TAUS = (0.01, 0.02, 0.05, 0.1, 0.2)


def experts(dkey, sel, describe=False):
    """(lm, similarity, y): the LM's prior-corrected log-probabilities and the label similarities, (n, K) each."""
    from judge.calibration import contextual_bias
    from judge.calibration.bias import AUTO_PRIOR_STRENGTH
    from judge.encoders import SentenceEncoder
    from judge.evaluation import read_checkpoint
    from judge.fusion import label_texts

    got = cached(dkey, sel)
    if got is None:
        return None
    s, y, labels = got
    f = path("smollm2", dkey, sel, "minilm")
    if not f.exists():
        return None
    X = read_checkpoint(f).scores
    lm = s - AUTO_PRIOR_STRENGTH * contextual_bias(content_free(dkey, labels))
    clf = classifier(dkey, labels)
    desc = json.loads((HERE / "descriptions" / f"{dkey}.json").read_text()) if describe else None
    L = SentenceEncoder()(label_texts(labels, clf.label_names, desc))
    return lm, X @ L.T, y


def accuracy(lm, sim, y, w, tau):
    from judge.fusion import Fusion

    return float((Fusion(w, tau).combine(lm, sim).argmax(1) == y).mean())


def grid(data):
    """Mean accuracy over the datasets in ``data`` for every (w, tau): {(w, tau): acc}."""
    return {(w, t): float(np.mean([accuracy(lm, sim, y, w, t) for lm, sim, y in data.values()]))
            for w in WEIGHTS for t in TAUS}


def best(table):
    return max(table, key=lambda k: (round(table[k], 10), -k[0], k[1]))


def select(args):
    data = {d: experts(d, "validation500") for d in args.dkeys.split(",")}
    missing = [d for d, v in data.items() if v is None]
    if missing:
        print(f"select: not cached for {missing} (scores and minilm of validation500); nothing chosen")
        return {"not run": missing}
    out = {"split": "validation500", "weights": list(WEIGHTS), "taus": list(TAUS), "left_out": {}}
    for d in data:
        rest = {k: v for k, v in data.items() if k != d}
        w, t = best(grid(rest))
        lm, sim, y = data[d]
        out["left_out"][d] = {"w": w, "tau": t, "accuracy": accuracy(lm, sim, y, w, t),
                              "lm": accuracy(lm, sim, y, 0.0, t), "similarity": accuracy(lm, sim, y, 1.0, t),
                              "best_in_hindsight": max(accuracy(lm, sim, y, ww, tt) for ww in WEIGHTS for tt in TAUS)}
        r = out["left_out"][d]
        print(f"{d:<10} chosen on the others: w {w} tau {t}: fused {r['accuracy']:.3f}  lm {r['lm']:.3f}  "
              f"similarity {r['similarity']:.3f}  (best in hindsight {r['best_in_hindsight']:.3f})", flush=True)
    w, t = best(grid(data))
    out["all"] = {"w": w, "tau": t}
    print(f"chosen on all four (the library default): w {w}, tau {t}")
    return out


def test(args):
    from judge.calibration.state import fit_resolved, resolve_bias
    from judge.fusion import DEFAULT_FUSION, fit_fusion

    sel = json.loads(Path(args.selection).read_text())
    out = {"split": "test1000", "default": [DEFAULT_FUSION.weight, DEFAULT_FUSION.temperature], "datasets": {}}
    for d in args.dkeys.split(","):
        te, va = experts(d, "test1000"), experts(d, "validation500")
        if te is None or va is None:
            out["datasets"][d] = "not run: scores or minilm of test1000 / validation500 not cached"
            print(f"{d:<10} {out['datasets'][d]}")
            continue
        lm, sim, y = te
        lo = sel["left_out"][d]
        row = {"n": len(y), "lm": accuracy(lm, sim, y, 0.0, 1.0), "similarity": accuracy(lm, sim, y, 1.0, 1.0),
               "fused (left-out choice)": accuracy(lm, sim, y, lo["w"], lo["tau"]),
               "fused (library default)": accuracy(lm, sim, y, DEFAULT_FUSION.weight, DEFAULT_FUSION.temperature)}
        fus = fit_fusion(va[0], va[1], va[2], temperature=lo["tau"])
        K = lm.shape[1]
        cal = fit_resolved(tuple(range(K)), fus.combine(va[0], va[1]), va[2], resolve_bias("auto", "exact", 1.0))
        row["fused + calibrate (validation)"] = float((cal.transform(fus.combine(lm, sim)).argmax(1) == y).mean())
        row["calibrated fusion weight"] = fus.weight
        cal_lm = fit_resolved(tuple(range(K)), va[0], va[2], resolve_bias("auto", "exact", 1.0))
        row["lm + calibrate (validation)"] = float((cal_lm.transform(lm).argmax(1) == y).mean())
        best_single = max(row["lm"], row["similarity"])
        row["gain over best single expert (left-out)"] = row["fused (left-out choice)"] - best_single
        out["datasets"][d] = row
        print(f"{d:<10} " + "  ".join(f"{k} {v:.3f}" for k, v in row.items() if isinstance(v, float)), flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("what", choices=("select", "test"))
    ap.add_argument("--dkeys", default=",".join(DATASETS), help="datasets (keys of bench/_fit_cache.DKEYS)")
    ap.add_argument("--selection", default=str(HERE / "results" / "fusion_select.json"),
                    help="test: the select results (left-out choices)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    unknown = [d for d in args.dkeys.split(",") if d not in DKEYS]
    if unknown:
        ap.error(f"unknown dataset keys {unknown}; valid: {sorted(DKEYS)}")
    out = select(args) if args.what == "select" else test(args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
