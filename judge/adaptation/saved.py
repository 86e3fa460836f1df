"""Rebuild a fitted adaptation from what ``Classifier.save`` wrote (its ``config()`` and ``arrays()``).

Every field is validated by the state's own constructor (shapes, finite values); an unknown kind
or a missing array is a clear error naming it.

What it deliberately does not do: read files (:mod:`judge.persistence` does).
"""

from __future__ import annotations

import numpy as np

__all__ = ["from_saved"]

_NEED = {"head": ("weights", "bias", "mean", "scale"), "demos": ("y", "states"), "lora": ()}


def from_saved(config: dict, arrays: dict, n_labels: int):
    """The fitted state described by ``config`` (JSON) and ``arrays`` (safetensors), checked against K labels.

    Examples
    --------
    >>> from judge.adaptation.head import LinearHead
    >>> h = LinearHead(np.zeros((2, 3)), np.zeros(2), 1.0, np.zeros(3), np.ones(3), 1.0)
    >>> from_saved(h.config(), h.arrays(), 2).offset_scale
    1.0
    >>> from_saved({"kind": "forest"}, {}, 2)
    Traceback (most recent call last):
    ...
    ValueError: the saved adaptation has kind 'forest'; valid kinds are ['demos', 'head', 'lora'].
    """
    if not isinstance(config, dict) or config.get("kind") not in _NEED:
        got = config.get("kind") if isinstance(config, dict) else type(config).__name__
        raise ValueError(f"the saved adaptation has kind {got!r}; valid kinds are {sorted(_NEED)}.")
    kind = config["kind"]
    missing = [k for k in _NEED[kind] if k not in arrays]
    if missing:
        raise ValueError(f"the saved {kind} lacks the array(s) {missing}; save it again.")
    try:
        if kind == "head":
            from judge.adaptation.head import LinearHead

            a, c = config.get("offset_scale"), config.get("similarity_scale")
            blocks = config.get("blocks")
            tfidf = None
            if config.get("tfidf"):
                from judge.encoders import TfidfEncoder

                t = config["tfidf"]
                tfidf = TfidfEncoder.from_state(t["spec"], {w: i for i, w in enumerate(t["terms"])},
                                                {"idf": arrays.get("tfidf_idf")})
            embedder = config.get("embedder")
            if isinstance(embedder, dict) and embedder.get("kind") == "tuned":  # fit(tune_embedder=...)'s weights
                from judge.adaptation.tuning import TunedEncoder

                embedder = TunedEncoder.from_saved(embedder, {k.removeprefix("tuned."): v for k, v in arrays.items()
                                                              if k.startswith("tuned.")})
            obj = LinearHead(arrays["weights"], arrays["bias"], None if a is None else float(a), arrays["mean"],
                             arrays["scale"], float(config["l2"]), config.get("report") or {},
                             None if blocks is None else tuple(tuple(b) for b in blocks),
                             None if c is None else float(c), embedder, arrays.get("label_vectors"), tfidf)
            rows = obj.weights.shape[0]
        elif kind == "demos":
            from judge.adaptation.demos import Demonstrations

            y = np.asarray(arrays["y"], np.int64)
            obj = Demonstrations(tuple(config["texts"]), y, arrays["states"], int(config["k"]),
                                 config.get("report") or {})
            rows = int(y.max()) + 1 if len(y) else 0
            if len(y) and y.min() < 0:
                rows = n_labels + 1
        else:
            from judge.adaptation.lora import LoraAdapter

            obj = LoraAdapter(int(config["rank"]), float(config["alpha"]), tuple(config["target_modules"]),
                              {k: np.asarray(v) for k, v in arrays.items()}, config.get("report") or {})
            rows = n_labels
    except KeyError as err:
        raise ValueError(f"the saved {kind} lacks the field {err}; save it again.") from None
    if (kind == "head" and rows != n_labels) or (kind == "demos" and rows > n_labels):
        raise ValueError(f"the saved {kind} was fitted for another label set (it has {rows} classes, the "
                         f"classifier {n_labels}); fit again.")
    return obj
