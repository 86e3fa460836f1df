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

from ._validation import check_labels, check_proba, check_unit_interval, top_label

__all__ = [
    "expected_calibration_error",
    "maximum_calibration_error",
    "brier_score",
    "negative_log_likelihood",
    "risk_coverage_curve",
    "aurc",
    "selective_accuracy",
    "coverage_at_accuracy",
    "ece_noise_floor",
    "bootstrap_interval",
    "calibration_report",
]

_STRATEGIES = ("uniform", "quantile")


def _check_inputs(y_true: ArrayLike, proba: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p = check_proba(proba)
    y = check_labels(y_true, p.shape[0], p.shape[1])
    return y, p


class _Bins(NamedTuple):
    """Per-bin top-label statistics; empty bins hold NaN accuracy/confidence."""

    edges: np.ndarray  # (n_bins + 1,)
    count: np.ndarray  # (n_bins,)
    accuracy: np.ndarray  # (n_bins,)
    confidence: np.ndarray  # (n_bins,)


def top_label_bins(y_true: ArrayLike, proba: ArrayLike, n_bins: int, strategy: str) -> _Bins:
    """Bin rows by top-label confidence.

    Bins are right-closed, ``(lo, hi]``, with the first one also holding its
    lower edge (the convention of ``sklearn.calibration.calibration_curve``):
    a confidence equal to an inner edge falls in the bin *below* it (the one
    that edge closes), 1.0 in the last bin. ``"uniform"`` uses the edges
    ``np.linspace(0.0, 1.0, n_bins + 1)``, compared as floats (0.5 with 2 or 4
    bins, 0.2 with 5, 1/15 with 15 sit on an edge); ``"quantile"`` uses
    quantiles of the confidences (equal-mass bins; ties can leave some empty),
    the smallest confidence being the first bin's lower edge.
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got n_bins={n_bins!r}; use e.g. 15.")
    if strategy not in _STRATEGIES:
        raise ValueError(
            f"strategy must be one of {_STRATEGIES}, got strategy={strategy!r}; 'uniform' gives equal-width bins, 'quantile' equal-mass bins."
        )
    y, p = _check_inputs(y_true, proba)
    conf, correct = top_label(y, p)
    return _bin_conf(conf, correct, n_bins, strategy)


def _bin_conf(conf: np.ndarray, correct: np.ndarray, n_bins: int, strategy: str) -> _Bins:
    """:func:`top_label_bins` on (confidence, correctness) already extracted."""
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


def ece_of_bins(bins: _Bins) -> float:
    """``sum_b (n_b / n) |accuracy_b - confidence_b|`` over non-empty bins."""
    full = bins.count > 0
    gaps = np.abs(bins.accuracy[full] - bins.confidence[full])
    return float(np.sum(bins.count[full] * gaps) / bins.count.sum())


def area_under_curve(coverage: np.ndarray, risk: np.ndarray) -> float:
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
        ``"uniform"``: equal-width bins on [0, 1], edges
        ``np.linspace(0.0, 1.0, n_bins + 1)``. ``"quantile"``: equal-mass bins
        at quantiles of the confidences. Either way the bins are right-closed,
        ``(lo, hi]``, the first also holding its lower edge: a confidence equal
        to an inner edge counts in the bin below it (with ``n_bins=2``, 0.5 is
        in the first bin), the largest edge in the last bin.

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

    On an edge: 0.5 joins the bin (0, 0.5], not 0.75's bin (0.5, 1]:
    ``(1 * |1 - 0.5| + 1 * |0 - 0.75|) / 2``.

    >>> expected_calibration_error([0, 1], [[0.5, 0.5], [0.75, 0.25]], n_bins=2)
    0.625
    """
    return ece_of_bins(top_label_bins(y_true, proba, n_bins, strategy))


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
    bins = top_label_bins(y_true, proba, n_bins, strategy)
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
    eps = check_unit_interval(eps, "eps", example=1e-12)
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
    conf, correct = top_label(y, p)
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
    return area_under_curve(coverage, risk)


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
    coverage = check_unit_interval(coverage, "coverage", closed_right=True, example=0.8)
    y, p = _check_inputs(y_true, proba)
    conf, correct = top_label(y, p)
    k = n_kept(coverage, len(y))
    top = np.argsort(-conf, kind="stable")[:k]
    return float(np.mean(correct[top]))


def n_kept(coverage: float, n: int) -> int:
    """``ceil(coverage * n)`` robust to float noise, at least 1."""
    return max(1, int(np.ceil(coverage * n - 1e-9)))


def coverage_at_accuracy(y_true: ArrayLike, proba: ArrayLike, target: float) -> float:
    """Largest fraction of most confident rows whose accuracy is at least ``target`` (0 if none).

    Measured on the rows given (an empirical figure; a threshold chosen on other
    data with a guarantee is :func:`judge.calibration.select_threshold`). Rows
    are ranked by top-label confidence, ties by row order.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    proba : array-like of shape (n_samples, n_classes)
    target : float in (0, 1]
        The selective accuracy to reach, e.g. 0.7 (a target risk of 0.3).

    Returns
    -------
    coverage : float in [0, 1]

    Examples
    --------
    >>> from judge.calibration import coverage_at_accuracy
    >>> y = [0, 1, 0, 1]
    >>> p = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.4, 0.6]]
    >>> coverage_at_accuracy(y, p, 1.0), coverage_at_accuracy(y, p, 0.5)
    (0.25, 1.0)
    """
    target = check_unit_interval(target, "target", closed_right=True, example=0.7)
    y, p = _check_inputs(y_true, proba)
    conf, correct = top_label(y, p)
    order = np.argsort(-conf, kind="stable")
    running = np.cumsum(correct[order]) / np.arange(1, len(y) + 1)
    ok = np.flatnonzero(running >= target - 1e-12)
    return float((ok[-1] + 1) / len(y)) if len(ok) else 0.0


def ece_noise_floor(
    proba: ArrayLike, n_bins: int = 15, strategy: str = "uniform", *, n_resamples: int = 200, seed: int = 0
) -> tuple[float, float]:
    """ECE a perfectly calibrated model with these confidences would show at this sample size.

    Each resample draws correctness ``~ Bernoulli(confidence)`` per row and
    measures the ECE (same bins as :func:`expected_calibration_error`); the
    mean and standard deviation over resamples are returned. ECE is biased
    upwards at finite n, so compare a measured ECE with this floor rather than
    with 0 (the convention of ``sys1bench``).

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
    n_bins, strategy : as :func:`expected_calibration_error`
    n_resamples : int, default=200
    seed : int, default=0

    Returns
    -------
    (mean, sd) : tuple of float

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import ece_noise_floor
    >>> p = np.tile([0.7, 0.3], (400, 1))
    >>> mean, sd = ece_noise_floor(p)
    >>> 0.0 < mean < 0.05, sd < mean
    (True, True)
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer) or n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}; use e.g. 200.")
    p = check_proba(proba)
    conf = p.max(axis=1)
    top_label_bins(np.zeros(len(conf), int), p, n_bins, strategy)  # validates n_bins / strategy
    rng = np.random.default_rng(seed)
    vals = [ece_of_bins(_bin_conf(conf, (rng.random(len(conf)) < conf).astype(float), n_bins, strategy))
            for _ in range(n_resamples)]
    return float(np.mean(vals)), float(np.std(vals))


def bootstrap_interval(
    metric, y_true: ArrayLike, proba: ArrayLike, *, n_resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``metric(y_true, proba)`` over rows resampled with replacement.

    For a statistic biased at finite n, such as ECE (resampled rows duplicate,
    and binned gaps only grow), the interval can sit above the point estimate
    at small n; read ECE's interval together with :func:`ece_noise_floor`.

    Parameters
    ----------
    metric : callable ``(y, proba) -> float``
        E.g. :func:`expected_calibration_error`, or
        ``lambda y, p: float((p.argmax(1) == y).mean())`` for accuracy.
    y_true : array-like of shape (n_samples,)
    proba : array-like of shape (n_samples, n_classes)
    n_resamples : int, default=1000
    level : float in (0, 1), default=0.95
    seed : int, default=0

    Returns
    -------
    (low, high) : tuple of float

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import bootstrap_interval
    >>> y = np.array([0, 1] * 50); p = np.tile([0.6, 0.4], (100, 1))
    >>> lo, hi = bootstrap_interval(lambda y, p: float((p.argmax(1) == y).mean()), y, p)
    >>> lo < 0.5 < hi
    True
    """
    level = check_unit_interval(level, "level", closed_right=False, example=0.95)
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int | np.integer) or n_resamples < 1:
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}; use e.g. 1000.")
    y, p = _check_inputs(y_true, proba)
    rng = np.random.default_rng(seed)
    vals = np.array([metric(y[i], p[i]) for i in (rng.integers(0, len(y), len(y)) for _ in range(n_resamples))])
    a = (1.0 - level) / 2
    return float(np.quantile(vals, a)), float(np.quantile(vals, 1 - a))


