"""A multinomial logistic head on the frozen model and a sentence embedder, starting from the zero-shot scores.

The head's logits for a text are ::

    a * s + c * r + b + W z        z = (x - mean) / scale

where ``s`` (K,) are the exact zero-shot label log-probabilities (an *offset*: the starting
point), ``r`` (K,) the text's cosine similarity to each label's text under a sentence embedder
(a second offset, starting at ``c = 0``), and ``x`` the concatenated feature *blocks*: the hidden
state at the answer slot (``hidden``, :func:`judge.adaptation.answer_states`) and/or the
sentence embedding of the text (``embed``, :class:`judge.encoders.SentenceEncoder`). ``a``,
``c`` (unpenalised scalars, clipped at 0), ``b`` (K,) and ``W`` (K, d) are fitted. It starts at
``a = 1, c = 0, b = 0, W = 0``: exactly the zero-shot distribution. The loss is the summed
negative log-likelihood plus ``l2 / 2 * (|W|^2 + |b|^2)``, so the more examples, the further
the head may move from zero-shot; ``l2`` is chosen by cross-validated NLL on the training data
only (:func:`choose_l2`), and so is the combination of blocks and offsets
(:func:`judge.adaptation.choose_features`, ``features="auto"``).

The fit is L-BFGS (scipy's ``L-BFGS-B``, float64, the loss's analytic gradient in numpy) on that
loss, not scikit-learn's ``LogisticRegression``: scikit-learn's takes no offset (a fixed
per-sample, per-class margin added to the logits, ``init_score`` in the boosting libraries),
and the offset is what makes zero examples equal zero-shot (nor is ``a * s``, one unpenalised
weight on a per-class input, a coefficient its multinomial model has). scikit-learn still makes
the cross-validation folds. With no offsets (``features="hidden"``) the same code fits a plain
multinomial logistic regression on the blocks (zero examples would be uniform).

What it deliberately does not do: compute features (:mod:`judge.adaptation.features` and
:mod:`judge.encoders` do) or calibrate (``Classifier.calibrate`` does, after ``fit``, on data the
fit never saw).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["LinearHead", "fit_head", "choose_l2", "cv_folds", "L2_GRID", "BLOCKS", "OFFSETS", "check_features"]

#: The L2 strengths cross-validation chooses from (summed-loss form: per example, l2 / n).
L2_GRID = (0.1, 1.0, 10.0, 100.0, 1000.0)
_CV_ITER = 60  # L-BFGS iterations per fold fit (warm-started along the grid): enough to rank strengths
#: Feature blocks (columns of ``W``), in the order they are concatenated (``tfidf``: sparse, last).
BLOCKS = ("hidden", "embed", "tfidf")
#: TF-IDF columns are multiplied by this before the fit (not standardised: they stay sparse), so one
#: L2 strength serves them and the standardised dense blocks (TF-IDF + LR prefers ~1000x weaker L2).
TFIDF_SCALE = 30.0
#: Offsets (per-label inputs with one fitted scale each), in their order.
OFFSETS = ("scores", "similarity")


def check_features(name, x, n, width=None) -> np.ndarray:
    """``x`` as float64 (n, width), with a clear error for another shape or NaN / infinite values.

    Examples
    --------
    >>> check_features("states", [[0.0, 1.0]], 1).shape
    (1, 2)
    >>> check_features("states", [[np.nan, 1.0]], 1)
    Traceback (most recent call last):
    ...
    ValueError: states holds 1 NaN or infinite value(s), first in row 0; every feature must be finite (drop or re-score those texts).
    """
    x = np.asarray(x, np.float64)
    if x.ndim != 2 or x.shape[0] != n or (width is not None and x.shape[1] != width):
        want = f"({n}, {width})" if width is not None else f"({n}, d)"
        raise ValueError(f"{name} has shape {x.shape}, expected {want}: one row per text.")
    bad = ~np.isfinite(x)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        raise ValueError(f"{name} holds {int(bad.sum())} NaN or infinite value(s), first in row {row}; every "
                         f"feature must be finite (drop or re-score those texts).")
    return x


def _log_softmax(z):
    m = z.max(axis=1, keepdims=True)
    e = z - np.where(np.isfinite(m), m, 0.0)
    return e - np.log(np.exp(e).sum(axis=1, keepdims=True))


@dataclass(frozen=True, eq=False)
class LinearHead:
    """A fitted head: ``log_softmax(a * scores + c * similarity + bias + ((x - mean) / scale) @ weights.T)``.

    Parameters
    ----------
    weights : ndarray of float64, shape (K, d)
    bias : ndarray of float64, shape (K,)
    offset_scale : float or None
        ``a``; None when the head does not use the zero-shot scores.
    mean, scale : ndarray of float64, shape (d,)
        Standardisation of the features (from the training texts).
    l2 : float
    report : dict
        ``n``, ``l2``, ``features``, the cross-validation table, seconds.
    blocks : tuple of (name, width) pairs
        The feature blocks of ``x`` in column order (names from :data:`BLOCKS`); default: one
        ``hidden`` block as wide as ``weights``.
    similarity_scale : float or None
        ``c``; None when the head does not use the label similarities.
    embedder : str or dict or None
        The sentence encoder of the ``embed`` block and the similarities (a name or spec for
        :func:`judge.encoders.get_encoder`; saved by name, never pickled).
    label_vectors : ndarray of float64, shape (K, e), or None
        The embedder's vectors of the labels' texts at fit time (the similarities' other side).
    tfidf : judge.encoders.TfidfEncoder or None
        The TF-IDF encoder fitted on the training texts, for the ``tfidf`` block.

    Examples
    --------
    >>> head = LinearHead(np.zeros((2, 3)), np.zeros(2), 1.0, np.zeros(3), np.ones(3), 1.0)
    >>> s = np.log([[0.75, 0.25]])
    >>> np.exp(head.log_proba(s, np.ones((1, 3)))).round(2).tolist()    # at its start: zero-shot
    [[0.75, 0.25]]
    >>> head.features
    'hidden+scores'
    """

    weights: np.ndarray
    bias: np.ndarray
    offset_scale: float | None
    mean: np.ndarray
    scale: np.ndarray
    l2: float
    report: dict = field(default_factory=dict)
    blocks: tuple | None = None
    similarity_scale: float | None = None
    embedder: object = None
    label_vectors: np.ndarray | None = None
    tfidf: object = None
    kind = "head"

    def __post_init__(self):
        if self.blocks is None:
            object.__setattr__(self, "blocks", (("hidden", int(np.asarray(self.weights).shape[1])),))
        object.__setattr__(self, "blocks", tuple((str(n), int(w)) for n, w in self.blocks))
        self.validate()

    @property
    def uses_scores(self) -> bool:
        """True when the head starts from the zero-shot scores (they are then computed at predict)."""
        return self.offset_scale is not None

    @property
    def uses_similarity(self) -> bool:
        """True when the head reads the text-label similarities of its embedder."""
        return self.similarity_scale is not None

    @property
    def block_names(self) -> tuple:
        """The feature blocks' names, in column order."""
        return tuple(n for n, _ in self.blocks)

    @property
    def features(self) -> str:
        """The blocks and offsets as ``fit(features=...)`` names them, e.g. ``"hidden+embed+similarity"``."""
        return "+".join([*self.block_names, *(["scores"] if self.uses_scores else []),
                         *(["similarity"] if self.uses_similarity else [])])

    def validate(self) -> None:
        """Raise ValueError naming the field when shapes disagree or a value is not finite."""
        W, b = np.asarray(self.weights), np.asarray(self.bias)
        if W.ndim != 2 or b.shape != (W.shape[0],):
            raise ValueError(f"head weights have shape {W.shape} and bias {b.shape}; expected (K, d) and (K,).")
        for name in ("mean", "scale"):
            v = np.asarray(getattr(self, name))
            if v.shape != (W.shape[1],):
                raise ValueError(f"head {name} has shape {v.shape}, expected ({W.shape[1]},).")
        if not all(np.all(np.isfinite(np.asarray(getattr(self, k)))) for k in ("weights", "bias", "mean", "scale")):
            raise ValueError("head arrays hold NaN or infinite values; fit again.")
        if np.any(np.asarray(self.scale) <= 0):
            raise ValueError("head scale must be > 0 everywhere; fit again.")
        bad = [n for n in self.block_names if n not in BLOCKS]
        if bad or sum(w for _, w in self.blocks) != W.shape[1] or len(set(self.block_names)) != len(self.blocks):
            raise ValueError(f"head blocks {self.blocks} do not describe its {W.shape[1]} feature columns with "
                             f"distinct names from {BLOCKS}; fit again.")
        for name in ("offset_scale", "similarity_scale"):
            a = getattr(self, name)
            if a is not None and not (isinstance(a, (int, float)) and np.isfinite(a) and a >= 0):
                raise ValueError(f"head {name} must be a finite number >= 0 or None, got {a!r}.")
        needs = self.uses_similarity or "embed" in self.block_names
        if needs and self.embedder is None:
            raise ValueError("the head reads a sentence embedder (embed block or similarity) but names none; fit again.")
        if "tfidf" in self.block_names:
            width = dict(self.blocks)["tfidf"]
            vec = getattr(self.tfidf, "vectorizer_", None)
            if vec is None or len(vec.vocabulary_) != width:
                raise ValueError(f"the head's tfidf block has {width} columns but its TF-IDF encoder "
                                 f"{'is missing' if vec is None else f'has {len(vec.vocabulary_)} terms'}; fit again.")
        if self.uses_similarity:
            L = np.asarray(self.label_vectors) if self.label_vectors is not None else None
            if L is None or L.ndim != 2 or L.shape[0] != W.shape[0] or not np.all(np.isfinite(L)):
                raise ValueError(f"head label_vectors must be finite, shape ({W.shape[0]}, e), for the similarity "
                                 f"offset; got {None if L is None else L.shape}. Fit again.")

    def stack(self, states):
        """The features as the head reads them: (dense (n, d_dense) or None, sparse (n, V) or None), from a dict
        ``states`` {block: (n, d_b)} (dense blocks stacked in the head's order, ``tfidf`` kept sparse) or stacked ones.

        Examples
        --------
        >>> head = LinearHead(np.zeros((2, 3)), np.zeros(2), None, np.zeros(3), np.ones(3), 1.0,
        ...                   blocks=(("hidden", 1), ("embed", 2)), embedder="minilm")
        >>> dense, sparse = head.stack({"embed": np.ones((4, 2)), "hidden": np.zeros((4, 1))})
        >>> dense.shape, dense[0].tolist(), sparse
        ((4, 3), [0.0, 1.0, 1.0], None)
        """
        if isinstance(states, dict):
            missing = [n for n in self.block_names if n not in states]
            if missing:
                raise ValueError(f"the head needs the feature block(s) {missing}; got {sorted(states)}.")
            dense = [np.asarray(states[n], np.float64) for n in self.block_names if n != "tfidf"]
            return (np.hstack(dense) if dense else None, states["tfidf"] if "tfidf" in self.block_names else None)
        return _parts(states)

    def log_proba(self, scores, states, similarity=None) -> np.ndarray:
        """Log-probabilities of the K labels: (n, K) float64, rows log-normalised.

        Parameters
        ----------
        scores : ndarray of shape (n, K), or None when ``uses_scores`` is False
        states : ndarray of shape (n, d) (the blocks concatenated in order) or dict {block: (n, d_b)}
            (``tfidf``: a sparse matrix)
        similarity : ndarray of shape (n, K), or None when ``uses_similarity`` is False
        """
        logits = _linear(_apply(self.stack(states), self.mean, self.scale), self.weights) + self.bias
        if self.uses_scores and self.offset_scale > 0:  # -inf (a label a search left out) stays impossible
            logits = logits + self.offset_scale * _centred(np.asarray(scores, np.float64))
        if self.uses_similarity and self.similarity_scale > 0:
            logits = logits + self.similarity_scale * _centred(np.asarray(similarity, np.float64))
        return _log_softmax(logits)

    def decision_function(self, clf, texts, base_scores, scores_states=None) -> np.ndarray:
        """What ``Classifier.decision_function`` returns once this head is fitted: (n, K) log-probabilities.

        ``base_scores(texts)``: the zero-shot scores (called only when the head uses them); ``scores_states(texts)``,
        optional: them and the answer-slot states of the same pass (or None), so the model runs once."""
        return self.log_proba(*self.features_of(clf, texts, base_scores, scores_states))

    def features_of(self, clf, texts, base_scores, scores_states=None, given=None) -> tuple:
        """What :meth:`log_proba` reads for ``texts``: (scores (n, K) or None, {block: (n, d_b)}, similarity or None).

        ``clf`` gives the ``hidden`` block and the zero-shot scores; ``base_scores``, ``scores_states``: as
        :meth:`decision_function`; ``given``: a dict of features computed already for ``texts`` (``"hidden"``,
        ``"scores"``), not computed again. ``embed`` and the similarities are always the head's own embedder's
        (a tuned one differs from the frozen).

        Examples
        --------
        >>> head = LinearHead(np.zeros((2, 3)), np.zeros(2), 1.0, np.zeros(3), np.ones(3), 1.0)
        >>> s, blocks, sim = head.features_of(None, ["a", "b"], None, given={"hidden": np.ones((2, 3)),
        ...                                                                   "scores": np.zeros((2, 2))})
        >>> s.shape, sorted(blocks), sim
        ((2, 2), ['hidden'], None)
        """
        from judge.adaptation.features import text_features

        given = given or {}
        blocks, s = [b for b in self.block_names if b != "tfidf"], given.get("scores") if self.uses_scores else None
        feats = {"hidden": given["hidden"]} if "hidden" in blocks and "hidden" in given else {}
        blocks = [b for b in blocks if b not in feats]
        if self.uses_scores and s is None and "hidden" in blocks and scores_states is not None:
            s, H = scores_states(texts)
            feats, blocks = ({"hidden": H}, [b for b in blocks if b != "hidden"]) if H is not None else ({}, blocks)
        feats.update(text_features(clf, texts, blocks, embedder=self.embedder))
        if self.tfidf is not None:
            feats["tfidf"] = self.tfidf.encode(texts)
        sim = None
        if self.uses_similarity:
            from judge.encoders import get_encoder
            from judge.fusion import label_similarity

            sim = label_similarity(get_encoder(self.embedder), texts, self.label_vectors)
        s = base_scores(texts) if self.uses_scores and s is None else s
        return s, feats, sim

    def arrays(self) -> dict:
        """The arrays to save (safetensors): weights, bias, mean, scale (and the label vectors)."""
        out = {"weights": self.weights, "bias": self.bias, "mean": self.mean, "scale": self.scale}
        if self.label_vectors is not None:
            out["label_vectors"] = np.asarray(self.label_vectors, np.float64)
        if self.tfidf is not None:
            out["tfidf_idf"] = self.tfidf.state()[1]["idf"]
        if hasattr(self.embedder, "arrays"):  # an embedder tuned by fit (judge.adaptation.tuning): its weights
            out.update({f"tuned.{k}": v for k, v in self.embedder.arrays().items()})
        return out

    def config(self) -> dict:
        """The JSON-safe scalars to save beside :meth:`arrays`."""
        tfidf = None
        if self.tfidf is not None:
            vocab = self.tfidf.state()[0]
            tfidf = {"spec": self.tfidf.spec, "terms": sorted(vocab, key=vocab.get)}
        return {"kind": self.kind, "offset_scale": self.offset_scale, "l2": self.l2, "report": self.report,
                "blocks": [list(b) for b in self.blocks], "similarity_scale": self.similarity_scale,
                "embedder": getattr(self.embedder, "spec", self.embedder), "tfidf": tfidf}

    def __repr__(self):
        K, d = np.asarray(self.weights).shape
        return f"LinearHead(K={K}, d={d}, features={self.features!r}, l2={self.l2:g})"


def _centred(s):
    m = s.max(axis=1, keepdims=True)
    return s - np.where(np.isfinite(m), m, 0.0)


def _offsets_of(scores, similarity):
    """The offsets present, in OFFSETS order: list of (name, centred (n, K) array)."""
    out = []
    if scores is not None:
        out.append(("scores", _centred(np.asarray(scores, np.float64))))
    if similarity is not None:
        out.append(("similarity", _centred(np.asarray(similarity, np.float64))))
    return out


def _parts(H):
    """Features as (dense (n, d) float64 or None, sparse CSR (n, V) or None)."""
    import scipy.sparse as sp

    if isinstance(H, tuple):
        return H
    if sp.issparse(H):
        return None, sp.csr_matrix(H, dtype=np.float64)
    return np.asarray(H, np.float64), None


def _rows(H, idx):
    d, s = H
    return (None if d is None else d[idx], None if s is None else s[idx])


def _width(H):
    d, s = H
    return (0 if d is None else d.shape[1]) + (0 if s is None else s.shape[1])


def _standardise(H):
    """Column means and scales: the dense columns standardised, the sparse (TF-IDF) ones scaled by TFIDF_SCALE."""
    d, s = _parts(H)
    mean, scale = np.zeros(0), np.zeros(0)
    if d is not None:
        mean = d.mean(axis=0)
        sd = d.std(axis=0)
        floor = 1e-3 * (float(sd.mean()) if sd.mean() > 0 else 1.0)
        scale = np.maximum(sd, floor)
    if s is not None:
        mean = np.concatenate([mean, np.zeros(s.shape[1])])
        scale = np.concatenate([scale, np.full(s.shape[1], 1.0 / TFIDF_SCALE)])
    return mean, scale


def _apply(H, mean, scale):
    """(standardised dense, scaled sparse) of features ``H``."""
    import scipy.sparse as sp

    d, s = _parts(H)
    nd = 0 if d is None else d.shape[1]
    zd = None if d is None else (d - mean[:nd]) / scale[:nd]
    zs = None if s is None else sp.csr_matrix(s.multiply(1.0 / scale[nd:][None, :]))
    return zd, zs


def _linear(Z, W):
    """``Z @ W.T`` for (dense, sparse) features: (n, K)."""
    zd, zs = Z
    nd = 0 if zd is None else zd.shape[1]
    out = 0.0
    if zd is not None:
        out = zd @ W[:, :nd].T
    if zs is not None:
        out = out + np.asarray(zs @ W[:, nd:].T)
    return out


def _fit(Z, offsets, y, K, l2, theta0=None, callback=None, max_iter=200):
    """L-BFGS (scipy, float64, analytic gradient) on the penalised summed NLL; the parameters [scales (J), b (K), W (K*d)].

    ``Z``: (dense, sparse) standardised features (:func:`_apply`); ``offsets``: list of (name, (n, K))
    centred offsets; the ``scores`` scale starts at 1, the others at 0. ``callback`` gets
    ``{"l2", "loss"}`` at every evaluation (it may raise to stop the fit).
    """
    from scipy.optimize import minimize

    zd, zs = _parts(Z)
    nd = 0 if zd is None else zd.shape[1]
    d = _width((zd, zs))
    J = len(offsets)
    offs = [o for _, o in offsets]
    y = np.asarray(y, np.int64)
    n = len(y)
    if theta0 is None:
        theta0 = np.zeros(J + K + K * d)
        for j, (name, _) in enumerate(offsets):
            theta0[j] = 1.0 if name == "scores" else 0.0

    def fun(theta):
        b, W = theta[J:J + K], theta[J + K:].reshape(K, d)
        logits = np.broadcast_to(b, (n, K)) + _linear((zd, zs), W)
        for j, o in enumerate(offs):
            logits = logits + theta[j] * o
        m = logits.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
        val = float((lse - logits[np.arange(n), y]).sum() + 0.5 * l2 * (b @ b + (W * W).sum()))
        G = np.exp(logits - lse[:, None])
        G[np.arange(n), y] -= 1.0
        grad = np.empty_like(theta)
        grad[:J] = [float((G * o).sum()) for o in offs]
        grad[J:J + K] = G.sum(axis=0) + l2 * b
        gW = l2 * W
        if zd is not None:
            gW[:, :nd] += G.T @ zd
        if zs is not None:
            gW[:, nd:] += np.asarray(zs.T @ G).T
        grad[J + K:] = gW.ravel()
        if callback is not None:
            callback({"l2": l2, "loss": val})
        return val, grad

    res = minimize(fun, np.asarray(theta0, np.float64), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "maxcor": 10, "gtol": 1e-6, "ftol": 1e-12})
    out = np.asarray(res.x, np.float64).copy()
    out[:J] = np.maximum(out[:J], 0.0)  # inverse temperatures: never flip an offset's order
    return out


