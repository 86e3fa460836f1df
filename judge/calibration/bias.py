"""Label-bias correction: divide out the model's prior preference for some labels.

Language models prefer some label strings regardless of the input (majority
label, recency, common-token bias). Two estimates of that prior are offered,
both a distribution over the K labels kept in log-space:

* :func:`contextual_bias` (Zhao et al., 2021, "Calibrate Before Use"): the mean
  label distribution the model gives to content-free inputs such as ``"N/A"``,
  ``""`` or ``"[MASK]"``.
* :func:`batch_bias` (Zhou et al., 2024, "Batch Calibration"): the mean label
  distribution over a batch of real, unlabelled inputs.

:func:`apply_bias` divides the prior out (``log p - log b``) and renormalizes.
Everything is in log-space with ``logsumexp``, so tiny probabilities do not
underflow. ``-inf`` entries (labels a row never reached) stay ``-inf``; the
output never holds NaN.

What this module deliberately does not do: run the model on the content-free
strings (the classifier does that) or learn a full affine (matrix) correction.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from ._validation import check_log_scores

__all__ = ["CONTENT_FREE", "AUTO_PRIOR_STRENGTH", "contextual_bias", "batch_bias", "apply_bias", "fit_bias_temperature"]

#: Inputs that say nothing: the mean label distribution a model gives them is its label-free prior
#: (``contextual``). The same three strings serve ``Classifier.calibrate``, the Classifier's default
#: label-free correction (``Classifier(prior=...)``) and the decisions' content-free states.
CONTENT_FREE = ("N/A", "", "[MASK]")
#: ``Classifier(prior="auto")``: the contextual prior divided out at this strength (``s - strength * prior``),
#: chosen on the four validation splits (bench/priors.py select; :doc:`/baselines`).
AUTO_PRIOR_STRENGTH = 0.75


def _normalize_rows(z: np.ndarray) -> np.ndarray:
    """Row-wise log-normalization; -inf entries stay -inf."""
    return z - logsumexp(z, axis=1, keepdims=True)


def _mean_log_distribution(log_probs: ArrayLike, name: str) -> np.ndarray:
    """Log of the mean of the row distributions, shape (K,)."""
    z = _normalize_rows(check_log_scores(log_probs, name))
    return logsumexp(z, axis=0) - np.log(z.shape[0])


def contextual_bias(content_free_log_probs: ArrayLike) -> np.ndarray:
    """Estimate the label prior from content-free inputs (contextual calibration).

    Parameters
    ----------
    content_free_log_probs : array-like of shape (n_inputs, n_classes)
        The model's label log-probabilities (or logits: each row is normalized
        first) for content-free inputs such as ``"N/A"``, ``""`` and
        ``"[MASK]"``, one row per input. ``-inf`` entries are allowed.

    Returns
    -------
    bias : ndarray of shape (n_classes,)
        ``log(mean_i softmax(row_i))``: the log of the averaged distribution,
        which sums to one after ``exp``. A label no content-free row can take
        gets ``-inf``.

    See Also
    --------
    apply_bias : Divide the estimated prior out of new log-probabilities.
    batch_bias : The same estimate from real, unlabelled inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import contextual_bias
    >>> cf = np.log([[0.7, 0.3], [0.5, 0.5]])  # "N/A" and "" prompts
    >>> np.exp(contextual_bias(cf)).round(3)
    array([0.6, 0.4])
    """
    return _mean_log_distribution(content_free_log_probs, "content_free_log_probs")


def batch_bias(log_probs: ArrayLike) -> np.ndarray:
    """Estimate the label prior as the mean distribution over real inputs (batch calibration).

    Parameters
    ----------
    log_probs : array-like of shape (n_samples, n_classes)
        Label log-probabilities (or logits) for a batch of unlabelled inputs,
        typically the calibration texts or the test batch itself. ``-inf``
        entries are allowed.

    Returns
    -------
    bias : ndarray of shape (n_classes,)
        ``log(mean_i softmax(row_i))``; ``-inf`` for a label no row can take.

    See Also
    --------
    apply_bias : Divide the estimated prior out of new log-probabilities.
    contextual_bias : The same estimate from content-free inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from judge.calibration import batch_bias
    >>> lp = np.log([[0.9, 0.1], [0.6, 0.4], [0.9, 0.1]])
    >>> np.exp(batch_bias(lp)).round(3)
    array([0.8, 0.2])
    """
    return _mean_log_distribution(log_probs, "log_probs")


def apply_bias(log_probs: ArrayLike, bias: ArrayLike) -> np.ndarray:
    """Divide a label prior out of log-probabilities and renormalize.

    Computes ``log_softmax(log_probs - bias)`` row by row, i.e.
    ``p_k / b_k`` renormalized.

    Parameters
    ----------
    log_probs : array-like of shape (n_samples, n_classes)
        Label log-probabilities (or logits). ``-inf`` entries stay ``-inf``.
    bias : array-like of shape (n_classes,)
        Log prior from :func:`contextual_bias` or :func:`batch_bias` (any
        additive constant is irrelevant). A ``-inf`` entry (a label the bias
        inputs never reached) gives no estimate for that label: it is replaced,
        with a warning, by the mean of the finite entries, so the label is
        neither favoured nor penalized relative to the typical label.

    Returns
    -------
    log_proba : ndarray of shape (n_samples, n_classes)
        Corrected, row-normalized log-probabilities; never NaN.

    Examples
    --------
    A model that favours label 0 everywhere: dividing out the prior makes the
    content-free input uniform and flips an undecided row to label 1.

    >>> import numpy as np
    >>> from judge.calibration import apply_bias, contextual_bias
    >>> bias = contextual_bias(np.log([[0.8, 0.2]]))
    >>> np.exp(apply_bias(np.log([[0.8, 0.2], [0.6, 0.4]]), bias)).round(3)
    array([[0.5  , 0.5  ],
           [0.273, 0.727]])
    """
    z = check_log_scores(log_probs, "log_probs")
    b = np.asarray(bias, dtype=float)
    if b.shape != (z.shape[1],):
        raise ValueError(
            f"bias must have shape (n_classes,) = ({z.shape[1]},) to match log_probs, got shape {b.shape}; pass the output of contextual_bias or batch_bias for the same labels."
        )
    if np.any(np.isnan(b)) or np.any(b == np.inf):
        raise ValueError(
            f"bias must not contain NaN or +inf, got {b!r}; pass a log-distribution from contextual_bias or batch_bias."
        )
    unreached = np.isneginf(b)
    if np.all(unreached):
        raise ValueError(
            f"bias is -inf for all {b.size} labels, so there is no prior to divide out; estimate it from inputs where the model reaches at least one label."
        )
    if np.any(unreached):
        warnings.warn(
            f"bias is -inf for labels {np.flatnonzero(unreached).tolist()} (the bias inputs never reached them); leaving them uncorrected by using the mean finite bias.",
            UserWarning,
            stacklevel=2,
        )
        b = np.where(unreached, b[~unreached].mean(), b)
    return _normalize_rows(z - b)


def fit_bias_temperature(
    log_probs: ArrayLike, y: ArrayLike, *, l2: float = 1.0, init_bias: ArrayLike | None = None
) -> tuple[np.ndarray, float]:
    """Fit a label bias and one temperature together on labelled data.

    Minimises the mean negative log-likelihood of
    ``softmax((log_probs - bias) / T)`` plus ``l2 / n * ||bias / T||^2`` over
    ``bias`` (K values, mean zero) and ``T > 0``, by L-BFGS with exact
    gradients. The result plugs into the same transform as the unsupervised
    biases. With few labelled rows per class the penalty matters: validate
    it (e.g. by cross-validation) rather than trusting the training NLL.

    Parameters
    ----------
    log_probs : array-like of shape (n_samples, n_classes)
        Raw label log-probabilities; ``-inf`` entries stay impossible.
    y : array-like of shape (n_samples,)
        True class indices.
    l2 : float, default=1.0
        Strength of the penalty on ``bias / T`` (per row: divided by n).
    init_bias : array-like of shape (n_classes,), optional
        Start from this bias (e.g. :func:`contextual_bias`); default zeros.

    Returns
    -------
    bias : ndarray of shape (n_classes,)
    temperature : float

    Examples
    --------
    Label 0 is favoured by 2 nats everywhere; the fit removes most of it.

    >>> import numpy as np
    >>> from judge.calibration import fit_bias_temperature
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 400)
    >>> lp = np.where(np.eye(2)[y] > 0, 1.0, -1.0) + rng.normal(0, 1, (400, 2)) + [2.0, 0.0]
    >>> bias, T = fit_bias_temperature(lp, y, l2=0.01)
    >>> bool(1.5 < bias[0] - bias[1] < 2.5)
    True
    """
    from scipy.optimize import minimize

    z = check_log_scores(log_probs, "log_probs")
    y = np.asarray(y)
    if y.shape != (z.shape[0],) or not np.issubdtype(y.dtype, np.integer) or (y.size and (y.min() < 0 or y.max() >= z.shape[1])):
        raise ValueError(
            f"y must hold one class index in [0, {z.shape[1]}) per row of log_probs ({z.shape[0]} rows), got "
            f"shape {y.shape}, dtype {y.dtype}; map labels to column indices first.")
    if not (isinstance(l2, int | float) and l2 >= 0):
        raise ValueError(f"l2 must be a number >= 0, got {l2!r}; use e.g. 1.0.")
    n, k = z.shape
    finite = np.isfinite(z)
    zf = np.where(finite, z, 0.0)
    c0 = np.zeros(k) if init_bias is None else np.asarray(init_bias, float)
    if c0.shape != (k,) or not np.all(np.isfinite(c0)):
        raise ValueError(f"init_bias must be {k} finite values, got shape {c0.shape}.")
    c0 = c0 - c0.mean()
    rows = np.arange(n)

    def loss(theta):
        u, c = theta[0], theta[1:]  # 1/T = exp(u); c = bias / T
        a = np.exp(u)
        logits = np.where(finite, a * zf - c, -np.inf)
        lse = logsumexp(logits, axis=1)
        p = np.exp(logits - lse[:, None])
        nll = np.mean(lse - logits[rows, y])
        onehot = np.zeros_like(p)
        onehot[rows, y] = 1.0
        g_logits = (p - onehot) / n
        g_u = a * np.sum(g_logits * zf)
        g_c = -g_logits.sum(axis=0) + 2 * l2 / n * c
        return nll + l2 / n * np.dot(c, c), np.concatenate([[g_u], g_c])

    theta0 = np.concatenate([[0.0], c0])
    res = minimize(loss, theta0, jac=True, method="L-BFGS-B", bounds=[(-5.0, 5.0)] + [(None, None)] * k)
    a, c = float(np.exp(res.x[0])), res.x[1:] - res.x[1:].mean()
    return c / a, 1.0 / a
