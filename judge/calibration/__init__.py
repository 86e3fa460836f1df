"""Calibration for zero-shot label scores: arrays in, arrays or floats out.

The modules follow the order data flows through them:

* :mod:`~judge.calibration.bias`: divide out the model's label prior
  (contextual and batch calibration), in log-space.
* :mod:`~judge.calibration.temperature`: one temperature fitted by
  negative log-likelihood; never changes the argmax.
* :mod:`~judge.calibration.metrics`: ECE, MCE, Brier, NLL, risk-coverage,
  AURC, selective accuracy.
* :mod:`~judge.calibration.abstention`: a confidence threshold for a target
  accuracy (Clopper-Pearson) or a target coverage.
* :mod:`~judge.calibration.conformal`: split-conformal prediction sets (LAC,
  APS) with a finite-sample coverage guarantee.
* :mod:`~judge.calibration.plots`: reliability diagram and risk-coverage
  displays (matplotlib is imported only when drawing).
* :mod:`~judge.calibration.state`: :class:`Calibration`, everything
  ``Classifier.calibrate`` fits, as one frozen object.

Conventions: ``y_true`` is an integer array of class indices, shape
(n_samples,); ``proba`` a row-normalized array of shape (n_samples, n_classes);
logits and log-probabilities may hold ``-inf`` for labels a row can never take.
Importing this package imports numpy and scipy only; no torch, no matplotlib.

Examples
--------
>>> import numpy as np
>>> from judge.calibration import TemperatureScaler, expected_calibration_error
>>> logits = np.array([[4.0, 0.0], [4.0, 0.0], [0.0, 4.0], [0.0, 4.0]])
>>> y = np.array([0, 0, 1, 0])  # right 3 times in 4 at 98% confidence
>>> proba = TemperatureScaler().fit(logits, y).predict_proba(logits)
>>> proba[0].round(3), expected_calibration_error(y, proba) < 1e-6
(array([0.75, 0.25]), True)
"""

from judge._math import softmax

from .abstention import clopper_pearson_lower, select_threshold
from .bias import CONTENT_FREE, apply_bias, batch_bias, contextual_bias, fit_bias_temperature
from .conformal import ConformalPredictor, conformal_quantile, conformity_scores
from .metrics import (
    aurc,
    bootstrap_interval,
    brier_score,
    calibration_report,
    coverage_at_accuracy,
    ece_noise_floor,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    risk_coverage_curve,
    selective_accuracy,
)
from .plots import ReliabilityDiagram, RiskCoverageDisplay
from .state import AUTO_BIAS, BIASES, Calibration
from .temperature import TemperatureScaler

__all__ = [
    "softmax",
    # bias.py
    "CONTENT_FREE",
    "contextual_bias",
    "batch_bias",
    "apply_bias",
    "fit_bias_temperature",
    # temperature.py
    "TemperatureScaler",
    # metrics.py
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
    # abstention.py
    "select_threshold",
    "clopper_pearson_lower",
    # conformal.py
    "conformity_scores",
    "conformal_quantile",
    "ConformalPredictor",
    # plots.py
    "ReliabilityDiagram",
    "RiskCoverageDisplay",
    # state.py: the fitted state of a Classifier
    "Calibration",
    "AUTO_BIAS",
    "BIASES",
]