def _log_proba_of(theta, Z, offsets, K):
    """Log-probabilities of parameters ``theta`` (as :func:`_fit` returns them) on standardised ``Z``."""
    J = len(offsets)
    logits = _linear(Z, theta[J + K:].reshape(K, _width(Z))) + theta[J:J + K]
    for j, (_, o) in enumerate(offsets):
        if theta[j] > 0:
            logits = logits + theta[j] * o
    return _log_softmax(logits)


def cv_folds(y, cv, random_state) -> list:
    """The head's cross-validation folds: stratified down to the smallest class, shuffled plain folds
    where a class has one text. Every candidate and every tuned embedder of ``fit`` uses these.

    Examples
    --------
    >>> [len(te) for _, te in cv_folds(np.repeat([0, 1], 4), 5, 0)]
    [2, 2, 2, 2]
    """
    from sklearn.model_selection import KFold, StratifiedKFold

    counts = np.bincount(y)
    counts = counts[counts > 0]
    k = min(cv, len(y))
    if counts.min() >= 2:
        return list(StratifiedKFold(min(k, int(counts.min())), shuffle=True, random_state=random_state).split(y, y))
    return list(KFold(k, shuffle=True, random_state=random_state).split(y))


def choose_l2(states, y, n_classes, *, scores=None, similarity=None, grid=L2_GRID, cv=5, random_state=0,
              callback=None, folds=None, per_fold=None) -> dict:
    """Cross-validated NLL of the head for each L2 strength; the training data only.

    Folds: stratified (``cv`` folds, fewer when a class has fewer examples), or plain shuffled
    folds when some class has a single example. Within a fold the grid runs from the strongest
    penalty down, each fit warm-started from the previous one.

    Parameters
    ----------
    states : ndarray of shape (n, d), or (dense, sparse) pair
        The feature blocks, concatenated (a TF-IDF block: the sparse part).
    y : ndarray of int, shape (n,)
    n_classes : int
    scores, similarity : ndarray of shape (n, K), optional
        The offsets.
    grid : sequence of float
    cv : int
    random_state : int
    callback : callable, optional
        Called after every optimiser step (may raise to stop).
    folds : list of (train, test) index arrays, optional
        Use these folds instead of making them.
    per_fold : callable, optional
        ``fold index -> (states, scores, similarity)``: features that differ per fold (an embedder
        tuned on each fold's training rows, :func:`judge.adaptation.fit_head_tuned`); they replace
        ``states``, ``scores`` and ``similarity`` (pass None for those) and need ``folds``.

    Returns
    -------
    dict
        ``l2`` (the chosen strength: lowest mean held-out NLL, the stronger one on a tie),
        ``grid``, ``nll`` (mean held-out NLL per strength), ``accuracy``, ``folds``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 10); H = rng.normal(size=(20, 3)) + 3 * np.eye(3)[y][:, :3]
    >>> r = choose_l2(H, y, 2, cv=3)
    >>> r["l2"] in L2_GRID, len(r["nll"]) == len(L2_GRID)
    (True, True)
    """
    H = None if per_fold is not None else _parts(states)
    y = np.asarray(y)
    folds = folds if folds is not None else cv_folds(y, cv, random_state)
    grid = sorted(float(g) for g in grid)[::-1]
    nll = np.zeros(len(grid))
    acc = np.zeros(len(grid))
    for f, (tr, te) in enumerate(folds):
        if per_fold is not None:
            states, scores, similarity = per_fold(f)
            H = _parts(states)
        mean, scale = _standardise(_rows(H, tr))
        Ztr, Zte = _apply(_rows(H, tr), mean, scale), _apply(_rows(H, te), mean, scale)
        off_tr = _offsets_of(None if scores is None else scores[tr], None if similarity is None else similarity[tr])
        theta = None
        for j, l2 in enumerate(grid):
            theta = _fit(Ztr, off_tr, y[tr], n_classes, l2, theta, callback, max_iter=_CV_ITER)
            off_te = _offsets_of(None if scores is None else scores[te], None if similarity is None else similarity[te])
            lp = _log_proba_of(theta, Zte, off_te, n_classes)
            nll[j] += -lp[np.arange(len(te)), y[te]].sum()
            acc[j] += (lp.argmax(1) == y[te]).sum()
    n_held = sum(len(te) for _, te in folds)
    nll, acc = nll / n_held, acc / n_held
    best = int(np.argmin(np.round(nll, 10)))  # grid runs strongest first: ties keep the stronger
    return {"l2": grid[best], "grid": grid, "nll": nll.tolist(), "accuracy": acc.tolist(), "folds": len(folds)}


