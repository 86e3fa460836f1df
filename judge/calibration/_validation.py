"""Input checks shared by the calibration modules.

Every public function of :mod:`judge.calibration` validates its arrays here so
that the error messages read the same everywhere: what was wrong, what was
given, and how to fix it. Nothing in this module is public.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

# Rows of ``proba`` must sum to one within this absolute tolerance; loose enough
# for float32 softmax outputs, tight enough to catch unnormalized scores.
_ROW_SUM_ATOL = 1e-4


def check_proba(proba: ArrayLike, name: str = "proba") -> np.ndarray:
    """Return ``proba`` as a float array of shape (n, K) of row-normalized probabilities."""
    p = np.asarray(proba, dtype=float)
    if p.ndim != 2:
        hint = (
            " For binary probabilities p of the positive class pass np.column_stack([1 - p, p])."
            if p.ndim == 1
            else ""
        )
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got shape {p.shape}.{hint}"
        )
    n, k = p.shape
    if n < 1 or k < 1:
        raise ValueError(
            f"{name} must have at least one row and one column, got shape {p.shape}; pass one probability row per sample."
        )
    if not np.all(np.isfinite(p)):
        raise ValueError(
            f"{name} must be finite, got {int(np.sum(~np.isfinite(p)))} NaN or infinite entries; pass probabilities (np.exp of log-probabilities), not logits."
        )
    if p.min() < 0.0 or p.max() > 1.0 + _ROW_SUM_ATOL:
        raise ValueError(
            f"{name} must lie in [0, 1], got values in [{p.min():.6g}, {p.max():.6g}]; pass probabilities, e.g. scipy.special.softmax(logits, axis=1)."
        )
    sums = p.sum(axis=1)
    bad = np.abs(sums - 1.0) > _ROW_SUM_ATOL
    if np.any(bad):
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"each row of {name} must sum to 1, got {int(bad.sum())} rows that do not (row {first} sums to {sums[first]:.6g}); normalize with proba / proba.sum(axis=1, keepdims=True)."
        )
    return np.clip(p, 0.0, 1.0)


def check_labels(y_true: ArrayLike, n_samples: int, n_classes: int) -> np.ndarray:
    """Return ``y_true`` as an int array of shape (n_samples,) with values in [0, n_classes)."""
    y = np.asarray(y_true)
    if y.ndim != 1 or y.shape[0] != n_samples:
        raise ValueError(
            f"y_true must have shape (n_samples,) = ({n_samples},) to match the rows of the scores, got shape {y.shape}; pass one integer class index per row."
        )
    if y.dtype == bool:
        y = y.astype(int)
    elif not np.issubdtype(y.dtype, np.integer):
        if not np.issubdtype(y.dtype, np.floating) or not np.all(
            np.isfinite(y) & (y == np.round(y))
        ):
            raise ValueError(
                f"y_true must hold integer class indices, got dtype {y.dtype}; map labels to 0..n_classes-1, e.g. np.unique(labels, return_inverse=True)[1]."
            )
        y = y.astype(int)
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(
            f"y_true must hold class indices in [0, {n_classes}) for {n_classes} classes, got values in [{y.min()}, {y.max()}]; map labels to 0..n_classes-1."
        )
    return y.astype(np.intp, copy=False)


def check_log_scores(scores: ArrayLike, name: str) -> np.ndarray:
    """Return logits/log-probabilities of shape (n, K): no NaN, no +inf, one finite entry a row.

    ``-inf`` entries are allowed: they mark labels a row can never take.
    """
    z = np.asarray(scores, dtype=float)
    if z.ndim != 2:
        hint = " For a single row use scores.reshape(1, -1)." if z.ndim == 1 else ""
        raise ValueError(
            f"{name} must be 2-D of shape (n_samples, n_classes), got shape {z.shape}.{hint}"
        )
    if z.shape[0] < 1 or z.shape[1] < 2:
        raise ValueError(
            f"{name} must have at least one row and two classes, got shape {z.shape}; pass one row of per-class scores per sample."
        )
    if np.any(np.isnan(z)) or np.any(z == np.inf):
        raise ValueError(
            f"{name} must not contain NaN or +inf, got {int(np.sum(np.isnan(z)))} NaN and {int(np.sum(z == np.inf))} +inf entries; -inf is allowed for unreachable labels."
        )
    dead = ~np.any(np.isfinite(z), axis=1)
    if np.any(dead):
        raise ValueError(
            f"every row of {name} needs at least one finite entry, got {int(dead.sum())} rows that are all -inf (first: row {int(np.flatnonzero(dead)[0])}); drop those rows."
        )
    return z


def check_unit_interval(
    value: float, name: str, *, closed_right: bool = False, example: float = 0.9
) -> float:
    """Return ``value`` as a float, requiring 0 < value < 1 (or <= 1 when ``closed_right``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number in (0, 1{']' if closed_right else ')'}, got {value!r}."
        ) from None
    ok = 0.0 < v <= 1.0 if closed_right else 0.0 < v < 1.0
    if not ok:
        interval = "(0, 1]" if closed_right else "(0, 1)"
        raise ValueError(
            f"{name} must be in {interval}, got {name}={value!r}; pick e.g. {name}={example}."
        )
    return v


def top_label(y: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence (max probability) and correctness of the argmax, both shape (n,)."""
    return p.max(axis=1), p.argmax(axis=1) == y
