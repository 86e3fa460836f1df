"""A retrieval shortlist for huge label sets: embed the labels once, keep the top M per text.

:class:`Shortlist` embeds every label's text once and, per call, the texts; a
nearest-neighbour search (scikit-learn's :class:`~sklearn.neighbors.NearestNeighbors`, cosine,
exact) keeps the M labels closest to each text. The classifier then scores those M labels
exactly and gives the others no probability: fast, but a label outside the shortlist can never
be predicted, so :meth:`Shortlist.recall` measures, on labelled texts, how often the right label
survives. Encoders:

* :class:`ModelEncoder` (the default): the language model's own last hidden states, mean-pooled
  over the text's tokens and L2-normalised (no second model to install);
* :class:`TfidfEncoder`: character n-gram TF-IDF (scikit-learn), a strong lexical baseline;
* any callable ``encode(list of str) -> (n, d) array or sparse matrix`` the user passes.

What it deliberately does not do: score labels (the engine does), or approximate the search
(the neighbour search is exact over all labels).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Shortlist", "ModelEncoder", "TfidfEncoder"]


class ModelEncoder:
    """Texts -> the model's mean-pooled last hidden states, L2-normalised: (n, d) float32.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase
    batch_size : int
    max_tokens : int
        Texts are cut to this many tokens.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> enc = ModelEncoder(*tiny_pair())
    >>> e = enc(["card arrival", "exchange rate"])
    >>> e.shape[0], bool(np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5))
    (2, True)
    """

    def __init__(self, model, tokenizer, *, batch_size: int = 64, max_tokens: int = 64):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_tokens = int(batch_size), int(max_tokens)

    def __call__(self, texts) -> np.ndarray:
        import torch

        texts = list(texts)
        out = []
        for s in range(0, len(texts), self.batch_size):
            enc = self.tokenizer(texts[s:s + self.batch_size], add_special_tokens=False, truncation=True,
                                 max_length=self.max_tokens, padding=True, return_tensors="pt")
            ids, att = enc["input_ids"], enc["attention_mask"]  # pooling uses the mask: either padding side
            with torch.inference_mode():
                h = self.model(input_ids=ids.to(self.model.device), attention_mask=att.to(self.model.device),
                               output_hidden_states=True).hidden_states[-1].float().cpu()
            m = att[..., None].float()
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
            out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)


class TfidfEncoder:
    """Character 2-4-gram TF-IDF within word boundaries (scikit-learn), fitted on the labels' texts.

    Examples
    --------
    >>> enc = TfidfEncoder()
    >>> enc.fit(["classical cholera", "typhoid fever"]).transform(["cholera"]).shape
    (1, 81)
    """

    def __init__(self, *, ngram_range=(2, 4), min_df: int = 1):
        self.ngram_range, self.min_df = ngram_range, min_df
        self.vectorizer_ = None

    def fit(self, label_texts) -> TfidfEncoder:
        """Fit the vocabulary and IDF weights on the labels' texts; returns self."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.vectorizer_ = TfidfVectorizer(analyzer="char_wb", ngram_range=self.ngram_range, min_df=self.min_df,
                                           lowercase=True, sublinear_tf=True)
        self.vectorizer_.fit(list(label_texts))
        return self

    def transform(self, texts):
        """Sparse (n, vocabulary) TF-IDF rows, L2-normalised."""
        if self.vectorizer_ is None:
            raise ValueError("TfidfEncoder is not fitted: call fit(label_texts) first (Shortlist does).")
        return self.vectorizer_.transform(list(texts))

    def __call__(self, texts):
        return self.transform(texts)


class Shortlist:
    """The M labels nearest to each text, by embedding similarity (see the module docstring).

    Parameters
    ----------
    label_texts : sequence of str, length K
        What each label says (its name or title).
    m : int
        Labels kept per text (capped at K).
    encoder : callable, optional
        ``encoder(list of str) -> (n, d)`` array or sparse matrix. A :class:`TfidfEncoder`
        is fitted on ``label_texts`` first. Default: a :class:`TfidfEncoder`.

    Attributes
    ----------
    label_embeddings_ : ndarray or sparse matrix, shape (K, d)
    seconds_ : float
        Time spent embedding the labels and building the index.

    Examples
    --------
    >>> sl = Shortlist(["classical cholera", "typhoid fever", "cholera due to vibrio"], m=2)
    >>> sl.query(["cholera"]).tolist()
    [[0, 2]]
    >>> sl.recall(["cholera", "typhoid"], [2, 1])
    1.0
    """

    def __init__(self, label_texts, m: int, encoder=None):
        import time

        from sklearn.neighbors import NearestNeighbors

        label_texts = [str(t) for t in label_texts]
        if not label_texts:
            raise ValueError("Shortlist needs at least one label text; got none.")
        if not isinstance(m, (int, np.integer)) or isinstance(m, bool) or m < 1:
            raise ValueError(f"m (labels kept per text) must be a positive int, got {m!r}.")
        t0 = time.perf_counter()
        self.m = int(min(m, len(label_texts)))
        self.encoder = TfidfEncoder() if encoder is None else encoder
        if isinstance(self.encoder, TfidfEncoder) and self.encoder.vectorizer_ is None:
            self.encoder.fit(label_texts)
        self.label_embeddings_ = self.encoder(label_texts)
        self.index_ = NearestNeighbors(n_neighbors=self.m, metric="cosine", algorithm="brute")
        self.index_.fit(self.label_embeddings_)
        self.seconds_ = time.perf_counter() - t0

    def query(self, texts) -> np.ndarray:
        """Label indices kept per text, nearest first: ndarray of int64, shape (n, M)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.m), np.int64)
        _, idx = self.index_.kneighbors(self.encoder(texts), n_neighbors=self.m)
        return idx.astype(np.int64)

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
