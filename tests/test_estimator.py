"""The Classifier as a scikit-learn estimator: clone, score, cross_val_score, GridSearchCV, Pipeline, MAPIE, pickle.

scikit-learn's own estimator checks that apply to a classifier of texts run here (``APPLICABLE``);
the others feed numeric arrays or test a contract this classifier breaks on purpose (``NOT_APPLICABLE``,
each with its reason; the docs' scikit-learn page lists them too).
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import estimator_checks

from judge import Classifier
from judge.testing import tiny_pair

TEXTS = ["good movie", "great film", "loved it", "awful", "terrible film", "hated it", "nice", "bad", "superb",
         "boring", "fine work", "worst"]
Y = ["pos", "pos", "pos", "neg", "neg", "neg", "pos", "neg", "pos", "neg", "pos", "neg"]
FIT = {"features": "hidden", "l2": 0.1}  # one head per fold, no inner cross-validation: seconds on the tiny model

APPLICABLE = ("check_estimator_cloneable", "check_get_params_invariance", "check_set_params",
              "check_parameters_default_constructible", "check_estimator_repr", "check_estimator_tags_renamed",
              "check_valid_tag_types", "check_estimator_sparse_tag", "check_mixin_order",
              "check_n_features_in_after_fitting")
NOT_APPLICABLE = {
    "numeric X (check_estimators_pickle, check_dont_overwrite_parameters, check_fit_check_is_fitted, "
    "check_dict_unchanged, check_fit_idempotent, check_estimators_overwrite_params, "
    "check_positive_only_tag_during_fit, check_classifier_not_supporting_multiclass and the other data checks)":
        "they feed arrays of numbers; the input is a list of texts (tags: string, not two_d_array); "
        "pickling, idempotent fit and untouched parameters are tested here on texts instead",
    "check_no_attributes_set_in_init":
        "a zero-shot classifier answers before fit: its fitted slots (calibration_, adaptation_, fusion_) "
        "exist, empty, from the constructor",
    "check_do_not_raise_errors_in_init_or_set_params":
        "a bad label set or option fails in the constructor and set_params on purpose, before a model loads",
    "check_classifiers_one_label": "one label is refused: every text would get it",
}


@pytest.fixture(scope="module")
def clf():
    model, tok = tiny_pair()
    return Classifier(["pos", "neg"], model, tokenizer=tok, embedder=None)


@pytest.mark.parametrize("check", APPLICABLE)
def test_scikit_learn_estimator_checks_that_apply(clf, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        getattr(estimator_checks, check)(type(clf).__name__, clf)


def test_clone_has_the_parameters_and_nothing_fitted(clf):
    c = clf.fit(TEXTS, Y, **FIT)
    try:
        new = clone(c)
        assert new.get_params().keys() == c.get_params().keys()
        assert all(new.get_params()[k] is not None or c.get_params()[k] is None for k in c.get_params())
        assert new.adaptation_ is None and new.calibration_ is None and c.adaptation_ is not None
    finally:
        object.__setattr__(clf, "adaptation_", None)


def test_score_is_accuracy(clf):
    assert clf.score(TEXTS, Y) == pytest.approx(np.mean(clf.predict(TEXTS) == np.array(Y, dtype=object)))


def test_cross_val_score_fits_a_clone_per_fold(clf):
    scores = cross_val_score(clf, TEXTS, Y, cv=3, params=FIT, error_score="raise")
    assert scores.shape == (3,) and np.all((0 <= scores) & (scores <= 1))
    assert clf.adaptation_ is None  # the estimator given is never fitted


def test_grid_search_over_constructor_parameters(clf):
    g = GridSearchCV(clf, {"prior": ["auto", None], "prompt": [None, "Review: {text}\nSentiment:"]}, cv=2,
                     error_score="raise").fit(TEXTS, Y, **FIT)
    assert set(g.best_params_) == {"prior", "prompt"} and len(g.cv_results_["params"]) == 4
    assert g.best_estimator_.adaptation_ is not None and g.predict(["nice"])[0] in ("pos", "neg")


def test_a_pipeline_step(clf):
    lower = FunctionTransformer(lambda X: [x.lower() for x in X])
    p = make_pipeline(lower, clone(clf)).fit(TEXTS, Y, classifier__features="hidden", classifier__l2=0.1)
    assert p.predict(["GOOD MOVIE"])[0] in ("pos", "neg") and 0 <= p.score(TEXTS, Y) <= 1


def test_pickle_round_trip_answers_the_same(clf):
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(TEXTS), clf.predict_proba(TEXTS))
    assert back.get_params().keys() == clf.get_params().keys()


def test_conformal_sets_through_mapie_with_sorted_labels():
    """MAPIE 1.x maps predict_proba's columns through a LabelEncoder (sorted classes): give it sorted labels.

    ``classes_`` keeps the caller's order (columns of predict_proba); scikit-learn's own classifiers
    sort theirs and MAPIE assumes it. With the labels sorted its answers are ours; unsorted they are
    not (the hazard the docs' scikit-learn page warns of: checked here so the warning stays true).
    """
    mapie = pytest.importorskip("mapie.classification", reason="the conformal extra: pip install 'trie-judge[conformal]'")
    model, tok = tiny_pair()
    X = np.array(TEXTS, dtype=object)  # MAPIE counts features on X's shape: a 1-D array of texts is one
    got = {}
    for labels in (["neg", "pos"], ["pos", "neg"]):
        c = Classifier(labels, model, tokenizer=tok, embedder=None)
        m = mapie.SplitConformalClassifier(estimator=c, prefit=True, confidence_level=0.8)
        pred, sets = m.conformalize(X, np.array(Y)).predict_set(X)
        assert sets.shape == (len(X), 2, 1) and sets[..., 0].any(axis=1).all()
        got[tuple(labels)] = (list(pred), list(c.predict(X)))
    assert got[("neg", "pos")][0] == got[("neg", "pos")][1]
    assert got[("pos", "neg")][0] != got[("pos", "neg")][1]
