"""Multi-label answers: every label judged on its own (``Classifier(labels, multi_label=True)``).

Each label gets its own probability that it applies to the text; rows need not sum to 1, and a
text may get several labels or none. What a label's logit is made of, per (text, label) pair
(:func:`label_features`, shape (n, K, F)):

* ``yes_no``: the language model's reading of a yes/no question per label (*Is this text about
  <label>?*, the decisions' yes/no prompt, :mod:`judge.decisions.prompts`): log P(yes) - log P(no),
  every spelling of each summed. All the labels of a text are questions about one state: they share
  one row of one forest pass (:func:`judge.engine.protocol.lower_queries` groups them).
* ``similarity``: the sentence embedder's cosine similarity of the text to the label (with an embedder).
* ``similarity_gap``: that similarity minus the text's best label's.
* ``single``: the label's log-probability under the single-label classifier's own (fused) answer
  over all labels: where a text's mass goes when it must be one label.

Zero-shot, the logit is a fixed weighting of those features, :data:`ZERO_SHOT_WEIGHTS`, chosen on
the composed multi-label validation sets (``bench/multilabel.py select``; shared by every label set:
it holds no per-label parameter). :func:`calibrate_multilabel` fits, on labelled validation texts,
a Platt scaling per label shrunk toward the pooled one (one logistic regression) and a threshold per
label (best F1, or the lowest reaching a target precision); :func:`fit_multilabel` fits a
one-vs-rest logistic regression (scikit-learn) on the embedder's vectors beside the zero-shot logits.

What a text with no label above its threshold gets from ``predict``: an empty list (say so in
downstream code; ``predict_proba`` still has every label's probability).

What it deliberately does not do: sum to one, pick at least one label, or model label correlations.
"""

from __future__ import annotations

import numpy as np

from judge.multilabel.models import (
    MultiLabelFit,
    MultiLabelHead,
    MultiLabelState,
    as_indicator,
    calibrate_multilabel,
    fit_multilabel,
    multilabel_f1,
    per_label_thresholds,
    sigmoid,
)

__all__ = ["FEATURES", "QUESTION", "ZERO_SHOT_THRESHOLD", "ZERO_SHOT_WEIGHTS", "MultiLabelFit", "MultiLabelHead", "MultiLabelState",
           "as_indicator", "per_label_thresholds", "sigmoid", "calibrate", "calibrate_multilabel", "features_for", "fit",
           "fit_classifier", "fit_multilabel",
           "label_features", "logits", "multilabel_f1", "predict", "proba", "records", "thresholds", "yes_no_scores",
           "zero_shot_logits"]

#: The yes/no question asked per label (``{label}``: what the model writes for the label).
QUESTION = "Is this text about {label}?"
#: The per-(text, label) features, in order (see the module docstring).
FEATURES = ("yes_no", "similarity", "similarity_gap", "single")
#: The zero-shot logit's weights: ``intercept + sum(w * feature)``, and the probability a label needs to be
#: given before ``calibrate``. Chosen on the composed validation sets by a rule fixed beforehand (the feature
#: set of highest mean micro-F1, its slopes a pooled logistic regression's, its threshold the best on a grid):
#: ``bench/multilabel.py select``, bench/results/multilabel_select.json. Without an embedder the ``single``
#: feature is the language model's own distribution (not selected separately).
#: Mean micro-F1 there: the single-label answer's log-probability 0.552, the similarity alone 0.411, the three
#: cheap features together 0.542; the yes/no reading added nothing (two-fold log-loss 0.0548 without, 0.0545
#: with; alone 0.0926, the base rate's) at a question per label, so its weight is 0 and it is not computed.
#: With these weights a label needs a single-label probability of about 0.36: at most two labels per text.
ZERO_SHOT_WEIGHTS = {"intercept": -0.0960, "yes_no": 0.0, "similarity": 0.0, "similarity_gap": 0.0, "single": 0.4947}
ZERO_SHOT_THRESHOLD = 0.3543


def yes_no_scores(clf, texts, *, batch_size=None, progress=None) -> np.ndarray:
    """The language model's yes/no reading of every label for every text: log P(yes) - log P(no), (n, K).

    One scoring call; the K questions about a text share one row of the forest pass.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> yes_no_scores(Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None), ["Wet?"]).shape
    (1, 2)
    """
    from judge.decisions.prompts import DEFAULT_STYLES, plan_question
    from judge.decisions.questions import YesNo
    from judge.engine.protocol import Query, lower_queries
    from judge.labels import label_names_for

    texts = list(texts)
    K = len(clf.labels)
    if not texts:
        return np.zeros((0, K))
    engine = clf.setup().engine_
    names = label_names_for(clf.labels, clf.label_names, clf.descriptions, clf.describe)
    style = DEFAULT_STYLES[YesNo.type]
    questions = [YesNo(QUESTION.format(label=n)) for n in names]
    plans = [plan_question(engine.tokenizer_, t, q, style) for t in texts for q in questions]
    items = lower_queries(engine, [Query(p.pieces, p.surfaces) for p in plans])
    step = batch_size or clf.batch_size
    show = clf.progress if progress is None else progress
    scores = engine.score_items(items, batch_size=step, progress="auto" if show is None else show)
    out = np.empty(len(plans))
    for i, (p, s) in enumerate(zip(plans, scores)):
        order = np.asarray(p.order)
        s = np.asarray(s, dtype=np.float64)
        out[i] = np.logaddexp.reduce(s[order == 0]) - np.logaddexp.reduce(s[order == 1])
    return out.reshape(len(texts), K)


