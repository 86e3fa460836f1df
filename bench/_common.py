"""Shared helpers for the benchmarks: seeded label families, peer grammars, bit rows.

What is here: deterministic label generators (tool names, ICD-10-like codes),
the choice grammar over a label list in each peer's language (xgrammar EBNF,
a regex alternation for llguidance and outlines-core), and a decoder from a
packed bitmask row to token ids.

What is deliberately not here: timing, subprocesses or printing (see the
scripts, e.g. ``bench/masks.py``), and anything the library itself needs.
"""

from __future__ import annotations

import json
import random
import re

import numpy as np

__all__ = ["FAMILIES", "ebnf_choice", "icd_codes", "regex_choice", "row_token_ids", "tool_names"]

_VERBS = (
    "get set list create update delete find search fetch send check cancel submit approve "
    "reject archive restore export import sync validate compute resolve assign close open "
    "reset schedule notify refresh upload download merge split track lookup register verify"
).split()
_NOUNS = (
    "user profile account order invoice payment refund customer product catalog item cart "
    "shipment delivery address email message thread channel team member role permission "
    "group project task ticket issue comment review rating report dashboard metric alert "
    "event calendar meeting booking reservation flight hotel room vehicle driver route "
    "location region store inventory warehouse supplier vendor contract document file folder "
    "image video playlist song artist album podcast episode subscription plan coupon discount "
    "price quote tax currency balance transaction transfer wallet card loan budget expense "
    "employee salary payroll shift schedule device sensor reading firmware license key token "
    "session password setting preference language timezone note reminder contact lead "
    "campaign audience segment survey response form field record table column index query "
    "job pipeline build release deployment cluster node service endpoint webhook log backup "
    "snapshot volume policy rule quota usage status history summary detail version"
).split()


def tool_names(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct snake_case tool names like ``get_user_profile`` (seeded).

    A verb and one to three nouns; about 20 characters on average.

    Examples
    --------
    >>> names = tool_names(3, seed=1)
    >>> len(set(names)), all("_" in n for n in names)
    (3, True)
    """
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < k:
        n_nouns = rng.choices((1, 2, 3), weights=(3, 6, 1))[0]
        out.setdefault("_".join([rng.choice(_VERBS), *rng.sample(_NOUNS, n_nouns)]), None)
    return list(out)


def icd_codes(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct ICD-10-like codes such as ``E11``, ``E11.6``, ``S72.001A`` (seeded).

    Many codes are prefixes of others, as in the real code set.

    Examples
    --------
    >>> codes = icd_codes(5, seed=2)
    >>> len(set(codes)), all(c[0].isupper() and c[1:3].isdigit() for c in codes)
    (5, True)
    """
    rng = random.Random(seed)
    out: dict[str, None] = {}
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    while len(out) < k:
        code = f"{rng.choice(letters)}{rng.randint(0, 99):02d}"
        if rng.random() < 0.9:
            n = rng.choices((1, 2, 3, 4), weights=(3, 4, 2, 1))[0]
            tail = "".join(rng.choice("0123456789") for _ in range(min(n, 3)))
            if n == 4:
                tail += rng.choice("ADS")
            code += "." + tail
        out.setdefault(code, None)
    return list(out)


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
