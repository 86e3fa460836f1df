"""Calibration and selective-prediction metrics as plain functions on arrays.

Every function takes ``(y_true, proba, ...)``: ``y_true`` holds integer class
indices of shape (n_samples,), ``proba`` row-normalized probabilities of shape
(n_samples, n_classes). Binary problems use two columns. Scalar metrics return a
Python ``float``; :func:`risk_coverage_curve` always returns a tuple of three
arrays.

Calibration error is measured on the *top label*: the confidence of a row is its
largest probability and it is correct when its argmax equals ``y_true``.

What this module deliberately does not do: draw anything (see
:mod:`judge.calibration.plots`) or choose thresholds (see
:mod:`judge.calibration.abstention`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._validation import _check_labels, _check_proba, _check_unit_interval, _top_label

__all__ = [
    "expected_calibration_error",
    "maximum_calibration_error",
    "brier_score",
    "negative_log_likelihood",
    "risk_coverage_curve",
    "aurc",
    "selective_accuracy",
]

_STRATEGIES = ("uniform", "quantile")


def _check_inputs(y_true: ArrayLike, proba: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p = _check_proba(proba)
    y = _check_labels(y_true, p.shape[0], p.shape[1])
    return y, p


class _Bins(NamedTuple):
    """Per-bin top-label statistics; empty bins hold NaN accuracy/confidence."""

    edges: np.ndarray  # (n_bins + 1,)
    count: np.ndarray  # (n_bins,)
    accuracy: np.ndarray  # (n_bins,)
    confidence: np.ndarray  # (n_bins,)


def _top_label_bins(y_true: ArrayLike, proba: ArrayLike, n_bins: int, strategy: str) -> _Bins:
    """Bin rows by top-label confidence.

    Bins are right-closed, ``(lo, hi]``, with the first one also holding its
    lower edge (the convention of ``sklearn.calibration.calibration_curve``).
    ``"uniform"`` uses equal-width edges on [0, 1]; ``"quantile"`` uses
    quantiles of the confidences (equal-mass bins; ties can leave some empty).
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got n_bins={n_bins!r}; use e.g. 15.")
    if strategy not in _STRATEGIES:
        raise ValueError(
            f"strategy must be one of {_STRATEGIES}, got strategy={strategy!r}; 'uniform' gives equal-width bins, 'quantile' equal-mass bins."
        )
    y, p = _check_inputs(y_true, proba)
    conf, correct = _top_label(y, p)
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    else:
        edges = np.quantile(conf, np.linspace(0.0, 1.0, n_bins + 1))
    ids = np.searchsorted(edges[1:-1], conf, side="left")
    count = np.bincount(ids, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(ids, weights=correct, minlength=n_bins) / count
        confidence = np.bincount(ids, weights=conf, minlength=n_bins) / count
    return _Bins(edges, count, accuracy, confidence)


def _ece(bins: _Bins) -> float:
    """``sum_b (n_b / n) |accuracy_b - confidence_b|`` over non-empty bins."""
    full = bins.count > 0
    gaps = np.abs(bins.accuracy[full] - bins.confidence[full])
    return float(np.sum(bins.count[full] * gaps) / bins.count.sum())


def _area(coverage: np.ndarray, risk: np.ndarray) -> float:
    """Right-endpoint step integral of risk over coverage, from coverage 0."""
    return float(np.sum(risk * np.diff(coverage, prepend=0.0)))


def expected_calibration_error(
    y_true: ArrayLike, proba: ArrayLike, n_bins: int = 15, strategy: str = "uniform"
) -> float:
    """Expected calibration error of the top label.

    ``ECE = sum_b (n_b / n) * |accuracy_b - confidence_b|`` over non-empty
    bins ``b`` of top-label confidence.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.
    n_bins : int, default=15
        Number of bins, >= 1.
    strategy : {"uniform", "quantile"}, default="uniform"
        ``"uniform"``: equal-width bins on [0, 1], right-closed ``(lo, hi]``.
        ``"quantile"``: equal-mass bins at quantiles of the confidences.

    Returns
    -------
    ece : float
        In [0, 1]; 0 for a perfectly calibrated top label.

    Examples
    --------
    Two rows at confidence 0.9, one right and one wrong, share a bin with
    accuracy 0.5: ``|0.5 - 0.9| = 0.4``.

    >>> from judge.calibration import expected_calibration_error
    >>> expected_calibration_error([0, 1], [[0.9, 0.1], [0.9, 0.1]], n_bins=10)
    0.4
    """
    return _ece(_top_label_bins(y_true, proba, n_bins, strategy))


def maximum_calibration_error(
    y_true: ArrayLike, proba: ArrayLike, n_bins: int = 15, strategy: str = "uniform"
) -> float:
    """Largest top-label calibration gap over the non-empty bins.

    ``MCE = max_b |accuracy_b - confidence_b|``; bins as in
    :func:`expected_calibration_error`.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.
    n_bins : int, default=15
        Number of bins, >= 1.
    strategy : {"uniform", "quantile"}, default="uniform"
        Equal-width or equal-mass bins.

    Returns
    -------
    mce : float
        In [0, 1].

    Examples
    --------
    >>> from judge.calibration import maximum_calibration_error
    >>> y, p = [0, 1, 0], [[0.9, 0.1], [0.9, 0.1], [0.6, 0.4]]
    >>> round(maximum_calibration_error(y, p, n_bins=10), 6)
    0.4
    """
    bins = _top_label_bins(y_true, proba, n_bins, strategy)
    full = bins.count > 0
    return float(np.max(np.abs(bins.accuracy[full] - bins.confidence[full])))


def brier_score(y_true: ArrayLike, proba: ArrayLike) -> float:
    """Multiclass Brier score.

    ``mean_i sum_k (proba[i, k] - onehot(y_true[i])_k) ** 2``, in [0, 2].
    For two classes this is twice scikit-learn's binary ``brier_score_loss``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.

    Returns
    -------
    brier : float
        Lower is better; 0 for confident, correct predictions.

    Examples
    --------
    ``(0.8 - 1)^2 + 0.2^2 = 0.08`` and ``0.5^2 + (0.5 - 1)^2 = 0.5``.

    >>> from judge.calibration import brier_score
    >>> round(brier_score([0, 1], [[0.8, 0.2], [0.5, 0.5]]), 6)
    0.29
    """
    y, p = _check_inputs(y_true, proba)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(y)), y] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def negative_log_likelihood(y_true: ArrayLike, proba: ArrayLike, *, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood (log loss) of the true classes.

    ``-mean_i log(clip(proba[i, y_true[i]], eps, 1))``; the clip keeps a zero
    probability on the true class from giving ``inf``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.
    eps : float, default=1e-12
        Smallest probability used; must be in (0, 1).

    Returns
    -------
    nll : float
        In nats; at most ``-log(eps)``.

    Examples
    --------
    >>> import math
    >>> from judge.calibration import negative_log_likelihood
    >>> nll = negative_log_likelihood([0, 1], [[0.8, 0.2], [0.5, 0.5]])
    >>> math.isclose(nll, -(math.log(0.8) + math.log(0.5)) / 2)
    True
    """
    eps = _check_unit_interval(eps, "eps", example=1e-12)
    y, p = _check_inputs(y_true, proba)
    p_true = np.clip(p[np.arange(len(y)), y], eps, 1.0)
    return float(-np.mean(np.log(p_true)))


def risk_coverage_curve(
    y_true: ArrayLike, proba: ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Selective risk against coverage when abstaining below a confidence threshold.

    For each distinct top-label confidence ``t`` (highest first), keep the rows
    with confidence ``>= t``; coverage is the kept fraction and risk the error
    rate among them. Tied confidences enter together, so each point is one
    achievable threshold.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.

    Returns
    -------
    coverage : ndarray of shape (n_thresholds,)
        Fraction of rows kept, increasing, ending at 1.
    risk : ndarray of shape (n_thresholds,)
        Error rate of the argmax on the kept rows.
    thresholds : ndarray of shape (n_thresholds,)
        The confidence thresholds, decreasing.

    Examples
    --------
    >>> from judge.calibration import risk_coverage_curve
    >>> y = [0, 1, 0, 1]
    >>> p = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> coverage, risk, thresholds = risk_coverage_curve(y, p)
    >>> coverage, risk.round(3), thresholds
    (array([0.25, 0.5 , 0.75, 1.  ]), array([0.   , 0.5  , 0.667, 0.5  ]), array([0.9, 0.8, 0.7, 0.6]))
    """
    y, p = _check_inputs(y_true, proba)
    conf, correct = _top_label(y, p)
    order = np.argsort(-conf, kind="stable")
    conf, errors = conf[order], ~correct[order]
    n = len(conf)
    kept = np.arange(1, n + 1)
    # last position of each run of tied confidences
    ends = np.append(np.flatnonzero(conf[1:] != conf[:-1]), n - 1)
    coverage = kept[ends] / n
    risk = np.cumsum(errors)[ends] / kept[ends]
    return coverage, risk, conf[ends]


def aurc(y_true: ArrayLike, proba: ArrayLike) -> float:
    """Area under the risk-coverage curve.

    The step integral ``sum_j risk_j * (coverage_j - coverage_{j-1})`` over the
    points of :func:`risk_coverage_curve` (with ``coverage_0 = 0``). With
    distinct confidences this is the mean selective risk over all ``n`` cut
    points (Geifman et al., 2019). Lower is better.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.

    Returns
    -------
    aurc : float
        In [0, 1].

    Examples
    --------
    ``(0 + 1/2 + 2/3 + 1/2) / 4``:

    >>> from judge.calibration import aurc
    >>> y = [0, 1, 0, 1]
    >>> p = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> round(aurc(y, p), 6)
    0.416667
    """
    coverage, risk, _ = risk_coverage_curve(y_true, proba)
    return _area(coverage, risk)


def selective_accuracy(y_true: ArrayLike, proba: ArrayLike, coverage: float) -> float:
    """Accuracy on the ``coverage`` fraction of most confident rows.

    Keeps ``ceil(coverage * n_samples)`` rows (at least one) with the highest
    top-label confidence; ties at the cut are broken by row order.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.
    coverage : float
        Fraction of rows to keep, in (0, 1].

    Returns
    -------
    accuracy : float
        Accuracy of the argmax on the kept rows.

    Examples
    --------
    >>> from judge.calibration import selective_accuracy
    >>> y = [0, 1, 0, 1]
    >>> p = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> selective_accuracy(y, p, coverage=0.5), selective_accuracy(y, p, coverage=1.0)
    (0.5, 0.5)
    >>> selective_accuracy(y, p, coverage=0.25)
    1.0
    """
    coverage = _check_unit_interval(coverage, "coverage", closed_right=True, example=0.8)
    y, p = _check_inputs(y_true, proba)
    conf, correct = _top_label(y, p)
    k = _n_kept(coverage, len(y))
    top = np.argsort(-conf, kind="stable")[:k]
    return float(np.mean(correct[top]))


def _n_kept(coverage: float, n: int) -> int:
    """``ceil(coverage * n)`` robust to float noise, at least 1."""
    return max(1, int(np.ceil(coverage * n - 1e-9)))