def label_features(clf, texts, *, which=FEATURES, progress=None) -> np.ndarray:
    """Every (text, label) pair's features, :data:`FEATURES` in order: (n, K, F) float64.

    Without an embedder (``clf.embedder_`` None) the two similarity features are 0; so are the features
    not in ``which`` (the yes/no reading costs a question per label).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> label_features(Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None), ["Wet?"]).shape
    (1, 2, 4)
    """
    from scipy.special import log_softmax

    from judge.experts import embedder_vectors, lm_offset, zero_shot_scores

    texts = list(texts)
    n, K = len(texts), len(clf.labels)
    F = np.zeros((n, K, len(FEATURES)))
    if not n:
        return F
    if "yes_no" in which:
        F[..., 0] = yes_no_scores(clf, texts, progress=progress)
    if not {"similarity", "similarity_gap", "single"} & set(which):
        return F
    lm = zero_shot_scores(clf, texts, full=True) - lm_offset(clf)  # after the label-free prior, as fusion reads it
    if clf.embedder_ is not None:
        X, L = embedder_vectors(clf, texts)
        sim = X @ L.T
        F[..., 1] = sim
        F[..., 2] = sim - sim.max(axis=1, keepdims=True)
        single = clf.fusion_.combine(lm, sim)
    else:
        single = lm
    F[..., 3] = log_softmax(np.where(np.isfinite(single), single, -1e9), axis=1)
    return F


def _weights() -> np.ndarray:
    w = ZERO_SHOT_WEIGHTS
    return np.array([w["intercept"], *(w[f] for f in FEATURES)])


def zero_shot_logits(features, *, weights=None) -> np.ndarray:
    """The zero-shot logit of every (text, label) pair from its features: (n, K).

    Parameters
    ----------
    features : ndarray (n, K, F)
        :func:`label_features`.
    weights : ndarray (F + 1,), optional
        ``[intercept, *weights]`` instead of the table's.

    Examples
    --------
    >>> f = np.zeros((1, 2, len(FEATURES))); f[0, :, 3] = [-0.1, -3.0]
    >>> zero_shot_logits(f, weights=np.array([1.0, 0, 0, 0, 2.0])).round(2).tolist()
    [[0.8, -5.0]]
    """
    w = _weights() if weights is None else np.asarray(weights, dtype=np.float64)
    return w[0] + np.asarray(features) @ w[1:]


def _used_features() -> tuple:
    return tuple(f for f in FEATURES if ZERO_SHOT_WEIGHTS[f] != 0.0)


def features_for(clf, texts, *, which=None, progress=None) -> np.ndarray:
    """:func:`label_features` computing only ``which`` (default: those the zero-shot weights use); others are 0.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> features_for(Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None), ["Wet?"])[..., 0].tolist()
    [[0.0, 0.0]]
    """
    return label_features(clf, texts, which=_used_features() if which is None else which,
                          progress=progress)


def _head_inputs(clf, texts, z) -> np.ndarray:
    from judge.experts import embedder_vectors

    if clf.embedder_ is None:
        return z
    X, _ = embedder_vectors(clf, texts)
    return np.hstack([X, z])


def logits(clf, texts) -> np.ndarray:
    """A multi-label classifier's raw logits (n, K): the fitted head's, else the zero-shot ones.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> logits(Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None, multi_label=True), ["Wet?"]).shape
    (1, 2)
    """
    texts = list(texts)
    z = zero_shot_logits(features_for(clf, texts))
    fitted = clf.multilabel_
    if fitted is not None and fitted.head is not None:
        return fitted.head.logits(_head_inputs(clf, texts, z))
    return z


def proba(clf, texts) -> np.ndarray:
    """Independent per-label probabilities (n, K): calibrated once ``calibrate`` ran, else the logits' sigmoid.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> proba(Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None, multi_label=True), ["Wet?"]).shape
    (1, 2)
    """
    z = logits(clf, texts)
    fitted = clf.multilabel_
    return fitted.state.proba(z) if fitted is not None and fitted.state is not None else sigmoid(z)


def thresholds(clf) -> np.ndarray:
    """Each label's threshold (K,): ``calibrate``'s, else :data:`ZERO_SHOT_THRESHOLD` (0.5 after ``fit``).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> float(thresholds(Classifier(["rain", "sun"], model, tokenizer=tok, multi_label=True))[0]) == ZERO_SHOT_THRESHOLD
    True
    """
    fitted = clf.multilabel_
    if fitted is not None and fitted.state is not None:
        return fitted.state.threshold
    return np.full(len(clf.labels), 0.5 if fitted is not None and fitted.head is not None else ZERO_SHOT_THRESHOLD)


