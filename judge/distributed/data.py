"""Ray Data: classify a Dataset (or parquet / CSV / JSONL files) on a pool of actors, and decide about a state column.

See `judge.distributed` for the output columns and what this does not do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from judge.distributed._checks import check_model_ref, check_positive, ray_module

__all__ = ["classify_dataset", "classify_files", "read_inputs", "decide_dataset", "OUTPUT_COLUMNS"]

#: Columns `classify_dataset` adds (``probabilities`` is replaced by the two ``top_`` columns with ``top_k``).
OUTPUT_COLUMNS = ("label", "confidence", "abstained", "abstain_reason", "probabilities")
_TOP_COLUMNS = ("top_labels", "top_probabilities")


# ----------------------------------------------------------------------------- the actor

class _ClassifyBatch:
    """The callable class run by each actor: one Classifier, built once, scoring pyarrow batches.

    Parameters are those of `classify_dataset`; ``labels`` is None exactly when
    ``classifier_dir`` is given.
    """

    def __init__(self, labels, model, classifier_dir, text_column, batch_size, batch_invariant, top_k,
                 abstain, device, backend="transformers"):
        from judge.classifier import Classifier

        if classifier_dir is not None:  # backend="vllm": this actor holds one vLLM engine (VLLMScorer)
            clf = Classifier.load(classifier_dir, model=model, device=device)
            clf.batch_size, clf.batch_invariant, clf.backend = batch_size, batch_invariant, backend
        else:
            clf = Classifier(labels, model, batch_size=batch_size, batch_invariant=batch_invariant,
                             device=device, progress=False, backend=backend)
        if clf.multi_label:  # its columns (one label, its confidence) would misread independent probabilities
            raise ValueError(f"the classifier in {classifier_dir!r} is multi-label (multi_label=True), and batch "
                             f"writes one label per row; use judge predict (a list of labels per text) or "
                             f"Classifier.predict_records on each batch.")
        if abstain and clf.threshold_ is None:
            from judge import NotCalibratedError

            raise NotCalibratedError(
                f"abstain=True but the classifier in {classifier_dir!r} has no abstention threshold; "
                f"calibrate it with calibrate(texts, y, target_accuracy=...) and save it, or pass abstain=False.")
        clf.progress = False
        clf.setup()  # load the model now, once per actor (a restarted actor loads it again)
        self.clf, self.text_column, self.top_k, self.abstain = clf, text_column, top_k, abstain

    def _texts(self, table) -> list[str]:
        if self.text_column not in table.column_names:
            raise KeyError(f"the dataset has no text column {self.text_column!r} (columns: "
                           f"{table.column_names}); pass text_column=NAME.")
        texts = table.column(self.text_column).to_pylist()
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise TypeError(f"row {bad} of this batch has a {type(texts[bad]).__name__} in column "
                            f"{self.text_column!r} ({texts[bad]!r:.40}), not a string; drop or fill it first.")
        return texts

    def __call__(self, table):
        import pyarrow as pa

        proba = self.clf.predict_proba(self._texts(table))
        cal = self.clf.calibration_
        return _append_outputs(table, proba, self.clf.classes_, self.clf.threshold_ if self.abstain else None,
                               self.top_k, pa, report=cal.report if self.abstain and cal is not None else None)


def _append_outputs(table, proba: np.ndarray, classes: np.ndarray, threshold: float | None, top_k: int | None, pa,
                    report=None):
    """``table`` with the output columns of `proba` (shape (n, K)) appended (``report``: the threshold's, for reasons)."""
    from judge.calibration.review import abstention_reason

    n, k = proba.shape
    best = np.argmax(proba, axis=1) if n else np.zeros(0, dtype=np.int64)
    conf = proba[np.arange(n), best] if n else np.zeros(0)
    abstained = conf < threshold if threshold is not None else np.zeros(n, dtype=bool)
    labels = [None if a else str(classes[b]) for a, b in zip(abstained, best)]
    why = [abstention_reason(float(c), dict(report or {}, threshold=threshold)) if a else None
           for a, c in zip(abstained, conf)]
    cols = {"label": pa.array(labels, pa.string()), "confidence": pa.array(conf, pa.float64()),
            "abstained": pa.array(abstained, pa.bool_()), "abstain_reason": pa.array(why, pa.string())}
    if top_k is None:
        cols["probabilities"] = pa.array(list(proba.astype(np.float64)), pa.list_(pa.float64()))
    else:
        m = min(top_k, k)
        order = np.argsort(-proba, axis=1, kind="stable")[:, :m]
        cols["top_labels"] = pa.array([[str(classes[j]) for j in row] for row in order], pa.list_(pa.string()))
        cols["top_probabilities"] = pa.array([proba[i, row].tolist() for i, row in enumerate(order)],
                                             pa.list_(pa.float64()))
    _refuse_overwrite(table.column_names, cols)  # a schema unknown up front: checked here, per batch
    for name, arr in cols.items():
        table = table.append_column(name, arr)
    return table


def _check_outputs_free(ds, names: Sequence[str]) -> None:
    try:
        cols = ds.columns(fetch_if_missing=False) or []
    except Exception:  # noqa: BLE001 - a dataset whose schema is not known yet: checked per batch instead
        cols = []
    _refuse_overwrite(cols, names)


def _refuse_overwrite(present, names) -> None:
    """Raise where an output column of ``names`` is among the dataset's columns ``present``."""
    clash = [c for c in names if c in present]
    if clash:
        raise ValueError(f"the dataset already has column(s) {clash}, which the output would overwrite; "
                         f"rename them first (ds.rename_columns({{...}})).")


def _map_kwargs(actors, num_cpus_per_actor, num_gpus_per_actor, max_retries) -> dict:
    """``map_batches`` keywords: a fixed pool of ``actors`` actors and what Ray does when one dies."""
    import ray.data

    if not isinstance(actors, int) or isinstance(actors, bool) or actors < 1:
        raise ValueError(f"actors must be a positive int, got {actors!r}.")
    check_positive("num_cpus_per_actor", num_cpus_per_actor)
    check_positive("num_gpus_per_actor", num_gpus_per_actor, zero=True)
    if max_retries is not None and (not isinstance(max_retries, int) or isinstance(max_retries, bool)
                                    or max_retries < -1):
        raise ValueError(f"max_retries must be None (Ray Data's default: restart and retry forever) or an int "
                         f">= -1 (-1: forever), got {max_retries!r}.")
    kw = dict(compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=num_cpus_per_actor,
              num_gpus=num_gpus_per_actor)
    if max_retries is not None:
        # max_restarts restarts a dead actor (its __init__ reloads the model); max_task_retries resubmits
        # the batch it was scoring, so a crash loses and duplicates no row. (Ray 2.60 warns that these
        # keywords are deprecated; it has no named replacement yet.)
        kw.update(max_restarts=max_retries, max_task_retries=max_retries)
    return kw


def classify_dataset(ds, *, labels=None, model=None, classifier_dir=None, text_column: str = "text",
                     batch_size: int = 16, actors: int = 1, num_cpus_per_actor: float = 1,
                     num_gpus_per_actor: float = 0, top_k: int | None = None, abstain: bool = False,
                     batch_invariant: bool = False, device: str | None = None, max_retries: int | None = None,
                     backend: str = "transformers", _udf=None):
    """Classify every row of a Ray Dataset on ``actors`` Ray actors, each holding one Classifier.

    Lazy, like every Ray Data transform: nothing runs until the result is
    consumed (``write_parquet``, ``take_all``, ``materialize``...). Ray Data's
    own progress bars show the work.

    Parameters
    ----------
    ds : ray.data.Dataset
        Must have a string column ``text_column``; every other column is kept
        as is (keep an id column to join results back).
    labels : sequence of str, length K, optional
        The classes (exactly one of ``labels`` and ``classifier_dir``).
    model : None, str or os.PathLike
        ``None``: the packaged SmolLM2 (with ``classifier_dir``: the model it
        was saved with); a hub id or a local folder. Each actor loads it once.
    classifier_dir : str or os.PathLike, optional
        A folder written by `judge.Classifier.save` (a calibrated classifier:
        labels, prompt, calibration), loaded by each actor.
    text_column : str
    batch_size : int
        Rows per ``map_batches`` batch, and texts per forward pass.
    actors : int
        Actors in the pool (``compute=ActorPoolStrategy(size=actors)``).
    num_cpus_per_actor, num_gpus_per_actor : float
        Resources Ray reserves for each actor.
    top_k : int, optional
        Write ``top_labels`` / ``top_probabilities`` (the k most probable)
        instead of the full ``probabilities`` list (use with large K).
    abstain : bool
        Null ``label`` and ``abstained=True`` below the calibrated threshold
        (needs a calibrated ``classifier_dir``).
    batch_invariant : bool
        One text per forward pass: bit-identical scores whatever the batches (slower).
    device : str, optional
        Passed to each actor's Classifier (e.g. ``"cuda"`` with ``num_gpus_per_actor=1``).
    max_retries : int, optional
        Times a dead actor is restarted and its batch resubmitted (-1: forever;
        None: Ray Data's default, which is forever).
    backend : {"transformers", "vllm"}
        Who scores in each actor: the transformers engine, or one vLLM engine per actor
        (`judge.backends.vllm`; reserve its GPU with ``num_gpus_per_actor=1``).

    Returns
    -------
    ray.data.Dataset
        The input columns plus ``label`` (string, null when abstained),
        ``confidence`` (float64), ``abstained`` (bool) and ``probabilities``
        (list of K float64 in ``classes_`` order: the order of ``labels``, or
        of the saved classifier), or ``top_labels`` / ``top_probabilities``
        with ``top_k``. Row order is not guaranteed (set
        ``DataContext.execution_options.preserve_order`` for that).

    Raises
    ------
    ValueError
        Neither or both of ``labels`` and ``classifier_dir``; ``abstain``
        without ``classifier_dir``; an option out of range; an output column
        already in ``ds``.

    Examples
    --------
    On a local Ray cluster, with a tiny saved model (give yours: a hub id or a folder; None is the
    packaged model):

    >>> import ray
    >>> from judge.testing import tiny_model_dir
    >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    >>> ds = ray.data.from_items([{"id": 0, "text": "I was charged twice"}])
    >>> out = classify_dataset(ds, labels=["refund", "card_arrival"], model=tiny_model_dir(), actors=1)
    >>> row = out.take(1)[0]
    >>> row["id"], row["label"] in ("refund", "card_arrival"), len(row["probabilities"])
    (0, True, 2)
    """
    ray_module()
    if (labels is None) == (classifier_dir is None):
        raise ValueError("pass exactly one of labels=[...] (a zero-shot classifier) and classifier_dir=DIR "
                         f"(a saved one); got labels={labels!r:.60} and classifier_dir={classifier_dir!r}.")
    check_model_ref(model)
    if classifier_dir is not None and not (Path(classifier_dir) / "classifier.json").is_file():
        raise FileNotFoundError(f"classifier_dir {str(classifier_dir)!r} has no classifier.json; pass the "
                                f"folder given to Classifier.save().")
    if classifier_dir is not None:  # refused before Ray starts, as each actor would refuse it
        import json

        try:
            multi = json.loads((Path(classifier_dir) / "classifier.json").read_text()).get("multi_label", False)
        except (ValueError, OSError, AttributeError):
            multi = False  # a damaged file: Classifier.load in the actor says what is wrong with it
        if multi:
            raise ValueError(f"the classifier in {str(classifier_dir)!r} is multi-label (multi_label=True), and "
                             f"classify_dataset writes one label per row; use judge predict (a list of labels per "
                             f"text) or Classifier.predict_records.")
    if labels is not None:
        from judge.labels import as_label_list, validate_labels

        labels = as_label_list(labels)
        validate_labels(labels)
    if abstain and classifier_dir is None:
        raise ValueError("abstain=True needs a calibrated classifier (its threshold_); pass classifier_dir=DIR "
                         "of a classifier saved after calibrate(..., target_accuracy=...), or abstain=False.")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
        raise ValueError(f"top_k must be None (all K probabilities) or a positive int, got {top_k!r}.")
    if not isinstance(text_column, str) or not text_column:
        raise ValueError(f"text_column must be a non-empty column name, got {text_column!r}.")
    from judge.backends import check_backend

    check_backend(backend)
    kwargs = _map_kwargs(actors, num_cpus_per_actor, num_gpus_per_actor, max_retries)
    _check_outputs_free(ds, OUTPUT_COLUMNS[:3] + (("probabilities",) if top_k is None else _TOP_COLUMNS))
    args = (None if labels is None else list(labels), None if model is None else str(model),
            None if classifier_dir is None else str(classifier_dir), text_column, batch_size,
            bool(batch_invariant), top_k, bool(abstain), device, backend)
    return ds.map_batches(_udf or _ClassifyBatch, batch_size=batch_size, batch_format="pyarrow",
                          fn_constructor_args=args, zero_copy_batch=True, **kwargs)


# ----------------------------------------------------------------------------- files

def read_inputs(inputs):
    """One Ray Dataset over parquet, CSV and JSONL files or folders (``ray.data.read_*``, unioned).

    Parameters
    ----------
    inputs : str, os.PathLike or list of them
        Checked and grouped by `judge.io.expand_inputs` (which raises on a
        missing path or an unknown suffix) before Ray reads anything.

    Returns
    -------
    ray.data.Dataset

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "tickets.csv").write_text("id,text\\n0,I was charged twice\\n")
    >>> read_inputs([folder / "tickets.csv"]).columns()
    ['id', 'text']
    """
    from judge.io import expand_inputs

    ray = ray_module()
    readers = {"parquet": ray.data.read_parquet, "csv": ray.data.read_csv, "json": ray.data.read_json}
    parts = [readers[kind](files) for kind, files in expand_inputs(inputs).items()]
    return parts[0] if len(parts) == 1 else parts[0].union(*parts[1:])


def _warn_if_no_cpu_left(actors, num_cpus_per_actor) -> None:
    """Ray Data's read and write tasks need a CPU too: an actor pool holding every CPU waits forever."""
    import warnings

    ray = ray_module()
    total = ray.cluster_resources().get("CPU", 0) if ray.is_initialized() else None
    if total is not None and actors * num_cpus_per_actor >= total:
        warnings.warn(f"{actors} actors x num_cpus_per_actor={num_cpus_per_actor} reserve all {total:g} CPUs of "
                      f"the cluster, leaving none for the file read and write tasks (the job can wait forever); "
                      f"use fewer actors or num_cpus_per_actor={total / (actors + 1):.2g}.", RuntimeWarning,
                      stacklevel=3)


def classify_files(inputs, output_dir, **options) -> Path:
    """Classify parquet / CSV / JSONL files (or folders of them) and write parquet to ``output_dir``.

    Parameters
    ----------
    inputs : str, os.PathLike or list of them
        Files (``.parquet``, ``.csv``, ``.jsonl``/``.ndjson``/``.json`` lines) or folders of them.
    output_dir : str or os.PathLike
        Created if missing; must be empty if it exists (nothing is overwritten).
        Leave the read and write tasks a CPU: ``actors * num_cpus_per_actor``
        below the cluster's CPUs (a warning says when it is not).
    **options
        Those of `classify_dataset` (``labels`` or ``classifier_dir``, ``model``,
        ``text_column``, ``actors``, ...).

    Returns
    -------
    pathlib.Path
        ``output_dir``, holding the parquet files (input columns plus the output columns).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from judge.testing import tiny_model_dir
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "tickets.csv").write_text("id,text\\n0,I was charged twice\\n1,Where is my card?\\n")
    >>> out = classify_files([folder / "tickets.csv"], folder / "out", labels=["refund", "other"],
    ...                      model=tiny_model_dir(), actors=1)
    >>> out == folder / "out", sum(1 for _ in out.glob("*.parquet")) >= 1
    (True, True)
    """
    out = Path(output_dir).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"output_dir {str(output_dir)!r} exists and is not an empty folder; pass a new "
                              f"or empty folder (nothing is overwritten).")
    ds = read_inputs(inputs)
    result = classify_dataset(ds, **options)  # validated before any file is written
    _warn_if_no_cpu_left(options.get("actors", 1), options.get("num_cpus_per_actor", 1))
    out.mkdir(parents=True, exist_ok=True)
    result.write_parquet(str(out))
    return out


