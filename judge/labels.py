"""Label code, in one place: what a label list may hold, what the model is shown for each label,
and label sets whose members cannot be told apart by a reader.

* :func:`as_label_list`, :func:`validate_labels`, :func:`check_label_count`: distinct, non-blank
  strings, at least two for a classifier (a lone string is refused, not split into characters);
* :func:`label_indices` (gold labels to column indices), :func:`label_descriptions` (a
  ``{label: description}`` mapping's descriptions);
* :func:`natural_label` and :func:`label_names_for`: what the model writes for each label
  (``card_arrival`` -> ``card arrival``; names, descriptions or both: :data:`DESCRIBE`);
* :func:`check_distinguishable` and :func:`visible_form`: look-alike labels, refused (below).


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
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from judge._errors import LabelError

__all__ = ["AUTO_DESCRIBE", "warn_if_descriptions_unscored", "DESCRIBE", "as_label_list", "check_distinguishable", "check_label_count",
           "label_descriptions", "label_indices", "label_names_for", "natural_label", "validate_labels",
           "visible_form"]

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
        What the model is shown for each label (:func:`label_names_for`);
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


def as_label_list(labels) -> list:
    """``labels`` as a list, refusing a lone string (which would split into characters).

    Examples
    --------
    >>> as_label_list(("a", "b"))
    ['a', 'b']
    """
    if isinstance(labels, (str, bytes)):
        raise LabelError(
            f"labels must be a sequence of strings, got a single {type(labels).__name__} {labels!r}; "
            f"wrap it in a list: [{labels!r}].")
    return list(labels)


def validate_labels(labels: Sequence, what: str = "Label") -> None:
    """Raise :class:`LabelError` unless ``labels`` are distinct non-blank strings.

    Examples
    --------
    >>> validate_labels(["a", "b"])
    >>> validate_labels(["a", "a"])
    Traceback (most recent call last):
    ...
    judge._errors.LabelError: Duplicate label 'a' at positions 0 and 1; labels must be distinct.
    """
    if len(labels) == 0:
        raise LabelError(f"The {what.lower()} list is empty; pass at least one label, e.g. ['positive', 'negative'].")
    ok = all(type(lab) is str and lab.strip() for lab in labels)  # fast path for the common case
    if ok and len(set(labels)) == len(labels):
        return
    seen = {}
    for i, lab in enumerate(labels):
        if not isinstance(lab, str):
            raise LabelError(
                f"{what} {i} is a {type(lab).__name__} ({lab!r}), not a str; convert labels with str() first.")
        if not lab.strip():
            raise LabelError(f"{what} {i} is empty or only whitespace ({lab!r}); every label needs visible text.")
        if lab in seen:
            raise LabelError(
                f"Duplicate {what.lower()} {lab!r} at positions {seen[lab]} and {i}; labels must be distinct.")
        seen[lab] = i


def label_indices(labels, y) -> np.ndarray:
    """Indices of the values ``y`` in ``labels``: (n,) int64; a clear error for values that are not labels.

    Examples
    --------
    >>> label_indices(["a", "b"], ["b", "a"]).tolist()
    [1, 0]
    """
    if y is None:
        raise TypeError(f"y must be a sequence of labels, one per text, got None; pass the true label of each text "
                        f"(values of classes_, e.g. {list(labels)[:3]}).")
    if isinstance(y, (str, bytes)):
        raise TypeError(f"y must be a sequence of labels, got a single {type(y).__name__}; wrap it in a list.")
    pos = {lab: i for i, lab in enumerate(labels)}
    try:
        y = list(y)
    except TypeError:
        raise TypeError(f"y must be a sequence of labels, one per text, got {type(y).__name__} {y!r:.40}.") from None
    bad = sorted({str(v) for v in y if v not in pos})
    if bad:
        raise ValueError(
            f"{len(bad)} value(s) in y are not labels of this classifier, e.g. {bad[:5]}; "
            f"valid labels are classes_ (e.g. {list(labels)[:5]}).")
    return np.asarray([pos[v] for v in y], np.int64)


def label_descriptions(labels):
    """``{label: description or None}`` when ``labels`` is a mapping, else None (values checked: str or None).

    Examples
    --------
    >>> label_descriptions({"billing": "payments and invoices", "other": None})
    {'billing': 'payments and invoices', 'other': None}
    >>> label_descriptions(["billing", "other"]) is None
    True
    """
    from collections.abc import Mapping

    if labels is None:
        raise TypeError("labels must be a list of label names or a dict {label: description}; got None.")
    if not isinstance(labels, Mapping):
        return None
    out = {}
    for k, v in labels.items():
        if v is not None and not isinstance(v, str):
            raise TypeError(f"The description of label {k!r} is {type(v).__name__} ({v!r:.40}); pass a string "
                            f"or None for labels without one.")
        out[k] = v
    return out


def check_label_count(labels) -> None:
    """Raise a LabelError unless a classifier's label list has at least two labels.

    One label is refused rather than given a meaning: every text would get it with probability 1
    (``predict_proba`` a column of ones), which answers nothing. A question about one label is a
    yes/no question: two labels (``[label, "other"]``) or :class:`judge.YesNo` with :class:`judge.Decider`.

    Examples
    --------
    >>> check_label_count(["billing", "other"])
    >>> check_label_count(["billing"])
    Traceback (most recent call last):
    ...
    judge._errors.LabelError: A Classifier needs at least two labels; got one, 'billing' (every text would get it, with probability 1). To ask whether a text is about 'billing', pass two labels, e.g. Classifier(['billing', 'other']), or ask a yes/no question with judge.Decider and judge.YesNo.
    """
    from judge._errors import LabelError

    if len(labels) == 0:
        raise LabelError("The label list is empty; a Classifier needs at least two labels, e.g. "
                         "['positive', 'negative'].")
    if len(labels) == 1:
        lab = next(iter(labels))
        raise LabelError(f"A Classifier needs at least two labels; got one, {lab!r} (every text would get it, with "
                         f"probability 1). To ask whether a text is about {lab!r}, pass two labels, e.g. "
                         f"Classifier([{lab!r}, 'other']), or ask a yes/no question with judge.Decider and judge.YesNo.")


#: What the model writes for a label with a description (``Classifier({label: description}, describe=...)``).
DESCRIBE = ("auto", "name", "description", "both")
#: ``describe="auto"``: chosen on the validation splits (bench/descriptions.py select, 64 texts each; mean accuracy
#: of the model, uncalibrated: names 44.9%, descriptions 43.4%, both 38.3%; :doc:`/baselines`).
AUTO_DESCRIBE = "name"


def warn_if_descriptions_unscored(describe, descriptions, *, stacklevel: int = 3) -> None:
    """Warn once where labels came with descriptions that ``describe="auto"`` does not score (``AUTO_DESCRIBE``).

    ``descriptions``: label -> description or None (`label_descriptions`); ``stacklevel`` 3 points at the
    caller of the constructor that calls this.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warn_if_descriptions_unscored("auto", {"yes": "agrees", "no": None})
    >>> "describe='auto' has the model score the label names" in str(w[0].message)
    True
    """
    if describe == "auto" and AUTO_DESCRIBE == "name" and any(d for d in (descriptions or {}).values()):
        warnings.warn(
            "Classifier got label descriptions; describe='auto' has the model score the label names (chosen on "
            "the four validation splits, where descriptions lowered the model's mean accuracy from 44.9% to "
            "43.4%; they helped on Banking77 and CLINC150, hurt on TREC). Pass describe='description' or "
            "'both' to score them, or describe='name' to silence this.", UserWarning, stacklevel=stacklevel)


def natural_label(label: str, *, lower_first: bool = True) -> str:
    """The natural form of an identifier: ``card_arrival`` -> ``card arrival``.

    Underscores become spaces, and a capitalised first word is lower-cased
    (``Refund_not_showing_up`` -> ``refund not showing up``): in a sorted list
    a lone capitalised label sorts first and small models over-pick the first
    label (measured on the validation splits, :doc:`/benchmarks/accuracy`). Acronyms and
    other mixed-case words are kept.

    Examples
    --------
    >>> natural_label("card_arrival")
    'card arrival'
    >>> natural_label("Refund_not_showing_up")
    'refund not showing up'
    >>> natural_label("NUM:date"), natural_label("PIN")
    ('NUM:date', 'PIN')
    >>> natural_label("_")  # nothing left: the label as given
    '_'
    """
    words = label.replace("_", " ").split()
    if lower_first and words and words[0][:1].isupper() and words[0][1:].islower():
        words[0] = words[0].lower()
    return " ".join(words) or label


def label_names_for(labels: Sequence[str], label_names=None, descriptions=None, describe="auto") -> list[str]:
    """What the model writes for each label.

    Parameters
    ----------
    labels : sequence of str, length K
    label_names : None, "natural", "raw", mapping or sequence of str
        ``None``/``"natural"``: underscores become spaces; ``"raw"``: the labels
        as given; a mapping ``{label: name}`` (missing labels use their natural
        form) or a sequence of K names.
    descriptions : mapping, optional
        ``{label: description or None}``: what each label means, in the caller's words.
    describe : {"auto", "name", "description", "both"}
        What the model writes for a label with a description: its name, its description, or
        ``name: description`` (``auto``: :data:`AUTO_DESCRIBE`). Labels without one: the name.

    Returns
    -------
    list of str, length K

    Raises
    ------
    LabelError
        Names collide (e.g. ``a_b`` and ``a b`` both become ``a b``; two labels with the same
        description written alone), or a sequence of the wrong length.

    Examples
    --------
    >>> label_names_for(["card_arrival", "pin"], {"pin": "PIN code"})
    ['card arrival', 'PIN code']
    >>> label_names_for(["card_arrival", "pin"], descriptions={"pin": "a PIN is blocked"}, describe="both")
    ['card arrival', 'pin: a PIN is blocked']
    """
    labels = list(labels)
    if label_names is None or label_names == "natural":
        names = [natural_label(lab) for lab in labels]
        if len(set(names)) < len(names):  # lower-casing merged two labels ("Apple", "apple"): keep the case
            names = [natural_label(lab, lower_first=False) for lab in labels]
    elif label_names == "raw":
        names = list(labels)
    elif isinstance(label_names, Mapping):
        names = [str(label_names.get(lab, natural_label(lab))) for lab in labels]
    elif isinstance(label_names, Sequence) and not isinstance(label_names, str):
        names = [str(n) for n in label_names]
        if len(names) != len(labels):
            raise LabelError(
                f"label_names has {len(names)} entries but there are {len(labels)} labels; pass one "
                f"name per label, in the same order, or a dict {{label: name}}.")
    else:
        raise LabelError(
            f"label_names must be None, 'natural', 'raw', a dict or a list of names; got {label_names!r}.")
    if descriptions:
        mode = AUTO_DESCRIBE if describe == "auto" else describe
        if mode not in DESCRIBE[1:]:
            raise LabelError(f"describe must be one of {DESCRIBE}, got {describe!r}.")
        if mode != "name":
            out = []
            for lab, name in zip(labels, names):
                d = descriptions.get(lab)
                d = " ".join(str(d).split()) if d is not None else ""
                out.append(name if not d else d if mode == "description" else f"{name}: {d}")
            names = out
    seen = {}
    for lab, name in zip(labels, names):
        if not name.strip():
            raise LabelError(f"The name shown for label {lab!r} is empty ({name!r}); give it visible text.")
        if name in seen:
            raise LabelError(
                f"Labels {seen[name]!r} and {lab!r} are both shown to the model as {name!r}, so they "
                f"could not be told apart; pass label_names='raw', a dict with distinct names, or distinct "
                f"descriptions.")
        seen[name] = lab
    return names
