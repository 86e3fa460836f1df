"""MASSIVE en-US intents (Amazon): 16,521 assistant commands in 60 intents.

Reads ``massive/{train,validation,test}.jsonl`` (the SetFit export: one JSON object
per line with ``id``, ``label`` (int), ``text`` and ``label_text``; no slots).
Labels are ``label_text`` (``alarm_set``); ``label_names`` are the 60 intents in the
official ``ClassLabel`` order (id 0 is ``datetime_query``), and each row's integer
``label`` must agree with that order. Official splits: 11,514 / 2,033 / 2,974.
Validation lacks ``audio_volume_other`` and test lacks ``cooking_query``, so each has
59 intents present; ``label_names`` still lists all 60.

Without ``data_dir`` or ``JUDGE_DATA_DIR`` it falls back to the hub copy
``SetFit/amazon_massive_intent_en-US`` (optional ``datasets`` package, online only).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ._common import (
    LabeledTexts,
    check_split,
    dataset_folder,
    load_hub,
    malformed,
    require_file,
)

__all__ = ["load", "INTENTS"]

NAME = "massive"
SPLITS = ("train", "validation", "test")
OPTIONS: tuple[str, ...] = ()
HUB_ID = "SetFit/amazon_massive_intent_en-US"

#: The 60 en-US intents in MASSIVE's official label-id order (id 0 first).
INTENTS = (
    "datetime_query", "iot_hue_lightchange", "transport_ticket", "takeaway_query", "qa_stock",
    "general_greet", "recommendation_events", "music_dislikeness", "iot_wemo_off",
    "cooking_recipe", "qa_currency", "transport_traffic", "general_quirky", "weather_query",
    "audio_volume_up", "email_addcontact", "takeaway_order", "email_querycontact",
    "iot_hue_lightup", "recommendation_locations", "play_audiobook", "lists_createoradd",
    "news_query", "alarm_query", "iot_wemo_on", "general_joke", "qa_definition",
    "social_query", "music_settings", "audio_volume_other", "calendar_remove",
    "iot_hue_lightdim", "calendar_query", "email_sendemail", "iot_cleaning",
    "audio_volume_down", "play_radio", "cooking_query", "datetime_convert", "qa_maths",
    "iot_hue_lightoff", "iot_hue_lighton", "transport_query", "music_likeness", "email_query",
    "play_music", "audio_volume_mute", "social_post", "alarm_set", "qa_factoid",
    "calendar_set", "play_game", "alarm_remove", "lists_remove", "transport_taxi",
    "recommendation_movies", "iot_coffee", "music_query", "play_podcasts", "lists_query",
)  # fmt: skip


def load(split: str = "test", data_dir: str | os.PathLike[str] | None = None) -> LabeledTexts:
    """Load one split of MASSIVE en-US (intents).

    Parameters
    ----------
    split : {"train", "validation", "test"}, default="test"
        The official splits; ``"val"`` is accepted for ``"validation"``.
    data_dir : str or path-like, optional
        Folder holding the ``massive/`` folder; defaults to ``$JUDGE_DATA_DIR``,
        then to the Hugging Face hub.

    Returns
    -------
    LabeledTexts
        ``label_names`` is :data:`INTENTS` (60) whatever the split.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> tmp = tempfile.TemporaryDirectory()
    >>> (pathlib.Path(tmp.name) / "massive").mkdir()
    >>> _ = (pathlib.Path(tmp.name) / "massive" / "test.jsonl").write_text(
    ...     '{"id":"0","label":48,"text":"wake me up at five am","label_text":"alarm_set"}\\n')
    >>> data = load("test", data_dir=tmp.name)
    >>> data.texts, data.labels, len(data.label_names)
    (('wake me up at five am',), ('alarm_set',), 60)
    >>> tmp.cleanup()
    """
    split = check_split(NAME, split, SPLITS)
    folder = dataset_folder(NAME, data_dir)
    if folder is None:
        dataset = load_hub(NAME, HUB_ID, None, split)
        texts, labels = tuple(dataset["text"]), tuple(dataset["label_text"])
    else:
        texts, labels = _read_jsonl(require_file(folder, f"{split}.jsonl"))
    return LabeledTexts(texts=texts, labels=labels, label_names=INTENTS, name=NAME, split=split)


def _read_jsonl(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ids = {intent: i for i, intent in enumerate(INTENTS)}
    texts: list[str] = []
    labels: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"line {number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise malformed(
                    path, where, f"not valid JSON ({exc.msg}): {line.strip()[:80]!r}"
                ) from exc
            if not (
                isinstance(row, dict)
                and isinstance(row.get("text"), str)
                and isinstance(row.get("label_text"), str)
            ):
                raise malformed(
                    path,
                    where,
                    f"expected an object with string 'text' and 'label_text', got {line.strip()[:80]!r}",
                )
            intent = row["label_text"]
            if intent not in ids:
                raise malformed(
                    path, where, f"label_text {intent!r} is not one of the 60 MASSIVE intents"
                )
            if "label" in row and row["label"] != ids[intent]:
                raise malformed(
                    path,
                    where,
                    f"label id {row['label']!r} does not match label_text {intent!r} (official id {ids[intent]})",
                )
            texts.append(row["text"])
            labels.append(intent)
    if not texts:
        raise malformed(path, "line 1", "the file has no rows")
    return tuple(texts), tuple(labels)
