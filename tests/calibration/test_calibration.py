"""Tests for judge.calibration: references, invariances, guarantees and error messages.

Everything here runs on small synthetic arrays in a few seconds; no model is loaded.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy.special import log_softmax, softmax

import judge.calibration as cal
from judge._errors import NotCalibratedError
from judge.calibration import (
    ConformalPredictor,
    ReliabilityDiagram,
    RiskCoverageDisplay,
    TemperatureScaler,
    apply_bias,
    aurc,
    batch_bias,
    brier_score,
    conformal_quantile,
    conformity_scores,
    contextual_bias,
    expected_calibration_error,
    maximum_calibration_error,
    negative_log_likelihood,
    risk_coverage_curve,
    select_threshold,
    selective_accuracy,
)


def _sample_labels(rng: np.random.Generator, proba: np.ndarray) -> np.ndarray:
    """One label per row drawn from that row's distribution (inverse CDF)."""
    return (rng.random(len(proba))[:, None] > np.cumsum(proba, axis=1)).sum(axis=1)


def _calibrated_data(rng: np.random.Generator, n: int, n_classes: int = 5, scale: float = 2.0):
    """Model probabilities softmax(z) and labels drawn from them: calibrated by construction."""
    proba = softmax(rng.normal(scale=scale, size=(n, n_classes)), axis=1)
    return _sample_labels(rng, proba), proba


# --------------------------------------------------------------------------- public surface


def test_public_names_are_pinned():
    assert sorted(cal.__all__) == sorted(
        [
            "CONTENT_FREE",
            "contextual_bias",
            "batch_bias",
            "apply_bias",
            "TemperatureScaler",
            "expected_calibration_error",
            "maximum_calibration_error",
            "brier_score",
            "negative_log_likelihood",
            "risk_coverage_curve",
            "aurc",
            "selective_accuracy",
            "select_threshold",
            "clopper_pearson_lower",
            "conformity_scores",
            "conformal_quantile",
            "ConformalPredictor",
            "ReliabilityDiagram",
            "RiskCoverageDisplay",
            "fit_bias_temperature",
            "coverage_at_accuracy",
            "ece_noise_floor",
            "bootstrap_interval",
            "calibration_report",
            "Calibration",
            "softmax",
            "AUTO_BIAS",
            "BIASES",
        ]
    )
    assert all(hasattr(cal, name) for name in cal.__all__)


def test_import_is_light():
    code = (
        "import sys, judge.calibration; "
        "print(sorted(m for m in ('matplotlib', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- temperature


def test_temperature_recovers_known_temperature():
    rng = np.random.default_rng(0)
    logits = rng.normal(scale=3.0, size=(20_000, 4))
    y = _sample_labels(rng, softmax(logits / 2.5, axis=1))
    scaler = TemperatureScaler().fit(logits, y)
    assert scaler.temperature_ == pytest.approx(2.5, rel=0.10)


def test_temperature_keeps_argmax_and_normalizes():
    rng = np.random.default_rng(1)
    logits = rng.normal(scale=4.0, size=(500, 6))
    y = _sample_labels(rng, softmax(logits / 3.0, axis=1))
    scaler = TemperatureScaler().fit(logits, y)
    out = scaler.transform(logits)
    assert out.shape == logits.shape
    np.testing.assert_array_equal(out.argmax(axis=1), logits.argmax(axis=1))
    np.testing.assert_allclose(np.exp(out).sum(axis=1), 1.0)
    np.testing.assert_allclose(scaler.predict_proba(logits), np.exp(out))
    assert scaler.temperature_ > 1.0  # the logits were over-confident


def test_temperature_handles_minus_inf_logits():
    rng = np.random.default_rng(2)
    logits = rng.normal(scale=2.0, size=(300, 4))
    y = _sample_labels(rng, softmax(logits, axis=1))
    rows = np.arange(0, 300, 5)
    unreachable = (rows, (y[rows] + 1) % 4)
    logits[unreachable] = -np.inf  # never the true label
    scaler = TemperatureScaler().fit(logits, y)
    assert np.isfinite(scaler.temperature_)
    out = scaler.transform(logits)
    assert not np.any(np.isnan(out))
    assert np.all(np.isneginf(out[unreachable]))
    np.testing.assert_allclose(np.exp(out).sum(axis=1), 1.0)


def test_temperature_skips_rows_whose_true_label_is_unreachable():
    logits = np.array([[2.0, 0.0]] * 4 + [[0.0, -np.inf]])
    y = [0, 0, 0, 1, 1]
    with pytest.warns(UserWarning, match=r"1 of 5 rows give their true label a -inf logit"):
        scaler = TemperatureScaler().fit(logits, y)
    assert scaler.temperature_ == pytest.approx(2 / np.log(3), rel=1e-6)


def test_temperature_method_order():
    scaler = TemperatureScaler()
    with pytest.raises(
        NotCalibratedError, match=r"call fit\(logits, y\) before calling transform\(\)"
    ):
        scaler.transform(np.zeros((2, 3)))
    with pytest.raises(
        NotCalibratedError, match=r"call fit\(logits, y\) before calling predict_proba"
    ):
        scaler.predict_proba(np.zeros((2, 3)))
    assert not hasattr(scaler, "temperature_")  # AttributeError-compatible


def test_temperature_bad_arguments():
    with pytest.raises(
        ValueError, match=r"logits must be 2-D of shape \(n_samples, n_classes\), got shape \(3,\)"
    ):
        TemperatureScaler().fit(np.zeros(3), [0, 1, 0])
    with pytest.raises(ValueError, match=r"y_true must have shape \(n_samples,\) = \(2,\)"):
        TemperatureScaler().fit(np.zeros((2, 3)), [0, 1, 2])
    with pytest.raises(
        ValueError, match=r"class indices in \[0, 3\) for 3 classes, got values in \[0, 5\]"
    ):
        TemperatureScaler().fit(np.zeros((2, 3)), [0, 5])
    with pytest.raises(ValueError, match=r"must not contain NaN or \+inf"):
        TemperatureScaler().fit(np.array([[np.nan, 0.0]]), [0])
    with pytest.raises(ValueError, match=r"1 rows that are all -inf \(first: row 1\)"):
        TemperatureScaler().fit(np.array([[0.0, 1.0], [-np.inf, -np.inf]]), [0, 1])
    with pytest.raises(ValueError, match=r"every row's true label has a -inf logit \(2 rows\), so no temperature"):
        TemperatureScaler().fit(np.array([[0.0, -np.inf], [-np.inf, 0.0]]), [1, 0])
    scaler = TemperatureScaler().fit(np.array([[1.0, 0.0], [0.0, 1.0]]), [0, 0])
    with pytest.raises(
        ValueError, match=r"logits must have 2 columns as in fit, got shape \(1, 3\)"
    ):
        scaler.transform(np.zeros((1, 3)))
    with pytest.raises(ValueError, match=r"^logits must be 2-D .* got shape \(2,\)\. For a single row use"):
        scaler.transform(np.zeros(2))


def _where_stacklevel_2_points(module, helper: str, monkeypatch) -> dict:
    """Spy on ``module.helper`` (a function the warning function calls first): records the file and line of the
    frame that called that function, where a warning with stacklevel=2 must point, however many wrapper frames (a
    decorator, a mutation tool's trampoline) sit between the test and the function."""
    seen, inner = {}, getattr(module, helper)

    def spy(*args, **kwargs):
        caller = sys._getframe(2)  # 0: the spy, 1: the function that warns, 2: its caller
        seen["at"] = (caller.f_code.co_filename, caller.f_lineno)
        return inner(*args, **kwargs)

    monkeypatch.setattr(module, helper, spy)
    return seen


def test_temperature_warning_points_at_the_line_that_called_fit(monkeypatch):
    import judge.calibration.temperature as temperature

    seen = _where_stacklevel_2_points(temperature, "check_log_scores", monkeypatch)
    logits = np.array([[2.0, 0.0]] * 4 + [[0.0, -np.inf]])
    with pytest.warns(UserWarning, match=r"1 of 5 rows give their true label a -inf logit") as rec:
        TemperatureScaler().fit(logits, [0, 0, 0, 1, 1])
    assert len(rec) == 1 and (rec[0].filename, rec[0].lineno) == seen["at"]


# --------------------------------------------------------------------------- bias


def test_contextual_bias_removes_a_known_bias_exactly():
    rng = np.random.default_rng(3)
    clean = log_softmax(rng.normal(size=(50, 4)), axis=1)
    bias = np.array([2.0, 0.5, -1.0, 0.0])
    biased = log_softmax(clean + bias, axis=1)
    # a content-free input carries no evidence: its distribution is the bias itself
    estimated = contextual_bias(log_softmax(bias[None, :], axis=1))
    np.testing.assert_allclose(apply_bias(biased, estimated), clean, atol=1e-12)


def test_bias_correction_raises_accuracy():
    rng = np.random.default_rng(4)
    n, k = 3000, 3
    y = rng.integers(k, size=n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), y] += 1.5  # informative but noisy scores, balanced labels
    bias = np.array([2.0, 0.0, -1.0])  # the model's preference for label 0
    biased = log_softmax(logits + bias, axis=1)
    content_free = log_softmax(bias + rng.normal(scale=0.1, size=(3, k)), axis=1)

    def accuracy(lp):
        return float(np.mean(lp.argmax(axis=1) == y))

    before = accuracy(biased)
    after_contextual = accuracy(apply_bias(biased, contextual_bias(content_free)))
    after_batch = accuracy(apply_bias(biased, batch_bias(biased)))
    assert after_contextual > before + 0.15
    assert after_batch > before + 0.15


