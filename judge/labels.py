"""Refuse label sets whose members cannot be told apart by a reader.

Two labels can be different strings and still print the same: ``"café"``
written with one code point (NFC) or as ``e`` plus a combining accent (NFD);
``"refund"`` and ``"ref\\u200bund"`` with a zero-width space; ``"refund"`` and
``" refund "``. A classifier happily keeps them as two classes, and every
report then shows two identical names with different numbers. This module
finds such pairs before anything is compiled.

What counts as "looks the same" (:func:`visible_form`): Unicode NFC
normalization, invisible characters removed (format characters, category
``Cf``: zero-width space/joiners, word joiner, BOM, soft hyphen, bidi marks;
plus a few fillers), and whitespace collapsed (surrounding whitespace dropped,
runs of any Unicode space, e.g. a no-break space, read as one space).

What it deliberately does not do: fold case (``Yes``/``yes`` are visibly
different), apply NFKC (``x²`` and ``x2`` are visibly different), or detect
confusable scripts (Latin ``a`` vs Cyrillic ``а``; that needs the Unicode
confusables table). It also refuses a label holding a lone surrogate (not
valid Unicode: it cannot be encoded, tokenized or saved).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from judge._errors import LabelError

__all__ = ["check_distinguishable", "visible_form"]

# Invisible code points that are not in category Cf (which covers U+00AD, U+200B-U+200F,
# U+202A-U+202E, U+2060-U+2064, U+FEFF, ...): combining grapheme joiner, Hangul fillers,
# braille blank.
_INVISIBLE_EXTRA = frozenset("\u034f\u115f\u1160\u3164\uffa0\u2800")


def _is_invisible(ch: str) -> bool:
    return ch in _INVISIBLE_EXTRA or unicodedata.category(ch) == "Cf"


def visible_form(label: str) -> str:
    """The form of ``label`` a reader sees: NFC, invisible characters removed, whitespace collapsed.

    Two labels with the same visible form print the same.

    Examples
    --------
    >>> visible_form(" caf\\u0065\\u0301\\u200b ") == visible_form("caf\\u00e9")
    True
    >>> visible_form("card\\u00a0 arrival")
    'card arrival'
    """
    if label.isascii():
        return " ".join(label.split())
    kept = "".join(ch for ch in unicodedata.normalize("NFC", label) if not _is_invisible(ch))
    return " ".join(unicodedata.normalize("NFC", kept).split())


def _lone_surrogate(label: str) -> int | None:
    try:
        label.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


def _differences(a: str, b: str) -> str:
    """Plain words for how two labels with one visible form differ."""
    why = []
    if a != a.strip() or b != b.strip():
        why.append("surrounding whitespace")
    if " ".join(a.split()) != a.strip() or " ".join(b.split()) != b.strip():
        why.append("inner whitespace (repeated or non-breaking spaces)")
    hidden = sorted({f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')}" for ch in a + b if _is_invisible(ch)})
    if hidden:
        why.append("invisible characters " + ", ".join(hidden))
    def bare(s):
        return "".join(ch for ch in s if not _is_invisible(ch)).strip()

    if unicodedata.normalize("NFC", bare(a)) == unicodedata.normalize("NFC", bare(b)) and bare(a) != bare(b):
        why.append("Unicode normalization (composed NFC vs decomposed, e.g. NFD)")
    return "; ".join(why) or "identical strings"


def check_distinguishable(labels: Sequence[str], names: Sequence[str] | None = None) -> None:
    """Raise :class:`~judge.LabelError` unless every label (and shown name) prints differently.

    Parameters
    ----------
    labels : sequence of str, length K
        The classes as the caller names them.
    names : sequence of str, length K, optional
        What the model is shown for each label (``judge.prompts.label_names_for``);
        checked too, since two names that print the same confuse the model and
        the reader alike.

    Raises
    ------
    LabelError
        A label is not a str or holds a lone surrogate; ``names`` has the wrong
        length; or two labels (or two names) have the same :func:`visible_form`.
        The message names both labels (written with ``ascii()`` so the hidden
        difference shows), their positions, what differs, and the fix.

    Examples
    --------
    >>> check_distinguishable(["card_arrival", "exchange_rate"])
    >>> check_distinguishable(["caf\\u00e9", "cafe\\u0301"])   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    judge._errors.LabelError: Labels 0 'caf\\xe9' and 1 'cafe\\u0301' both print as 'café' but are different strings (Unicode normalization ...); ...
    """
    labels = list(labels)
    for i, lab in enumerate(labels):
        if not isinstance(lab, str):
            raise LabelError(
                f"Label {i} is a {type(lab).__name__} ({lab!r}), not a str; convert labels with str() first.")
        pos = _lone_surrogate(lab)
        if pos is not None:
            raise LabelError(
                f"Label {i} {ascii(lab)} holds a lone surrogate U+{ord(lab[pos]):04X} at character {pos}, "
                f"which is not valid Unicode (it cannot be tokenized or saved); fix how the label was "
                f"decoded (e.g. bytes.decode('utf-8', errors='replace')) or drop that character.")
    _check_pairs(labels, labels, "Labels", "")
    if names is not None:
        names = list(names)
        if len(names) != len(labels):
            raise LabelError(
                f"names has {len(names)} entries but there are {len(labels)} labels; pass one name per "
                f"label, in the same order.")
        for i, name in enumerate(names):
            if not isinstance(name, str) or _lone_surrogate(name) is not None:
                raise LabelError(
                    f"The name shown for label {i} ({labels[i]!r}) is {ascii(name)}, not a valid str; "
                    f"give it a plain Unicode string.")
        _check_pairs(names, labels, "The names shown for labels", " (what the model is shown)")


def _check_pairs(strings, labels, what, where) -> None:
    seen: dict[str, int] = {}
    for j, s in enumerate(strings):
        key = visible_form(s)
        i = seen.setdefault(key, j)
        if i == j:
            continue
        a, b = strings[i], s
        if strings is labels:
            who = f"{i} {ascii(a)} and {j} {ascii(b)}"
        else:
            who = f"{i} ({labels[i]!r}: {ascii(a)}) and {j} ({labels[j]!r}: {ascii(b)})"
        if a == b:
            raise LabelError(f"{what} {who} are the same string; every label must be distinct, drop one of the two.")
        raise LabelError(
            f"{what} {who} both print as {key!r}{where} but are different strings ({_differences(a, b)}); "
            f"a reader (and the model) cannot tell them apart. Normalize labels with "
            f"unicodedata.normalize('NFC', s), strip whitespace and remove invisible characters, or drop "
            f"one of the two.")
