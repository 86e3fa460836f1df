"""CLINC150 (clinc/oos-eval, "full"): 150 in-scope intents plus out-of-scope queries.

Reads ``clinc150/data_full.json`` (keys ``train``, ``val``, ``test`` and
``oos_train``, ``oos_val``, ``oos_test``, each a list of ``[text, label]``) and
``clinc150/domains.json`` (10 domains of 15 intents each). The canonical
``label_names`` order is ``domains.json`` read domain by domain. Official splits:
in-scope 15,000 / 3,000 / 4,500; out-of-scope 100 / 100 / 1,000.

By default only in-scope rows are returned (150 labels). With
``include_oos=True`` the out-of-scope rows follow them, labelled ``"oos"``, and
``"oos"`` is appended to ``label_names``.

Without ``data_dir`` or ``JUDGE_DATA_DIR`` it falls back to the hub copy
``clinc_oos`` (config ``"plus"``; optional ``datasets`` package, online only).
Its in-scope rows are the same; its out-of-scope train split has 250 rows, not
100, and its label order is the hub's ``ClassLabel`` order.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._common import (
    LabeledTexts,
    check_split,
    dataset_folder,
    hub_names,
    load_hub,
    malformed,
    read_json,
    require_file,
)

__all__ = ["load"]

NAME = "clinc150"
SPLITS = ("train", "validation", "test")
OPTIONS = ("include_oos",)
HUB_ID, HUB_CONFIG = "clinc_oos", "plus"
OOS = "oos"

_KEYS = {"train": "train", "validation": "val", "test": "test"}


def load(
    split: str = "test",
    data_dir: str | os.PathLike[str] | None = None,
    *,
    include_oos: bool = False,
) -> LabeledTexts:
    """Load one split of CLINC150.

    Parameters
    ----------
    split : {"train", "validation", "test"}, default="test"
        ``"val"`` is accepted for ``"validation"``.
    data_dir : str or path-like, optional
        Folder holding the ``clinc150/`` folder; defaults to ``$JUDGE_DATA_DIR``,
        then to the Hugging Face hub.
    include_oos : bool, default=False
        Append the out-of-scope rows of the split, labelled ``"oos"``, and add
        ``"oos"`` as the last label name.

    Returns
    -------
    LabeledTexts
        Labels are the intent identifiers (``alarm_set``, ``translate``).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = pathlib.Path(tmp.name) / "clinc150"
    >>> folder.mkdir()
    >>> _ = (folder / "domains.json").write_text(json.dumps({"utility": ["timer", "alarm"]}))
    >>> rows = {"test": [["set a timer", "timer"]], "oos_test": [["how tall is a yak", "oos"]]}
    >>> _ = (folder / "data_full.json").write_text(json.dumps(rows))
    >>> load("test", data_dir=tmp.name).labels
    ('timer',)
    >>> data = load("test", data_dir=tmp.name, include_oos=True)
    >>> data.labels, data.label_names
    (('timer', 'oos'), ('timer', 'alarm', 'oos'))
    >>> tmp.cleanup()
    """
    split = check_split(NAME, split, SPLITS)
    if not isinstance(include_oos, bool):
        raise ValueError(
            f"include_oos must be True or False, got {include_oos!r}; pass include_oos=True to add the out-of-scope rows."
        )
    folder = dataset_folder(NAME, data_dir)
    if folder is None:
        texts, labels, names = _from_hub(split, include_oos)
    else:
        names = _read_domains(require_file(folder, "domains.json"))
        path = require_file(folder, "data_full.json")
        data = read_json(path)
        if not isinstance(data, dict):
            raise malformed(
                path, "top level", f"expected a JSON object of splits, got {type(data).__name__}"
            )
        key = _KEYS[split]
        rows = _rows(path, data, key, set(names))
        if include_oos:
            rows += _rows(path, data, f"oos_{key}", {OOS})
            names = (*names, OOS)
        texts, labels = tuple(t for t, _ in rows), tuple(lab for _, lab in rows)
    return LabeledTexts(texts=texts, labels=labels, label_names=names, name=NAME, split=split)


def _read_domains(path: Path) -> tuple[str, ...]:
    domains = read_json(path)
    if not isinstance(domains, dict) or not all(
        isinstance(v, list) and all(isinstance(x, str) for x in v) for v in domains.values()
    ):
        raise malformed(
            path, "top level", "expected a JSON object mapping each domain to a list of intents"
        )
    names = tuple(intent for intents in domains.values() for intent in intents)
    if not names or len(set(names)) != len(names) or OOS in names:
        raise malformed(
            path,
            "top level",
            f"expected distinct in-scope intents, got {len(names)} entries, {len(set(names))} distinct",
        )
    return names


def _rows(path: Path, data: dict, key: str, allowed: set[str]) -> list[tuple[str, str]]:
    if key not in data:
        raise malformed(path, "top level", f"no {key!r} key (found {sorted(data)})")
    rows = data[key]
    if not isinstance(rows, list):
        raise malformed(
            path,
            f"key {key!r}",
            f"expected a list of [text, label] pairs, got {type(rows).__name__}",
        )
    out = []
    for i, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 2 and all(isinstance(x, str) for x in row)):
            raise malformed(
                path,
                f"entry {key!r}[{i}]",
                f"expected a [text, label] pair of strings, got {row!r}",
            )
        if row[1] not in allowed:
            expected = "one of the intents in domains.json" if OOS not in allowed else "'oos'"
            raise malformed(path, f"entry {key!r}[{i}]", f"label {row[1]!r} is not {expected}")
        out.append((row[0], row[1]))
    return out


def _from_hub(
    split: str, include_oos: bool
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    dataset = load_hub(NAME, HUB_ID, HUB_CONFIG, split)
    intents = hub_names(dataset, "intent")
    names = tuple(n for n in intents if n != OOS) + ((OOS,) if include_oos else ())
    rows = [
        (text, intents[i])
        for text, i in zip(dataset["text"], dataset["intent"], strict=True)
        if include_oos or intents[i] != OOS
    ]
    return tuple(t for t, _ in rows), tuple(lab for _, lab in rows), names
