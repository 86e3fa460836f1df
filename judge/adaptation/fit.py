"""``Classifier.fit``'s work: validate everything, compute the features, fit, return the fitted state.

:func:`fit_adaptation` checks the arguments (texts, labels, method, its options, features given
ahead) and raises a clear error *before* any text is scored or any weight moves; then it computes
what the method needs and fits it. It returns the fitted state (:class:`~judge.adaptation.head.LinearHead`,
:class:`~judge.adaptation.lora.LoraAdapter` or :class:`~judge.adaptation.demos.Demonstrations`);
the classifier swaps it in with one assignment, so an interrupted fit leaves the classifier as it was.

Methods and their options (``Classifier.fit(texts, y, method=..., **options)``):

========== =========================================================================================
``head``   ``features`` ("hidden+scores": the exact zero-shot scores as the offset, so 0 examples
           give zero-shot; "hidden": the states alone, no exact scoring of the training texts;
           "auto", the default: the offset up to :data:`AUTO_OFFSET_PER_CLASS` texts per class on
           average (and where the path scores every label), the states alone past it; chosen on
           validation by ``bench/learning_curve.py select``, the cut by cost, see the README),
           ``l2`` (None: cross-validated), ``cv`` (5), ``scores`` / ``states`` (computed already).
``lora``   ``rank`` (8), ``alpha`` (16), ``target_modules`` (("q_proj", "v_proj")), ``epochs`` (3),
           ``lr`` (5e-4), ``batch_size`` (8), ``validation_fraction`` (0.2), ``patience`` (1).
``demos``  ``k`` (4): the k training texts nearest to each text (cosine of answer-slot states)
           are written into its prompt as answered examples; ``states`` (computed already).
========== =========================================================================================

Every method learns from the classifier's one prompt as written (:func:`~judge.adaptation.answer_states`,
the exact label likelihood of that prompt): a classifier with ``think=True`` (reasoning written
before the answer) or with effective ``rotations`` (scores averaged over label-list orders) is
refused with a clear error, since what was learned would be scored on other prompts.

What it deliberately does not do: hold state (the classifier does) or calibrate.
"""

from __future__ import annotations

import numpy as np

__all__ = ["METHODS", "OPTIONS", "AUTO_OFFSET_PER_CLASS", "fit_adaptation", "check_fit_args", "check_fit_prompt",
           "per_class_indices", "resolve_features"]

METHODS = ("head", "lora", "demos")
#: Valid options of each method, with their defaults.
OPTIONS = {
    "head": {"features": "auto", "l2": None, "cv": 5, "scores": None, "states": None},
    "lora": {"rank": 8, "alpha": 16.0, "target_modules": ("q_proj", "v_proj"), "epochs": 3, "lr": 5e-4,
             "batch_size": 8, "validation_fraction": 0.2, "patience": 1},
    "demos": {"k": 4, "states": None},
}
FEATURES = ("auto", "hidden+scores", "hidden")
#: ``features="auto"``: the zero-shot offset while the training texts number at most this many per
#: class on average. On validation (bench/learning_curve.py select, calibrated by calibrate()'s
#: post-fit default) the offset gained 0.2-19.1 points at 1 per class and 1.0-2.7 at 4 on all five
#: datasets, -1.0 to +0.2 at 16 and -0.6 at 64 (TREC, the only rows with cached scores), while its
#: exact scoring of every training text costs ~0.6 CPU-s per text at 77 labels (11x the states).
AUTO_OFFSET_PER_CLASS = 8
_EVERY_LABEL_SCORED = ("exact", "first_token")  # the paths whose zero-shot scores can be the offset


def per_class_indices(y, n: int, seed: int = 0) -> np.ndarray:
    """The first ``n`` rows of every class in a seeded per-class order, sorted: an ``n``-per-class draw.

    The order depends on ``y`` and ``seed`` only, so the 4-per-class draw is part of the 16-per-class
    one; a class with fewer than ``n`` rows gives all of them.

    Parameters
    ----------
    y : array-like of int, shape (m,)
        Class indices.
    n : int
    seed : int

    Returns
    -------
    ndarray of int, shape (<= n * n_classes,)

    Examples
    --------
    >>> y = np.array([0, 0, 0, 1, 1, 2])
    >>> per_class_indices(y, 1).size, set(per_class_indices(y, 1)) <= set(per_class_indices(y, 2))
    (3, True)
    """
    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    out = []
    for k in range(int(y.max()) + 1):
        members = np.flatnonzero(y == k)
        out.append(members[rng.permutation(len(members))][:n])
    return np.sort(np.concatenate(out)).astype(np.int64)