def test_bias_estimates_are_log_mean_distributions():
    lp = np.log([[0.9, 0.1, 1.0], [0.5, 0.25, 0.25]])
    lp[0, 2] = -np.inf  # log(0): a label the first row never reached
    expected = np.log([0.7, 0.175, 0.125])
    np.testing.assert_allclose(batch_bias(lp), expected)
    np.testing.assert_allclose(contextual_bias(lp), expected)
    # rows are normalized first, so logits give the same estimate
    np.testing.assert_allclose(batch_bias(lp + np.array([[3.0], [-2.0]])), expected)


def test_bias_keeps_minus_inf_and_never_nan():
    with np.errstate(divide="ignore"):
        lp = np.log([[0.6, 0.4, 0.0], [0.0, 0.5, 0.5]])
        cf = np.log([[0.8, 0.2, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from -inf arithmetic either
        out = apply_bias(lp, batch_bias(lp))
    assert not np.any(np.isnan(out))
    np.testing.assert_array_equal(np.isneginf(out), np.isneginf(lp))
    np.testing.assert_allclose(np.exp(out).sum(axis=1), 1.0)
    # a label the bias inputs never reached gets -inf bias: warn, stay finite
    assert np.isneginf(contextual_bias(cf)[2])
    with pytest.warns(UserWarning, match=r"bias is -inf for labels \[2\]"):
        out = apply_bias(lp, contextual_bias(cf))
    assert not np.any(np.isnan(out))
    np.testing.assert_array_equal(np.isneginf(out), np.isneginf(lp))


def test_apply_bias_is_permutation_equivariant():
    rng = np.random.default_rng(5)
    lp = log_softmax(rng.normal(size=(20, 5)), axis=1)
    bias = batch_bias(lp[:7])
    perm = rng.permutation(5)
    np.testing.assert_allclose(apply_bias(lp[:, perm], bias[perm]), apply_bias(lp, bias)[:, perm])


def test_bias_bad_arguments():
    lp = np.log([[0.6, 0.4], [0.3, 0.7]])
    for bad in ([0.0, np.inf], [np.nan, 0.0]):
        with pytest.raises(ValueError, match=r"bias must not contain NaN or \+inf"):
            apply_bias(lp, np.array(bad))
    with pytest.raises(
        ValueError,
        match=r"bias must have shape \(n_classes,\) = \(2,\) to match log_probs, got shape \(3,\)",
    ):
        apply_bias(lp, np.zeros(3))
    with pytest.raises(ValueError, match=r"bias is -inf for all 2 labels"):
        apply_bias(lp, np.array([-np.inf, -np.inf]))
    with pytest.raises(
        ValueError, match=r"log_probs must be 2-D .* got shape \(2,\)\. For a single row use"
    ):
        apply_bias(lp[0], np.zeros(2))
    with pytest.raises(ValueError, match=r"content_free_log_probs must be 2-D"):
        contextual_bias(np.zeros(2))
    with pytest.raises(ValueError, match=r"must not contain NaN or \+inf"):
        batch_bias(np.array([[np.inf, 0.0]]))


# --------------------------------------------------------------------------- metrics

# Ten rows, three classes; the top label is class 0 with the confidence below.
# y = 0 where the top label is right, y = 1 where it is wrong.
_CONF = np.array([0.95, 0.92, 0.85, 0.81, 0.75, 0.70, 0.65, 0.55, 0.45, 0.38])
_RIGHT = np.array([1, 1, 0, 1, 1, 0, 1, 0, 1, 0], dtype=bool)
_PROBA10 = np.column_stack([_CONF, (1 - _CONF) / 2, (1 - _CONF) / 2])
_Y10 = np.where(_RIGHT, 0, 1)


def test_ece_matches_hand_computation_on_ten_samples():
    # Five equal-width bins, right-closed: (0.8, 1], (0.6, 0.8], (0.4, 0.6], (0.2, 0.4], [0, 0.2].
    # (0.8, 1]:   0.95 0.92 0.85 0.81 -> acc 3/4 = 0.75, conf 3.53/4 = 0.8825, gap 0.1325
    # (0.6, 0.8]: 0.75 0.70 0.65      -> acc 2/3,        conf 2.10/3 = 0.70,   gap 0.0333...
    # (0.4, 0.6]: 0.55 0.45           -> acc 1/2,        conf 1.00/2 = 0.50,   gap 0
    # (0.2, 0.4]: 0.38                -> acc 0,          conf 0.38,            gap 0.38
    ece = (4 * 0.1325 + 3 * (0.70 - 2 / 3) + 2 * 0.0 + 1 * 0.38) / 10  # = 0.101
    assert expected_calibration_error(_Y10, _PROBA10, n_bins=5) == pytest.approx(ece)
    assert ece == pytest.approx(0.101)
    assert maximum_calibration_error(_Y10, _PROBA10, n_bins=5) == pytest.approx(0.38)
    # Two equal-mass bins split at the median confidence (0.70 + 0.75) / 2 = 0.725:
    # low:  0.38 0.45 0.55 0.65 0.70 -> acc 2/5 = 0.4, conf 2.73/5 = 0.546, gap 0.146
    # high: 0.75 0.81 0.85 0.92 0.95 -> acc 4/5 = 0.8, conf 4.28/5 = 0.856, gap 0.056
    ece_quantile = (5 * 0.146 + 5 * 0.056) / 10
    assert expected_calibration_error(
        _Y10, _PROBA10, n_bins=2, strategy="quantile"
    ) == pytest.approx(ece_quantile)
    # one bin: |mean accuracy - mean confidence| = |0.6 - 0.701|
    assert expected_calibration_error(_Y10, _PROBA10, n_bins=1) == pytest.approx(0.101)


@pytest.mark.parametrize("n_classes", [2, 5])
def test_ece_matches_sklearn_calibration_curve(n_classes):
    from sklearn.calibration import calibration_curve

    rng = np.random.default_rng(6)
    proba = softmax(rng.normal(scale=1.5, size=(2000, n_classes)), axis=1)
    y = _sample_labels(rng, softmax(rng.normal(size=(2000, n_classes)) + np.log(proba), axis=1))
    conf, correct = proba.max(axis=1), proba.argmax(axis=1) == y
    n_bins = 10
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # no confidence sits on an edge, so every binning convention agrees
    assert np.min(np.abs(conf[:, None] - edges[None, :])) > 1e-9
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=n_bins, strategy="uniform")
    counts = np.histogram(conf, bins=edges)[0]
    counts = counts[counts > 0]  # calibration_curve drops empty bins, in the same order
    reference = np.sum(counts * np.abs(prob_true - prob_pred)) / len(y)
    assert expected_calibration_error(y, proba, n_bins=n_bins) == pytest.approx(
        reference, abs=1e-12
    )
    assert maximum_calibration_error(y, proba, n_bins=n_bins) == pytest.approx(
        np.max(np.abs(prob_true - prob_pred)), abs=1e-12
    )


# Bin edges (issue 43): which side of an edge a confidence falls on, with confidences exactly on the edges.

def _rows_with_top(conf):
    """Probability rows whose largest entry, in column 0, is exactly ``conf``: the rest spread evenly over enough
    classes that each gets less."""
    conf = np.asarray(conf, float)
    n_classes = int(np.ceil(1.0 / conf.min())) + 1
    proba = np.repeat(((1.0 - conf) / (n_classes - 1))[:, None], n_classes, axis=1)
    proba[:, 0] = conf
    return proba


def _reference_binned_errors(conf, correct, edges):
    """(ECE, MCE) with right-closed bins by a plain loop, sharing nothing with judge: a confidence goes to the
    first bin whose upper edge it does not exceed, so one equal to an inner edge joins the bin below it."""
    members = [[] for _ in range(len(edges) - 1)]
    for c, ok in zip(conf.tolist(), correct.tolist()):
        members[next(b for b in range(len(edges) - 1) if c <= edges[b + 1])].append((c, ok))
    gaps = [(len(m), abs(sum(ok for _, ok in m) / len(m) - sum(c for c, _ in m) / len(m))) for m in members if m]
    return sum(n * g for n, g in gaps) / len(conf), max(g for _, g in gaps)


def test_a_confidence_on_a_bin_edge_falls_in_the_bin_below_by_hand():
    # four bins (0, .25], (.25, .5], (.5, .75], (.75, 1]; 0.25 needs four equal classes to be a top label
    proba = [[0.25] * 4, [0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0.75, 0.25, 0, 0], [0.6, 0.4, 0, 0], [1.0, 0, 0, 0]]
    y = [0, 0, 1, 0, 1, 0]
    # (0, .25]: 0.25 right -> gap .75; (.25, .5]: 0.5 right, 0.5 wrong -> gap 0;
    # (.5, .75]: 0.75 right, 0.6 wrong -> |.5 - .675| = .175; (.75, 1]: 1.0 right -> gap 0
    assert expected_calibration_error(y, proba, n_bins=4) == pytest.approx((0.75 + 2 * 0.175) / 6, abs=1e-12)
    assert maximum_calibration_error(y, proba, n_bins=4) == pytest.approx(0.75, abs=1e-12)
    # (left-closed bins [lo, hi) would give (0.75 + 3 * 0.2 + 2 * 0.125) / 6 = 0.2667 and the counts [0, 1, 3, 2])
    np.testing.assert_array_equal(ReliabilityDiagram.from_predictions(y, proba, n_bins=4).bin_count, [1, 2, 2, 1])
    # the default 15 bins: 1/15 (fifteen equal classes) is the first bin's upper edge, 0.5 is not an edge
    y15, p15 = [0, 0], [[1 / 15] * 15, [0.5, 0.5] + [0.0] * 13]
    np.testing.assert_array_equal(ReliabilityDiagram.from_predictions(y15, p15).bin_count,
                                  [1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("n_bins", [15, 10, 5, 4, 2])
def test_ece_and_mce_with_confidences_on_every_edge_equal_a_plain_loop(n_bins):
    edges = np.linspace(0.0, 1.0, n_bins + 1)  # the documented edges
    on_edges = np.array([i / n_bins for i in range(1, n_bins + 1)])  # 1/15, 0.5, 1.0, ...: edges as written
    inside = (np.arange(n_bins) + 0.5) / n_bins
    conf = np.concatenate([np.repeat(on_edges, 3), inside])
    assert np.isin(conf, edges).sum() >= 2 * n_bins  # most of them sit exactly on an edge
    correct = np.random.default_rng(n_bins).random(len(conf)) < 0.6
    proba = _rows_with_top(conf)
    y = np.where(correct, 0, 1)
    ece, mce = _reference_binned_errors(conf, correct, edges.tolist())
    assert expected_calibration_error(y, proba, n_bins=n_bins) == pytest.approx(ece, abs=1e-12)
    assert maximum_calibration_error(y, proba, n_bins=n_bins) == pytest.approx(mce, abs=1e-12)
    diagram = ReliabilityDiagram.from_predictions(y, proba, n_bins=n_bins)
    assert diagram.ece == pytest.approx(ece, abs=1e-12)


@pytest.mark.parametrize("strategy, n_bins", [("uniform", 15), ("uniform", 4), ("quantile", 2), ("quantile", 4)])
def test_bins_with_confidences_on_edges_equal_sklearn_calibration_curve(strategy, n_bins):
    """sklearn's calibration_curve bins the same way ((lo, hi], the first bin closed): its non-empty bins'
    accuracy and confidence are the reliability diagram's, with confidences on the edges."""
    from sklearn.calibration import calibration_curve

    if strategy == "uniform":
        conf = np.repeat([i / n_bins for i in range(1, n_bins + 1)], 2)
    else:  # an odd count: the quantile edges are confidences themselves (the median, the smallest)
        conf = np.array([0.4, 0.5, 0.5, 0.6, 0.7, 0.7, 0.8, 0.9, 1.0])
    correct = np.random.default_rng(3).random(len(conf)) < 0.5
    correct[:2] = [True, False]
    proba, y = _rows_with_top(conf), np.where(correct, 0, 1)
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=n_bins, strategy=strategy)
    d = ReliabilityDiagram.from_predictions(y, proba, n_bins=n_bins, strategy=strategy)
    full = d.bin_count > 0
    np.testing.assert_allclose(d.bin_accuracy[full], prob_true, atol=1e-12)
    np.testing.assert_allclose(d.bin_confidence[full], prob_pred, atol=1e-12)
    ece, mce = _reference_binned_errors(conf, correct, d.bin_edges.tolist())
    assert expected_calibration_error(y, proba, n_bins=n_bins, strategy=strategy) == pytest.approx(ece, abs=1e-12)
    assert maximum_calibration_error(y, proba, n_bins=n_bins, strategy=strategy) == pytest.approx(mce, abs=1e-12)


def test_metrics_are_invariant_to_permuting_classes_and_rows():
    rng = np.random.default_rng(7)
    y, proba = _calibrated_data(rng, 300, n_classes=4)
    cols, rows = rng.permutation(4), rng.permutation(300)
    inverse = np.argsort(cols)  # new column j holds old column cols[j]
    y_perm, proba_perm = inverse[y][rows], proba[rows][:, cols]
    for metric in (expected_calibration_error, brier_score, negative_log_likelihood, aurc):
        assert metric(y_perm, proba_perm) == pytest.approx(metric(y, proba))


def test_brier_and_nll_hand_checks():
    y = [0, 2]
    proba = [[0.7, 0.2, 0.1], [0.2, 0.3, 0.5]]
    # (0.3^2 + 0.2^2 + 0.1^2 + 0.2^2 + 0.3^2 + 0.5^2) / 2 = (0.14 + 0.38) / 2
    assert brier_score(y, proba) == pytest.approx(0.26)
    assert negative_log_likelihood(y, proba) == pytest.approx(-(np.log(0.7) + np.log(0.5)) / 2)
    # a zero probability on the true class is clipped, not infinite
    assert negative_log_likelihood([1], [[1.0, 0.0]]) == pytest.approx(-np.log(1e-12))
    assert negative_log_likelihood([1], [[1.0, 0.0]], eps=1e-3) == pytest.approx(-np.log(1e-3))
    assert brier_score([0], [[1.0, 0.0]]) == 0.0
    assert brier_score([1], [[1.0, 0.0]]) == pytest.approx(2.0)


def test_risk_coverage_curve_groups_ties():
    y = [0, 0, 0, 1, 1]
    proba = [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.7, 0.3], [0.4, 0.6]]
    # rows by confidence: 0.9 right | 0.8 right | 0.7 right, 0.7 wrong (tied) | 0.6 right
    coverage, risk, thresholds = risk_coverage_curve(y, proba)
    np.testing.assert_allclose(coverage, [0.2, 0.4, 0.8, 1.0])
    np.testing.assert_allclose(risk, [0.0, 0.0, 0.25, 0.2])
    np.testing.assert_allclose(thresholds, [0.9, 0.8, 0.7, 0.6])
    assert aurc(y, proba) == pytest.approx(0.2 * 0 + 0.2 * 0 + 0.4 * 0.25 + 0.2 * 0.2)


def test_aurc_rewards_ranking_errors_last():
    y = np.array([0, 0, 0, 1])
    good = np.array(
        [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4]]
    )  # the error is least confident
    bad = good[::-1]  # the error is most confident
    assert aurc(y, good) < aurc(y, bad)
    assert aurc(y, good) == pytest.approx((0 + 0 + 0 + 1 / 4) / 4)
    assert aurc(y, bad) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def test_selective_accuracy():
    assert selective_accuracy(_Y10, _PROBA10, coverage=1.0) == pytest.approx(0.6)
    assert selective_accuracy(_Y10, _PROBA10, coverage=0.2) == 1.0  # 0.95, 0.92
    assert selective_accuracy(_Y10, _PROBA10, coverage=0.3) == pytest.approx(2 / 3)  # + 0.85 wrong
    assert selective_accuracy(_Y10, _PROBA10, coverage=0.01) == 1.0  # at least one row


def test_metric_bad_arguments():
    y, p = _Y10, _PROBA10
    with pytest.raises(ValueError, match=r"n_bins must be an integer >= 1, got n_bins=0"):
        expected_calibration_error(y, p, n_bins=0)
    with pytest.raises(ValueError, match=r"n_bins must be an integer >= 1, got n_bins=2\.5"):
        maximum_calibration_error(y, p, n_bins=2.5)
    with pytest.raises(
        ValueError, match=r"strategy must be one of \('uniform', 'quantile'\), got strategy='equal'"
    ):
        expected_calibration_error(y, p, strategy="equal")
    with pytest.raises(
        ValueError, match=r"proba must be 2-D .* got shape \(10,\)\. For binary probabilities"
    ):
        brier_score(y, _CONF)
    with pytest.raises(
        ValueError, match=r"y_true must have shape \(n_samples,\) = \(10,\) .* got shape \(9,\)"
    ):
        brier_score(y[:9], p)
    with pytest.raises(
        ValueError, match=r"each row of proba must sum to 1, got 10 rows that do not"
    ):
        negative_log_likelihood(y, p * 2 / 3)
    with pytest.raises(ValueError, match=r"proba must lie in \[0, 1\]"):
        negative_log_likelihood([0], [[1.5, -0.5]])
    with pytest.raises(ValueError, match=r"y_true must hold integer class indices, got dtype <U1"):
        brier_score(["a"] * 10, p)
    with pytest.raises(ValueError, match=r"coverage must be in \(0, 1\], got coverage=0"):
        selective_accuracy(y, p, coverage=0)
    with pytest.raises(ValueError, match=r"eps must be in \(0, 1\)"):
        negative_log_likelihood(y, p, eps=0.0)


# --------------------------------------------------------------------------- abstention


def test_select_threshold_meets_target_accuracy_in_95_percent_of_repetitions():
    # Binary, calibrated: confidence c ~ U(0.5, 1) and the top label is right with probability c.
    # The accuracy of rows with confidence >= t is then exactly E[c | c >= t] = (1 + t) / 2, so
    # "held-out accuracy" is known in closed form (an infinite held-out set).
    # The Clopper-Pearson bound holds at 95% for each threshold; scanning all thresholds and
    # keeping the lowest makes the guarantee approximate (about 97% here with 100 rows; it drifts
    # towards ~94-95% with thousands of rows, see the select_threshold docstring).
    rng = np.random.default_rng(8)
    target, n_cal, reps = 0.9, 100, 1000
    met = []
    for _ in range(reps):
        conf = rng.uniform(0.5, 1.0, n_cal)
        y = np.where(rng.random(n_cal) < conf, 0, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "no threshold" is a pass: abstain on all
            t = select_threshold(y, np.column_stack([conf, 1 - conf]), target_accuracy=target)
        met.append(t > 1.0 or (1.0 + t) / 2.0 >= target)
    assert np.mean(met) >= 0.95


def test_select_threshold_on_held_out_multiclass_data():
    # A sanity check of the multi-class path on real held-out draws. The held-out accuracy adds
    # its own sampling noise to the scan effect, so the hit rate here sits near, not above, 95%
    # (about 0.94-0.96 for this design); the 95% claim itself is tested above in closed form.
    rng = np.random.default_rng(9)
    accuracies, kept = [], []
    for _ in range(40):
        y_cal, p_cal = _calibrated_data(rng, 400, n_classes=4)
        y_new, p_new = _calibrated_data(rng, 20_000, n_classes=4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "no threshold": abstain on all
            t = select_threshold(y_cal, p_cal, target_accuracy=0.8)
        keep = p_new.max(axis=1) >= t
        kept.append(keep.mean())
        if keep.any():
            accuracies.append(np.mean(p_new.argmax(axis=1)[keep] == y_new[keep]))
    assert np.sum(np.array(accuracies) < 0.8) <= 6  # at least 34 of 40 hits (85%)
    assert np.mean(accuracies) > 0.8 + 0.01  # conservative on average
    assert 0.1 < np.mean(kept) < 0.9  # it neither abstains on everything nor on nothing


def test_select_threshold_coverage_mode_keeps_about_the_fraction():
    rng = np.random.default_rng(10)
    y_cal, p_cal = _calibrated_data(rng, 2000, n_classes=3)
    _, p_new = _calibrated_data(rng, 50_000, n_classes=3)
    for coverage in (0.3, 0.7, 1.0):
        t = select_threshold(y_cal, p_cal, coverage=coverage)
        assert np.sum(p_cal.max(axis=1) >= t) == int(np.ceil(coverage * 2000))  # no ties here
        assert np.mean(p_new.max(axis=1) >= t) == pytest.approx(coverage, abs=0.03)


def test_select_threshold_unreachable_target_abstains_on_everything():
    y = [0, 1, 0, 1]
    proba = [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4]]
    with pytest.warns(
        UserWarning, match=r"no confidence threshold certifies target_accuracy=0\.99"
    ):
        t = select_threshold(y, proba, target_accuracy=0.99)
    assert t > 1.0


def test_select_threshold_keeps_every_row_when_all_of_them_are_certified():
    """100 distinct confidences, all right: the bound over every row, 0.05 ** (1/100) = 0.97, certifies 0.9, so
    the threshold is the lowest confidence (no row abstained on); likewise with only the least confident row wrong."""
    conf = np.linspace(0.99, 0.6, 100)
    proba = np.column_stack([conf, 1 - conf])
    y = np.zeros(100, dtype=int)
    assert select_threshold(y, proba, target_accuracy=0.9) == conf[-1]
    y[-1] = 1  # 99 of 100 right: the bound is about 0.953
    assert select_threshold(y, proba, target_accuracy=0.9) == conf[-1]
    assert select_threshold(y, proba, target_accuracy=0.96) == conf[-2]  # 99 of 99 certify 0.970, 99 of 100 do not


def test_clopper_pearson_lower_refuses_impossible_counts():
    with pytest.raises(ValueError, match=r"counts must satisfy 0 <= n_correct <= n_total and n_total >= 1, got 2 "
                                         r"pairs that do not \(first: n_correct=3, n_total=2\)"):
        cal.clopper_pearson_lower([1, 3, 0], [1, 2, 0], 0.95)


def test_select_threshold_bad_arguments():
    y, p = _Y10, _PROBA10
    with pytest.raises(
        ValueError,
        match=r"pass exactly one of target_accuracy or coverage, got target_accuracy=None and coverage=None",
    ):
        select_threshold(y, p)
    with pytest.raises(
        ValueError,
        match=r"pass exactly one of target_accuracy or coverage, got target_accuracy=0\.9 and coverage=0\.5",
    ):
        select_threshold(y, p, target_accuracy=0.9, coverage=0.5)
    with pytest.raises(
        ValueError, match=r"target_accuracy must be in \(0, 1\), got target_accuracy=1\.0"
    ):
        select_threshold(y, p, target_accuracy=1.0)
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\), got confidence=95"):
        select_threshold(y, p, target_accuracy=0.9, confidence=95)
    with pytest.raises(ValueError, match=r"coverage must be in \(0, 1\], got coverage=1\.5"):
        select_threshold(y, p, coverage=1.5)


# --------------------------------------------------------------------------- conformal


@pytest.mark.parametrize("method, randomized", [("lac", False), ("aps", False), ("aps", True)])
def test_conformal_sets_cover_on_held_out_splits(method, randomized):
    rng = np.random.default_rng(11)
    y, proba = _calibrated_data(rng, 2000, n_classes=5)
    # a miscalibrated model: the guarantee must not depend on calibration
    proba = softmax(3.0 * np.log(proba), axis=1)
    alpha, n_cal, coverages, sizes = 0.1, 500, [], []
    for _ in range(200):
        order = rng.permutation(len(y))
        cal_rows, test_rows = order[:n_cal], order[n_cal:]
        predictor = ConformalPredictor(method, alpha, randomized=randomized, random_state=rng)
        sets = predictor.fit(y[cal_rows], proba[cal_rows]).predict_set(proba[test_rows])
        coverages.append(np.mean(sets[np.arange(len(test_rows)), y[test_rows]]))
        sizes.append(sets.sum(axis=1).mean())
    mean, sem = np.mean(coverages), np.std(coverages, ddof=1) / np.sqrt(len(coverages))
    # E[coverage] >= 1 - alpha exactly; the Monte Carlo mean is allowed 3 standard errors of noise.
    assert mean >= 1 - alpha - 3 * sem
    # and the sets are not trivially large: coverage <= 1 - alpha + 1 / (n_cal + 1) for these
    # (almost surely tie-free) scores, up to the same noise
    assert mean <= 1 - alpha + 1 / (n_cal + 1) + 3 * sem
    assert 1.0 < np.mean(sizes) < 5.0


def test_aps_sets_are_prefixes_of_the_ranking():
    rng = np.random.default_rng(12)
    y, proba = _calibrated_data(rng, 600, n_classes=6)
    sets = ConformalPredictor("aps", 0.2).fit(y[:300], proba[:300]).predict_set(proba[300:])
    ranked = np.take_along_axis(sets, np.argsort(-proba[300:], axis=1, kind="stable"), axis=1)
    assert np.all(ranked[:, :-1] >= ranked[:, 1:])  # once a class is out, all lower ones are out


def test_conformal_non_empty_option():
    # calibration rows are confident and right: every score is 1 - 0.9 = 0.1, so q = 0.1
    y_cal, p_cal = np.zeros(10, dtype=int), np.array([[0.9, 0.05, 0.05]] * 10)
    new = np.array([[0.95, 0.03, 0.02], [0.4, 0.3, 0.3], [0.2, 0.5, 0.3]])
    plain = ConformalPredictor("lac", 0.5).fit(y_cal, p_cal)
    assert plain.quantile_ == pytest.approx(0.1)
    np.testing.assert_array_equal(
        plain.predict_set(new).sum(axis=1), [1, 0, 0]
    )  # LAC sets can be empty
    filled = ConformalPredictor("lac", 0.5, non_empty=True).fit(y_cal, p_cal).predict_set(new)
    np.testing.assert_array_equal(
        filled, [[True, False, False], [True, False, False], [False, True, False]]
    )


def test_conformal_quantile_and_scores_by_hand():
    assert conformal_quantile(np.arange(1, 10) / 10, alpha=0.2) == pytest.approx(0.8)  # rank 8 of 9
    assert conformal_quantile(np.arange(1, 10) / 10, alpha=0.5) == pytest.approx(0.5)  # rank 5
    with pytest.warns(
        UserWarning, match=r"alpha=0\.05 is too small for 9 calibration scores \(need at least 19\)"
    ):
        assert conformal_quantile(np.arange(1, 10) / 10, alpha=0.05) == np.inf
    np.testing.assert_allclose(conformity_scores([[0.2, 0.5, 0.3]], "aps"), [[1.0, 0.5, 0.8]])
    np.testing.assert_allclose(conformity_scores([[0.2, 0.5, 0.3]], "lac"), [[0.8, 0.5, 0.7]])
    randomized = conformity_scores([[0.2, 0.5, 0.3]], "aps", randomized=True, random_state=0)
    assert np.all(randomized <= conformity_scores([[0.2, 0.5, 0.3]], "aps"))
    assert np.all(randomized >= [[0.8, 0.0, 0.5]])


def test_conformal_method_order_and_bad_arguments():
    with pytest.raises(
        NotCalibratedError, match=r"call fit\(y_true, proba\) before calling predict_set\(\)"
    ):
        ConformalPredictor().predict_set(_PROBA10)
    for alpha in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=r"alpha must be in \(0, 1\), got alpha="):
            ConformalPredictor("lac", alpha).fit(_Y10, _PROBA10)
    with pytest.raises(
        ValueError, match=r"method must be one of \('lac', 'aps'\), got method='raps'"
    ):
        ConformalPredictor("raps").fit(_Y10, _PROBA10)
    with pytest.raises(
        ValueError, match=r"randomized=True only applies to method='aps', got method='lac'"
    ):
        ConformalPredictor("lac", randomized=True).fit(_Y10, _PROBA10)
    fitted = ConformalPredictor("lac", 0.5).fit(_Y10, _PROBA10)
    default = ConformalPredictor(alpha=0.5).fit(_Y10, _PROBA10)  # the default method is LAC
    assert default.method == "lac" and default.quantile_ == fitted.quantile_
    with pytest.raises(
        ValueError, match=r"proba must have 3 columns as in fit, got shape \(1, 2\)"
    ):
        fitted.predict_set([[0.5, 0.5]])
    with pytest.raises(ValueError, match=r"scores must be a non-empty 1-D array"):
        conformal_quantile([], alpha=0.1)


