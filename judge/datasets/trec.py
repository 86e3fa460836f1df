"""TREC question classification (Li & Roth 2002): 6 coarse and 50 fine answer types.

Reads ``trec/train_5500.label`` (5,452 questions) and ``trec/TREC_10.label``
(500), one ``COARSE:fine question text`` per line, decoded as latin-1 (train has
one non-ASCII byte, 0xF0, read as ``"ð"`` and kept, not replaced). Texts are the
rest of the line after the first space, unchanged (tokenised upstream:
``"How far is it from Denver to Aspen ?"``).

``granularity="coarse"`` (default) labels rows ``ABBR``, ``ENTY``, ``DESC``,
``HUM``, ``LOC``, ``NUM``; ``"fine"`` labels them ``NUM:date`` and so on (50
labels; the test file uses 42). Both orders follow Li & Roth's class definitions
(as ``CogComp/trec`` does). ``"validation"`` is carved from train:
``VALIDATION_FRACTION`` (10 %, 545 rows), stratified by *fine* label so the rows
are the same for both granularities, seed ``VALIDATION_SEED`` (0); ``"train"`` is
the other 4,907.

Without ``data_dir`` or ``JUDGE_DATA_DIR`` it falls back to the hub copy
``CogComp/trec`` (optional ``datasets`` package, online only), whose loader
replaces the 0xF0 byte with a space.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._common import (
    LabeledTexts,
    carve_validation,
    check_split,
    dataset_folder,
    hub_names,
    load_hub,
    malformed,
    require_file,
    take,
)

__all__ = ["load", "COARSE_LABELS", "FINE_LABELS", "display_names"]

NAME = "trec"
SPLITS = ("train", "validation", "test")
OPTIONS = ("granularity",)
HUB_ID = "CogComp/trec"
GRANULARITIES = ("coarse", "fine")

#: The 6 coarse answer types, in Li & Roth's order.
COARSE_LABELS = ("ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM")
#: The 50 fine answer types (``COARSE:fine``), in Li & Roth's order.
FINE_LABELS = (
    "ABBR:abb", "ABBR:exp",
    "ENTY:animal", "ENTY:body", "ENTY:color", "ENTY:cremat", "ENTY:currency", "ENTY:dismed",
    "ENTY:event", "ENTY:food", "ENTY:instru", "ENTY:lang", "ENTY:letter", "ENTY:other",
    "ENTY:plant", "ENTY:product", "ENTY:religion", "ENTY:sport", "ENTY:substance",
    "ENTY:symbol", "ENTY:techmeth", "ENTY:termeq", "ENTY:veh", "ENTY:word",
    "DESC:def", "DESC:desc", "DESC:manner", "DESC:reason",
    "HUM:gr", "HUM:ind", "HUM:title", "HUM:desc",
    "LOC:city", "LOC:country", "LOC:mount", "LOC:other", "LOC:state",
    "NUM:code", "NUM:count", "NUM:date", "NUM:dist", "NUM:money", "NUM:ord", "NUM:other",
    "NUM:period", "NUM:perc", "NUM:speed", "NUM:temp", "NUM:volsize", "NUM:weight",
)  # fmt: skip

_FILES = {"train": "train_5500.label", "test": "TREC_10.label"}
_LINE = re.compile(r"([A-Z]+:[a-z]+) (.*\S.*)")


def load(
    split: str = "test",
    data_dir: str | os.PathLike[str] | None = None,
    *,
    granularity: str = "coarse",
) -> LabeledTexts:
    """Load one split of TREC.

    Parameters
    ----------
    split : {"train", "validation", "test"}, default="test"
        ``"validation"`` (or ``"val"``) is the 10 % stratified carve of the
        official train file; ``"train"`` excludes those rows.
    data_dir : str or path-like, optional
        Folder holding the ``trec/`` folder; defaults to ``$JUDGE_DATA_DIR``,
        then to the Hugging Face hub.
    granularity : {"coarse", "fine"}, default="coarse"
        ``"coarse"``: 6 labels (``NUM``); ``"fine"``: 50 labels (``NUM:date``).

    Returns
    -------
    LabeledTexts

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = tempfile.TemporaryDirectory()
    >>> (pathlib.Path(tmp.name) / "trec").mkdir()
    >>> _ = (pathlib.Path(tmp.name) / "trec" / "TREC_10.label").write_bytes(
    ...     b"NUM:date When was Ozzy Osbourne born ?\\nHUM:ind Who wrote Hamlet ?\\n")
    >>> data = load("test", data_dir=tmp.name)
    >>> data.texts
    ('When was Ozzy Osbourne born ?', 'Who wrote Hamlet ?')
    >>> data.labels, len(data.label_names)
    (('NUM', 'HUM'), 6)
    >>> load("test", data_dir=tmp.name, granularity="fine").labels
    ('NUM:date', 'HUM:ind')
    >>> tmp.cleanup()
    """
    split = check_split(NAME, split, SPLITS)
    if granularity not in GRANULARITIES:
        raise ValueError(
            f"Unknown granularity {granularity!r} for trec; expected 'coarse' (6 labels such as 'NUM') or 'fine' (50 labels such as 'NUM:date')."
        )
    file_split = "test" if split == "test" else "train"
    folder = dataset_folder(NAME, data_dir)
    if folder is None:
        texts, fine = _from_hub(file_split)
    else:
        texts, fine = _read_label_file(require_file(folder, _FILES[file_split]))
    if split != "test":
        train, validation = carve_validation(fine)
        keep = validation if split == "validation" else train
        texts, fine = take(texts, keep), take(fine, keep)
    if granularity == "fine":
        labels, names = fine, FINE_LABELS
    else:
        labels, names = tuple(label.split(":", 1)[0] for label in fine), COARSE_LABELS
    return LabeledTexts(texts=texts, labels=labels, label_names=names, name=NAME, split=split)


def _read_label_file(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Texts and fine labels of a ``COARSE:fine text`` file (latin-1, blank lines skipped)."""
    known = set(FINE_LABELS)
    texts: list[str] = []
    labels: list[str] = []
    with path.open(encoding="latin-1", newline="") as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            match = _LINE.fullmatch(line)
            if match is None:
                raise malformed(
                    path,
                    f"line {number}",
                    f"expected 'COARSE:fine question text' (e.g. 'NUM:date When was Ozzy Osbourne born ?'), got {line[:80]!r}",
                )
            if match[1] not in known:
                raise malformed(
                    path,
                    f"line {number}",
                    f"label {match[1]!r} is not one of the 50 TREC fine labels (ABBR:abb ... NUM:weight)",
                )
            labels.append(match[1])
            texts.append(match[2])
    if not texts:
        raise malformed(path, "line 1", "the file has no labelled questions")
    return tuple(texts), tuple(labels)