def check_fit_args(labels, texts, y, method, options) -> tuple[list, np.ndarray, dict]:
    """Validate ``fit``'s arguments; returns (texts, label indices, options with defaults).

    Examples
    --------
    >>> texts, y, opts = check_fit_args(["a", "b"], ["x", "z"], ["a", "b"], "head", {"cv": 2})
    >>> y.tolist(), opts["cv"], opts["features"]
    ([0, 1], 2, 'auto')
    >>> check_fit_args(["a", "b"], ["x", "z"], ["a", "a"], "head", {})
    Traceback (most recent call last):
    ...
    ValueError: fit needs examples of at least 2 classes; all 2 labelled texts are 'a'. Add examples of other classes (classes_ lists them).
    """
    from judge._checks import check_texts, label_indices

    if method not in METHODS:
        raise ValueError(f"Unknown fit method {method!r}; valid methods are {METHODS}.")
    unknown = sorted(set(options) - set(OPTIONS[method]))
    if unknown:
        raise TypeError(f"fit(method={method!r}) got unknown option(s) {unknown}; its options are "
                        f"{sorted(OPTIONS[method])}.")
    opts = dict(OPTIONS[method], **options)
    texts = check_texts(texts)
    if isinstance(y, (str, bytes)):
        raise TypeError(f"y must be a sequence of labels, got a single {type(y).__name__}; wrap it in a list.")
    y = list(y)
    if len(texts) != len(y):
        raise ValueError(f"texts and y differ in length ({len(texts)} vs {len(y)}); pass one label per text.")
    if not texts:
        raise ValueError("fit needs labelled texts, got none (0 texts); without examples the classifier is "
                         "zero-shot already: skip fit().")
    yi = label_indices(labels, y)
    if len(set(yi.tolist())) < 2:
        raise ValueError(f"fit needs examples of at least 2 classes; all {len(yi)} labelled texts are "
                         f"{labels[int(yi[0])]!r}. Add examples of other classes (classes_ lists them).")
    _check_options(method, opts, len(texts), len(labels))
    return texts, yi, opts


def _positive_int(name, v, low=1):
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}.")


def _check_options(method, o, n, k):
    from judge.adaptation.head import check_features

    if method == "head":
        if o["features"] not in FEATURES:
            raise ValueError(f"Unknown features {o['features']!r}; valid values are {FEATURES}.")
        if o["l2"] is not None and not (isinstance(o["l2"], (int, float)) and not isinstance(o["l2"], bool)
                                        and np.isfinite(o["l2"]) and o["l2"] >= 0):
            raise ValueError(f"l2 must be None (cross-validated) or a number >= 0, got {o['l2']!r}.")
        _positive_int("cv", o["cv"], 2)
        if o["scores"] is not None:
            if o["features"] == "hidden":
                raise ValueError("scores= was given but features='hidden' does not use them; drop scores= or "
                                 "use features='hidden+scores'.")
            o["scores"] = check_features("scores", o["scores"], n, k)
    if method in ("head", "demos") and o["states"] is not None:
        o["states"] = check_features("states", o["states"], n)
    if method == "lora":
        for name in ("rank", "epochs", "batch_size"):
            _positive_int(name, o[name])
        _positive_int("patience", o["patience"])
        for name in ("alpha", "lr"):
            if not (isinstance(o[name], (int, float)) and not isinstance(o[name], bool) and o[name] > 0):
                raise ValueError(f"{name} must be a number > 0, got {o[name]!r}.")
        vf = o["validation_fraction"]
        if not (isinstance(vf, float) and 0.0 < vf < 1.0):
            raise ValueError(f"validation_fraction must be a float in (0, 1), got {vf!r}; e.g. 0.2 holds out a "
                             f"fifth of the texts for early stopping.")
        if n < 4:
            raise ValueError(f"fit(method='lora') needs at least 4 labelled texts (some are held out for early "
                             f"stopping), got {n}.")
        tm = o["target_modules"]
        if isinstance(tm, str) or not tm or not all(isinstance(t, str) for t in tm):
            raise ValueError(f"target_modules must be a non-empty sequence of module names, got {tm!r}.")
        o["target_modules"] = tuple(tm)
    if method == "demos":
        _positive_int("k", o["k"])


