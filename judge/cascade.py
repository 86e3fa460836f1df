"""Cascade: confident rows stay with a small model, the rest go to a larger one.

The first classifier answers every text; rows whose top probability is below
the threshold (by default the first classifier's calibrated ``threshold_``)
are sent to the fallback, another :class:`~judge.Classifier` over the same
labels or any callable mapping a list of texts to labels. Input order is kept.

What it deliberately does not do: run the fallback on rows the first model is
confident about, or accept fallback answers that are not labels.
"""

from __future__ import annotations

import time

import numpy as np

from judge._errors import NotCalibratedError

__all__ = ["Cascade"]


class Cascade:
    """Route low-confidence rows of ``first`` to ``fallback``.

    Parameters
    ----------
    first : Classifier
    fallback : Classifier or callable
        A classifier with the same labels, or ``f(list_of_texts) -> labels``.
    threshold : float, optional
        Confidence below which a row is routed; default ``first.threshold_``
        (set by ``first.calibrate(..., target_accuracy=...)``).

    Attributes
    ----------
    route_stats_ : dict
        After :meth:`predict`: ``n``, ``first`` (rows kept), ``fallback``
        (rows routed), ``fallback_fraction``, ``seconds_first``,
        ``seconds_fallback``.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair, tiny_model
    >>> model, tok = tiny_pair()
    >>> small = Classifier(["yes", "no"], model, tokenizer=tok)
    >>> big = Classifier(["yes", "no"], tiny_model("qwen2", tok, seed=1), tokenizer=tok)
    >>> _ = small.calibrate(["sure", "nope", "yes!", "no way"], ["yes", "no", "yes", "no"], coverage=0.5)
    >>> cascade = Cascade(small, big)
    >>> cascade.predict(["ok", "never", "fine"]).shape
    (3,)
    >>> sorted(cascade.route_stats_)[:3]
    ['fallback', 'fallback_fraction', 'first']
    """

    def __init__(self, first, fallback, *, threshold=None):
        if not hasattr(first, "predict_proba"):
            raise TypeError(f"first must be a Classifier (with predict_proba), got {type(first).__name__}.")
        if not (callable(fallback) or hasattr(fallback, "predict")):
            raise TypeError(
                f"fallback must be a Classifier or a callable mapping texts to labels, got {type(fallback).__name__}.")
        if hasattr(fallback, "classes_") and set(fallback.classes_) != set(first.classes_):
            raise ValueError(
                "first and fallback classify into different label sets; give the fallback the same labels "
                f"(first has {len(first.classes_)}, fallback {len(fallback.classes_)}).")
        if threshold is not None and not 0.0 <= float(threshold) <= 1.0 + 1e-9:
            raise ValueError(f"threshold must be a probability in [0, 1], got {threshold}.")
        self.first = first
        self.fallback = fallback
        self.threshold = threshold

    def _threshold(self) -> float:
        if self.threshold is not None:
            return float(self.threshold)
        t = getattr(self.first, "threshold_", None)
        if t is None:
            raise NotCalibratedError(
                "The cascade has no threshold: call first.calibrate(texts, y, target_accuracy=...) "
                "before Cascade.predict(), or pass Cascade(..., threshold=0.7).")
        return float(t)

    def _run_fallback(self, texts) -> np.ndarray:
        if not texts:
            return np.empty(0, dtype=object)
        f = self.fallback
        out = f.predict(texts) if hasattr(f, "predict") else f(texts)
        out = np.asarray(list(out), dtype=object)
        if out.shape != (len(texts),):
            raise ValueError(f"The fallback returned {out.shape[0] if out.ndim else 'a scalar'} answers for "
                             f"{len(texts)} texts; it must return one label per text.")
        valid = set(self.first.classes_)
        bad = [v for v in out if v not in valid]
        if bad:
            raise ValueError(
                f"The fallback returned {len(bad)} answer(s) that are not labels, e.g. {bad[:3]!r}; "
                f"it must return values from first.classes_.")
        return out

    def predict(self, texts) -> np.ndarray:
        """Labels for ``texts``: the first model's where confident, the fallback's elsewhere.

        Returns
        -------
        ndarray of object, shape (n,)
        """
        return self._predict(texts)[0]

    def _predict(self, texts):
        threshold = self._threshold()
        texts = list(texts)
        t0 = time.perf_counter()
        proba = self.first.predict_proba(texts)
        t1 = time.perf_counter()
        first_pred = self.first.classes_[proba.argmax(axis=1)] if texts else np.empty(0, dtype=object)
        routed = np.flatnonzero(proba.max(axis=1) < threshold) if texts else np.empty(0, int)
        out = first_pred.astype(object).copy()
        out[routed] = self._run_fallback([texts[i] for i in routed])
        t2 = time.perf_counter()
        self.route_stats_ = {
            "n": len(texts), "first": len(texts) - len(routed), "fallback": int(len(routed)),
            "fallback_fraction": float(len(routed) / len(texts)) if texts else 0.0,
            "threshold": threshold, "seconds_first": t1 - t0, "seconds_fallback": t2 - t1,
        }
        return out, first_pred

    def curve(self, texts, y, *, fractions=None) -> list[dict]:
        """Accuracy and cost as a function of the routed fraction, least confident rows routed first.

        Both models are run once on every text (each timed); for each
        fraction f the ``round(f * n)`` rows with the lowest top probability
        of ``first`` take the fallback's answer. ``seconds`` is the first
        model's measured time plus the fallback's measured time per text
        times the rows routed. Use it to pick a threshold (the
        ``threshold`` column: route rows below it), on held-out data.

        Parameters
        ----------
        texts : sequence of str, length n
        y : sequence of labels, length n
        fractions : sequence of float in [0, 1], optional
            Default 0, 0.1, ..., 1.

        Returns
        -------
        list of dict
            One per fraction: ``routed`` (fraction), ``accuracy``,
            ``seconds``, ``threshold``.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair, tiny_model
        >>> model, tok = tiny_pair()
        >>> small = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> big = Classifier(["yes", "no"], tiny_model("qwen2", tok, seed=1), tokenizer=tok)
        >>> points = Cascade(small, big, threshold=0.5).curve(["ok", "never"], ["yes", "no"], fractions=[0, 1])
        >>> [p["routed"] for p in points]
        [0.0, 1.0]
        """
        texts, y = list(texts), np.asarray(list(y), dtype=object)
        if len(texts) != len(y):
            raise ValueError(f"texts and y differ in length ({len(texts)} vs {len(y)}).")
        if not texts:
            raise ValueError("curve needs at least one text.")
        fractions = np.linspace(0.0, 1.0, 11) if fractions is None else np.asarray(fractions, float)
        if fractions.ndim != 1 or np.any((fractions < 0) | (fractions > 1)) or not np.all(np.isfinite(fractions)):
            raise ValueError(f"fractions must be numbers in [0, 1], got {fractions!r}.")
        t0 = time.perf_counter()
        proba = self.first.predict_proba(texts)
        t1 = time.perf_counter()
        second = self._run_fallback(texts)
        t2 = time.perf_counter()
        conf = proba.max(axis=1)
        first_pred = self.first.classes_[proba.argmax(axis=1)]
        order = np.argsort(conf, kind="stable")
        per_text = (t2 - t1) / len(texts)
        out = []
        for f in fractions:
            k = int(round(f * len(texts)))
            pred = first_pred.astype(object).copy()
            pred[order[:k]] = second[order[:k]]
            thr = float(conf[order[k]]) if k < len(texts) else float(conf.max()) + 1e-12
            out.append({"routed": k / len(texts), "accuracy": float(np.mean(pred == y)),
                        "seconds": (t1 - t0) + per_text * k, "threshold": thr})
        return out

    def evaluate(self, texts, y) -> dict:
        """Accuracy and measured cost of the first model alone, the fallback alone and the cascade.

        The fallback is also run on every text, to report it alone; the
        cascade's time is the first model on all rows plus the fallback on
        the routed rows only, both measured.

        Parameters
        ----------
        texts : sequence of str, length n
        y : sequence of labels, length n

        Returns
        -------
        dict
            ``first``, ``fallback``, ``cascade``: each ``{"accuracy", "seconds"}``;
            plus ``n`` and ``fallback_fraction``.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair, tiny_model
        >>> model, tok = tiny_pair()
        >>> small = Classifier(["yes", "no"], model, tokenizer=tok)
        >>> big = Classifier(["yes", "no"], tiny_model("qwen2", tok, seed=1), tokenizer=tok)
        >>> report = Cascade(small, big, threshold=0.5).evaluate(["ok", "never"], ["yes", "no"])
        >>> sorted(report["cascade"])
        ['accuracy', 'seconds']
        """
        texts, y = list(texts), np.asarray(list(y), dtype=object)
        if len(texts) != len(y):
            raise ValueError(f"texts and y differ in length ({len(texts)} vs {len(y)}).")
        pred, first_pred = self._predict(texts)
        stats = dict(self.route_stats_)
        t0 = time.perf_counter()
        fb_all = self._run_fallback(texts)
        t_fb_all = time.perf_counter() - t0
        self.route_stats_ = stats
        return {
            "n": len(texts),
            "first": {"accuracy": float((first_pred == y).mean()), "seconds": stats["seconds_first"]},
            "fallback": {"accuracy": float((fb_all == y).mean()), "seconds": t_fb_all},
            "cascade": {"accuracy": float((pred == y).mean()),
                        "seconds": stats["seconds_first"] + stats["seconds_fallback"]},
            "fallback_fraction": stats["fallback_fraction"],
        }