# --------------------------------------------------------------------------- displays


def test_displays_compute_without_matplotlib():
    diagram = ReliabilityDiagram.from_predictions(_Y10, _PROBA10, n_bins=5)
    assert diagram.ece == pytest.approx(expected_calibration_error(_Y10, _PROBA10, n_bins=5))
    np.testing.assert_array_equal(diagram.bin_count, [0, 1, 2, 3, 4])
    assert diagram.bin_edges.shape == (6,) and diagram.bin_accuracy.shape == (5,)
    curve = RiskCoverageDisplay.from_predictions(_Y10, _PROBA10)
    assert curve.aurc == pytest.approx(aurc(_Y10, _PROBA10))
    assert curve.coverage[-1] == 1.0 and not hasattr(curve, "ax_")


def test_displays_plot_to_png(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(14)
    y, proba = _calibrated_data(rng, 500, n_classes=4)
    diagram = ReliabilityDiagram.from_predictions(y, proba, n_bins=10).plot(name="synthetic")
    curve = RiskCoverageDisplay.from_predictions(y, proba).plot()
    try:
        assert diagram.ax_.figure is diagram.figure_
        legend = [text.get_text() for text in diagram.ax_.get_legend().get_texts()]
        assert any(label.startswith("synthetic, ECE = ") for label in legend)
        for display, name in ((diagram, "reliability.png"), (curve, "risk_coverage.png")):
            display.figure_.savefig(tmp_path / name)
            assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        fig, axes = plt.subplots(1, 2)
        assert ReliabilityDiagram.from_predictions(y, proba).plot(ax=axes[0]).figure_ is fig
        sharper = softmax(2.0 * np.log(proba), axis=1)
        ReliabilityDiagram.from_predictions(y, sharper).plot(ax=axes[0], name="sharper")
        labels = [line.get_label() for line in axes[0].get_lines()]
        assert labels.count("perfectly calibrated") == 1 and len(labels) == 3  # overlays
        assert RiskCoverageDisplay.from_predictions(y, proba).plot(ax=axes[1]).ax_ is axes[1]
        plt.close(fig)
    finally:
        plt.close(diagram.figure_)
        plt.close(curve.figure_)


# ------------------------------------------- noise floor, intervals, coverage at a target accuracy, joint fit
def _calibrated_sample(n, k=4, seed=0):
    """Rows whose labels are drawn from their own probabilities: perfectly calibrated by construction."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.5), n)
    y = np.array([rng.choice(k, p=row) for row in p])
    return y, p


def test_ece_noise_floor_matches_a_calibrated_model_and_shrinks_with_n():
    y, p = _calibrated_sample(400)
    floor, sd = cal.ece_noise_floor(p, n_resamples=300)
    measured = expected_calibration_error(y, p)
    assert abs(measured - floor) < 3 * sd + 1e-9  # a calibrated model's ECE is its noise floor, within noise
    big_floor, _ = cal.ece_noise_floor(_calibrated_sample(20000)[1], n_resamples=50)
    assert big_floor < floor / 3  # ~ 1 / sqrt(n)
    # a miscalibrated model (overconfident) sits far above its floor
    sharp = softmax(3 * np.log(p), axis=1)
    f2, sd2 = cal.ece_noise_floor(sharp, n_resamples=100)
    assert expected_calibration_error(y, sharp) > f2 + 5 * sd2


def test_ece_noise_floor_rejects_bad_arguments():
    _, p = _calibrated_sample(10)
    with pytest.raises(ValueError, match="n_resamples"):
        cal.ece_noise_floor(p, n_resamples=0)
    with pytest.raises(ValueError, match="n_bins"):
        cal.ece_noise_floor(p, n_bins=0)


def test_bootstrap_interval_brackets_the_point_and_covers_the_truth():
    acc = lambda yy, pp: float((pp.argmax(1) == yy).mean())  # noqa: E731
    hits = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        correct = rng.random(200) < 0.7  # true accuracy 0.7
        p = np.tile([0.6, 0.4], (200, 1))
        y = np.where(correct, 0, 1)
        lo, hi = cal.bootstrap_interval(acc, y, p, n_resamples=300, seed=seed)
        assert lo <= acc(y, p) <= hi
        hits += lo <= 0.7 <= hi
    assert hits >= 34  # a 95% interval covers the truth in most of 40 draws
    with pytest.raises(ValueError, match="level"):
        cal.bootstrap_interval(acc, y, p, level=1.5)


def test_coverage_at_accuracy_by_hand():
    y = [0, 0, 1, 1]
    p = [[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.4, 0.6]]  # right, right, wrong, right by confidence order
    assert cal.coverage_at_accuracy(y, p, 1.0) == 0.5
    assert cal.coverage_at_accuracy(y, p, 0.75) == 1.0
    assert cal.coverage_at_accuracy([1, 1], [[0.9, 0.1], [0.8, 0.2]], 0.5) == 0.0
    with pytest.raises(ValueError, match="target"):
        cal.coverage_at_accuracy(y, p, 0.0)


def test_fit_bias_temperature_recovers_a_planted_bias_and_temperature():
    rng = np.random.default_rng(1)
    n, k = 4000, 5
    true = rng.normal(0, 2, (n, k))
    y = np.array([rng.choice(k, p=row) for row in softmax(true, axis=1)])
    planted = np.array([1.5, -0.5, 0.0, 0.7, -1.7])
    observed = 2.0 * true + planted  # T = 2, bias b: softmax((observed - b) / T) is the truth
    b, T = cal.fit_bias_temperature(observed, y, l2=0.0)
    assert abs(T - 2.0) < 0.15
    np.testing.assert_allclose(b - b.mean(), planted - planted.mean(), atol=0.3)
    # no worse than contextual-free temperature scaling alone, on held-out rows
    fit = TemperatureScaler().fit(observed[:2000], y[:2000])
    b2, T2 = cal.fit_bias_temperature(observed[:2000], y[:2000], l2=1.0)
    nll_joint = -np.mean(log_softmax((observed[2000:] - b2) / T2, axis=1)[np.arange(2000), y[2000:]])
    nll_temp = -np.mean(np.log(fit.predict_proba(observed[2000:])[np.arange(2000), y[2000:]]))
    assert nll_joint < nll_temp


def test_fit_bias_temperature_stops_at_its_temperature_bound_on_separable_labels():
    """Labels that a 0.001-nat difference separates perfectly: the likelihood keeps improving as T -> 0; the fit
    stops at T = exp(-5) (log T is bounded to [-5, 5]), so the probabilities stay finite, not a hard argmax."""
    z = np.array([[0.001, 0.0], [0.0, 0.001]] * 20)
    b, T = cal.fit_bias_temperature(z, np.array([0, 1] * 20), l2=0.0)
    assert T == pytest.approx(np.exp(-5.0), rel=1e-9)
    np.testing.assert_allclose(b, 0.0, atol=1e-12)


def test_fit_bias_temperature_keeps_impossible_labels_and_checks_input():
    rng = np.random.default_rng(2)
    s = rng.normal(size=(50, 3))
    s[:, 2] = -np.inf
    y = rng.integers(0, 2, 50)
    b, T = cal.fit_bias_temperature(s, y)
    assert np.all(np.isfinite(b)) and T > 0
    with pytest.raises(ValueError, match="class index"):
        cal.fit_bias_temperature(s, np.full(50, 3))
    with pytest.raises(ValueError, match=r"class index .* got shape \(49,\), dtype int"):
        cal.fit_bias_temperature(s, y[:49])  # integer labels, one short
    with pytest.raises(ValueError, match=r"class index .* got shape \(50,\), dtype float64"):
        cal.fit_bias_temperature(s, y.astype(float))  # the right shape, not indices
    with pytest.raises(ValueError, match="l2"):
        cal.fit_bias_temperature(s, y, l2=-1)


def test_calibration_report_has_baselines_intervals_and_floor():
    y, p = _calibrated_sample(300, k=3)
    r = cal.calibration_report(y, p, n_resamples=200)
    assert r["n"] == 300 and r["uniform"] == pytest.approx(1 / 3)
    assert r["majority"]["accuracy"] == pytest.approx(np.bincount(y).max() / 300)
    assert r["accuracy_ci"][0] <= r["accuracy"] <= r["accuracy_ci"][1]
    assert r["ece_ci"][0] <= r["ece"] <= r["ece_ci"][1]
    assert r["ece_over_floor"] == pytest.approx(r["ece"] / r["ece_floor"])
    assert set(r["coverage_at_accuracy"]) == {"0.5", "0.7"}


def test_calibration_report_resamples_as_asked_and_scores_an_empty_class_as_zero_silently():
    """The intervals are bootstrap_interval's at the report's n_resamples, level and seed; macro-F1 averages over
    every class, one neither present nor predicted counting 0, without a warning (a fourth, empty column here)."""
    y, p3 = _calibrated_sample(120, k=3, seed=5)
    p = np.column_stack([p3, np.zeros(len(y))])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = cal.calibration_report(y, p, n_resamples=40, level=0.8, seed=7)
    boot = dict(n_resamples=40, level=0.8, seed=7)
    assert r["accuracy_ci"] == cal.bootstrap_interval(lambda yy, pp: float(np.mean(pp.argmax(1) == yy)), y, p, **boot)
    assert r["ece_ci"] == cal.bootstrap_interval(expected_calibration_error, y, p, **boot)
    pred = p.argmax(1)
    f1 = [2 * np.sum((pred == c) & (y == c)) / max(1, np.sum(pred == c) + np.sum(y == c)) for c in range(4)]
    assert r["macro_f1"] == pytest.approx(np.mean(f1)) and f1[3] == 0
    share = np.bincount(y, minlength=4).max() / len(y)  # the majority class: precision = share, recall = 1
    assert r["majority"]["macro_f1"] == pytest.approx(2 * share / (share + 1) / 4)


# --------------------------------------------------------------------------- choosing the bias L2


def test_choose_bias_l2_picks_the_lowest_out_of_fold_nll():
    """Recompute every candidate's out-of-fold NLL here (same seeded folds, NLL from the held-out
    probabilities) and check the choice is the lowest, the stronger penalty on a tie."""
    from sklearn.model_selection import StratifiedKFold

    from judge.calibration.state import Calibration, choose_bias_l2

    rng = np.random.default_rng(3)
    n, k = 300, 4
    y = rng.integers(0, k, n)
    planted = np.array([2.0, 0.0, 0.0, -1.0])  # a label bias only a free fitted bias can undo
    s = log_softmax(rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y] + planted, axis=1)
    grid = (0.01, 1.0, 1e4)
    got = choose_bias_l2(s, y, None, grid=grid, folds=5, seed=0)
    nll = dict.fromkeys(grid, 0.0)
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(s, y):
        for g in grid:
            p = Calibration.fit(tuple(range(k)), s[tr], y[tr], fit_bias=g).transform(s[te])
            nll[g] -= np.log(p[np.arange(len(te)), y[te]]).sum()
    nll = {g: v / n for g, v in nll.items()}
    assert got["l2"] == min(grid, key=lambda g: (round(nll[g], 10), -g))
    assert dict(zip(got["grid"], got["nll"])) == pytest.approx(nll, rel=1e-7)
    assert max(nll, key=nll.get) == 1e4 and got["l2"] != 1e4  # the near-frozen bias cannot undo the plant


@pytest.mark.parametrize("planted, want_none", [(np.array([2.0, 0.0, 0.0, -1.0]), False), (np.zeros(4), True)])
def test_choose_bias_l2_with_none_scores_temperature_alone(planted, want_none):
    """``with_none``: temperature alone is one more candidate, recomputed here on the same folds; it
    wins where there is no label bias to remove and loses where one is planted."""
    from sklearn.model_selection import StratifiedKFold

    from judge.calibration.state import Calibration, choose_bias_l2

    rng = np.random.default_rng(5)
    n, k = 300, 4
    y = rng.integers(0, k, n)
    s = log_softmax(rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y] + planted, axis=1)
    got = choose_bias_l2(s, y, "batch", grid=(0.1, 1.0), with_none=True)
    none = 0.0
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(s, y):
        p = Calibration.fit(tuple(range(k)), s[tr], y[tr]).transform(s[te])
        none -= np.log(p[np.arange(len(te)), y[te]]).sum()
    assert got["nll_none"] == pytest.approx(none / n, rel=1e-7)
    assert (got["l2"] is None) == want_none == (got["nll_none"] <= min(got["nll"]))
    assert choose_bias_l2(s, y, "batch", grid=(0.1, 1.0))["nll_none"] is None  # not asked: not scored


def test_choose_bias_l2_fits_the_batch_prior_on_each_training_fold_only():
    """``prior="batch"``: each fold's prior is the batch prior of its training rows (recomputed here on the
    same seeded folds), never of every row: a prior from all rows would let the held-out texts' scores into
    the calibration they are then scored by, and the choice the README reports as out-of-fold would not be."""
    from sklearn.model_selection import StratifiedKFold

    from judge.calibration.bias import batch_bias
    from judge.calibration.state import Calibration, choose_bias_l2

    rng = np.random.default_rng(7)
    n, k = 200, 4
    y = rng.integers(0, k, n)
    s = log_softmax(rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y] + [1.5, 0.0, -0.5, 0.0], axis=1)
    s[:40] += [0.0, 2.0, 0.0, 0.0]  # the rows differ in their drift: each fold's prior is its own
    grid = (0.1, 1.0, 1e4)
    got = choose_bias_l2(s, y, "batch", grid=grid, folds=5, seed=0)
    fold_prior, all_rows = dict.fromkeys(grid, 0.0), dict.fromkeys(grid, 0.0)
    for tr, te in StratifiedKFold(5, shuffle=True, random_state=0).split(s, y):
        for prior, out in ((batch_bias(s[tr]), fold_prior), (batch_bias(s), all_rows)):
            for g in grid:
                p = Calibration.fit(tuple(range(k)), s[tr], y[tr], bias=prior, fit_bias=g).transform(s[te])
                out[g] -= np.log(p[np.arange(len(te)), y[te]]).sum() / n
    assert dict(zip(got["grid"], got["nll"])) == pytest.approx(fold_prior, rel=1e-7)
    assert abs(all_rows[1e4] - fold_prior[1e4]) > 1e-4  # the leak would show: the check can fail
    assert got["l2"] == min(grid, key=lambda g: (round(fold_prior[g], 10), -g))


def test_choose_bias_l2_breaks_ties_for_no_bias_then_the_strongest_penalty(monkeypatch):
    """Every candidate with the same out-of-fold NLL: no bias wins (with_none), else the strongest L2."""
    import judge.calibration.metrics as metrics
    from judge.calibration.state import choose_bias_l2

    monkeypatch.setattr(metrics, "negative_log_likelihood", lambda y, p: 0.5)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 10)
    s = log_softmax(rng.normal(size=(30, 3)), axis=1)
    assert choose_bias_l2(s, y, "batch", grid=(0.1, 10.0, 1.0), with_none=True)["l2"] is None
    got = choose_bias_l2(s, y, "batch", grid=(0.1, 10.0, 1.0))
    assert got["l2"] == 10.0 and got["grid"] == [10.0, 1.0, 0.1] and got["nll"] == [0.5] * 3


@pytest.mark.parametrize("per_class, stratified", [(5, True), (4, False)])
def test_choose_bias_l2_folds_are_stratified_when_every_class_fills_them(per_class, stratified):
    """Five folds: stratified when every class has at least five rows (exactly five here), plain seeded shuffled
    folds when one has fewer; recomputed on those folds."""
    from sklearn.model_selection import KFold, StratifiedKFold

    from judge.calibration.state import Calibration, choose_bias_l2

    rng = np.random.default_rng(11)
    y = np.concatenate([np.repeat([0, 1], 12), np.full(per_class, 2)])
    s = log_softmax(rng.normal(size=(len(y), 3)) + 1.5 * np.eye(3)[y], axis=1)
    split = (StratifiedKFold(5, shuffle=True, random_state=3).split(s, y) if stratified
             else KFold(5, shuffle=True, random_state=3).split(s))
    nll = 0.0
    for tr, te in split:
        p = Calibration.fit(tuple(range(3)), s[tr], y[tr], fit_bias=1.0).transform(s[te])
        nll -= np.log(p[np.arange(len(te)), y[te]]).sum() / len(y)
    assert choose_bias_l2(s, y, None, grid=(1.0,), folds=5, seed=3)["nll"] == [pytest.approx(nll, rel=1e-7)]


def test_calibration_fit_reads_scores_and_bias_as_float64():
    from judge.calibration.state import Calibration

    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 40)
    s = log_softmax(rng.normal(size=(40, 3)) * 3 + np.eye(3)[y], axis=1)
    b = np.array([0.3, -0.1, 0.0])
    want = Calibration.fit(tuple("abc"), s, y, bias=b, fit_bias=1.0)
    s32, b32 = s.astype(np.float32), b.astype(np.float32)
    got = Calibration.fit(tuple("abc"), s32, y, bias=b32, fit_bias=1.0)
    np.testing.assert_allclose(got.bias, Calibration.fit(tuple("abc"), s32.astype(np.float64), y,
                                                         bias=b32.astype(np.float64), fit_bias=1.0).bias, rtol=0,
                               atol=0)
    assert got.bias.dtype == np.float64 and got.proba.dtype == np.float64
    np.testing.assert_allclose(got.proba, want.proba, atol=1e-5)
    t = Calibration.fit(tuple("abc"), s32, y)
    assert t.temperature == Calibration.fit(tuple("abc"), s32.astype(np.float64), y).temperature
    assert Calibration.fit(tuple("abc"), s, y, bias=b32).bias.dtype == np.float64  # as documented


@pytest.mark.parametrize("name, value, ok", [("coverage", 1.0, True), ("target_accuracy", 1.0, False),
                                             ("confidence", 1.0, False), ("coverage", 1.5, False),
                                             ("target_accuracy", 0.0, False), ("target_accuracy", 0.99, True)])
def test_calibrate_args_bounds_and_messages(name, value, ok):
    """coverage may be 1 (keep every row); an accuracy target or a confidence of 1 cannot be met: refused,
    with the interval named."""
    from judge.calibration.state import check_calibrate_args

    kw = {"target_accuracy": None, "coverage": None, "confidence": 0.95, name: value}
    n = 400  # enough texts that any target below 1 could be certified (fewer are refused for that reason)
    call = lambda: check_calibrate_args(n, np.arange(n) % 2, 2, bias="auto", bias_l2=1.0, temperature=True,  # noqa: E731
                                        scores=None, **kw)
    if ok:
        assert call() is None
    else:
        span = r"\(0, 1\]" if name == "coverage" else r"\(0, 1\)"
        with pytest.raises(ValueError, match=rf"^{name} must be a number in {span}, got {value!r}\.$"):
            call()


def test_calibration_fit_threshold_uses_the_given_confidence():
    from judge.calibration.abstention import select_threshold
    from judge.calibration.state import Calibration

    rng = np.random.default_rng(8)
    y = rng.integers(0, 3, 300)
    s = log_softmax(rng.normal(size=(300, 3)) * 2 + 3.0 * np.eye(3)[y], axis=1)
    got = {}
    for conf in (0.5, 0.99):
        cal = Calibration.fit(tuple("abc"), s, y, target_accuracy=0.8, confidence=conf)
        assert cal.threshold == select_threshold(y, cal.proba, target_accuracy=0.8, confidence=conf)
        got[conf] = cal.threshold
    assert got[0.5] < got[0.99]  # more confidence in the bound: a stricter threshold


def test_calibration_report_values_and_validation_bounds():
    """The report's numbers, recomputed; a threshold may be just above 1 (what select_threshold returns when no
    threshold passes) but not beyond the float tolerance; a label index of K is refused."""
    from judge.calibration.metrics import expected_calibration_error, negative_log_likelihood
    from judge.calibration.state import Calibration

    rng = np.random.default_rng(9)
    y = rng.integers(0, 3, 80)
    s = log_softmax(rng.normal(size=(80, 3)) * 2 + np.eye(3)[y] + [1.0, 0.0, 0.0], axis=1)
    cal = Calibration.fit(tuple("abc"), s, y, bias=np.array([0.5, 0.0, -0.5]), bias_method="contextual",
                          coverage=0.5)
    raw = softmax(s, axis=1)
    assert {k: cal.report[k] for k in ("n", "bias", "bias_l2", "temperature", "threshold")} == {
        "n": 80, "bias": "contextual", "bias_l2": None, "temperature": cal.temperature, "threshold": cal.threshold}
    kept = cal.proba.max(1) >= cal.threshold
    assert {k: cal.report[k] for k in ("target_accuracy", "coverage_target", "confidence", "coverage")} == {
        "target_accuracy": None, "coverage_target": 0.5, "confidence": None, "coverage": float(kept.mean())}
    assert cal.report["selective_accuracy"] == pytest.approx(float((cal.proba.argmax(1) == y)[kept].mean()), rel=1e-12)
    assert cal.report["measured_on"].startswith("the 80 calibration texts, in-sample")
    given = ("n", "bias", "bias_l2", "temperature", "threshold", "target_accuracy", "coverage_target", "confidence",
             "coverage", "selective_accuracy", "measured_on")
    assert set(cal.report) == {*given, "accuracy_raw", "accuracy", "ece_raw", "ece", "nll_raw", "nll"}
    assert {k: v for k, v in cal.report.items() if k not in given} \
        == pytest.approx({
        "accuracy_raw": float((raw.argmax(1) == y).mean()), "accuracy": float((cal.proba.argmax(1) == y).mean()),
        "ece_raw": expected_calibration_error(y, raw), "ece": expected_calibration_error(y, cal.proba),
        "nll_raw": negative_log_likelihood(y, raw), "nll": negative_log_likelihood(y, cal.proba)}, rel=1e-12)
    assert cal.report["accuracy"] != cal.report["accuracy_raw"] or cal.report["ece"] != cal.report["ece_raw"]
    p, yy = np.full((2, 2), 0.5), np.array([0, 1])
    Calibration(("a", "b"), None, None, float(np.nextafter(1.0, np.inf)), p, yy)  # abstain on every row
    Calibration(("a", "b"), None, None, 1.0 + 1e-9, p, yy)
    with pytest.raises(ValueError, match=r"threshold must be a probability in \[0, 1\], got 1\.00001"):
        Calibration(("a", "b"), None, None, 1.00001, p, yy)
    with pytest.raises(ValueError, match=r"^calibration y holds label indices outside \[0, 2\)\.$"):
        Calibration(("a", "b"), None, None, None, p, np.array([0, 2]))


def test_prior_bias_contextual_comes_from_the_content_free_scores_and_transform_reads_float64():
    from judge.calibration.bias import batch_bias, contextual_bias
    from judge.calibration.state import Calibration, prior_bias

    rng = np.random.default_rng(12)
    s = log_softmax(rng.normal(size=(20, 3)), axis=1)
    cf = log_softmax(rng.normal(size=(2, 3)) + [2.0, 0.0, 0.0], axis=1)
    np.testing.assert_array_equal(prior_bias("contextual", s, cf), contextual_bias(cf))
    np.testing.assert_array_equal(prior_bias("batch", s, cf), batch_bias(s))
    assert prior_bias(None, s, cf) is None
    cal = Calibration(tuple("abc"), None, 1.7, None, np.full((1, 3), 1 / 3), np.array([0]))
    s32 = (s * 10).astype(np.float32)
    np.testing.assert_allclose(cal.transform(s32), cal.transform(s32.astype(np.float64)), rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match=r"^calibration proba holds NaN or infinite values; refit with calibrate\(\)\.$"):
        Calibration(tuple("ab"), None, None, None, np.array([[np.nan, 1.0]]), np.array([0]))


# ----------------------------------------------------------------------------- calibration.state's survivors
def _separable(n=60, k=3, seed=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    return rng.normal(size=(n, k)) + 2.0 * np.eye(k)[y], y


def test_fit_resolved_takes_the_contextual_prior_from_the_content_free_scores():
    from judge.calibration.bias import contextual_bias
    from judge.calibration.state import fit_resolved

    s, y = _separable()
    cf = np.random.default_rng(7).normal(size=(4, 3))
    cal = fit_resolved(tuple("abc"), s, y, ("contextual", None, "contextual"), content_free_scores=cf)
    np.testing.assert_allclose(cal.bias, contextual_bias(cf), rtol=0, atol=1e-12)


def test_a_jointly_fitted_bias_keeps_its_fitted_temperature():
    from judge.calibration.bias import fit_bias_temperature
    from judge.calibration.state import Calibration

    s, y = _separable()
    cal = Calibration.fit(tuple("abc"), s, y, fit_bias=1.0)
    _, T = fit_bias_temperature(s, y, l2=1.0)
    assert isinstance(cal.temperature, float) and cal.temperature == float(T)


def test_choose_bias_l2_reads_float_labels_as_the_same_classes():
    from judge.calibration.state import choose_bias_l2

    s, y = _separable()
    assert choose_bias_l2(s, y.astype(np.float64), "batch") == choose_bias_l2(s, y, "batch")


def test_choose_bias_l2_stratifies_into_the_folds_asked_for():
    """Three rows per class and folds=3: stratified three-fold, with no warning about classes smaller
    than the number of splits (a stratified split of another size would raise that warning)."""
    from judge.calibration.state import choose_bias_l2

    y = np.repeat(np.arange(3), 3)
    s = np.random.default_rng(1).normal(size=(9, 3)) + 2.0 * np.eye(3)[y]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = choose_bias_l2(s, y, "batch", folds=3)
    assert set(out) >= {"l2"}