# ----------------------------------------------------------------------------- typed decisions

class _DecideBatch:
    """The callable class of `decide_dataset`: one Decider per actor."""

    def __init__(self, questions, model, calibration, state_column, device):
        from judge.decisions import Decider

        self.decider = Decider(model, device=device, calibration=calibration)
        _ = self.decider.tokenizer_  # load the model and tokenizer now, once per actor
        self.questions, self.state_column = questions, state_column

    def __call__(self, table):
        import pyarrow as pa

        if self.state_column not in table.column_names:
            raise KeyError(f"the dataset has no state column {self.state_column!r} (columns: "
                           f"{table.column_names}); pass state_column=NAME.")
        states = table.column(self.state_column).to_pylist()
        answers = self.decider.ask_many([(s, self.questions) for s in states]) if states else []
        for qid, q in self.questions.items():
            col = [a[qid] for a in answers]
            if q.type == "choice":
                value = pa.array([a.choice for a in col], pa.string())
            elif q.type == "noul":
                value = pa.array([a.noul for a in col], pa.float64())
            else:
                value = pa.array([a.score for a in col], pa.float64())
            conf = pa.array([a.confidence for a in col], pa.float64())
            probs = pa.array([list(a.probabilities.values()) for a in col], pa.list_(pa.float64()))
            table = (table.append_column(qid, value).append_column(f"{qid}_confidence", conf)
                     .append_column(f"{qid}_probabilities", probs))
        return table


