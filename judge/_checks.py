"""Validation of user inputs shared by the Classifier and the decision API.

What it deliberately does not do: validate label sets (``judge.automaton.trie.validate_labels``
and ``judge.labels`` do) or model arguments (``judge.models`` does).
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_texts", "check_model_arg", "check_encoder_spec"]


def check_texts(texts) -> list[str]:
    """Validate a list of texts (None, a lone string, a dict, non-strings and blanks are errors).

    Examples
    --------
    >>> check_texts(("a text", "another"))
    ['a text', 'another']
    >>> check_texts(None)
    Traceback (most recent call last):
    ...
    TypeError: texts must be a list of strings, got None; pass e.g. ["my card has not arrived"].
    """
    if texts is None:
        raise TypeError('texts must be a list of strings, got None; pass e.g. ["my card has not arrived"].')
    if isinstance(texts, (str, bytes)):
        raise TypeError(
            f"texts must be a list of strings, got a single {type(texts).__name__}; wrap it in a list: "
            f"[{texts[:40]!r}].")
    if isinstance(texts, dict):
        raise TypeError("texts must be a list of strings, got a dict; pass list(d.values()) or list(d).")
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"texts must be a list of strings, got {type(texts).__name__}.") from None
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(
                f"Text {i} is {type(t).__name__} ({t!r:.40}), not a str; convert or drop it "
                f"(missing values must be removed before classifying).")
        if not t.strip():
            raise ValueError(
                f"Text {i} is empty or only whitespace ({t!r}); there is nothing to classify. "
                f"Remove empty rows first.")
        try:
            t.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"Text {i} is not valid Unicode ({err.reason} at position {err.start}, e.g. a lone "
                f"surrogate); decode your input with errors='replace' first.") from None
    return texts


def check_model_arg(model) -> None:
    """Raise a TypeError unless ``model`` is None, a name or folder (str / PathLike) or a loaded model.

    Examples
    --------
    >>> check_model_arg("smollm2-135m-instruct")
    >>> check_model_arg(5)
    Traceback (most recent call last):
    ...
    TypeError: model must be None (the packaged model), a hub id, a local folder or a loaded PreTrainedModel; got int 5.
    """
    import os

    if model is None or isinstance(model, (str, os.PathLike)) or hasattr(model, "forward"):
        return
    raise TypeError(f"model must be None (the packaged model), a hub id, a local folder or a loaded "
                    f"PreTrainedModel; got {type(model).__name__} {model!r:.40}.")


def check_encoder_spec(name, spec, *, many=False) -> None:
    """Raise a ValueError unless ``spec`` names an encoder :func:`judge.encoders.get_encoder` resolves offline.

    A name (``"tfidf"``, ``"tfidf-word"``, ``"minilm"``, ``"model"``, ``"all-MiniLM-L6-v2"``), an
    existing folder, a callable or an encoder object; with ``many``, also a list of those or a
    mapping of them to weights (finite, >= 0, not all 0).

    Examples
    --------
    >>> check_encoder_spec("shortlist_encoder", ["tfidf", "minilm"], many=True)
    >>> check_encoder_spec("shortlist_encoder", {"tfidf": 0.25, "minilm": 0.75}, many=True)
    >>> check_encoder_spec("embedder", "tfidff")
    Traceback (most recent call last):
    ...
    ValueError: embedder 'tfidff' is not an encoder name ('tfidf', 'tfidf-word', 'minilm', 'model', 'all-MiniLM-L6-v2') nor a sentence-transformers model folder; pass one of those, a callable list of str -> (n, d), or an encoder from judge.encoders.
    """
    import os

    if many and isinstance(spec, dict) and spec:  # {encoder: weight}: a weighted sum of cosine similarities
        for s, w in spec.items():
            check_encoder_spec(name, s)
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not (np.isfinite(w) and w >= 0):
                raise ValueError(f"{name} weights must be finite numbers >= 0; got {w!r} for {s!r}. Example: "
                                 f"{{'tfidf': 0.25, 'minilm': 0.75}}.")
        if sum(spec.values()) <= 0:
            raise ValueError(f"{name} weights are all 0 ({spec!r}); give at least one encoder a positive weight.")
        return
    if many and isinstance(spec, (list, tuple)) and spec:
        for s in spec:
            check_encoder_spec(name, s)
        return
    if isinstance(spec, str):
        from judge.encoders import DEFAULT_EMBEDDER, ENCODER_NAMES

        known = (*ENCODER_NAMES, DEFAULT_EMBEDDER)
        if spec.lower() in {k.lower() for k in known} | {"sentence-transformers/all-minilm-l6-v2", "embedder"} \
                or os.path.isdir(os.path.expanduser(spec)):
            return
        raise ValueError(f"{name} {spec!r} is not an encoder name ({', '.join(repr(k) for k in known)}) nor a "
                         f"sentence-transformers model folder; pass one of those, a callable list of str -> (n, d), "
                         f"or an encoder from judge.encoders.")
    if callable(spec) or hasattr(spec, "encode"):
        return
    raise ValueError(f"{name} must be an encoder name, a folder, a callable list of str -> (n, d) or an encoder "
                     f"(or a list of them); got {type(spec).__name__} {spec!r:.40}.")
