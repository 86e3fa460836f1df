"""A retrieval shortlist for huge label sets: embed the labels once, keep the top M per text.

:class:`Shortlist` embeds every label's text once and, per call, the texts; the cosine
similarity of each text to every label (exact, a matrix product over all K labels) ranks them,
and the M most similar are kept. The classifier then scores those M labels exactly and gives
the others no probability: fast, but a label outside the shortlist can never be predicted, so
:meth:`Shortlist.recall` measures, on labelled texts, how often the right label survives.
Encoders come from :mod:`judge.encoders` (by name or object): character n-gram TF-IDF (the
default), the packaged sentence embedder, the LM's own mean-pooled states, or any callable
``list of str -> (n, d)``. Several encoders rank by a weighted sum of their similarities (a
dense embedder beside TF-IDF); :meth:`Shortlist.similarity` returns that score, which a caller
may fuse with the exact label scores.

What it deliberately does not do: score labels (the engine does), or approximate the search
(the similarity is computed against every label).
"""

from __future__ import annotations

import numpy as np

from judge.encoders import get_encoder

__all__ = ["Shortlist"]


class Shortlist:
    """The M labels nearest to each text, by embedding similarity (see the module docstring).

    Parameters
    ----------
    label_texts : sequence of str, length K
        What each label says (its name or title).
    m : int
        Labels kept per text (capped at K).
    encoder : encoder, name, callable, or a sequence of them, optional
        Anything :func:`judge.encoders.get_encoder` takes (``"tfidf"``, ``"minilm"``, an encoder
        object, a callable ``list of str -> (n, d)``). An unfitted TF-IDF encoder is fitted on
        ``label_texts`` first. Default: ``"tfidf"`` (character n-grams). A sequence ranks by
        the weighted sum of each encoder's cosine similarity.
    weights : sequence of float, optional
        One per encoder (default: equal weights summing to 1).

    Attributes
    ----------
    encoders_ : list of Encoder
    label_embeddings_ : list of ndarray or sparse matrix, each of shape (K, d_e)
        Row-normalised label vectors, one matrix per encoder.
    seconds_ : float
        Time spent embedding the labels.

    Examples
    --------
    >>> sl = Shortlist(["classical cholera", "typhoid fever", "cholera due to vibrio"], m=2)
    >>> sl.query(["cholera"]).tolist()
    [[0, 2]]
    >>> sl.recall(["cholera", "typhoid"], [2, 1])
    1.0
    >>> sl.similarity(["cholera"]).shape
    (1, 3)
    """

    def __init__(self, label_texts, m: int, encoder=None, *, weights=None):
        import time

        label_texts = [str(t) for t in label_texts]
        if not label_texts:
            raise ValueError("Shortlist needs at least one label text; got none.")
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise ValueError(f"m (labels kept per text) must be a positive int, got {m!r}.")
        many = isinstance(encoder, (list, tuple))
        specs = list(encoder) if many else ["tfidf" if encoder is None else encoder]
        if not specs:
            raise ValueError("Shortlist got an empty list of encoders; pass one or more, e.g. ['tfidf', 'minilm'].")
        if weights is None:
            weights = [1.0 / len(specs)] * len(specs)
        weights = [float(w) for w in weights]
        if len(weights) != len(specs) or not all(np.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"weights must be {len(specs)} finite numbers >= 0, not all 0 (one per encoder); got "
                             f"{weights!r}.")
        t0 = time.perf_counter()
        self.m = int(min(m, len(label_texts)))
        self.weights = weights
        self.encoders_ = [get_encoder(e) for e in specs]
        for enc in self.encoders_:
            if getattr(enc, "vectorizer_", True) is None:  # an unfitted TF-IDF: its vocabulary is the labels'
                enc.fit(label_texts)
        self.label_embeddings_ = [_unit_rows(enc(label_texts)) for enc in self.encoders_]
        self.seconds_ = time.perf_counter() - t0

    @property
    def encoder(self):
        """The (first) encoder."""
        return self.encoders_[0]

    def similarity(self, texts) -> np.ndarray:
        """Weighted cosine similarity of every text to every label: ndarray of float64, shape (n, K).

        Parameters
        ----------
        texts : sequence of str, length n
        """
        texts = list(texts)
        K = self.label_embeddings_[0].shape[0]
        out = np.zeros((len(texts), K))
        if not texts:
            return out
        for w, enc, lab in zip(self.weights, self.encoders_, self.label_embeddings_):
            if w == 0:
                continue
            sim = _unit_rows(enc(texts)) @ lab.T
            out += w * (sim.toarray() if hasattr(sim, "toarray") else np.asarray(sim, np.float64))
        return out

    def query(self, texts) -> np.ndarray:
        """Label indices kept per text, most similar first: ndarray of int64, shape (n, M).

        Ties are broken by the lower label index.
        """
        sim = self.similarity(texts)
        if not len(sim):
            return np.zeros((0, self.m), np.int64)
        part = np.argpartition(-sim, self.m - 1, axis=1)[:, : self.m] if self.m < sim.shape[1] else \
            np.tile(np.arange(sim.shape[1]), (len(sim), 1))
        rows = np.arange(len(sim))[:, None]
        order = np.lexsort((part, -sim[rows, part]), axis=1)
        return part[rows, order].astype(np.int64)

    def recall(self, texts, y) -> float:
        """Fraction of texts whose gold label index (``y``) is in their shortlist.

        Parameters
        ----------
        texts : sequence of str, length n
        y : sequence of int, length n
            Gold label indices.
        """
        y = np.asarray(list(y), np.int64)
        texts = list(texts)
        if len(texts) != len(y):
            raise ValueError(f"texts and y differ in length ({len(texts)} vs {len(y)}).")
        if not len(y):
            raise ValueError("recall needs at least one labelled text; got none.")
        idx = self.query(texts)
        return float(np.mean([y[i] in idx[i] for i in range(len(y))]))


def _unit_rows(x):
    """Rows scaled to unit L2 norm (zero rows stay zero): dense float64 or sparse CSR."""
    import scipy.sparse as sp

    if sp.issparse(x):
        x = sp.csr_matrix(x, dtype=np.float64)
        n = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
        return sp.diags(1.0 / np.where(n > 0, n, 1.0)) @ x
    x = np.asarray(x, np.float64)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1.0)