def decide_dataset(ds, questions: Mapping[str, Any], *, state_column: str = "state", model=None,
                   calibration=None, batch_size: int = 16, actors: int = 1, num_cpus_per_actor: float = 1,
                   num_gpus_per_actor: float = 0, device: str | None = None, max_retries: int | None = None):
    """Answer typed questions (`judge.decisions`) about every row's state, on a pool of actors.

    Parameters
    ----------
    ds : ray.data.Dataset
        With a column ``state_column`` of strings (or JSON objects, shown as canonical JSON).
    questions : mapping of str to Choice, YesNo or Score
        Asked about every row; the ids become column names.
    model : None, str or os.PathLike
    calibration : str or os.PathLike, optional
        A `judge.decisions.DecisionCalibration` file, loaded by each actor.
    batch_size, actors, num_cpus_per_actor, num_gpus_per_actor, device, max_retries
        As in `classify_dataset` (each batch is one ``Decider.ask_many`` call).

    Returns
    -------
    ray.data.Dataset
        The input columns plus, per question ``q``: ``q`` (choice: the option
        name, string; yes/no: P(yes), float64; score: the expected level,
        float64), ``q_confidence`` (float64, null for yes/no) and
        ``q_probabilities`` (list<float64> in the question's option order;
        yes/no: ``[P(yes), P(no)]``; score: levels 0..n-1).

    Examples
    --------
    >>> import ray
    >>> from judge.decisions import YesNo
    >>> from judge.testing import tiny_model_dir
    >>> _ = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    >>> ds = ray.data.from_items([{"state": "I was charged twice, please give my money back"}])
    >>> out = decide_dataset(ds, {"refund": YesNo("Does the customer want a refund?")}, model=tiny_model_dir())
    >>> 0.0 <= out.take(1)[0]["refund"] <= 1.0      # P(yes)
    True
    """
    ray_module()
    from judge.decisions import check_questions

    check_questions(questions)
    check_model_ref(model)
    if calibration is not None and not isinstance(calibration, (str, os.PathLike)):
        raise TypeError(f"calibration must be the path of a DecisionCalibration file, got "
                        f"{type(calibration).__name__}; save it with DecisionCalibration.save(path).")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    kwargs = _map_kwargs(actors, num_cpus_per_actor, num_gpus_per_actor, max_retries)
    names = [n for qid in questions for n in (qid, f"{qid}_confidence", f"{qid}_probabilities")]
    _check_outputs_free(ds, names)
    args = (dict(questions), None if model is None else str(model),
            None if calibration is None else str(calibration), state_column, device)
    return ds.map_batches(_DecideBatch, batch_size=batch_size, batch_format="pyarrow",
                          fn_constructor_args=args, **kwargs)
