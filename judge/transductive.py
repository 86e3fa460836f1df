"""Transductive zero-shot: a call's own unlabelled texts move the label vectors toward the texts they attract.

The fused zero-shot answer (:mod:`judge.fusion`: the language model's exact label scores beside a
sentence embedder's text-label similarity) assigns each text to a label; each label's vector is
then moved ``step`` of the way toward the mean of the texts assigned to it, and the texts are
assigned again, ``rounds`` times (:func:`refine_label_vectors`). No label of any text is read: the
texts only sharpen what each label's name means in the user's own data (a label named
``card_arrival`` comes to sit among the texts that ask where a card is). The language model's
scores stay as they are; only the embedder's side moves.

``Classifier.predict(texts, transductive=True)`` does this on the call's texts and forgets it;
``Classifier.adapt(texts)`` keeps the moved vectors (``transduction_``, saved with the classifier)
for every later call. Chosen on validation splits (bench/zero_shot.py): the rounds and step of
:data:`DEFAULT_ROUNDS` / :data:`DEFAULT_STEP`; a pseudo-labelled logistic head (self-training) was
tried beside it and measured lower (:doc:`/baselines`).

What it deliberately does not do: read labels, or change the language model's scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from judge._math import unit_rows as _unit
from judge.fusion import is_fused

__all__ = ["Transduction", "refine_label_vectors", "TransductiveMixin", "DEFAULT_ROUNDS", "DEFAULT_STEP",
           "AUTO_MIN_TEXTS"]

#: Assign-and-move rounds, and how far each label vector moves toward its texts' mean per round
#: (chosen on the four validation splits: bench/zero_shot.py select).
DEFAULT_ROUNDS = 10
DEFAULT_STEP = 0.3
#: ``transductive="auto"`` moves the label vectors for zero-shot calls of at least this many texts: the
#: smallest call measured where it won on all four validation splits by at least a point (bench/zero_shot.py).
AUTO_MIN_TEXTS = 500


def refine_label_vectors(lm, X, L, fusion, *, rounds=DEFAULT_ROUNDS, step=DEFAULT_STEP) -> np.ndarray:
    """Label vectors moved toward the texts the fused answer assigns to them: (K, d) unit rows.

    Each round: ``fusion.combine(lm, X @ L.T)`` assigns every text its top label; a label with
    texts moves to ``unit((1 - step) * L[k] + step * unit(mean of its texts))``; a label without
    texts stays. Deterministic (no randomness; ties broken by the lowest label index).

    Parameters
    ----------
    lm : ndarray of shape (n, K)
        The language model's label log-scores (:func:`judge.experts.experts`).
    X : ndarray of shape (n, d)
        The texts' embeddings (normalised here).
    L : ndarray of shape (K, d)
        The labels' embeddings to start from.
    fusion : judge.fusion.Fusion
    rounds : int >= 0
    step : float in (0, 1]

    Examples
    --------
    Two labels whose names sit between two clusters of texts: the vectors move into the clusters.

    >>> from judge.fusion import Fusion
    >>> X = np.array([[1.0, 0.1], [1.0, -0.1], [0.1, 1.0], [-0.1, 1.0]])
    >>> L = np.array([[0.8, 0.6], [0.6, 0.8]])
    >>> refine_label_vectors(np.zeros((4, 2)), X, L, Fusion(1.0, 0.05)).round(2)
    array([[1.  , 0.02],
           [0.02, 1.  ]])
    """
    X, L = _unit(X), _unit(L).copy()
    lm = np.asarray(lm, np.float64)
    if X.ndim != 2 or L.ndim != 2 or X.shape[1] != L.shape[1] or lm.shape != (len(X), len(L)):
        raise ValueError(f"lm {lm.shape}, X {X.shape} and L {L.shape} must be (n, K), (n, d) and (K, d).")
    if not (isinstance(rounds, int) and rounds >= 0):
        raise ValueError(f"rounds must be an int >= 0, got {rounds!r}.")
    if not (isinstance(step, (int, float)) and 0.0 < step <= 1.0):
        raise ValueError(f"step must be a number in (0, 1], got {step!r}.")
    for _ in range(rounds if len(X) else 0):
        top = fusion.combine(lm, X @ L.T).argmax(1)
        sums = np.zeros_like(L)
        np.add.at(sums, top, X)
        has = np.bincount(top, minlength=len(L)) > 0
        L[has] = _unit((1.0 - step) * L[has] + step * _unit(sums[has]))
    return L


@dataclass(frozen=True)
class Transduction:
    """What :meth:`TransductiveMixin.adapt` learnt from unlabelled texts: the moved label vectors.

    Attributes
    ----------
    label_vectors : ndarray of shape (K, d)
        Unit rows, in the classifier's label order.
    rounds, step : the refinement's settings.
    n_texts : int
        How many texts it was learnt from.

    Examples
    --------
    >>> Transduction(np.eye(2), n_texts=10).config()
    {'rounds': 10, 'step': 0.3, 'n_texts': 10}
    """

    label_vectors: np.ndarray
    rounds: int = DEFAULT_ROUNDS
    step: float = DEFAULT_STEP
    n_texts: int = 0
    report: dict = field(default_factory=dict)

    def config(self) -> dict:
        """The JSON part saved by ``Classifier.save`` (the vectors go to safetensors)."""
        return {"rounds": self.rounds, "step": self.step, "n_texts": self.n_texts}


def _check_fused(clf, what):
    if clf.adaptation_ is not None:
        raise ValueError(f"{what} works on the zero-shot answer, and this classifier was fit() on labelled texts "
                         f"(its head answers instead); use it before fit(), or on a classifier without fit().")
    f = clf.fusion_
    if f is None or f.weight <= 0:
        why = ("it has no sentence embedder (embedder=None, a path that scores some labels only, or the 'embed' "
               "extra missing)" if f is None else
               "its fusion weight is 0 (a model other than the packaged one, before calibrate() fits the weight)")
        raise ValueError(f"{what} moves the sentence embedder's label vectors, and this classifier does not use "
                         f"them: {why}. Use embedder='minilm' (or the default with the packaged model), or "
                         f"calibrate(texts, y) first.")


class TransductiveMixin:
    """``adapt`` and ``predict(..., transductive=True)`` for :class:`judge.Classifier` (see the module docstring).

    Examples
    --------
    >>> from judge import Classifier
    >>> issubclass(Classifier, TransductiveMixin)
    True
    """

    def adapt(self, texts, *, rounds: int = DEFAULT_ROUNDS, step: float = DEFAULT_STEP):
        """Learn from unlabelled texts (no label is read): keep label vectors moved toward them; returns self.

        Every later call scores with the moved vectors (``transduction_``; saved by ``save``); a
        later ``adapt`` starts again from the labels' own texts. Changing a parameter that
        changes the fusion (``embedder``, ``model``, ``labels``, ...) drops it.

        Parameters
        ----------
        texts : sequence of str, length n >= 1
            Texts of the kind the classifier will see (the call's own texts, or a sample of them).
        rounds, step : see :func:`refine_label_vectors`.

        Examples
        --------
        >>> from judge import Classifier
        >>> from judge.testing import tiny_pair
        >>> model, tok = tiny_pair()
        >>> clf = Classifier(["yes", "no"], model, tokenizer=tok, embedder="minilm")
        >>> clf.adapt(["sure thing", "no way", "yes please"]).transduction_.label_vectors.shape
        (2, 384)
        """
        from judge._checks import check_texts

        texts = check_texts(texts)
        if not texts:
            raise ValueError("adapt() needs at least one text; got an empty list.")
        _check_fused(self, "adapt()")
        L = _refined(self, texts, rounds, step)[2]
        object.__setattr__(self, "transduction_", Transduction(L, rounds, float(step), len(texts)))
        return self


def _refined(clf, texts, rounds=DEFAULT_ROUNDS, step=DEFAULT_STEP):
    """(lm, X, moved label vectors) for ``texts``, from the labels' own vectors."""
    from judge.experts import expert_inputs

    lm, X, L = expert_inputs(clf, texts, adapted=False)
    return lm, X, refine_label_vectors(lm, X, L, clf.fusion_, rounds=rounds, step=step)


def transductive_for(clf, n_texts, transductive) -> bool:
    """Whether a call of ``n_texts`` to ``clf`` moves the label vectors: ``transductive`` resolved (``"auto"``:
    zero-shot, fused, not ``batch_invariant``, not adapted, and at least :data:`AUTO_MIN_TEXTS` texts).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["yes", "no"], model, tokenizer=tok, embedder="minilm")
    >>> transductive_for(clf, 1, "auto"), transductive_for(clf, 1, True)
    (False, True)
    """
    if transductive == "auto":
        return (n_texts >= AUTO_MIN_TEXTS and is_fused(clf.fusion_) and not clf.batch_invariant and
                clf.calibration_ is None and clf.adaptation_ is None and clf.transduction_ is None)
    if not isinstance(transductive, bool):
        raise ValueError(f"transductive must be True, False or 'auto', got {transductive!r}.")
    return transductive


def transductive_scores(clf, texts) -> np.ndarray:
    """``clf``'s fused zero-shot scores with label vectors moved toward this call's ``texts``: (n, K)."""
    _check_fused(clf, "transductive=True")
    if not texts:
        return np.zeros((0, len(clf.labels)))
    lm, X, L = _refined(clf, texts)
    return clf.fusion_.combine(lm, X @ L.T)
