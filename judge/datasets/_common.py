"""The shared pieces of the dataset loaders: the result type, directory lookup, splits.

What this module does:

* :class:`LabeledTexts`, the one type every loader returns (texts, labels in the
  dataset's own identifiers, the full label set in canonical order), with a seeded
  stratified :meth:`LabeledTexts.sample` that records which rows it took;
* where the files are: ``data_dir``, else the ``JUDGE_DATA_DIR`` environment
  variable, else ``None`` (the loaders then try the Hugging Face hub);
* the deterministic stratified validation split carved from a train file that has
  none (Banking77, TREC): :data:`VALIDATION_FRACTION` of train, seed
  :data:`VALIDATION_SEED`;
* the online fallback through the optional ``datasets`` package, imported only there.

What it deliberately does not do: download anything by itself, cache parsed files,
or change texts (no lowercasing, no stripping, no label renaming).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LabeledTexts", "VALIDATION_FRACTION", "VALIDATION_SEED"]

#: Fraction of the official train rows moved to the carved validation split
#: (Banking77 and TREC, which ship no validation split), stratified by label.
VALIDATION_FRACTION = 0.1
#: Seed of the carved validation split (see :data:`VALIDATION_FRACTION`).
VALIDATION_SEED = 0

_ENV_VAR = "JUDGE_DATA_DIR"
_FOLDERS = "banking77/, clinc150/, massive/ and trec/"


@dataclass(frozen=True, repr=False)
class LabeledTexts:
    """Texts with their gold labels, one split of one dataset.

    Parameters
    ----------
    texts : tuple of str, length n_samples
        The inputs, exactly as in the source files.
    labels : tuple of str, length n_samples
        The gold label of each text, in the dataset's own identifiers
        (``card_arrival``, ``alarm_set``, ``NUM:date``).
    label_names : tuple of str
        The full label set in the dataset's canonical order, including labels
        that do not occur in this split.
    name : str
        The dataset name, as given to :func:`judge.datasets.load`.
    split : str
        ``"train"``, ``"validation"`` or ``"test"``.
    indices : tuple of int, length n_samples, optional
        Position of each row in the split as :func:`judge.datasets.load` returns
        it (with the same options). Defaults to ``0 .. n_samples - 1``;
        :meth:`sample` keeps it pointing at the loaded split, so a report can
        state exactly which rows were used.

    Examples
    --------
    >>> data = LabeledTexts(
    ...     texts=("wake me at 7", "what time is it", "set an alarm"),
    ...     labels=("alarm_set", "datetime_query", "alarm_set"),
    ...     label_names=("alarm_set", "alarm_query", "datetime_query"),
    ...     name="toy", split="test")
    >>> len(data)
    3
    >>> data
    LabeledTexts(name='toy', split='test', n_samples=3, n_labels=3)
    >>> data.indices
    (0, 1, 2)
    """

    texts: tuple[str, ...]
    labels: tuple[str, ...]
    label_names: tuple[str, ...]
    name: str
    split: str
    indices: tuple[int, ...] = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        texts, labels, names = tuple(self.texts), tuple(self.labels), tuple(self.label_names)
        indices = tuple(range(len(texts))) if self.indices is None else tuple(self.indices)
        if not len(texts) == len(labels) == len(indices):
            raise ValueError(
                f"LabeledTexts needs one label and one index per text, got {len(texts)} texts, {len(labels)} labels and {len(indices)} indices; pass sequences of equal length."
            )
        if len(set(names)) != len(names):
            dupes = sorted({x for x in names if names.count(x) > 1})
            raise ValueError(
                f"LabeledTexts label_names must be unique, got duplicates {dupes}; pass each label once."
            )
        unknown = sorted(set(labels) - set(names))
        if unknown:
            raise ValueError(
                f"LabeledTexts labels {unknown[:5]} are not in label_names ({len(names)} names); add them to label_names or fix the labels."
            )
        object.__setattr__(self, "texts", texts)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "label_names", names)
        object.__setattr__(self, "indices", indices)

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:
        return (
            f"LabeledTexts(name={self.name!r}, split={self.split!r}, "
            f"n_samples={len(self)}, n_labels={len(self.label_names)})"
        )

    def to_pandas(self):
        """Return the rows as a DataFrame with columns ``text`` and ``label``.

        The index, named ``index``, is :attr:`indices` (the row positions in the
        loaded split). pandas is imported here, not when ``judge`` is imported.

        Returns
        -------
        pandas.DataFrame of shape (n_samples, 2)

        Examples
        --------
        >>> data = LabeledTexts(("hi", "bye"), ("greet", "leave"), ("greet", "leave"), "toy", "test")
        >>> data.to_pandas()  # doctest: +NORMALIZE_WHITESPACE
              text  label
        index
        0       hi  greet
        1      bye  leave
        """
        import pandas as pd

        return pd.DataFrame(
            {"text": list(self.texts), "label": list(self.labels)},
            index=pd.Index(list(self.indices), name="index"),
        )

    def sample(self, n: int, seed: int = 0) -> LabeledTexts:
        """Draw a seeded, stratified sample of ``n`` rows.

        Allocation is proportional to label frequency (largest remainder). When
        ``n`` is at least the number of labels present, every present label gets
        at least one row: labels whose share is below one get exactly one and the
        other labels share the rest in proportion. With fewer rows than labels the
        allocation is simply proportional, so small labels may get none.
        Ties, and which rows of a label are taken, are decided by
        ``random.Random(seed).random()``, whose sequence Python keeps stable
        across versions. Rows keep their original order, and :attr:`indices` of
        the result still point at the loaded split (so sampling a sample works).

        Parameters
        ----------
        n : int
            Number of rows, ``1 <= n <= len(self)``.
        seed : int, default=0
            Seed of the draw; the same ``(data, n, seed)`` always gives the same rows.

        Returns
        -------
        LabeledTexts
            ``n`` rows, same ``label_names``, ``name`` and ``split``.

        Examples
        --------
        >>> data = LabeledTexts(
        ...     texts=tuple(f"t{i}" for i in range(10)),
        ...     labels=("a",) * 6 + ("b",) * 3 + ("c",),
        ...     label_names=("a", "b", "c", "d"), name="toy", split="test")
        >>> small = data.sample(4, seed=0)
        >>> sorted(small.labels)
        ['a', 'a', 'b', 'c']
        >>> small.indices == data.sample(4, seed=0).indices
        True
        >>> [data.texts[i] for i in small.indices] == list(small.texts)
        True
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(self):
            raise ValueError(
                f"sample() needs an integer n between 1 and {len(self)} (the number of rows of {self.name} {self.split}), got n={n!r}; pass a smaller n or sample from a larger split."
            )
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(
                f"sample() needs an integer seed, got seed={seed!r}; pass e.g. seed=0."
            )
        chosen = _stratified_positions(self.labels, n, seed, at_least_one=True)
        return LabeledTexts(
            texts=tuple(self.texts[i] for i in chosen),
            labels=tuple(self.labels[i] for i in chosen),
            label_names=self.label_names,
            name=self.name,
            split=self.split,
            indices=tuple(self.indices[i] for i in chosen),
        )


