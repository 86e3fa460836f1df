"""Validation of user inputs shared by the Classifier and the decision API.

What it deliberately does not do: validate label sets (``judge.automaton.trie.validate_labels``
and ``judge.labels`` do) or model arguments (``judge.models`` does).
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_texts", "label_indices"]


def check_texts(texts) -> list[str]:
    """Validate a list of texts (a lone string, a dict, non-strings and blanks are errors)."""
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


def label_indices(labels, y) -> np.ndarray:
    """Indices of the values ``y`` in ``labels``: (n,) int64; a clear error for values that are not labels.

    Examples
    --------
    >>> label_indices(["a", "b"], ["b", "a"]).tolist()
    [1, 0]
    """
    if isinstance(y, (str, bytes)):
        raise TypeError(f"y must be a sequence of labels, got a single {type(y).__name__}; wrap it in a list.")
    pos = {lab: i for i, lab in enumerate(labels)}
    y = list(y)
    bad = sorted({str(v) for v in y if v not in pos})
    if bad:
        raise ValueError(
            f"{len(bad)} value(s) in y are not labels of this classifier, e.g. {bad[:5]}; "
            f"valid labels are classes_ (e.g. {list(labels)[:5]}).")
    return np.asarray([pos[v] for v in y], np.int64)
