"""The score cache of bench/accuracy.py: which rows of which split, where they are kept, how they are read back.

A split is scored in the order of a seeded permutation (`permutation`), so the
first ``m`` rows of any run are a seeded uniform sample; `gold` gives their labels.
Each (model, dataset, variant) folder of the cache (`cache_dir`) holds, per split,
a `judge.evaluation.score_with_checkpoint` checkpoint (``SPLIT.npz``) and its
meta (``SPLIT.json``: labels, column order, scoring path), and the content-free
inputs' scores (``content_free.npy``). `load_scores`, `variant_scores` and
`letters_scores` read them back in dataset label order.

What it deliberately does not do: score (bench/accuracy.py ``score`` does) or
compute any figure of the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["AVERAGES", "cache_dir", "dataset_key", "gold", "letters_scores", "load_scores", "load_split",
           "permutation", "variant_scores"]


def dataset_key(dataset: str, granularity: str | None = None, subset: int | None = None) -> str:
    return dataset + ("-fine" if granularity == "fine" else "") + (f"-sub{subset}" if subset else "")


class _Subset:
    """The texts of a split whose gold label is in a seeded draw of ``k`` labels (letter-readout subsets)."""

    def __init__(self, data, k, seed=0):
        names = sorted(np.random.default_rng(seed).choice(sorted(data.label_names), k, replace=False).tolist())
        keep = [i for i, lab in enumerate(data.labels) if lab in set(names)]
        self.label_names = tuple(names)
        self.texts = tuple(data.texts[i] for i in keep)
        self.labels = tuple(data.labels[i] for i in keep)

    def __len__(self):
        return len(self.texts)


def load_split(dataset: str, split: str, data_dir, granularity=None, subset=None):
    from judge import datasets as ds

    opts = {"granularity": granularity} if granularity else {}
    data = ds.load(dataset, split=split, data_dir=data_dir, **opts)
    return _Subset(data, subset) if subset else data


def permutation(n: int, seed: int = 0) -> np.ndarray:
    """The fixed order in which a split is scored: the first m rows are a seeded uniform sample."""
    return np.random.default_rng(seed).permutation(n)


def cache_dir(cache: Path, model_key: str, dkey: str, variant: str) -> Path:
    return Path(cache) / model_key / dkey / variant


def load_scores(cache, model_key, dkey, variant, split):
    """(scores (m, K) in permutation order and dataset label order, meta) or (None, None).

    ``m`` is the number of leading permutation rows scored (an interrupted run
    leaves the rest unscored); ``meta["seconds"]`` is the time they took.
    """
    from judge.evaluation import read_checkpoint

    d = cache_dir(cache, model_key, dkey, variant)
    f = d / f"{split}.npz"
    if not (f.exists() and (d / f"{split}.json").exists()):
        return None, None
    meta = json.loads((d / f"{split}.json").read_text())
    ck = read_checkpoint(f)
    done = ~np.isnan(ck.scores).any(axis=1)
    m = len(done) if done.all() else int(np.argmin(done))
    meta["seconds"] = float(ck.seconds[:m].sum())
    return ck.scores[:m][:, meta["columns"]], meta


#: Averaged prompts (several passes per text): what they average.
AVERAGES = {"rotavg(chat)": ("lower", "lower+rot"),
            "rotavg(completion)": ("lower+completion", "lower+completion+rot"),
            "ensemble(completion)": ("lower+completion", "lower+completion+intent", "lower+completion+rot")}


def gold(dataset, split, data_dir, m, granularity=None, subset=None):
    """(gold indices, labels, texts) of the first ``m`` rows of a split's seeded permutation."""
    data = load_split(dataset, split, data_dir, granularity, subset)
    labels = list(data.label_names)
    pos = {lab: i for i, lab in enumerate(labels)}
    perm = permutation(len(data))[:m]
    return np.array([pos[data.labels[i]] for i in perm]), labels, [data.texts[i] for i in perm]


def variant_scores(cache, model_key, dkey, variant, split):
    """(scores, content-free scores, meta); ``rotavg`` = mean of ``lower`` and ``lower+rot``;
    ``default`` falls back to ``lower`` where lower-casing changes no name (every dataset but Banking77)."""
    if variant in AVERAGES:  # mean log-probability over prompts: one pass per prompt
        got = [variant_scores(cache, model_key, dkey, v, split) for v in AVERAGES[variant]]
        if any(g[0] is None for g in got):
            return None, None, None
        m = min(len(g[0]) for g in got)
        return (np.mean([g[0][:m] for g in got], axis=0), np.mean([g[1] for g in got], axis=0),
                {"seconds_per_text": sum(g[2]["seconds_per_text"] for g in got)})
    s, meta = load_scores(cache, model_key, dkey, variant, split)
    if s is None and variant == "default" and not dkey.startswith("banking77"):
        return variant_scores(cache, model_key, dkey, "lower", split)
    if s is None:
        return None, None, None
    cf = np.load(cache_dir(cache, model_key, dkey, variant) / "content_free.npy")
    meta = dict(meta, seconds_per_text=meta["seconds"] / max(1, len(s)))
    return s, cf, meta


def letters_scores(cache, model_key, dkey, split, k):
    """Rotation-averaged letter readout: mean over rotations of each rotation's letter distribution, as log."""
    from judge.calibration import softmax

    got = [load_scores(cache, model_key, dkey, f"letters@{r}", split) for r in range(k)]
    if any(g[0] is None for g in got):
        return None, None, None
    m = min(len(g[0]) for g in got)
    avg = np.mean([softmax(g[0][:m]) for g in got], axis=0)
    cfs = [np.load(cache_dir(cache, model_key, dkey, f"letters@{r}") / "content_free.npy") for r in range(k)]
    cf = np.log(np.mean([softmax(c) for c in cfs], axis=0))
    single = got[0][0][:m]
    secs = sum(g[1]["seconds"] for g in got) / m
    return np.log(avg), cf, {"single": single, "seconds_per_text": secs}