def _accuracy(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(p.argmax(axis=1) == y))


def calibration_report(
    y_true: ArrayLike, proba: ArrayLike, *, targets=(0.5, 0.7), n_resamples: int = 1000, level: float = 0.95,
    seed: int = 0,
) -> dict:
    """Accuracy, macro-F1 and ECE with bootstrap intervals, the ECE noise floor, and coverage at target accuracies.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    proba : array-like of shape (n_samples, n_classes)
    targets : sequence of float in (0, 1]
        Selective accuracies for :func:`coverage_at_accuracy`.
    n_resamples, level, seed : bootstrap and noise-floor settings.

    Returns
    -------
    dict
        ``n``, ``accuracy``, ``accuracy_ci``, ``macro_f1``, ``macro_f1_ci``,
        ``ece``, ``ece_ci``, ``ece_floor``, ``ece_floor_sd``,
        ``ece_over_floor``, ``nll``, ``brier``, ``coverage_at_accuracy``
        (``{target: coverage}``), ``majority`` (accuracy and macro-F1 of
        always answering this set's most frequent class) and ``uniform``
        (expected accuracy of a uniform guess, ``1 / n_classes``). Macro-F1
        averages over every class, one neither present nor predicted
        counting 0 (no warning); the intervals are :func:`bootstrap_interval`'s with
        ``n_resamples``, ``level`` and ``seed``.

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import calibration_report
    >>> rng = np.random.default_rng(0)
    >>> p = rng.dirichlet(np.ones(3), 300); y = np.array([rng.choice(3, p=r) for r in p])
    >>> r = calibration_report(y, p, n_resamples=200)
    >>> r["ece_ci"][0] <= r["ece"] <= r["ece_ci"][1], r["uniform"]
    (True, 0.3333333333333333)
    """
    from sklearn.metrics import f1_score

    y, p = _check_inputs(y_true, proba)
    k = p.shape[1]

    def f1(yy, pp):
        return float(f1_score(yy, pp.argmax(axis=1), average="macro", labels=np.arange(k), zero_division=0))

    major = int(np.bincount(y, minlength=k).argmax())
    const = np.zeros_like(p)
    const[:, major] = 1.0
    floor, floor_sd = ece_noise_floor(p, n_resamples=min(n_resamples, 200), seed=seed)
    ece = expected_calibration_error(y, p)
    boot = dict(n_resamples=n_resamples, level=level, seed=seed)
    return {
        "n": int(len(y)),
        "accuracy": _accuracy(y, p), "accuracy_ci": bootstrap_interval(_accuracy, y, p, **boot),
        "macro_f1": f1(y, p), "macro_f1_ci": bootstrap_interval(f1, y, p, **boot),
        "ece": ece, "ece_ci": bootstrap_interval(expected_calibration_error, y, p, **boot),
        "ece_floor": floor, "ece_floor_sd": floor_sd, "ece_over_floor": ece / floor if floor > 0 else float("inf"),
        "nll": negative_log_likelihood(y, p), "brier": brier_score(y, p),
        "coverage_at_accuracy": {str(t): coverage_at_accuracy(y, p, t) for t in targets},
        "majority": {"accuracy": float(np.mean(y == major)), "macro_f1": f1(y, const)},
        "uniform": 1.0 / k,
    }
