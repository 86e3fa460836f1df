"""Split-conformal prediction sets with a finite-sample coverage guarantee.

Given ``n`` labelled calibration rows exchangeable with the test rows, the set
``{k : score(x, k) <= q}`` contains the true label with probability at least
``1 - alpha``, where ``q`` is the ``ceil((n + 1)(1 - alpha))``-th smallest
calibration score (Vovk et al.; Angelopoulos & Bates, 2021). Two scores:

* ``"lac"`` (least ambiguous set-valued classifier, Sadinle et al., 2019):
  ``1 - p_k``. Smallest sets on average; may be empty.
* ``"aps"`` (adaptive prediction sets, Romano et al., 2020): the probability
  mass of the classes ranked at or above ``k`` (highest probability first).
  Sets grow with the model's uncertainty. Optionally randomized (off by
  default), which makes coverage close to exactly ``1 - alpha``.

What this module deliberately does not do: class-conditional (Mondrian)
coverage, regularized APS (RAPS), or choosing ``alpha`` for you.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike

from judge._errors import NotCalibratedError

from ._validation import check_labels, check_proba, check_unit_interval

__all__ = ["conformity_scores", "conformal_quantile", "ConformalPredictor"]

_METHODS = ("lac", "aps")


def _check_method(method: str, randomized: bool) -> None:
    if method not in _METHODS:
        raise ValueError(
            f"method must be one of {_METHODS}, got method={method!r}; 'lac' gives the smallest sets, 'aps' sets that adapt to uncertainty."
        )
    if randomized and method != "aps":
        raise ValueError(
            f"randomized=True only applies to method='aps', got method={method!r}; drop randomized or use method='aps'."
        )


def conformity_scores(
    proba: ArrayLike,
    method: str = "lac",
    *,
    randomized: bool = False,
    random_state: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Non-conformity score of every class for every row (higher = less plausible).

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities; rows sum to one.
    method : {"lac", "aps"}, default="lac"
        ``"lac"``: ``1 - proba[i, k]``. ``"aps"``: total probability of the
        classes ranked at or above ``k`` in row ``i`` (ties ranked by class
        index).
    randomized : bool, default=False
        APS only: replace the own-class term ``p_k`` by ``u_i * p_k`` with one
        ``u_i ~ Uniform(0, 1)`` per row.
    random_state : int, numpy.random.Generator or None, default=None
        Source of ``u_i`` when ``randomized``.

    Returns
    -------
    scores : ndarray of shape (n_samples, n_classes)
        The calibration score of row ``i`` is ``scores[i, y_true[i]]``; the
        prediction set of row ``i`` is ``scores[i] <= q``.

    Examples
    --------
    >>> from judge.calibration import conformity_scores
    >>> p = [[0.5, 0.2, 0.3]]
    >>> conformity_scores(p, "lac")
    array([[0.5, 0.8, 0.7]])
    >>> conformity_scores(p, "aps")
    array([[0.5, 1. , 0.8]])
    """
    _check_method(method, randomized)
    p = check_proba(proba)
    if method == "lac":
        return 1.0 - p
    order = np.argsort(-p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    cumulative = np.cumsum(ranked, axis=1)
    if randomized:
        u = np.random.default_rng(random_state).uniform(size=(p.shape[0], 1))
        cumulative = cumulative - (1.0 - u) * ranked
    scores = np.empty_like(p)
    np.put_along_axis(scores, order, cumulative, axis=1)
    return scores


def conformal_quantile(scores: ArrayLike, alpha: float) -> float:
    """Finite-sample conformal quantile of calibration scores.

    The ``ceil((n + 1)(1 - alpha))``-th smallest score, i.e. the empirical
    ``ceil((n + 1)(1 - alpha)) / n`` quantile. When that rank exceeds ``n``
    (``alpha < 1 / (n + 1)``) the quantile is ``+inf`` and a warning is issued:
    every set then holds every class.

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Calibration scores ``score(x_i, y_i)``, finite.
    alpha : float
        Miscoverage level in (0, 1).

    Returns
    -------
    quantile : float
        Threshold ``q`` for sets ``{k : score(x, k) <= q}``.

    Examples
    --------
    With 9 scores and ``alpha = 0.2`` the rank is ``ceil(10 * 0.8) = 8``:

    >>> from judge.calibration import conformal_quantile
    >>> conformal_quantile([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], alpha=0.2)
    0.8
    """
    alpha = check_unit_interval(alpha, "alpha", example=0.1)
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1 or s.size < 1 or not np.all(np.isfinite(s)):
        raise ValueError(
            f"scores must be a non-empty 1-D array of finite numbers, got shape {s.shape}; pass one calibration score per labelled row."
        )
    n = s.size
    rank = int(np.ceil((n + 1) * (1.0 - alpha) - 1e-9))
    if rank > n:
        warnings.warn(
            f"alpha={alpha} is too small for {n} calibration scores (need at least {int(np.ceil(1.0 / alpha - 1.0))}); the quantile is +inf, so every prediction set holds every class. Add calibration rows or raise alpha.",
            UserWarning,
            stacklevel=2,
        )
        return float("inf")
    return float(np.partition(s, rank - 1)[rank - 1])


class ConformalPredictor:
    """Split-conformal prediction sets over the K labels.

    Parameters
    ----------
    method : {"lac", "aps"}, default="lac"
        Score function; see :func:`conformity_scores`.
    alpha : float, default=0.1
        Target miscoverage in (0, 1): sets hold the true label with probability
        at least ``1 - alpha`` on rows exchangeable with the calibration rows.
    randomized : bool, default=False
        Randomized APS (only with ``method="aps"``).
    non_empty : bool, default=False
        Always put the argmax in the set, so no set is empty (useful with
        ``"lac"``, whose sets can be empty when no class is plausible enough).
        Sets only grow, so the coverage guarantee still holds.
    random_state : int, numpy.random.Generator or None, default=None
        Seed for randomized APS; one generator is created in :meth:`fit` and
        used by later calls.

    Attributes
    ----------
    quantile_ : float
        The conformal quantile of the calibration scores (``+inf`` when
        ``alpha`` is too small for the number of rows).
    n_classes_ : int
        Number of classes seen in :meth:`fit`.

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import ConformalPredictor
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7]] * 5)
    >>> y = np.array([0, 0, 1, 1] * 5)
    >>> cp = ConformalPredictor(method="lac", alpha=0.2).fit(y, proba)
    >>> cp.quantile_  # 17th smallest of the 20 scores 1 - p_true
    0.6
    >>> cp.predict_set([[0.9, 0.1], [0.5, 0.5]])
    array([[ True, False],
           [ True,  True]])
    """

    def __init__(
        self,
        method: str = "lac",
        alpha: float = 0.1,
        *,
        randomized: bool = False,
        non_empty: bool = False,
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.method = method
        self.alpha = alpha
        self.randomized = randomized
        self.non_empty = non_empty
        self.random_state = random_state

    def fit(self, y_true: ArrayLike, proba: ArrayLike) -> ConformalPredictor:
        """Compute the conformal quantile from labelled calibration rows.

        Parameters
        ----------
        y_true : array-like of shape (n_samples,)
            True class indices in ``[0, n_classes)``.
        proba : array-like of shape (n_samples, n_classes)
            Predicted probabilities for the calibration rows.

        Returns
        -------
        self : ConformalPredictor
            The fitted predictor, with ``quantile_`` set.
        """
        _check_method(self.method, self.randomized)
        alpha = check_unit_interval(self.alpha, "alpha", example=0.1)
        p = check_proba(proba)
        y = check_labels(y_true, p.shape[0], p.shape[1])
        self._rng = np.random.default_rng(self.random_state)
        scores = conformity_scores(
            p, self.method, randomized=self.randomized, random_state=self._rng
        )
        self.quantile_ = conformal_quantile(scores[np.arange(len(y)), y], alpha)
        self.n_classes_ = int(p.shape[1])
        return self

    def predict_set(self, proba: ArrayLike) -> np.ndarray:
        """Prediction sets as a membership mask.

        Parameters
        ----------
        proba : array-like of shape (n_samples, n_classes)
            Predicted probabilities for new rows.

        Returns
        -------
        sets : ndarray of bool, shape (n_samples, n_classes)
            ``sets[i, k]`` is True when class ``k`` is in the set of row ``i``.

        Raises
        ------
        NotCalibratedError
            If :meth:`fit` has not been called.
        """
        if not hasattr(self, "quantile_"):
            raise NotCalibratedError(
                "This ConformalPredictor is not fitted yet: call fit(y_true, proba) before calling predict_set()."
            )
        p = check_proba(proba)
        if p.shape[1] != self.n_classes_:
            raise ValueError(
                f"proba must have {self.n_classes_} columns as in fit, got shape {p.shape}; pass probabilities for the same label set."
            )
        scores = conformity_scores(
            p, self.method, randomized=self.randomized, random_state=self._rng
        )
        sets = scores <= self.quantile_
        if self.non_empty:
            sets[np.arange(p.shape[0]), p.argmax(axis=1)] = True
        return sets

    def __repr__(self) -> str:
        return f"ConformalPredictor(method={self.method!r}, alpha={self.alpha!r}, randomized={self.randomized!r}, non_empty={self.non_empty!r})"
