"""Label descriptions: does scoring what a label means beat scoring its name? (validation; test once)

``Classifier({label: description}, describe=...)`` has the model write, for each label, its name
(``name``), its description (``description``) or ``name: description`` (``both``). The descriptions
are the ones written for the four datasets from their label names and training texts only
(bench/descriptions/*.json). Measured with the default label-free prior (``prior="auto"``), uncalibrated
and calibrated (``calibrate()``, 2-fold cross-fitted on the same rows), beside the sentence
embedder's similarity to the same label texts and their fusion (``judge.fusion.DEFAULT_FUSION``).

* ``select`` — on ``validation{n}`` (exact scores cached under bench/cache/fit/, resumable); the rule
  fixed before running: ``AUTO_DESCRIBE`` is the variant with the highest mean uncalibrated accuracy
  of the LM over the four datasets (names win a tie);
* ``test`` — ``test{n}`` once with names and with the chosen variant.

    python -m bench.descriptions select --n 200 --json bench/results/descriptions_select.json
    python -m bench.descriptions merge a.json b.json --json c.json   # select runs of parallel processes, as one

The README's choice was made at ``--n 64`` (descriptions multiply the tokens scored per text: about 400 s
per 32 Banking77 texts on one loaded thread), CLINC150 in a second process, merged.
    python -m bench.descriptions test --n 500 --json bench/results/descriptions_test.json

What it deliberately does not do: edit a description after seeing validation or test figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

from bench._fit_cache import DKEYS, path, rows  # noqa: E402

DATA = str(HERE.parent.parent / "shared" / "datasets")
DATASETS = ("banking77", "clinc150", "massive", "trec")
VARIANTS = ("name", "description", "both")


def classifier(dkey, labels, describe):
    from judge import Classifier
    from judge import datasets as ds

    desc = json.loads((HERE / "descriptions" / f"{dkey}.json").read_text())
    names = ds.display_names(DKEYS[dkey][0], labels) or None
    return Classifier({lab: desc[lab] for lab in labels}, label_names=names, describe=describe, progress=False)


def cached_prefix(dkey, sel, kind):
    """A cached feature of ``sel`` (e.g. ``validation64``): its own checkpoint, else the first rows of a larger
    selection of the same seeded order (``validation200/500/1000``) where those rows are complete; None if neither."""
    from judge.evaluation import read_checkpoint

    split = sel.rstrip("0123456789")
    n = int(sel[len(split):] or 0)
    for m in (n, 200, 500, 1000):
        f = path("smollm2", dkey, f"{split}{m}", kind)
        if m >= n and f.exists():
            x = read_checkpoint(f).scores[:n]
            if not np.isnan(x).any():
                return x
    return None


def variant(dkey, sel, describe):
    """(probabilities under the default prior, raw scores, y, label texts) of one variant on one selection."""
    from judge.evaluation import score_with_checkpoint

    texts, y, labels, _ = rows(dkey, sel, DATA)
    clf = classifier(dkey, labels, describe)
    tag = "scores" if describe == "name" else f"describe-{describe}.scores"
    s = cached_prefix(dkey, sel, tag)
    if s is None:
        s = score_with_checkpoint(clf, texts, path("smollm2", dkey, sel, tag), chunk=32)
    return clf.scores_to_proba(s), s, y, clf


def embedder_side(dkey, sel, clf, describe):
    """Cosine similarities of the texts to the label texts of a variant: (n, K)."""
    from judge.encoders import SentenceEncoder

    X = cached_prefix(dkey, sel, "minilm")
    if X is None:
        raise SystemExit(f"not cached: minilm of {dkey} {sel} (python -m bench.learning_curve cache --what "
                         f"embed --dkeys {dkey} --sels {sel})")
    texts = clf.compiled_.names  # what the model writes: name, description or both
    L = SentenceEncoder()(texts).astype(np.float64)
    return X @ L.T


def measure(dkey, sel, describe):
    from bench.priors import calibrated_cross_fit
    from judge.calibration import contextual_bias
    from judge.calibration.bias import AUTO_PRIOR_STRENGTH
    from judge.fusion import DEFAULT_FUSION

    p, s, y, clf = variant(dkey, sel, describe)
    sim = embedder_side(dkey, sel, clf, describe)
    lm = s - AUTO_PRIOR_STRENGTH * contextual_bias(clf.content_free_scores())
    fused = DEFAULT_FUSION.combine(lm, sim)

    def acc(q):
        return float((np.asarray(q).argmax(1) == y).mean())

    return {"lm": acc(p), "lm calibrated": acc(calibrated_cross_fit(s, y)), "embedder": acc(sim),
            "fused": acc(fused), "n": len(y)}


def run(args, sel):
    out = {"split": sel, "datasets": {}}
    variants = VARIANTS if args.what == "select" else ("name", args.describe or _chosen())
    for dkey in args.dkeys.split(","):
        out["datasets"][dkey] = {}
        for v in dict.fromkeys(variants):
            r = measure(dkey, sel, v)
            out["datasets"][dkey][v] = r
            print(f"{dkey:<10} {v:<12} " + "  ".join(f"{k} {x:.3f}" for k, x in r.items() if k != "n"), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    if args.what == "select":
        choose(out)
    return out


def choose(out):
    """The rule, fixed before running: the variant of highest mean uncalibrated LM accuracy over the datasets."""
    means = {v: float(np.mean([d[v]["lm"] for d in out["datasets"].values()])) for v in VARIANTS}
    out["mean_lm_accuracy"] = means
    out["choice"] = max(VARIANTS, key=lambda v: (round(means[v], 10), v == "name"))
    print(f"mean LM accuracy over {', '.join(out['datasets'])}: {means}; chosen: {out['choice']}")
    return out


def merge(files, json_out):
    """Several ``select`` runs of the same split (datasets run in parallel processes) as one, with the rule applied."""
    runs = [json.loads(Path(f).read_text()) for f in files]
    if len({r["split"] for r in runs}) != 1:
        raise SystemExit(f"the runs are of different splits: {[r['split'] for r in runs]}")
    out = {"split": runs[0]["split"], "datasets": {}, "merged_from": [str(f) for f in files]}
    for r in runs:
        out["datasets"].update({k: v for k, v in r["datasets"].items() if all(x in v for x in VARIANTS)})
    choose(out)
    if json_out:
        Path(json_out).write_text(json.dumps(out, indent=2) + "\n")
    return out


def _chosen():
    from judge.labels import AUTO_DESCRIBE

    return AUTO_DESCRIBE


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("what", choices=("select", "test", "merge"))
    ap.add_argument("files", nargs="*", help="merge: the select runs' JSON files (datasets run in parallel)")
    ap.add_argument("--dkeys", default=",".join(DATASETS))
    ap.add_argument("--n", type=int, default=200, help="seeded texts of the split")
    ap.add_argument("--describe", help="test: the variant (default: the library's AUTO_DESCRIBE)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if args.what == "merge":
        return merge(args.files, args.json)
    import torch

    torch.set_num_threads(args.threads)
    out = run(args, f"{'validation' if args.what == 'select' else 'test'}{args.n}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return out


if __name__ == "__main__":
    main()