def _head(theta, K, blocks, use_s, use_r, mean, scale, l2, report=None, embedder=None, label_vectors=None,
          tfidf=None):
    J = int(use_s) + int(use_r)
    d = sum(w for _, w in blocks)
    a = float(theta[0]) if use_s else None
    c = float(theta[int(use_s)]) if use_r else None
    return LinearHead(theta[J + K:].reshape(K, d).copy(), theta[J:J + K].copy(), a, mean, scale, float(l2),
                      report or {}, blocks, c, embedder if (use_r or any(n == "embed" for n, _ in blocks)) else None,
                      label_vectors if use_r else None, tfidf if any(n == "tfidf" for n, _ in blocks) else None)


def fit_head(states, y, n_classes, *, scores=None, similarity=None, l2=None, cv=5, grid=L2_GRID, random_state=0,
             callback=None, blocks=None, embedder=None, label_vectors=None, tfidf=None) -> LinearHead:
    """Fit the head on labelled texts' features; ``l2=None`` chooses it by cross-validation.

    Parameters
    ----------
    states : ndarray of shape (n, d)
        The feature blocks of the training texts, concatenated (``blocks`` names them; default one
        ``hidden`` block: the answer-slot hidden states).
    y : ndarray of int, shape (n,)
        Label indices in ``[0, n_classes)``.
    n_classes : int
    scores : ndarray of shape (n, K), optional
        The texts' exact zero-shot log-probabilities: the offset the head starts from.
    similarity : ndarray of shape (n, K), optional
        The texts' cosine similarities to the labels' texts (needs ``embedder`` and ``label_vectors``).
    l2 : float, optional
        The L2 strength; None: :func:`choose_l2` on these data.
    cv, grid, random_state : cross-validation settings.
    callback : callable, optional
        Called after every optimiser step with a small dict (may raise to stop: nothing is kept).
    blocks : sequence of (name, width), optional
    embedder, label_vectors : the sentence encoder (name or spec) and the labels' vectors, when used.
    tfidf : judge.encoders.TfidfEncoder, optional
        The fitted encoder of a ``tfidf`` block.

    Returns
    -------
    LinearHead

    Examples
    --------
    A planted signal in the states, and zero-shot scores that know nothing:

    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1, 2], 8)
    >>> H = rng.normal(size=(24, 5)); H[:, :3] += 4 * np.eye(3)[y]
    >>> head = fit_head(H, y, 3, scores=np.zeros((24, 3)), cv=3)
    >>> float((head.log_proba(np.zeros((24, 3)), H).argmax(1) == y).mean())
    1.0
    """
    t0 = time.perf_counter()
    dense, sparse = _parts(states)
    if dense is not None:
        dense = check_features("states", dense, len(y))
    if sparse is not None and sparse.shape[0] != len(y):
        raise ValueError(f"the sparse (TF-IDF) features have {sparse.shape[0]} rows, expected {len(y)}: one per text.")
    H = (dense, sparse)
    y = np.asarray(y, np.int64)
    S = None if scores is None else check_features("scores", scores, len(y), n_classes)
    R = None if similarity is None else check_features("similarity", similarity, len(y), n_classes)
    blocks = (("hidden", _width(H)),) if blocks is None else tuple(blocks)
    report = {"n": int(len(y))}
    if l2 is None:
        cvr = choose_l2(H, y, n_classes, scores=S, similarity=R, grid=grid, cv=cv, random_state=random_state,
                        callback=callback)
        l2 = cvr["l2"]
        report["cv"] = cvr
    mean, scale = _standardise(H)
    theta = _fit(_apply(H, mean, scale), _offsets_of(S, R), y, n_classes, float(l2), None, callback)
    report.update(l2=float(l2), seconds=time.perf_counter() - t0)
    return _head(theta, n_classes, blocks, S is not None, R is not None, mean, scale, l2, report, embedder,
                 label_vectors, tfidf)
