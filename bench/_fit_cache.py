"""The feature cache of bench/learning_curve.py and bench/oos.py: which rows, which features, where kept.

Every figure of those scripts is derived from this cache (``bench/cache/fit/``, git-ignored):

* rows: ``test`` and ``validation`` are the first ``n`` rows of a seeded permutation of the split
  (`bench._accuracy_cache.permutation`, seed 0: the rows bench/accuracy.py scored); ``train``
  is the whole training split, and ``pool{m}`` its first ``m`` rows of every class in a seeded
  per-class order (`per_class`), so the ``n``-per-class draw of seed 0 is a prefix of it;
  CLINC150's out-of-scope rows are ``oos_validation`` (all 100) and ``oos_test`` (a seeded sample).
* features, each a `judge.evaluation.score_with_checkpoint` checkpoint (resumable, keyed by the
  classifier's fingerprint and each text): ``scores`` (exact zero-shot label log-probabilities,
  ``decision_function``), ``states`` (`judge.adaptation.answer_states`), ``embed``
  (`judge.adaptation.text_embeddings`, the baseline's mean-pooled text), ``minilm`` (the packaged
  sentence embedder, `judge.encoders.SentenceEncoder`: no language model involved).

What it deliberately does not do: fit or report anything (the scripts do).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["CACHE", "DKEYS", "classifier", "features", "load_rows", "per_class", "rows"]

CACHE = Path(__file__).resolve().parent / "cache" / "fit"
#: dataset keys: (dataset, granularity)
DKEYS = {"banking77": ("banking77", None), "clinc150": ("clinc150", None), "massive": ("massive", None),
         "trec": ("trec", None), "trec-fine": ("trec", "fine")}


def load_rows(dkey: str, split: str, data_dir, *, n=None, seed: int = 0):
    """(texts, gold indices, labels, row indices) of a selection of a split (see the module docstring)."""
    from bench._accuracy_cache import permutation
    from judge import datasets as ds

    name, gran = DKEYS[dkey]
    opts = {"granularity": gran} if gran else {}
    if split.startswith("oos_"):
        data = ds.load(name, split=split[4:], data_dir=data_dir, include_oos=True)
        labels = [lab for lab in data.label_names if lab != "oos"]
        idx = np.flatnonzero(np.asarray(data.labels, dtype=object) == "oos")
        if n:
            idx = idx[permutation(len(idx), seed)[:n]]
        return [data.texts[i] for i in idx], np.full(len(idx), -1), labels, idx
    data = ds.load(name, split=split, data_dir=data_dir, **opts)
    labels = list(data.label_names)
    pos = {lab: i for i, lab in enumerate(labels)}
    y = np.array([pos[v] for v in data.labels])
    idx = np.arange(len(y)) if n is None else permutation(len(y), seed)[:n]
    return [data.texts[i] for i in idx], y[idx], labels, idx


def per_class(y, n: int, seed: int = 0) -> np.ndarray:
    """Indices of the first ``n`` rows of every class in a seeded per-class order (sorted): the ``n``-shot draw.

    The orders depend on ``y`` and ``seed`` only, so ``per_class(y, 4)`` is a subset of ``per_class(y, 16)``.
    """
    from judge.adaptation import per_class_indices

    return per_class_indices(y, n, seed)


def rows(dkey, sel, data_dir):
    """(texts, y, labels, indices) for a named selection: test{n}, validation{n}, train, pool{m}, oos_*."""
    import re

    m = re.fullmatch(r"(test|validation|oos_test|oos_validation)(\d*)|train|pool(\d+)", sel)
    if not m:
        raise ValueError(f"unknown selection {sel!r}")
    if sel == "train":
        return load_rows(dkey, "train", data_dir)
    if m.group(3):
        texts, y, labels, idx = load_rows(dkey, "train", data_dir)
        keep = per_class(y, int(m.group(3)))
        return [texts[i] for i in keep], y[keep], labels, idx[keep]
    return load_rows(dkey, m.group(1), data_dir, n=int(m.group(2)) if m.group(2) else None)


def classifier(dkey, labels, model=None):
    """The language model alone (``embedder=None``) as ``judge evaluate`` sets it up (dataset label names for TREC).

    The cache's ``scores`` are this LM's; the fusion with the embedder is computed from them and ``minilm``."""
    from judge import Classifier
    from judge import datasets as ds

    names = ds.display_names(DKEYS[dkey][0], labels)
    return Classifier(labels, model, label_names=names or None, progress=False, embedder=None)  # the LM alone


class _Features:
    """``score_with_checkpoint`` adapter: any feature map of a classifier, keyed by its fingerprint."""

    def __init__(self, clf, kind):
        from judge.adaptation import answer_states, text_embeddings

        self.clf, self.kind = clf, kind
        self.fn = {"states": answer_states, "embed": text_embeddings}[kind]
        self.labels = [0] * int(clf.compiled_.engine.model_.config.get_text_config().hidden_size)

    def fingerprint(self):
        return f"{self.kind}:{self.clf.fingerprint()}"

    def decision_function(self, texts):
        return self.fn(self.clf, texts)


class _Sentence:
    """``score_with_checkpoint`` adapter for the packaged sentence embedder (no language model involved)."""

    def __init__(self):
        from judge.encoders import DEFAULT_EMBEDDER, SentenceEncoder

        self.enc = SentenceEncoder(DEFAULT_EMBEDDER)
        self.labels = [0] * 384

    def fingerprint(self):
        return f"minilm:{self.enc.model}"

    def decision_function(self, texts):
        return self.enc(texts).astype(float)


def features(clf, kind, texts, path, *, chunk=64) -> np.ndarray:
    """``scores`` / ``states`` / ``embed`` / ``minilm`` of ``texts`` through the resumable checkpoint at ``path``."""
    from judge.evaluation import score_with_checkpoint

    obj = clf if kind == "scores" else _Sentence() if kind == "minilm" else _Features(clf, kind)
    return score_with_checkpoint(obj, texts, path, chunk=chunk)


def path(model_key, dkey, sel, kind) -> Path:
    d = CACHE / model_key / dkey
    d.mkdir(parents=True, exist_ok=True)
    return d / f"{sel}.{kind}.npz"
