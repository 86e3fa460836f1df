"""Temperature scaling: one scalar that softens or sharpens every prediction.

Guo et al. (2017), "On Calibration of Modern Neural Networks": divide the logits
by a single temperature ``T > 0`` fitted by minimizing the negative
log-likelihood on held-out labelled rows. Dividing by a positive number keeps
the order of the logits, so the predicted class (argmax) never changes; only the
confidence does.

What this module deliberately does not do: per-class temperatures, vector or
matrix scaling, or anything that can change the argmax. Label-prior shifts are
handled by :mod:`judge.calibration.bias`.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_softmax, logsumexp

from judge._errors import NotCalibratedError

from ._validation import check_labels, check_log_scores

__all__ = ["TemperatureScaler"]

# Search range for log T: T in [exp(-7), exp(7)] ~ [0.0009, 1097].
_LOG_T_BOUNDS = (-7.0, 7.0)


def _scaled_log_softmax(z: np.ndarray, temperature: float) -> np.ndarray:
    """log_softmax(z / T) row-wise; -inf entries stay -inf (never NaN)."""
    return log_softmax(z / temperature, axis=1)


def _mean_nll(z: np.ndarray, y: np.ndarray, temperature: float) -> float:
    """Mean negative log-likelihood of ``y`` under softmax(z / T)."""
    scaled = z / temperature
    true = scaled[np.arange(len(y)), y]
    return float(np.mean(logsumexp(scaled, axis=1) - true))


class TemperatureScaler:
    """Fit one temperature ``T`` on labelled logits and rescale new logits by it.

    The model is ``p(y | x) = softmax(z(x) / T)``. ``T > 1`` softens
    over-confident predictions, ``T < 1`` sharpens under-confident ones. ``T`` is
    found by minimizing the mean negative log-likelihood over ``log T`` (bounded
    Brent search, so ``T`` stays positive); the objective is unimodal in
    ``log T``. The argmax of every row is unchanged by :meth:`transform`.

    Logits may contain ``-inf`` for labels a row can never take (for example a
    label path the decoder never reached); those entries stay ``-inf`` (zero
    probability) after scaling. Log-probabilities are valid logits too.

    ``T`` is searched in ``[exp(-7), exp(7)]``; it ends at an edge only when the
    labels are perfectly separated by the logits (``T -> 0``) or unrelated to
    them (``T -> inf``), so a fit on very few rows can land there.

    Attributes
    ----------
    temperature_ : float
        The fitted temperature, set by :meth:`fit`.
    n_classes_ : int
        Number of classes seen in :meth:`fit`.

    Examples
    --------
    Four identical rows whose top logit is 2 and which are right three times
    out of four: the best temperature makes ``sigmoid(2 / T) = 3/4``, i.e.
    ``T = 2 / log(3)``.

    >>> import numpy as np
    >>> from judge.calibration import TemperatureScaler
    >>> logits = np.array([[2.0, 0.0]] * 4)
    >>> scaler = TemperatureScaler().fit(logits, [0, 0, 0, 1])
    >>> round(scaler.temperature_, 4), round(float(2 / np.log(3)), 4)
    (1.8205, 1.8205)
    >>> scaler.predict_proba(logits[:1]).round(3)
    array([[0.75, 0.25]])
    """

    def fit(self, logits: ArrayLike, y: ArrayLike) -> TemperatureScaler:
        """Fit the temperature by minimizing the negative log-likelihood.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Validation logits or log-probabilities; ``-inf`` allowed, NaN and
            ``+inf`` not. Rows whose true label has a ``-inf`` logit have
            infinite loss at every temperature; they are left out of the fit
            with a warning.
        y : array-like of shape (n_samples,)
            True class indices in ``[0, n_classes)``.

        Returns
        -------
        self : TemperatureScaler
            The fitted scaler, with ``temperature_`` set.
        """
        from scipy.optimize import minimize_scalar

        z = check_log_scores(logits, "logits")
        y = check_labels(y, z.shape[0], z.shape[1])
        reachable = np.isfinite(z[np.arange(len(y)), y])
        if not np.all(reachable):
            if not np.any(reachable):
                raise ValueError(
                    f"every row's true label has a -inf logit ({len(y)} rows), so no temperature can be fitted; check that y matches the columns of logits."
                )
            warnings.warn(
                f"{int((~reachable).sum())} of {len(y)} rows give their true label a -inf logit (infinite loss at any temperature); fitting on the other {int(reachable.sum())} rows.",
                UserWarning,
                stacklevel=2,
            )
            z, y = z[reachable], y[reachable]

        result = minimize_scalar(
            lambda log_t: _mean_nll(z, y, float(np.exp(log_t))),
            bounds=_LOG_T_BOUNDS,
            method="bounded",
            options={"xatol": 1e-10},
        )
        self.temperature_ = float(np.exp(result.x))
        self.n_classes_ = int(z.shape[1])
        return self

    def _check_fitted(self, method: str) -> None:
        if not hasattr(self, "temperature_"):
            raise NotCalibratedError(
                f"This TemperatureScaler is not fitted yet: call fit(logits, y) before calling {method}()."
            )

    def transform(self, logits: ArrayLike) -> np.ndarray:
        """Return calibrated log-probabilities ``log_softmax(logits / T)``.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Logits or log-probabilities; ``-inf`` entries stay ``-inf``.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Row-normalized calibrated log-probabilities; same argmax as ``logits``.

        Raises
        ------
        NotCalibratedError
            If :meth:`fit` has not been called.
        """
        self._check_fitted("transform")
        z = check_log_scores(logits, "logits")
        if z.shape[1] != self.n_classes_:
            raise ValueError(
                f"logits must have {self.n_classes_} columns as in fit, got shape {z.shape}; pass scores for the same label set."
            )
        return _scaled_log_softmax(z, self.temperature_)

    def predict_proba(self, logits: ArrayLike) -> np.ndarray:
        """Return calibrated probabilities ``softmax(logits / T)``.

        Parameters
        ----------
        logits : array-like of shape (n_samples, n_classes)
            Logits or log-probabilities; ``-inf`` entries get probability 0.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Rows sum to one.

        Raises
        ------
        NotCalibratedError
            If :meth:`fit` has not been called.
        """
        self._check_fitted("predict_proba")
        return np.exp(self.transform(logits))

    def __repr__(self) -> str:
        if hasattr(self, "temperature_"):
            return f"TemperatureScaler(temperature_={self.temperature_:.4g})"
        return "TemperatureScaler()"