def _from_hub(split: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    dataset = load_hub(NAME, HUB_ID, None, split)
    coarse, fine = hub_names(dataset, "coarse_label"), hub_names(dataset, "fine_label")
    labels = tuple(
        f if ":" in f else f"{c}:{f}"  # older hub versions name fine labels without the prefix
        for c, f in (
            (coarse[i], fine[j])
            for i, j in zip(dataset["coarse_label"], dataset["fine_label"], strict=True)
        )
    )
    return tuple(dataset["text"]), labels


_COARSE_WORDS = {"ABBR": "abbreviation", "DESC": "description", "ENTY": "entity", "HUM": "human",
                 "LOC": "location", "NUM": "number"}
_FINE_WORDS = {
    "abb": "abbreviation", "exp": "expansion", "def": "definition", "desc": "description",
    "cremat": "creative work", "dismed": "disease or medicine", "instru": "instrument",
    "lang": "language", "techmeth": "technique or method", "termeq": "equivalent term",
    "veh": "vehicle", "gr": "group", "ind": "individual", "mount": "mountain",
    "dist": "distance", "ord": "order", "perc": "percentage", "temp": "temperature",
    "volsize": "size",
}


def display_names(labels) -> dict[str, str]:
    """Readable names a model can understand for TREC's codes (``NUM:dist`` -> ``number: distance``).

    Examples
    --------
    >>> display_names(["NUM", "HUM:ind"])
    {'NUM': 'number', 'HUM:ind': 'human: individual'}
    """
    out = {}
    for label in labels:
        coarse, _, fine = label.partition(":")
        name = _COARSE_WORDS.get(coarse, coarse)
        if fine:
            name += ": " + _FINE_WORDS.get(fine, fine)
        out[label] = name
    return out