def check_fit_prompt(clf, method) -> None:
    """Refuse prompts ``fit`` does not learn from: think-then-answer, and rotated label lists.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> check_fit_prompt(Classifier(["yes", "no"], model, tokenizer=tok, think=True, think_tokens=4), "head")
    Traceback (most recent call last):
    ...
    ValueError: fit(method='head') learns from the classifier's prompt as written, but think=True has the model write reasoning before the answer, which fit's features and training never see (the fitted state would score other prompts than it learned from); set think=False before fit().
    """
    c = clf.compiled_
    if c.think:
        raise ValueError(f"fit(method={method!r}) learns from the classifier's prompt as written, but think=True has "
                         f"the model write reasoning before the answer, which fit's features and training never see "
                         f"(the fitted state would score other prompts than it learned from); set think=False "
                         f"before fit().")
    if c.rotated:
        raise ValueError(f"fit(method={method!r}) learns from the classifier's one prompt, but rotations="
                         f"{clf.rotations} averages the scores over {len(c.rotated) + 1} label-list orders, which "
                         f"fit's features and training never see; set rotations=1 before fit().")


def resolve_features(features, n, k, path, scores_given=False) -> str:
    """The head's features for ``n`` training texts over ``k`` labels on a scoring ``path``.

    ``"auto"`` is ``"hidden+scores"`` when the scores were given, or when ``n <= AUTO_OFFSET_PER_CLASS * k``
    and the path gives an exact score for every label; ``"hidden"`` otherwise. Others are kept.

    Examples
    --------
    >>> resolve_features("auto", 40, 5, "exact"), resolve_features("auto", 41, 5, "exact")
    ('hidden+scores', 'hidden')
    >>> resolve_features("auto", 4, 2, "decode"), resolve_features("hidden", 4, 2, "exact")
    ('hidden', 'hidden')
    """
    if features != "auto":
        return features
    if scores_given or (n <= AUTO_OFFSET_PER_CLASS * k and path in _EVERY_LABEL_SCORED):
        return "hidden+scores"
    return "hidden"


def fit_adaptation(clf, texts, y, *, method="head", base_scores, random_state=0, callback=None, **options):
    """Validate, compute features, fit; returns the fitted state (the classifier is not touched).

    Parameters
    ----------
    clf : judge.Classifier
    texts : sequence of str, length n
    y : sequence of labels, length n
    method : {"head", "lora", "demos"}
    base_scores : callable
        ``texts -> (n, K)`` zero-shot scores of the classifier without any adaptation.
    random_state : int
    callback : callable, optional
        Called with a small dict after every optimiser step (it may raise to stop the fit).
    **options
        See the module docstring.

    Returns
    -------
    LinearHead, LoraAdapter or Demonstrations

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
    >>> head = fit_adaptation(clf, ["sure", "nope", "yes!", "never"], ["yes", "no"] * 2,
    ...                       base_scores=clf.decision_function, cv=2)
    >>> head.kind, head.weights.shape
    ('head', (2, 64))
    """
    texts, yi, o = check_fit_args(list(clf.labels), texts, y, method, options)
    if getattr(clf, "backend", "transformers") == "vllm":
        # fitting runs the model's states or weights, which vLLM keeps in its own engine: refuse first
        from judge.backends.vllm import check_classifier

        check_classifier(clf, fit=method)
    check_fit_prompt(clf, method)
    K = len(clf.labels)
    if method == "head":
        from judge.adaptation.features import answer_states
        from judge.adaptation.head import check_features, fit_head

        scores = o["scores"]
        o["features"] = resolve_features(o["features"], len(texts), K, clf.method_, scores is not None)
        if o["features"] == "hidden+scores" and clf.method_ not in _EVERY_LABEL_SCORED:
            raise ValueError(
                "features='hidden+scores' needs an exact zero-shot score for every label, which the "
                f"{clf.method_!r} path does not give (it leaves labels at -inf); use features='hidden', or "
                "method='exact' on the Classifier.")
        if o["features"] == "hidden+scores" and scores is None:
            scores = check_features("zero-shot scores", base_scores(texts), len(texts), K)
        states = o["states"] if o["states"] is not None else check_features("states", answer_states(clf, texts),
                                                                             len(texts))
        head = fit_head(states, yi, K, scores=scores, l2=o["l2"], cv=o["cv"], random_state=random_state,
                        callback=callback)
        head.report["features"] = o["features"]
        return head
    if method == "demos":
        from judge.adaptation.demos import fit_demos

        return fit_demos(clf, texts, yi, k=o["k"], states=o["states"])
    from judge.adaptation.lora import train_lora

    return train_lora(clf, texts, yi, random_state=random_state, callback=callback,
                      **{k: o[k] for k in OPTIONS["lora"]})
