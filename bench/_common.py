"""Shared helpers for the benchmarks: seeded label families, peer grammars, bit rows.

What is here: the label families (re-exported from ``judge.testing``), the choice grammar over a label list in each peer's language (xgrammar EBNF,
a regex alternation for llguidance and outlines-core), a decoder from a
packed bitmask row to token ids, and the ``--model`` loader shared by the
scripts (``--model tiny``: a random-weight model for a smoke run in seconds).

What is deliberately not here: timing, subprocesses or printing (see the
scripts, e.g. ``bench/masks.py``), and anything the library itself needs.
"""

from __future__ import annotations

import json
import re

import numpy as np

# also icd_codes, tool_names and FAMILIES, loaded on first use (see __getattr__)
__all__ = ["FAMILY_NAMES", "TINY_MODEL", "ebnf_choice", "family_labels", "load_bench_model", "regex_choice",
           "row_token_ids"]

#: The label families of the benchmarks; their generators are `judge.testing.tool_names` and
#: `judge.testing.icd_codes` (the one copy, shared with the tests).
FAMILY_NAMES = ("tools", "icd")


def family_labels(name: str, k: int, seed: int = 0) -> list[str]:
    """``k`` seeded labels of the family ``name`` (one of `FAMILY_NAMES`).

    Examples
    --------
    >>> family_labels("icd", 3, seed=1) == __import__("judge.testing").testing.icd_codes(3, seed=1)
    True
    """
    if name not in FAMILY_NAMES:
        raise ValueError(f"unknown label family {name!r}; valid families are {', '.join(FAMILY_NAMES)}")
    return _generators()[name](k, seed=seed)


def _generators() -> dict:
    from judge.testing import icd_codes, tool_names

    return dict(zip(FAMILY_NAMES, (tool_names, icd_codes)))


def __getattr__(name):
    """``icd_codes``, ``tool_names`` and ``FAMILIES`` (family name -> generator), from judge.testing.

    Imported on first use: judge.testing loads transformers, which would make every script's
    ``--help`` take seconds.
    """
    if name == "FAMILIES":
        return _generators()
    if name in ("icd_codes", "tool_names"):
        return _generators()["icd" if name == "icd_codes" else "tools"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def ebnf_choice(labels) -> str:
    """xgrammar EBNF that matches exactly one of ``labels``.

    Examples
    --------
    >>> ebnf_choice(['a"b', "c"])
    'root ::= "a\\\\"b" | "c"'
    """
    return "root ::= " + " | ".join(json.dumps(lab, ensure_ascii=False) for lab in labels)


_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$#&~-])")


def regex_choice(labels) -> str:
    """A regex alternation that matches exactly one of ``labels`` (Rust regex syntax).

    Only regex metacharacters are escaped (a backslash before a space or a
    letter is an error in some Rust regex front ends).

    Examples
    --------
    >>> regex_choice(["E11.6", "a b"])
    'E11\\\\.6|a b'
    """
    return "|".join(_REGEX_META.sub(r"\\\1", lab) for lab in labels)


def row_token_ids(row) -> np.ndarray:
    """Token ids whose bit is set in one packed int32 bitmask row.

    Examples
    --------
    >>> row_token_ids(np.array([5, 1], np.int32)).tolist()
    [0, 2, 32]
    """
    bits = np.unpackbits(np.ascontiguousarray(row, dtype=np.int32).view(np.uint8), bitorder="little")
    return np.flatnonzero(bits)


#: The ``--model`` value of a smoke run: `judge.testing.tiny_pair` (random weights, the packaged tokenizer).
TINY_MODEL = "tiny"


def load_bench_model(name=None, *, device=None):
    """``(model, tokenizer)`` for a script's ``--model``.

    ``"tiny"`` (`TINY_MODEL`) is `judge.testing.tiny_pair`: a random-weight 2-layer model over the
    packaged SmolLM2 tokenizer, on CPU, built in seconds; its numbers mean nothing, a run with it
    only shows that the script works end to end. Anything else goes to `judge.models.load_model`
    (None: the packaged SmolLM2).

    Examples
    --------
    >>> model, tok = load_bench_model("tiny")
    >>> model.config.num_hidden_layers
    2
    """
    if name == TINY_MODEL:
        from judge.testing import tiny_pair

        model, tok = tiny_pair()
        if not model.config.architectures:  # built from a config, not loaded: say what it is, as a saved one does
            model.config.architectures = [type(model).__name__]
        return model, tok
    from judge.models import load_model

    return load_model(name, device=device)
