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


def test_a_sparse_or_dataframe_indicator_matrix_is_read_as_one():
    import pandas as pd
    from scipy import sparse

    Y = np.array([[1, 0, 1], [0, 1, 0]])
    np.testing.assert_array_equal(multilabel.as_indicator(sparse.csr_matrix(Y), LABELS), Y)
    np.testing.assert_array_equal(multilabel.as_indicator(pd.DataFrame(Y, columns=LABELS), LABELS), Y)


def test_a_label_given_to_every_or_no_training_text_gets_a_constant_logit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    Y = np.stack([(X[:, 0] > 0), np.ones(40), np.zeros(40)], 1).astype(int)
    head = multilabel.fit_multilabel(X, Y, cv=2)
    z = head.logits(rng.normal(size=(5, 3)))
    assert z.dtype == np.float64
    np.testing.assert_array_equal(z[:, 1], 8.0)
    np.testing.assert_array_equal(z[:, 2], -8.0)


def test_an_indicator_matrix_comes_back_as_int64_and_ten_labels_are_listed_whole():
    Y = multilabel.as_indicator(np.array([[True, False, True]]), LABELS)
    assert Y.dtype == np.int64 and Y.tolist() == [[1, 0, 1]]
    ten = [f"l{i}" for i in range(10)]
    with pytest.raises(ValueError, match=r"'l9'\]\.$"):
        multilabel.as_indicator([["hail"]], ten)
    with pytest.raises(ValueError, match=r"'l9'\] \.\.\.\.$"):
        multilabel.as_indicator([["hail"]], ten + ["l10"])


def test_the_best_f1_cut_is_the_midpoint_and_can_be_below_every_probability():
    p = np.array([[0.9], [0.8], [0.7], [0.6]])
    assert multilabel.per_label_thresholds(p, np.array([[1], [1], [1], [0]]))[0] == pytest.approx(0.65)
    # every text has the label: the best cut gives it to all of them (below the lowest probability)
    assert multilabel.per_label_thresholds(p, np.ones((4, 1), int))[0] < 0.6


def test_a_single_target_is_refused_with_what_it_is():
    with pytest.raises(ValueError, match="every target here is 1"):
        multilabel.calibrate_multilabel(np.zeros((1, 1)), np.ones((1, 1), int))


def test_the_report_counts_the_rows_given_no_label():
    r = multilabel.multilabel_f1(np.array([[1, 0], [0, 1]]), np.array([[1, 0], [0, 0]]))
    assert r["empty_share"] == 0.5


def test_a_label_with_three_positives_gets_its_own_threshold_and_fewer_the_pooled_one():
    rng = np.random.default_rng(3)
    p = rng.random((60, 2))
    Y = np.zeros((60, 2), int)
    Y[np.argsort(-p[:, 0])[:3], 0] = 1  # three positives, the three most probable: the cut right below them
    Y[np.argsort(-p[:, 1])[:2], 1] = 1  # two positives: the pooled threshold
    th = multilabel.per_label_thresholds(p, Y)
    assert np.sort(p[:, 0])[-4] < th[0] < np.sort(p[:, 0])[-3]
    pooled = multilabel.per_label_thresholds(p, Y, min_positives=10)
    assert th[1] == pooled[1] == pooled[0]


def test_a_fold_without_a_labels_positive_still_fits_and_the_calibration_strength_is_used():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    Y = np.zeros((40, 2), int)
    Y[:, 0] = X[:, 0] > 0
    Y[7, 1] = 1  # one positive: the folds that hold it out train on none
    head = multilabel.fit_multilabel(X, Y, cv=4)
    assert head.logits(X).shape == (40, 2)
    z = rng.normal(size=(300, 2)) + 2 * (Y2 := rng.integers(0, 2, (300, 2)))
    loose, tight = multilabel.calibrate_multilabel(z, Y2), multilabel.calibrate_multilabel(z, Y2, C=1e-4)
    assert np.abs(loose.a - tight.a).max() > 0.1


def test_the_cut_ranks_by_f1_and_an_unreachable_precision_gives_the_label_to_no_text():
    p = np.array([[0.95], [0.9], [0.8], [0.7], [0.6], [0.5]])
    # cuts: after 1 (P 1, R 1/3, F1 .5), after 3 (P 2/3, R 2/3, F1 .667), after 6 (P .5, R 1, F1 .667: later tie)
    Y = np.array([[1], [0], [1], [0], [0], [1]])
    assert multilabel.per_label_thresholds(p, Y, min_positives=1)[0] == pytest.approx(0.75)
    top = np.array([[1.0], [0.9], [0.8], [0.7]])
    never = multilabel.per_label_thresholds(top, np.array([[0], [1], [1], [1]]), target_precision=0.99)
    assert never[0] > 1.0  # not even a probability of exactly 1 gets it


def test_the_regularisation_is_chosen_by_cross_validation_from_six_texts():
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(2, 0.3, (2, 2)), rng.normal(-2, 0.3, (4, 2))]
    Y = np.r_[np.ones(2), np.zeros(4)].astype(int)[:, None]
    # C = 1e-6 leaves the intercept (a third are positive: below 0) to answer no everywhere: F1 0
    head = multilabel.fit_multilabel(X, Y, Cs=(1e-6, 10.0), cv=3)  # n == 2 * cv: still cross-validated
    assert np.abs(head.coef).max() > 0.1
    # a label given to most texts whatever X says: the intercept alone is best, and the CV must add it
    X = rng.normal(size=(60, 3))
    Y = (rng.random((60, 1)) < 0.8).astype(int)
    head = multilabel.fit_multilabel(X, Y, Cs=(1e-6, 1e3), cv=3)
    assert np.abs(head.coef).max() < 1e-3


def test_the_head_standardises_with_the_training_mean_and_fits_from_two_texts():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2)) + 100.0  # far from 0: the standardisation must subtract the mean
    Y = (X[:, :1] > 100.0).astype(int)
    head = multilabel.fit_multilabel(X, Y, cv=3)
    assert ((head.logits(X) > 0) == Y).mean() > 0.9
    few = multilabel.fit_multilabel(X[:2], np.array([[1], [0]]), cv=3)  # fewer than 2 * cv texts: no CV
    assert few.logits(X[:2]).shape == (2, 1)


def test_cuts_between_tied_probabilities_are_not_taken():
    p = np.array([[0.9], [0.9], [0.5], [0.5]])
    th = multilabel.per_label_thresholds(p, np.array([[1], [0], [1], [0]]), min_positives=1)[0]
    assert th == pytest.approx(0.7) or th < 0.5  # between the two distinct values, or below all: never inside a tie
