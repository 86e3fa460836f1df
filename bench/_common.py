"""Shared helpers for the benchmarks: seeded label families, peer grammars, bit rows.

What is here: the label families (re-exported from ``judge.testing``), the choice grammar over a label list in each peer's language (xgrammar EBNF,
a regex alternation for llguidance and outlines-core), and a decoder from a
packed bitmask row to token ids.

What is deliberately not here: timing, subprocesses or printing (see the
scripts, e.g. ``bench/masks.py``), and anything the library itself needs.
"""

from __future__ import annotations

import json
import re

import numpy as np

__all__ = ["FAMILIES", "ebnf_choice", "icd_codes", "regex_choice", "row_token_ids", "tool_names"]

# the label generators live in judge.testing (shared by tests and benchmarks; identical output)
from judge.testing import icd_codes, tool_names  # noqa: E402

FAMILIES = {"tools": tool_names, "icd": icd_codes}


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
