"""Seeded label generators for tests and benchmarks: one copy each.

``tool_names`` (snake_case tool names), ``icd_codes`` (ICD-10-like codes, many prefixes of
others), ``phrases``, ``prefix_labels``, ``unicode_labels``. The benchmarks import these.

What it deliberately does not do: anything random without a seed.
"""

from __future__ import annotations

import random

__all__ = ["icd_codes", "phrases", "prefix_labels", "tool_names", "unicode_labels"]

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
    """``k`` distinct snake_case tool names like ``get_user_profile`` (seeded; as bench/_common.py).

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
    """``k`` distinct ICD-10-like codes such as ``E11``, ``E11.6``, ``S72.001A`` (seeded; as bench/_common.py).

    Many codes are prefixes of others.

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


_PHRASES = (
    "very positive",
    "positive",
    "not positive at all",
    "neutral",
    "somewhat negative",
    "negative",
    "card arrival",
    "card linking",
    "exchange rate",
    "exchange via app",
    "top up failed",
    "Top up reverted",
    "pin blocked",
    "lost or stolen card",
)
_ADJ = "very somewhat not slightly really quite fairly rather extremely barely".split()
_WORDS = (
    "positive negative neutral happy sad angry calm urgent late early lost stolen blocked failed "
    "pending refunded declined approved card transfer payment account balance rate fee app"
).split()


def phrases(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct short space-separated phrases (seeded).

    The first ones are the fixed sentiment / banking phrases the tests use
    (``"very positive"``, ``"positive"``, ``"card arrival"``...); beyond those, random
    one-to-four-word phrases, many sharing a first word.

    Examples
    --------
    >>> phrases(2)
    ['very positive', 'positive']
    >>> len(set(phrases(40, seed=3)))
    40
    """
    out: dict[str, None] = dict.fromkeys(_PHRASES[:k])
    rng = random.Random(seed)
    while len(out) < k:
        n = rng.choices((1, 2, 3, 4), weights=(2, 5, 3, 1))[0]
        words = [rng.choice(_WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.insert(0, rng.choice(_ADJ))
        out.setdefault(" ".join(words), None)
    return list(out)


def prefix_labels() -> list[str]:
    """Labels that are prefixes of one another, including across a space (fixed).

    The union of the prefix families in tests/automaton/test_trie.py and tests/test_peers.py.

    Examples
    --------
    >>> prefix_labels()[:3]
    ['a', 'ab', 'abc']
    """
    return ["a", "ab", "abc", "abcd", "abc d", "b", "ba", "bo", "book", "booking", "booking_fee"]


_UNICODE = (
    "café",
    "café au lait",
    "naïve",
    "日本語",
    "日本",
    "中文标签",
    "😀 happy",
    "emoji 🎉🎉",
    "Ελληνικά",
    "Ωmega",
    "a\u0301",
)
_UNICODE_POOL = "éèüßøåçñ日本語中文标签한국어ÄÖÜΩλπ😀🎉🚀✓→€"


def unicode_labels(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct labels with non-ASCII text: accents, CJK, emoji, Greek, a combining mark (seeded).

    The first ones are the fixed set from the tests (``"café"``, ``"日本語"``, ``"日本"``...);
    beyond those, random mixes of ASCII letters and multi-byte characters.

    Examples
    --------
    >>> unicode_labels(3)
    ['café', 'café au lait', 'naïve']
    >>> all(any(ord(ch) > 127 for ch in s) for s in unicode_labels(30, seed=1))
    True
    """
    out: dict[str, None] = dict.fromkeys(_UNICODE[:k])
    rng = random.Random(seed)
    while len(out) < k:
        n = rng.randint(1, 6)
        chars = [
            rng.choice(_UNICODE_POOL) if rng.random() < 0.5 else rng.choice("abcdefgh ")
            for _ in range(n)
        ]
        chars[rng.randrange(n)] = rng.choice(_UNICODE_POOL)
        s = "".join(chars).strip()
        if s:
            out.setdefault(s, None)
    return list(out)
