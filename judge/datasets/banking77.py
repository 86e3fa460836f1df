"""Banking77 (PolyAI): 13,083 online-banking queries in 77 intents.

Reads ``banking77/train.csv`` and ``banking77/test.csv`` (columns ``text,category``,
UTF-8) and ``banking77/categories.json`` (the 77 intents; their order is the
canonical ``label_names`` order). Upstream ships train (10,003) and test (3,080)
only; ``"validation"`` is carved from train: ``VALIDATION_FRACTION`` (10 %, 1,000
rows), stratified by intent, seed ``VALIDATION_SEED`` (0), and ``"train"`` is the
other 9,003 rows.

Without ``data_dir`` or ``JUDGE_DATA_DIR`` it falls back to the hub copy
``PolyAI/banking77`` (optional ``datasets`` package, online only); its label order
is then the hub's ``ClassLabel`` order, and the validation split is carved the same
way from the hub's train rows.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from ._common import (
    LabeledTexts,
    carve_validation,
    check_split,
    dataset_folder,
    hub_names,
    load_hub,
    malformed,
    read_name_list,
    require_file,
    take,
)

__all__ = ["load"]

NAME = "banking77"
SPLITS = ("train", "validation", "test")
OPTIONS: tuple[str, ...] = ()
HUB_ID = "PolyAI/banking77"

_COLUMNS = ("text", "category")


def load(split: str = "test", data_dir: str | os.PathLike[str] | None = None) -> LabeledTexts:
    """Load one split of Banking77.

    Parameters
    ----------
    split : {"train", "validation", "test"}, default="test"
        ``"validation"`` (or ``"val"``) is the 10 % stratified carve of the
        official train file; ``"train"`` excludes those rows.
    data_dir : str or path-like, optional
        Folder holding the ``banking77/`` folder; defaults to ``$JUDGE_DATA_DIR``,
        then to the Hugging Face hub.

    Returns
    -------
    LabeledTexts
        Labels are the intent identifiers (``card_arrival``); ``label_names`` has
        all 77 in ``categories.json`` order.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = pathlib.Path(tmp.name)
    >>> (root / "banking77").mkdir()
    >>> _ = (root / "banking77" / "categories.json").write_text('["card_arrival", "age_limit"]')
    >>> _ = (root / "banking77" / "test.csv").write_text(
    ...     'text,category\\nWhere is my card?,card_arrival\\n"Am I old enough, really?",age_limit\\n')
    >>> data = load("test", data_dir=root)
    >>> data.texts
    ('Where is my card?', 'Am I old enough, really?')
    >>> data.labels, data.label_names
    (('card_arrival', 'age_limit'), ('card_arrival', 'age_limit'))
    >>> tmp.cleanup()
    """
    split = check_split(NAME, split, SPLITS)
    file_split = "test" if split == "test" else "train"
    folder = dataset_folder(NAME, data_dir)
    if folder is None:
        texts, labels, names = _from_hub(file_split)
    else:
        names = read_name_list(require_file(folder, "categories.json"))
        texts, labels = _read_csv(require_file(folder, f"{file_split}.csv"), names)
    if split != "test":
        train, validation = carve_validation(labels)
        keep = validation if split == "validation" else train
        texts, labels = take(texts, keep), take(labels, keep)
    return LabeledTexts(texts=texts, labels=labels, label_names=names, name=NAME, split=split)


def _read_csv(path: Path, names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    known = set(names)
    texts: list[str] = []
    labels: list[str] = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or not set(_COLUMNS) <= set(header):
            raise malformed(
                path,
                "line 1",
                f"expected a CSV header with columns 'text' and 'category', got {header!r}",
            )
        text_at, label_at = header.index("text"), header.index("category")
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise malformed(
                    path,
                    f"line {reader.line_num}",
                    f"expected {len(header)} fields ({', '.join(header)}), got {len(row)}: {row!r}",
                )
            if row[label_at] not in known:
                raise malformed(
                    path,
                    f"line {reader.line_num}",
                    f"category {row[label_at]!r} is not one of the {len(names)} in categories.json",
                )
            texts.append(row[text_at])
            labels.append(row[label_at])
    if not texts:
        raise malformed(path, "line 2", "the file has a header but no rows")
    return tuple(texts), tuple(labels)


def _from_hub(split: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    dataset = load_hub(NAME, HUB_ID, None, split)
    names = hub_names(dataset, "label")
    return tuple(dataset["text"]), tuple(names[i] for i in dataset["label"]), tuple(names)
