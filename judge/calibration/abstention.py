"""Choose a confidence threshold below which the classifier abstains.

A row is answered when its top-label confidence (largest probability) is
``>= threshold`` and abstained on otherwise. :func:`select_threshold` picks the
threshold on labelled calibration rows, either to reach a target accuracy with
statistical confidence (Clopper-Pearson lower bound) or to keep a target
fraction of rows.

What this module deliberately does not do: apply the threshold (compare
``proba.max(axis=1) >= threshold`` yourself or let the classifier do it) or
produce prediction sets (see :mod:`judge.calibration.conformal`).
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike

from ._validation import check_labels, check_proba, check_unit_interval, top_label
from .metrics import n_kept

__all__ = ["select_threshold", "clopper_pearson_lower"]


def clopper_pearson_lower(
    n_correct: ArrayLike, n_total: ArrayLike, confidence: float
) -> np.ndarray:
    """One-sided Clopper-Pearson lower confidence bound on a binomial proportion.

    ``Beta.ppf(1 - confidence; k, n - k + 1)``, and 0 when ``k = 0``.

    Parameters
    ----------
    n_correct : array-like of int, shape (m,)
        Successes ``k``, with ``0 <= k <= n``.
    n_total : array-like of int, shape (m,)
        Trials ``n >= 1``.
    confidence : float
        Confidence level in (0, 1), e.g. 0.95.

    Returns
    -------
    lower : ndarray of shape (m,)
        With probability at least ``confidence`` the true proportion is
        ``>= lower``.

    Examples
    --------
    Ten right answers out of ten only certify ``0.05 ** (1/10)`` at 95%:

    >>> from judge.calibration import clopper_pearson_lower
    >>> clopper_pearson_lower([10, 0], [10, 10], 0.95).round(4)
    array([0.7411, 0.    ])
    """
    from scipy.stats import beta

    confidence = check_unit_interval(confidence, "confidence", example=0.95)
    k = np.atleast_1d(np.asarray(n_correct, dtype=float))
    n = np.atleast_1d(np.asarray(n_total, dtype=float))
    if k.shape != n.shape or k.ndim != 1:
        raise ValueError(
            f"n_correct and n_total must be 1-D arrays of the same shape, got shapes {k.shape} and {n.shape}; pass one count pair per entry."
        )
    bad = (n < 1) | (k < 0) | (k > n)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"counts must satisfy 0 <= n_correct <= n_total and n_total >= 1, got {int(bad.sum())} pairs that do not (first: n_correct={k[i]:g}, n_total={n[i]:g}); count successes among trials."
        )
    lower = np.zeros_like(k)
    some = k > 0
    lower[some] = beta.ppf(1.0 - confidence, k[some], n[some] - k[some] + 1.0)
    return lower


def select_threshold(
    y_true: ArrayLike,
    proba: ArrayLike,
    *,
    target_accuracy: float | None = None,
    coverage: float | None = None,
    confidence: float = 0.95,
) -> float:
    """Pick a top-label confidence threshold for abstention on calibration rows.

    Pass exactly one of ``target_accuracy`` or ``coverage``.

    * ``target_accuracy``: among the distinct top-label confidences ``t``,
      return the lowest one for which the rows with confidence ``>= t`` have a
      one-sided Clopper-Pearson lower bound on their accuracy, at level
      ``confidence``, of at least ``target_accuracy``. The bound holds for each
      threshold separately; scanning all of them and keeping the lowest makes the
      guarantee approximate, so use a comfortable number of calibration rows.
      If no threshold qualifies, warn and return a value above 1, so that every
      row is abstained on.
    * ``coverage``: return the confidence of the ``ceil(coverage * n)``-th most
      confident row, so about ``coverage`` of the rows are kept (ties at the cut
      may keep a few more). ``confidence`` is ignored.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class indices in ``[0, n_classes)``.
    proba : array-like of shape (n_samples, n_classes)
        Calibrated probabilities; rows sum to one.
    target_accuracy : float, optional
        Accuracy to certify on answered rows, in (0, 1).
    coverage : float, optional
        Fraction of rows to answer, in (0, 1].
    confidence : float, default=0.95
        Level of the Clopper-Pearson bound, in (0, 1).

    Returns
    -------
    threshold : float
        Answer a row when ``proba.max(axis=1) >= threshold``.

    Warns
    -----
    UserWarning
        When no threshold reaches ``target_accuracy``.

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import select_threshold
    >>> conf = np.repeat([0.99, 0.6], 50)
    >>> proba = np.column_stack([conf, 1 - conf])
    >>> y = np.r_[np.zeros(50, int), np.zeros(30, int), np.ones(20, int)]
    >>> select_threshold(y, proba, target_accuracy=0.9)
    0.99
    >>> select_threshold(y, proba, coverage=0.8)
    0.6
    """
    if (target_accuracy is None) == (coverage is None):
        raise ValueError(
            f"pass exactly one of target_accuracy or coverage, got target_accuracy={target_accuracy!r} and coverage={coverage!r}; e.g. select_threshold(y_true, proba, target_accuracy=0.9)."
        )
    p = check_proba(proba)
    y = check_labels(y_true, p.shape[0], p.shape[1])
    conf, correct = top_label(y, p)
    order = np.argsort(-conf, kind="stable")
    conf, correct = conf[order], correct[order]

    if coverage is not None:
        coverage = check_unit_interval(coverage, "coverage", closed_right=True, example=0.8)
        return float(conf[n_kept(coverage, len(conf)) - 1])

    target = check_unit_interval(target_accuracy, "target_accuracy", example=0.9)
    confidence = check_unit_interval(confidence, "confidence", example=0.95)
    n = len(conf)
    ends = np.append(np.flatnonzero(conf[1:] != conf[:-1]), n - 1)
    kept = ends + 1
    lower = clopper_pearson_lower(np.cumsum(correct)[ends], kept, confidence)
    ok = np.flatnonzero(lower >= target)
    if ok.size == 0:
        warnings.warn(
            f"no confidence threshold certifies target_accuracy={target} at confidence={confidence} on {n} calibration rows (best lower bound {lower.max():.4f}); returning a threshold above 1 so every row is abstained on. Lower target_accuracy or confidence, or add calibration rows.",
            UserWarning,
            stacklevel=2,
        )
        return float(np.nextafter(1.0, np.inf))
    return float(conf[ends[ok[-1]]])