# ---- stratified selection ------------------------------------------------------------


def _apportion(weights: Sequence[int], n: int, tiebreak: Sequence[float]) -> list[int]:
    """Largest-remainder apportionment of ``n`` in proportion to ``weights`` (exact).

    Equal remainders go to the smaller ``tiebreak``. Each share is the floor or the
    ceiling of its quota ``n * w / sum(weights)``, so never above ``w`` when
    ``n <= sum(weights)``.
    """
    total = sum(weights)
    if n == 0 or total == 0:
        return [0] * len(weights)
    shares = [n * w // total for w in weights]
    remainders = [n * w % total for w in weights]
    order = sorted(range(len(weights)), key=lambda k: (-remainders[k], tiebreak[k]))
    for k in order[: n - sum(shares)]:
        shares[k] += 1
    return shares


def _allocate(
    sizes: Sequence[int], n: int, tiebreak: Sequence[float], at_least_one: bool
) -> list[int]:
    """Split ``n`` among groups of the given sizes in proportion to the sizes.

    With ``at_least_one`` and ``n >= len(sizes)``, groups whose quota is below one
    get exactly one and the rest of ``n`` is apportioned among the others,
    repeatedly until every remaining quota is at least one (the usual
    "proportional allocation with a minimum of one"). No group gets more than
    its size.
    """
    counts = [0] * len(sizes)
    free = list(range(len(sizes)))
    if at_least_one and n >= len(sizes):
        while free:
            total = sum(sizes[k] for k in free)
            fixed = {k for k in free if n * sizes[k] < total}  # quota below one
            if not fixed:
                break
            for k in fixed:
                counts[k] = 1
            n -= len(fixed)
            free = [k for k in free if k not in fixed]
    shares = _apportion([sizes[k] for k in free], n, [tiebreak[k] for k in free])
    for k, share in zip(free, shares, strict=True):
        counts[k] = share
    return counts


def _stratified_positions(
    labels: Sequence[str], n: int, seed: int, at_least_one: bool
) -> list[int]:
    """Positions (sorted) of a seeded stratified selection of ``n`` of ``labels``."""
    rng = random.Random(seed)
    keys = [rng.random() for _ in labels]
    groups: dict[str, list[int]] = {}
    for position, label in enumerate(labels):
        groups.setdefault(label, []).append(position)
    members = list(groups.values())
    tiebreak = [rng.random() for _ in members]
    counts = _allocate([len(m) for m in members], n, tiebreak, at_least_one)
    chosen: list[int] = []
    for group, count in zip(members, counts, strict=True):
        chosen.extend(sorted(group, key=keys.__getitem__)[:count])
    return sorted(chosen)


def carve_validation(labels: Sequence[str]) -> tuple[list[int], list[int]]:
    """Split train positions into (train, validation), stratified by label.

    ``round(VALIDATION_FRACTION * len(labels))`` rows go to validation, each label
    contributing in proportion to its frequency (largest remainder, seed
    ``VALIDATION_SEED``); the two lists are disjoint and cover every position.

    Examples
    --------
    >>> train, val = carve_validation(["a"] * 10 + ["b"] * 20)
    >>> len(train), len(val), sorted(set(train) | set(val)) == list(range(30))
    (27, 3, True)
    """
    n_val = round(VALIDATION_FRACTION * len(labels))
    if n_val == 0:
        return list(range(len(labels))), []
    val = _stratified_positions(labels, n_val, VALIDATION_SEED, at_least_one=False)
    taken = set(val)
    return [i for i in range(len(labels)) if i not in taken], val


# ---- arguments -----------------------------------------------------------------------


def check_split(name: str, split: str, valid: Sequence[str]) -> str:
    """Return the canonical split name (``"val"`` means ``"validation"``) or raise."""
    canonical = "validation" if split == "val" else split
    if canonical not in valid:
        options = ", ".join(repr(s) for s in valid)
        raise ValueError(
            f"Unknown split {split!r} for {name}; expected one of {options} ('val' is accepted for 'validation')."
        )
    return canonical


# ---- files ---------------------------------------------------------------------------


def dataset_folder(name: str, data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The folder of dataset ``name`` under ``data_dir`` or ``$JUDGE_DATA_DIR``.

    Returns ``None`` when neither is given (the caller then tries the hub).
    Raises ``FileNotFoundError`` when the given directory or its ``name`` folder
    does not exist: an explicit location is never silently replaced by a download.
    """
    if data_dir is not None:
        root, source = Path(data_dir).expanduser(), f"data_dir={os.fspath(data_dir)!r}"
    else:
        env = os.environ.get(_ENV_VAR, "")
        if not env:
            return None
        root, source = Path(env).expanduser(), f"{_ENV_VAR}={env!r}"
    if not root.is_dir():
        raise FileNotFoundError(
            f"Dataset directory {str(root)!r} (from {source}) does not exist or is not a directory; pass data_dir= or set {_ENV_VAR} to the folder that holds the {_FOLDERS} folders."
        )
    folder = root / name
    if not folder.is_dir():
        raise FileNotFoundError(
            f"No {name} folder in {str(root)!r} (from {source}): expected {str(folder)!r}; pass data_dir= or set {_ENV_VAR} to the folder that holds the {_FOLDERS} folders (not to a dataset folder itself)."
        )
    return folder


def require_file(folder: Path, filename: str) -> Path:
    """``folder / filename``, or a ``FileNotFoundError`` naming the expected path."""
    path = folder / filename
    if not path.is_file():
        raise FileNotFoundError(
            f"Missing file {str(path)!r}: the {folder.name} loader expects {filename!r} in {str(folder)!r}; point data_dir (or {_ENV_VAR}) at a complete copy of the datasets folder."
        )
    return path


def read_json(path: Path) -> Any:
    """Parse a JSON file, turning a decode error into a ``ValueError`` naming the file."""
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"Malformed JSON in {str(path)!r} at line {exc.lineno}, column {exc.colno}: {exc.msg}; replace the file with an unmodified upstream copy."
        ) from exc


def malformed(path: Path, where: str, problem: str) -> ValueError:
    """A ``ValueError`` for a bad record: file, where (``"line 3"``), what was wrong, the fix."""
    return ValueError(
        f"Malformed {path.name} ({str(path)!r}) at {where}: {problem}; replace the file with an unmodified upstream copy."
    )


def read_name_list(path: Path) -> tuple[str, ...]:
    """A JSON list of unique strings (a label set), or a ``ValueError`` naming the file."""
    names = read_json(path)
    if not isinstance(names, list) or not names or not all(isinstance(x, str) for x in names):
        raise ValueError(
            f"Malformed {str(path)!r}: expected a non-empty JSON list of label strings, got {type(names).__name__}; replace the file with an unmodified upstream copy."
        )
    if len(set(names)) != len(names):
        raise ValueError(
            f"Malformed {str(path)!r}: the label list has duplicates ({len(names)} entries, {len(set(names))} distinct); replace the file with an unmodified upstream copy."
        )
    return tuple(names)


# ---- hub fallback --------------------------------------------------------------------


def load_hub(name: str, hub_id: str, config: str | None, split: str) -> Any:
    """Load one split of the public hub copy with the optional ``datasets`` package.

    Only used when neither ``data_dir`` nor ``JUDGE_DATA_DIR`` is given. Any failure
    (package missing, offline, hub changed) becomes a ``FileNotFoundError`` that says
    how to use a local copy instead.
    """
    fix = f"pass data_dir= or set {_ENV_VAR} to the folder that holds the {_FOLDERS} folders"
    try:
        import datasets as hf_datasets
    except ImportError as exc:
        raise FileNotFoundError(
            f"No local copy of {name}: data_dir was not given and {_ENV_VAR} is not set, and the Hugging Face hub fallback needs the optional 'datasets' package ({exc}); {fix}, or pip install 'trie-judge[datasets]' to download {hub_id!r}."
        ) from exc
    try:
        return hf_datasets.load_dataset(hub_id, config, split=split)
    except Exception as exc:  # network, auth, hub layout: all mean "use a local copy"
        raise FileNotFoundError(
            f"No local copy of {name}: data_dir was not given and {_ENV_VAR} is not set, and loading {hub_id!r} (config {config!r}, split {split!r}) from the Hugging Face hub failed ({type(exc).__name__}: {exc}); {fix}."
        ) from exc


def hub_names(dataset: Any, column: str) -> list[str]:
    """The class names of a hub ``ClassLabel`` column."""
    return list(dataset.features[column].names)


def take(values: Sequence[Any], positions: Iterable[int]) -> tuple[Any, ...]:
    return tuple(values[i] for i in positions)
