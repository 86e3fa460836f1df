"""The arithmetic of multi-label answers (judge.multilabel.models): thresholds that recover planted ones, per-label
Platt scaling, targets refused with what was given."""

from __future__ import annotations

import numpy as np
import pytest

from judge import multilabel

LABELS = ["rain", "sun", "snow"]


def test_thresholds_recover_planted_ones_on_synthetic_scores():
    rng = np.random.default_rng(0)
    n, K = 3000, 4
    planted = np.array([0.2, 0.4, 0.6, 0.8])
    p = rng.random((n, K))
    Yp = (p >= planted).astype(int)
    th = multilabel.per_label_thresholds(p, Yp)
    assert np.abs(th - planted).max() < 0.01
    # a target precision: the lowest threshold reaching it
    noisy = np.where(rng.random((n, K)) < 0.1, 1 - Yp, Yp)
    th90 = multilabel.per_label_thresholds(p, noisy, target_precision=0.9)
    for k in range(K):
        given = p[:, k] >= th90[k]
        assert noisy[given, k].mean() >= 0.9


def test_calibrate_fits_a_scaling_and_threshold_per_label():
    rng = np.random.default_rng(1)
    n = 2000
    Y = rng.integers(0, 2, (n, 3))
    z = np.stack([1.0 * (2 * Y[:, 0] - 1), 0.5 * (2 * Y[:, 1] - 1), 1.5 * (2 * Y[:, 2] - 1)], 1) + rng.normal(size=(n, 3))
    s = multilabel.calibrate_multilabel(z, Y)
    assert s.a.shape == s.b.shape == s.threshold.shape == (3,)
    # two unit Gaussians at -c and +c: the true scaling is a = 2c (2, 1, 3), the bias 0
    assert s.a[2] > s.a[0] > s.a[1]
    assert np.abs(s.a - [2.0, 1.0, 3.0]).max() < 0.3 and np.abs(s.b).max() < 0.2
    with pytest.raises(ValueError, match="both given and absent"):
        multilabel.calibrate_multilabel(z, np.ones_like(Y))
    with pytest.raises(ValueError, match="target_precision"):
        multilabel.calibrate_multilabel(z, Y, target_precision=1.5)


@pytest.mark.parametrize("y, match", [
    ([["rain"], "sun"], r"y\[1\] must be a list of labels"),
    ([["rain"], ["hail"]], r"y\[1\] has a label that is not one of"),
    (np.ones((2, 2)), "one column per label"),
    (np.full((2, 3), 2), "only 0 and 1"),
    ("rain", "got a string"),
])
def test_bad_targets_are_refused_with_what_was_given(y, match):
    with pytest.raises((TypeError, ValueError), match=match):
        multilabel.as_indicator(y, LABELS)