def predict(clf, texts, *, abstain=False) -> np.ndarray:
    """The labels given to each text: ndarray of object (n,), each a list of labels (possibly empty).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> type(predict(Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None, multi_label=True), ["Wet?"])[0])
    <class 'list'>
    """
    if abstain:
        raise ValueError("predict(abstain=True) is for one label per text; with multi_label=True a text with no "
                         "label above its threshold already gets an empty list.")
    P = proba(clf, texts) >= thresholds(clf)
    out = np.empty(len(P), dtype=object)
    for i, row in enumerate(P):
        out[i] = [clf.labels[j] for j in np.flatnonzero(row)]
    return out


def calibrate(clf, texts, y, *, target_precision=None) -> MultiLabelFit:
    """The classifier's fitted state with per-label Platt scaling and thresholds fitted on ``texts``, ``y`` (not set).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None, multi_label=True)
    >>> calibrate(clf, ["wet", "dry", "both"], [["rain"], ["sun"], ["rain", "sun"]]).state.a.shape
    (2,)
    """
    Y = as_indicator(y, clf.labels)
    if len(Y) != len(texts):
        raise ValueError(f"calibrate() got {len(texts)} texts and {len(Y)} targets; give one list of labels per text.")
    state = calibrate_multilabel(logits(clf, texts), Y, target_precision=target_precision)
    fitted = clf.multilabel_
    return MultiLabelFit(None if fitted is None else fitted.head, state)


def fit(clf, texts, y, *, random_state=0, Cs=(0.01, 0.1, 1.0, 10.0), cv=3) -> MultiLabelFit:
    """A one-vs-rest head on the embedder's vectors (where there is one) and the zero-shot logits (not set).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["rain", "sun"], model, tokenizer=tok, embedder=None, multi_label=True)
    >>> fit(clf, ["wet", "dry", "both", "none"], [["rain"], ["sun"], ["rain", "sun"], []], cv=2).head.coef.shape
    (2, 2)
    """
    Y = as_indicator(y, clf.labels)
    if len(Y) != len(texts):
        raise ValueError(f"fit() got {len(texts)} texts and {len(Y)} targets; give one list of labels per text.")
    if len(texts) < 2:
        raise ValueError(f"fit(multi_label=True) needs at least 2 labelled texts, got {len(texts)}.")
    z = zero_shot_logits(features_for(clf, texts))
    return MultiLabelFit(fit_multilabel(_head_inputs(clf, texts, z), Y, Cs=Cs, cv=cv, random_state=random_state))


def records(labels, proba_, thresholds_, *, top_k=None) -> list[dict]:
    """Each text's multi-label answer as a record (what ``judge predict --multi-label`` and ``/v1/classify`` write).

    Parameters
    ----------
    labels : sequence of K str
    proba_ : ndarray (n, K)
        Independent per-label probabilities.
    thresholds_ : ndarray (K,)
    top_k : int, optional
        The most probable labels' probabilities per record (None: all K).

    Returns
    -------
    list of n dicts
        ``labels`` (those at or above their threshold, most probable first; possibly empty) and
        ``probabilities`` ({label: p}, most probable first).

    Examples
    --------
    >>> records(["rain", "sun"], np.array([[0.9, 0.7]]), np.array([0.5, 0.8]))
    [{'labels': ['rain'], 'probabilities': {'rain': 0.9, 'sun': 0.7}}]
    """
    out = []
    for row in np.asarray(proba_, dtype=np.float64):
        order = np.argsort(-row, kind="stable")
        given = [str(labels[j]) for j in order if row[j] >= thresholds_[j]]
        keep = order if top_k is None else order[:top_k]
        out.append({"labels": given, "probabilities": {str(labels[j]): float(row[j]) for j in keep}})
    return out


def fit_classifier(clf, texts, y, *, method="head", random_state=0, **options):
    """``Classifier.fit`` of a multi-label classifier: :func:`fit` checked and swapped in at the end; returns ``clf``.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["rain", "sun"], model, tokenizer=tok, multi_label=True, embedder=None)
    >>> fit_classifier(clf, ["wet", "dry", "both", "neither"], [["rain"], ["sun"], ["rain", "sun"], []],
    ...                cv=2).multilabel_.head is not None
    True
    """
    import warnings

    from judge._checks import check_texts

    if method != "head":
        raise ValueError(f"fit(method={method!r}) is for one label per text; with multi_label=True fit() trains "
                         f"a one-vs-rest head (method='head').")
    unknown = sorted(set(options) - {"Cs", "cv"})
    if unknown:
        raise TypeError(f"fit(multi_label=True) takes the options Cs and cv, got {unknown}.")
    fitted = fit(clf, check_texts(texts), y, random_state=random_state, **options)
    if clf.multilabel_ is not None and clf.multilabel_.state is not None:
        warnings.warn("fit() drops the calibration fitted before it; call calibrate() on texts the fit never saw.",
                      stacklevel=3)
    object.__setattr__(clf, "multilabel_", fitted)
    return clf
