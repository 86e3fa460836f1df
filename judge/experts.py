"""A Classifier's two experts, read off it: the arrays the fusion, the calibration and the heads take.

`judge.Classifier` holds its parameters, its compiled label set and what it fitted; the modules that
do the arithmetic (:mod:`judge.fusion`, :mod:`judge.calibration`, :mod:`judge.adaptation`) take and
return arrays. This module is the one place that reads a Classifier for them: its run options
(:func:`options_of`), the language model's exact label scores by its path (:func:`zero_shot_scores`),
the label-free offset the fusion removes (:func:`lm_offset`), the embedder's vectors
(:func:`embedder_vectors`), both experts (:func:`experts`, :func:`expert_inputs`) and the bias under
which the certified search proves a fused answer (:func:`search_correction`).

What it deliberately does not do: compute a fusion, a calibration or a score itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from judge.compiled import ScoreOptions
from judge.fusion import label_texts

__all__ = ["options_of", "zero_shot_scores", "expert_inputs", "lm_offset", "embedder_vectors", "experts",
           "SearchCorrection", "search_correction"]


def options_of(clf) -> ScoreOptions:
    """A Classifier's run options (``batch_size``, ``pack``, ``progress``, ``batch_invariant``, the search's).

    Examples
    --------
    >>> from judge import Classifier
    >>> options_of(Classifier(["yes", "no"], batch_invariant=True)).batch_size
    1
    """
    step = 1 if clf.batch_invariant else clf.batch_size
    return ScoreOptions(batch_size=step, pack=1 if clf.batch_invariant else min(clf.pack, step),
                        progress=clf.progress, search_budget=clf.search_budget,
                        search_tolerance=clf.search_tolerance)


def zero_shot_scores(clf, texts, *, full: bool = False, states: bool = False):
    """``clf``'s language-model label log-probabilities by its path, before any ``fit`` or fusion: (n, K).

    ``clf`` is a :class:`judge.Classifier`: its compiled set scores with its run options
    (:func:`options_of`). The certified search's report, where one ran, is not kept here
    (``Classifier.decision_function`` keeps it in ``search_report_``). ``full``: every label
    scored exactly on the ``search`` path too (:meth:`CompiledLabels.score`). ``states``: return
    ``(scores, answer-slot states or None)``, the states from the same pass where one gives both.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> zero_shot_scores(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?"]).shape
    (1, 2)
    """
    r = clf.compiled_.score(texts, options_of(clf), full=full, states=states)
    return (r.scores, r.states) if states else r.scores


def expert_inputs(clf, texts, *, adapted=True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the two experts read, for ``texts``: (lm (n, K), text vectors (n, d), label vectors (K, d)), unit rows.

    ``lm``: the exact label log-probabilities after the label-free contextual prior at
    ``AUTO_PRIOR_STRENGTH`` (scored once per label set, cached with the compiled labels); the
    label vectors: the embedder's vectors of :func:`label_texts` (cached likewise), or, with
    ``adapted`` and after ``Classifier.adapt``, the moved ones (:mod:`judge.transductive`).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> lm, X, L = expert_inputs(Classifier(["yes", "no"], model, tokenizer=tok, embedder="minilm"), ["Is it?"])
    >>> lm.shape, X.shape, L.shape
    ((1, 2), (1, 384), (2, 384))
    """
    texts = list(texts)
    X, L = embedder_vectors(clf, texts, adapted=adapted)
    return zero_shot_scores(clf, texts) - lm_offset(clf), X, L


def lm_offset(clf) -> np.ndarray:
    """What the LM's raw scores lose before the fusion: its contextual prior at ``AUTO_PRIOR_STRENGTH``, (K,).

    Labels the prior's inputs never reached get the mean of the others (as ``Classifier(prior="auto")``).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> lm_offset(Classifier(["yes", "no"], model, tokenizer=tok, embedder="minilm")).shape
    (2,)
    """
    from judge.calibration.bias import AUTO_PRIOR_STRENGTH

    p = clf.zero_shot_prior()
    return AUTO_PRIOR_STRENGTH * np.where(np.isfinite(p), p, np.nanmean(np.where(np.isfinite(p), p, np.nan)))


def embedder_vectors(clf, texts, *, adapted=True) -> tuple[np.ndarray, np.ndarray]:
    """The embedder's unit vectors of ``texts`` (n, d) and of the labels (K, d) (moved ones after ``adapt``).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> X, L = embedder_vectors(Classifier(["yes", "no"], model, tokenizer=tok, embedder="minilm"), ["Is it?"])
    >>> X.shape, L.shape
    ((1, 384), (2, 384))
    """
    from judge._math import unit_rows as unit
    from judge.encoders import get_encoder

    texts = list(texts)
    enc = get_encoder(clf.embedder_)
    tr = getattr(clf, "transduction_", None)
    L = tr.label_vectors if adapted and tr is not None else clf.compiled_.derived("label_vectors", lambda: unit(
        enc(label_texts(clf.labels, clf.label_names, clf.descriptions))))
    return (unit(enc(texts)) if texts else np.zeros((0, L.shape[1]))), L


@dataclass(frozen=True)
class SearchCorrection:
    """What the certified search corrects the LM's scores by: ``bias`` (K,) or (n, K), ``temperature`` or None.

    Examples
    --------
    >>> SearchCorrection(np.zeros((1, 2))).temperature is None
    True
    """

    bias: np.ndarray
    temperature: float | None = None


def search_correction(clf, texts, cal=None) -> SearchCorrection:
    """The per-text bias that makes the certified search prove a fused classifier's answer (its ``predict``).

    ``cal``: the classifier's calibration (its bias applies to the fused scores), or None.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> search_correction(Classifier(["yes", "no"], model, tokenizer=tok, embedder="minilm"), ["Is it?"]).bias.shape
    (1, 2)
    """
    X, L = embedder_vectors(clf, texts)
    return SearchCorrection(clf.fusion_.argmax_bias(lm_offset(clf), X @ L.T, None if cal is None else cal.bias))


def experts(clf, texts) -> tuple[np.ndarray, np.ndarray]:
    """The two experts of a `judge.Classifier` with an ``embedder``, for ``texts``: (lm, similarity), each (n, K).

    ``lm`` and the vectors: :func:`expert_inputs`; ``similarity``: the texts' cosine similarities to
    the labels' vectors.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> lm, sim = experts(Classifier(["yes", "no"], model, tokenizer=tok, embedder="minilm"), ["Is it?"])
    >>> lm.shape, sim.shape
    ((1, 2), (1, 2))
    """
    lm, X, L = expert_inputs(clf, texts)
    return lm, X @ L.T
