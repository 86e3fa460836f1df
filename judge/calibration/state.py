"""The fitted calibration of a classifier, as one frozen object.

:class:`Calibration` holds everything ``Classifier.calibrate`` fits (label
bias, temperature, abstention threshold, the calibration set's probabilities
for conformal sets, a report) for one label list. A classifier swaps its
``calibration_`` in one assignment, so a thread that predicts while another
calibrates sees the old state or the new one, never a mix.

What it deliberately does not do: score texts (it maps scores to
probabilities) or read files (``judge.persistence`` does, and validates them
through :meth:`Calibration.validate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from judge._math import softmax

__all__ = ["Calibration", "BIASES", "AUTO_BIAS", "AUTO_BIAS_AFTER_FIT", "BIAS_L2_GRID", "check_calibrate_args",
           "resolve_bias", "prior_bias", "choose_bias_l2", "fit_resolved"]

#: The ``bias`` values ``Classifier.calibrate`` accepts.
BIASES = ("auto", "contextual", "batch", "contextual+fit", "batch+fit", "fit", "cv", None, "none")
#: What ``calibrate(bias="auto")`` fits, chosen on the four validation splits (bench/accuracy.py
#: select): the batch prior, then a residual bias fitted jointly with the temperature (L2 1.0).
AUTO_BIAS = "batch+fit"
#: What ``calibrate(bias="auto")`` fits after ``fit``, by the fitted kind where it differs from
#: :data:`AUTO_BIAS`; chosen on validation by bench/learning_curve.py select (:doc:`/baselines`, "fit").
#: After a head: ``cv`` (batch+fit or no bias, by out-of-fold NLL on the calibration texts), which had the
#: highest mean cross-fitted validation accuracy (60.5% against 60.0% for batch+fit and 54.1% for the
#: temperature alone, 33 points of five datasets): batch+fit cost the head 4.7-7.5 points at 64 per class on
#: Banking77 and CLINC150, the temperature alone lost 24-44 points to it at 1 per class with the offset.
AUTO_BIAS_AFTER_FIT: dict = {"head": "cv"}


def check_calibrate_args(n, y, k, *, bias, bias_l2, temperature, target_accuracy, coverage, confidence, scores):
    """Validate ``Classifier.calibrate``'s arguments before anything is scored; ``scores`` as float64 (or None).

    ``n`` texts, ``y`` their label indices, ``k`` labels. Raises ValueError naming the argument.

    Examples
    --------
    >>> check_calibrate_args(2, np.array([0, 1]), 2, bias="auto", bias_l2=1.0, temperature=True,
    ...                      target_accuracy=None, coverage=None, confidence=0.95, scores=None) is None
    True
    """
    if len(y) != n:
        raise ValueError(f"texts and y differ in length ({n} vs {len(y)}); pass one label per text.")
    if n < 2:
        raise ValueError(f"calibrate needs at least 2 labelled texts, got {n}.")
    if bias not in BIASES:
        raise ValueError(f"Unknown bias {bias!r}; valid values are {BIASES}.")
    if bias_l2 != "cv" and not (isinstance(bias_l2, (int, float)) and not isinstance(bias_l2, bool) and bias_l2 >= 0):
        raise ValueError(f"bias_l2 must be a number >= 0 or 'cv' (chosen by out-of-fold NLL), got {bias_l2!r}; "
                         f"use e.g. 1.0.")
    if isinstance(bias, str) and (bias.endswith("fit") or bias == "cv") and not temperature:
        raise ValueError(f"bias={bias!r} is fitted jointly with the temperature; pass temperature=True.")
    if target_accuracy is not None and coverage is not None:
        raise ValueError("Pass at most one of target_accuracy and coverage.")
    for name, v in (("target_accuracy", target_accuracy), ("coverage", coverage), ("confidence", confidence)):
        top = 1.0 if name == "coverage" else 1.0 - 1e-12  # coverage may be 1 (keep every row)
        if v is not None and not (isinstance(v, (int, float)) and 0.0 < float(v) <= top):
            span = "(0, 1]" if name == "coverage" else "(0, 1)"
            raise ValueError(f"{name} must be a number in {span}, got {v!r}.")
    from judge.calibration.review import check_target_size

    check_target_size(n, k, target_accuracy, confidence)  # too few texts to certify it at all: refuse now
    if scores is None:
        return None
    scores = np.asarray(scores, np.float64)
    if scores.shape != (n, k):
        raise ValueError(f"scores has shape {scores.shape}, expected ({n}, {k}).")
    return scores


def resolve_bias(bias, method, bias_l2, adaptation=None):
    """(prior, residual L2 or None, name) for a ``bias`` value on a scoring ``method``.

    ``adaptation``: the ``kind`` of what ``fit`` fitted ("head", "lora", "demos") or None;
    ``auto`` is then :data:`AUTO_BIAS_AFTER_FIT` for that kind where it names one. ``cv`` gives
    ``("batch", "cv", "cv")``: the caller chooses the L2, or no bias, by out-of-fold NLL
    (:func:`choose_bias_l2` with ``with_none=True``).

    Examples
    --------
    >>> resolve_bias("auto", "exact", 1.0), resolve_bias("auto", "decode", 1.0), resolve_bias("fit", "exact", 2.0)
    (('batch', 1.0, 'batch+fit'), (None, None, None), (None, 2.0, 'fit'))
    >>> resolve_bias("cv", "exact", 1.0)
    ('batch', 'cv', 'cv')
    """
    if bias == "auto":
        bias = None if method == "decode" else AUTO_BIAS_AFTER_FIT.get(adaptation, AUTO_BIAS)
    bias = None if bias == "none" else bias
    if bias == "cv":
        return "batch", "cv", "cv"
    if bias is not None and bias.endswith("fit"):
        return bias[:-4] or None, (bias_l2 if bias_l2 == "cv" else float(bias_l2)), bias
    return bias, None, bias


def prior_bias(prior, scores, content_free_scores=None):
    """The unsupervised label prior: ``contextual`` (from content-free scores), ``batch`` (from ``scores``) or None.

    Returns ndarray of shape (K,) (a log-distribution) or None.

    Examples
    --------
    >>> np.exp(prior_bias("batch", np.log([[0.9, 0.1], [0.5, 0.5]]))).round(2).tolist()
    [0.7, 0.3]
    """
    from judge.calibration.bias import batch_bias, contextual_bias

    if prior == "contextual":
        return contextual_bias(content_free_scores)
    return batch_bias(scores) if prior == "batch" else None


#: The L2 strengths ``calibrate(bias_l2="cv")`` chooses from.
BIAS_L2_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)


def choose_bias_l2(scores, y, prior, *, content_free_scores=None, grid=BIAS_L2_GRID, folds=5, seed=0,
                   with_none=False) -> dict:
    """Out-of-fold NLL of a ``prior+fit`` calibration for each L2 strength of the fitted bias.

    Each fold fits the prior (``batch``: on the fold's own training rows; ``contextual``: from
    ``content_free_scores``) and the residual bias with the temperature on the other folds, and
    scores the negative log-likelihood of its held-out rows; folds are stratified when every
    class has ``folds`` rows, shuffled otherwise.

    Parameters
    ----------
    scores : ndarray of shape (n, K)
        Raw log-scores of the calibration texts.
    y : ndarray of int, shape (n,)
    prior : {None, "batch", "contextual"}
    content_free_scores : ndarray of shape (m, K), optional
    grid : sequence of float
    folds : int
    seed : int
    with_none : bool
        Also score no bias at all (temperature alone, the argmax kept): ``l2`` is None when it has
        the lowest out-of-fold NLL (it wins a tie). ``calibrate(bias="cv")``.

    Returns
    -------
    dict
        ``l2`` (lowest out-of-fold NLL; the stronger on a tie; None: no bias), ``grid``, ``nll`` (mean
        per strength), ``nll_none`` (temperature alone; None unless ``with_none``).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 120)
    >>> s = np.log(np.full((120, 3), 0.2)) + 2.0 * np.eye(3)[y] + [1.0, 0.0, 0.0]
    >>> r = choose_bias_l2(s, y, "batch")
    >>> r["l2"] in BIAS_L2_GRID, len(r["nll"])
    (True, 7)
    >>> choose_bias_l2(s - [1.0, 0.0, 0.0], y, "batch", with_none=True)["l2"] is None  # no bias to remove
    True
    """
    from sklearn.model_selection import KFold, StratifiedKFold

    from judge.calibration.metrics import negative_log_likelihood

    scores = np.asarray(scores, np.float64)
    y = np.asarray(y, np.int64)
    counts = np.bincount(y)
    k = min(folds, len(y))
    split = (StratifiedKFold(k, shuffle=True, random_state=seed) if counts[counts > 0].min() >= k
             else KFold(k, shuffle=True, random_state=seed))
    grid = sorted(float(g) for g in grid)[::-1]
    nll, nll_none = np.zeros(len(grid)), 0.0
    labels = tuple(range(scores.shape[1]))
    for tr, te in split.split(scores, y if isinstance(split, StratifiedKFold) else None):
        b = prior_bias(prior, scores[tr], content_free_scores)
        for j, l2 in enumerate(grid):
            cal = Calibration.fit(labels, scores[tr], y[tr], bias=b, fit_bias=l2)
            nll[j] += negative_log_likelihood(y[te], cal.transform(scores[te])) * len(te)
        if with_none:
            cal = Calibration.fit(labels, scores[tr], y[tr])
            nll_none += negative_log_likelihood(y[te], cal.transform(scores[te])) * len(te)
    nll, nll_none = nll / len(y), nll_none / len(y)
    best = int(np.argmin(np.round(nll, 10)))
    l2 = None if with_none and round(nll_none, 10) <= round(nll[best], 10) else grid[best]
    return {"l2": l2, "grid": grid, "nll": nll.tolist(), "nll_none": float(nll_none) if with_none else None}


def fit_resolved(labels, scores, y, resolved, *, content_free_scores=None, **fit_kwargs):
    """The :class:`Calibration` a :func:`resolve_bias` triple names, its ``"cv"`` choices made first.

    ``resolved``: ``(prior, residual L2 or "cv" or None, name)``; an L2 of ``"cv"`` is chosen by
    :func:`choose_bias_l2` on these scores (for ``bias="cv"`` with no bias as a candidate: the
    name becomes ``"cv: none"`` or ``"cv: batch+fit"``). ``fit_kwargs`` go to :meth:`Calibration.fit`.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 90)
    >>> s = np.log(np.full((90, 3), 0.2)) + 2.0 * np.eye(3)[y]
    >>> fit_resolved(tuple("abc"), s, y, resolve_bias("cv", "exact", 1.0)).bias_method
    'cv: none'
    """
    prior, fit_l2, name = resolved
    if fit_l2 == "cv":
        fit_l2 = choose_bias_l2(scores, y, prior, content_free_scores=content_free_scores, with_none=name == "cv")["l2"]
        if name == "cv":
            prior, name = (None, "cv: none") if fit_l2 is None else (prior, f"cv: {prior}+fit")
    return Calibration.fit(labels, scores, y, bias=prior_bias(prior, scores, content_free_scores), bias_method=name,
                           fit_bias=fit_l2, **fit_kwargs)


@dataclass(frozen=True, eq=False)
class Calibration:
    """Label bias, temperature and abstention threshold fitted for one label list.

    Parameters
    ----------
    labels : tuple of str, length K
        The label order the arrays refer to.
    bias : ndarray of float64, shape (K,), or None
        Subtracted from the log-scores.
    temperature : float or None
        Divides the bias-corrected scores (> 0).
    threshold : float or None
        Abstain where the top probability is below it (in [0, 1]).
    proba : ndarray of float64, shape (n, K)
        Calibrated probabilities of the calibration texts (conformal sets).
    y : ndarray of int64, shape (n,)
    report : dict
    bias_method : str or None

    Examples
    --------
    >>> cal = Calibration(("a", "b"), np.zeros(2), 2.0, None, np.full((2, 2), 0.5), np.array([0, 1]))
    >>> cal.transform(np.array([[0.0, -2.0]])).round(3).tolist()
    [[0.731, 0.269]]
    """

    labels: tuple
    bias: np.ndarray | None
    temperature: float | None
    threshold: float | None
    proba: np.ndarray
    y: np.ndarray
    report: dict = field(default_factory=dict)
    bias_method: str | None = None

    def __post_init__(self):
        self.validate()

    def __repr__(self):
        from judge.calibration.review import describe_calibration

        return describe_calibration(self)

    def validate(self) -> None:
        """Raise ValueError naming the field when any part is inconsistent or out of range."""
        K = len(self.labels)
        if K < 1:
            raise ValueError("calibration.labels is empty; a calibration needs the label list it was fitted on.")
        if self.bias is not None:
            b = np.asarray(self.bias)
            if b.shape != (K,):
                raise ValueError(f"calibration bias has shape {b.shape}, expected ({K},) for {K} labels.")
            if not np.all(np.isfinite(b)):
                raise ValueError("calibration bias holds NaN or infinite values; refit with calibrate().")
        T = self.temperature
        if T is not None and not (isinstance(T, (int, float)) and math.isfinite(T) and T > 0):
            raise ValueError(f"calibration temperature must be a finite number > 0, got {T!r}.")
        th = self.threshold
        if th is not None and not (isinstance(th, (int, float)) and 0.0 <= th <= 1.0 + 1e-9):
            # (just above 1: abstain on every row, what select_threshold returns when no threshold passes)
            raise ValueError(f"calibration threshold must be a probability in [0, 1], got {th!r}.")
        p, y = np.asarray(self.proba), np.asarray(self.y)
        if p.ndim != 2 or p.shape[1] != K or y.shape != (p.shape[0],):
            raise ValueError(
                f"calibration arrays do not fit {K} labels: proba has shape {p.shape}, y has shape {y.shape}.")
        if len(y) and (y.min() < 0 or y.max() >= K):
            raise ValueError(f"calibration y holds label indices outside [0, {K}).")
        if not np.all(np.isfinite(p)):
            raise ValueError("calibration proba holds NaN or infinite values; refit with calibrate().")

    def transform_log(self, scores) -> np.ndarray:
        """Calibrated log-probabilities from raw log-scores: (n, K) -> (n, K), rows log-normalised.

        Examples
        --------
        >>> cal = Calibration.prior_only(("a", "b"), np.log([0.8, 0.2]))
        >>> np.exp(cal.transform_log(np.log([[0.8, 0.2]]))).round(3).tolist()
        [[0.5, 0.5]]
        """
        from scipy.special import logsumexp

        s = np.asarray(scores, np.float64)
        if self.bias is not None:
            s = s - self.bias[None, :]
        if self.temperature is not None:
            s = s / self.temperature
        m = np.where(np.isfinite(s).any(axis=1, keepdims=True), logsumexp(s, axis=1, keepdims=True), 0.0)
        return s - m

    def transform(self, scores) -> np.ndarray:
        """Calibrated probabilities from raw log-scores: (n, K) -> (n, K), rows sum to 1."""
        s = np.asarray(scores, np.float64)
        if self.bias is not None:
            s = s - self.bias[None, :]
        if self.temperature is not None:
            s = s / self.temperature
        return softmax(s)

    @classmethod
    def prior_only(cls, labels, bias, bias_method=None) -> Calibration:
        """A label-free correction as a Calibration: ``bias`` (K,) divided out, no temperature, nothing fitted.

        Non-finite entries of ``bias`` (labels the prior's inputs never reached) are replaced by the
        mean of the finite ones, as in :meth:`fit`.

        Examples
        --------
        >>> cal = Calibration.prior_only(("a", "b"), np.log([0.8, 0.2]), "prior: contextual")
        >>> cal.transform(np.log([[0.8, 0.2]])).round(3).tolist()
        [[0.5, 0.5]]
        """
        b = np.asarray(bias, np.float64)
        finite = np.isfinite(b)
        b = np.where(finite, b, b[finite].mean() if finite.any() else 0.0)
        K = len(labels)
        return cls(tuple(labels), b, None, None, np.zeros((0, K)), np.zeros(0, np.int64), {"bias": bias_method},
                   bias_method)

    @classmethod
    def fit(cls, labels, scores, y, *, bias=None, bias_method=None, temperature=True, target_accuracy=None,
            coverage=None, confidence=0.95, fit_bias=None) -> Calibration:
        """Fit temperature (and threshold) on log-scores ``(n, K)`` with true indices ``(n,)``.

        ``bias`` (K,) is a precomputed label bias (contextual or batch);
        non-finite entries are replaced by the mean of the finite ones.
        ``fit_bias`` (an L2 strength): also fit a residual bias on top of it,
        jointly with the temperature (:func:`judge.calibration.fit_bias_temperature`).
        """
        from judge.calibration.abstention import select_threshold
        from judge.calibration.metrics import expected_calibration_error, negative_log_likelihood
        from judge.calibration.temperature import TemperatureScaler

        if fit_bias is not None and not temperature:
            raise ValueError("A fitted bias ('+fit') is fitted jointly with the temperature; pass temperature=True.")
        scores = np.asarray(scores, np.float64)
        y = np.asarray(y, np.int64)
        if bias is not None:
            b = np.asarray(bias, np.float64)
            finite = np.isfinite(b)
            bias = np.where(finite, b, b[finite].mean() if finite.any() else 0.0)
        shifted = scores - (bias[None, :] if bias is not None else 0.0)
        if fit_bias is not None:
            from judge.calibration.bias import fit_bias_temperature

            residual, T = fit_bias_temperature(shifted, y, l2=float(fit_bias))
            bias = residual if bias is None else bias + residual
            T = float(T)
        else:
            T = float(TemperatureScaler().fit(shifted, y).temperature_) if temperature else None
        draft = cls(tuple(labels), bias, T, None, np.full((len(y), scores.shape[1]), 1.0 / scores.shape[1]), y)
        proba = draft.transform(scores)
        th = None
        if target_accuracy is not None or coverage is not None:
            import warnings

            with warnings.catch_warnings():  # an abstain-on-all threshold is reported by review_calibration
                warnings.simplefilter("ignore", UserWarning)
                th = float(select_threshold(y, proba, target_accuracy=target_accuracy, coverage=coverage,
                                            confidence=confidence))
        raw = softmax(scores)
        kept = proba.max(1) >= th if th is not None else np.ones(len(y), bool)
        report = {
            "n": int(len(y)), "measured_on": f"the {len(y)} calibration texts, in-sample: the bias, temperature "
                                             f"and threshold were fitted on these same texts",
            "bias": bias_method, "bias_l2": fit_bias, "temperature": T, "threshold": th,
            "target_accuracy": target_accuracy, "coverage_target": coverage,
            "confidence": confidence if target_accuracy is not None else None,
            "coverage": float(kept.mean()) if len(y) else 0.0,
            "selective_accuracy": float((proba.argmax(1) == y)[kept].mean()) if kept.any() else None,
            "accuracy_raw": float((raw.argmax(1) == y).mean()),
            "accuracy": float((proba.argmax(1) == y).mean()),
            "ece_raw": float(expected_calibration_error(y, raw)),
            "ece": float(expected_calibration_error(y, proba)),
            "nll_raw": float(negative_log_likelihood(y, raw)),
            "nll": float(negative_log_likelihood(y, proba)),
        }
        return cls(tuple(labels), bias, T, th, proba, y, report, bias_method)
