"""Loaders for the evaluation benchmarks: Banking77, CLINC150, TREC, MASSIVE, and ICD-10-CM for huge K.

Every loader returns a :class:`LabeledTexts` (texts, gold labels in the dataset's
own identifiers, the full label set in canonical order). Files are read from
``data_dir``, else from ``$JUDGE_DATA_DIR``: a folder holding ``banking77/``,
``clinc150/``, ``massive/`` and ``trec/`` as the upstream projects publish them.
With neither, the public Hugging Face hub copy is loaded through the optional
``datasets`` package (``pip install 'trie-judge[datasets]'``, online only).

========== ======================== =========================================
name       splits                   options
========== ======================== =========================================
banking77  train, validation*, test
clinc150   train, validation, test  ``include_oos=False``
massive    train, validation, test
trec       train, validation*, test ``granularity="coarse"`` or ``"fine"``
icd10cm    validation, test         (from the ``simple-icd-10-cm`` package)
========== ======================== =========================================

\\* carved from the official train file: :data:`VALIDATION_FRACTION` (10 %) of it,
stratified by label, seed :data:`VALIDATION_SEED` (0); ``"train"`` is the rest.

This package deliberately does not download to a cache of its own, rename
labels, or clean texts; a classifier may show ``card_arrival`` to a model as
``card arrival`` as long as it maps predictions back.
"""

from __future__ import annotations

import os

from . import banking77, clinc150, icd10cm, massive, trec
from ._common import VALIDATION_FRACTION, VALIDATION_SEED, LabeledTexts

__all__ = ["DATASETS", "LabeledTexts", "VALIDATION_FRACTION", "VALIDATION_SEED", "display_names", "load"]

_LOADERS = {module.NAME: module for module in (banking77, clinc150, massive, trec, icd10cm)}

#: Names accepted by :func:`load`.
DATASETS = tuple(_LOADERS)


def load(
    name: str,
    split: str = "test",
    data_dir: str | os.PathLike[str] | None = None,
    **options: object,
) -> LabeledTexts:
    """Load one split of a benchmark dataset.

    Parameters
    ----------
    name : {"banking77", "clinc150", "massive", "trec", "icd10cm"}
        The dataset (case-insensitive).
    split : {"train", "validation", "test"}, default="test"
        ``"val"`` is accepted for ``"validation"``.
    data_dir : str or path-like, optional
        Folder holding the dataset folders (``banking77/`` ...). Defaults to the
        ``JUDGE_DATA_DIR`` environment variable, then to the Hugging Face hub.
    **options
        Dataset options: ``include_oos`` (clinc150), ``granularity`` (trec).

    Returns
    -------
    LabeledTexts
        With ``texts``, ``labels``, ``label_names``, ``name``, ``split``.

    Raises
    ------
    ValueError
        Unknown name, split or option value, or a malformed file.
    TypeError
        An option the dataset does not have.
    FileNotFoundError
        ``data_dir`` (or ``JUDGE_DATA_DIR``) or a file in it does not exist, or
        neither is given and the hub copy cannot be loaded.

    Examples
    --------
    The dataset files are not part of the package: these run from the repository root,
    beside the project's shared folder:

    >>> data = load("banking77", "test", data_dir="../shared/datasets")
    >>> len(data), len(data.label_names), data.labels[0]
    (3080, 77, 'card_arrival')
    >>> load("clinc150", "val", include_oos=True, data_dir="../shared/datasets").label_names[-1]
    'oos'
    >>> load("imdb")
    Traceback (most recent call last):
    ...
    ValueError: Unknown dataset 'imdb'; expected one of 'banking77', 'clinc150', 'massive', 'trec', 'icd10cm'.
    """
    key = name.lower() if isinstance(name, str) else name
    if key not in _LOADERS:
        valid = ", ".join(repr(n) for n in DATASETS)
        raise ValueError(f"Unknown dataset {name!r}; expected one of {valid}.")
    module = _LOADERS[key]
    unknown = sorted(set(options) - set(module.OPTIONS))
    if unknown:
        valid = ", ".join(module.OPTIONS) or "none"
        raise TypeError(
            f"Unknown option(s) {', '.join(unknown)} for {key}; its options are: {valid}. Remove them or pick the dataset that has them."
        )
    return module.load(split, data_dir, **options)


def display_names(name: str, labels) -> dict:
    """Dataset-specific readable label names for the model (empty: use the natural form).

    Only TREC needs one: its codes (``ABBR``, ``NUM:dist``) mean nothing to a
    model as written. Predictions still map back to the dataset's labels.

    Examples
    --------
    >>> display_names("trec", ["LOC"])
    {'LOC': 'location'}
    >>> display_names("banking77", ["card_arrival"])
    {}
    """
    module = _LOADERS.get(str(name).lower())
    fn = getattr(module, "display_names", None)
    return fn(labels) if fn else {}
