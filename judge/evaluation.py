"""Evaluate a classifier on a dataset, and score long lists of texts resumably.

- `score_with_checkpoint`: ``decision_function`` in chunks, each saved (atomically)
  as it finishes, so an interrupted run resumes where it stopped; the file is
  keyed by `judge.Classifier.fingerprint` (labels as shown, prompt, path,
  model weights) and by each text, so a stale checkpoint is never reused.
- `read_checkpoint`: the scores (and the seconds they took) of such a file.
- `evaluate`: a dataset end to end, what ``judge evaluate`` runs: scores
  (checkpointed), optional calibration on another split, metrics with
  bootstrap intervals, an optional unconstrained-generation baseline; writes
  ``metrics.json``, ``predictions.csv``, plots and the calibrated classifier.

What it deliberately does not do: parse arguments or print a report (the
command line does, `judge.cli.evaluate`), define metrics (`judge.calibration`
does), or load datasets itself (`judge.datasets` does).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["score_with_checkpoint", "read_checkpoint", "Checkpoint", "evaluate"]


# ----------------------------------------------------------------------------- checkpointed scoring

class Checkpoint(NamedTuple):
    """What a checkpoint file of `score_with_checkpoint` holds.

    Attributes
    ----------
    scores : ndarray of float64, shape (n, K)
        ``decision_function`` of each text, in the order the texts were given;
        NaN rows are not scored yet.
    seconds : ndarray of float64, shape (n,)
        Scoring time of each row (a chunk's wall time shared equally by its rows).
    fingerprint : str
        `judge.Classifier.fingerprint` of the classifier that scored them.
    texts : ndarray of str, shape (n,)
        SHA-256 hex digest of each text.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
    >>> path = Path(tempfile.mkdtemp()) / "scores.npz"
    >>> _ = score_with_checkpoint(clf, ["is it?", "no way"], path)
    >>> ck = read_checkpoint(path)
    >>> ck.scores.shape, ck.fingerprint == clf.fingerprint()
    ((2, 2), True)
    """

    scores: np.ndarray
    seconds: np.ndarray
    fingerprint: str
    texts: np.ndarray


def _text_digests(texts) -> np.ndarray:
    return np.array([hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts], dtype="<U64")


def _checkpoint_path(path) -> Path:
    return Path(path).with_suffix(".npz")


def read_checkpoint(path) -> Checkpoint:
    """The contents of a checkpoint written by `score_with_checkpoint`.

    Parameters
    ----------
    path : str or os.PathLike
        The path given to `score_with_checkpoint` (its suffix is replaced by ``.npz``).

    Returns
    -------
    Checkpoint

    Raises
    ------
    FileNotFoundError
        No checkpoint at ``path``.
    ValueError
        The file is not a checkpoint (unreadable, or fields missing).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> class Constant:   # anything with labels, fingerprint() and decision_function(texts)
    ...     labels = ["yes", "no"]
    ...     def fingerprint(self):
    ...         return "constant-v1"
    ...     def decision_function(self, texts):
    ...         return np.log(np.full((len(texts), 2), 0.5))
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "scores_test.npz"
    >>> _ = score_with_checkpoint(Constant(), ["a", "b", "c"], path, chunk=2)
    >>> ck = read_checkpoint(path)
    >>> ck.scores.shape, ck.fingerprint, len(ck.seconds)
    ((3, 2), 'constant-v1', 3)
    """
    p = _checkpoint_path(path)
    if not p.exists():
        raise FileNotFoundError(f"no score checkpoint at {str(p)!r}; score_with_checkpoint(clf, texts, "
                                f"{str(path)!r}) writes one.")
    try:
        with np.load(p) as f:
            return Checkpoint(f["scores"].copy(), f["seconds"].copy(), str(f["fingerprint"]), f["texts"].copy())
    except (OSError, KeyError, ValueError) as err:
        raise ValueError(f"{str(p)!r} is not a score checkpoint ({err}); delete it to score again.") from None


def score_with_checkpoint(clf, texts, path, *, chunk: int = 64) -> np.ndarray:
    """``clf.decision_function(texts)`` in chunks, saved after each so an interrupted run resumes.

    The scores are written to ``path`` with the suffix ``.npz`` (atomically:
    a temporary file, then a rename), together with the classifier's
    `judge.Classifier.fingerprint` (everything that changes a score: labels as
    shown, prompt, path, model weights) and a digest of each text. A later call
    reuses a saved row only when the fingerprint matches and the text is the
    same, wherever it sits in the list: a stale or half-written checkpoint is
    never reused, and scoring more texts of the same list (a larger sample)
    scores only the new ones. The file then holds exactly ``texts``' rows.

    Parameters
    ----------
    clf : judge.Classifier
        Or any object with ``labels``, ``fingerprint()`` and ``decision_function(texts)``.
    texts : sequence of str, length n
    path : str or os.PathLike
        Where the checkpoint lives (its suffix is replaced by ``.npz``).
    chunk : int
        Texts per saved chunk.

    Returns
    -------
    ndarray of float64, shape (n, K)
        As ``clf.decision_function(texts)`` (up to the float rounding of
        batching, about 1e-6, unless the classifier is batch-invariant).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> class Counting:   # anything with labels, fingerprint() and decision_function(texts)
    ...     labels, calls = ["yes", "no"], 0
    ...     def fingerprint(self):
    ...         return "counting-v1"
    ...     def decision_function(self, texts):
    ...         self.calls += len(texts)
    ...         return np.log(np.full((len(texts), 2), 0.5))
    >>> clf, path = Counting(), pathlib.Path(tempfile.mkdtemp()) / "scores.npz"
    >>> score_with_checkpoint(clf, ["a", "b"], path).shape
    (2, 2)
    >>> _ = score_with_checkpoint(clf, ["a", "b", "c"], path)   # "a" and "b" are read back
    >>> clf.calls
    3
    """
    from tqdm.auto import tqdm

    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise ValueError(f"chunk must be a positive int, got {chunk!r}.")
    texts = list(texts)
    fingerprint = clf.fingerprint()
    digests = _text_digests(texts)
    out = np.full((len(texts), len(clf.labels)), np.nan)
    seconds = np.zeros(len(texts))
    path = _checkpoint_path(path)
    try:
        saved = read_checkpoint(path)
    except (FileNotFoundError, ValueError):
        saved = None  # none yet, or unreadable: score again
    if saved is not None and saved.fingerprint == fingerprint and saved.scores.shape[1:] == out.shape[1:]:
        row = {d: i for i, d in enumerate(saved.texts) if not np.isnan(saved.scores[i]).any()}
        for i, d in enumerate(digests):
            if d in row:
                out[i], seconds[i] = saved.scores[row[d]], saved.seconds[row[d]]
    starts = range(0, len(texts), chunk)
    missing = np.isnan(out).any(axis=1)
    todo = [i for i in starts if missing[i:i + chunk].any()]
    if len(todo) < len(starts):
        print(f"resuming: {len(starts) - len(todo)} of {len(starts)} chunks already scored in {path}",
              file=sys.stderr)
    for i in tqdm(todo, desc=f"scoring {path.stem}", unit="chunk", disable=len(todo) < 2):
        rows = i + np.flatnonzero(missing[i:i + chunk])
        t0 = time.perf_counter()
        out[rows] = clf.decision_function([texts[j] for j in rows])
        seconds[rows] = (time.perf_counter() - t0) / len(rows)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, scores=out, seconds=seconds, fingerprint=np.array(fingerprint), texts=digests)
        os.replace(tmp, path)
    return out


# ----------------------------------------------------------------------------- evaluate

def _loose(s: str) -> str:
    return " ".join(s.replace("_", " ").lower().strip().strip(".").split())


def _metric_block(cal, y, proba) -> dict:
    """Point metrics plus bootstrap intervals, the ECE noise floor, baselines and coverage at 0.5 / 0.7 accuracy."""
    out = cal.calibration_report(y, proba, targets=(0.5, 0.7, 0.8))
    out.update({
        "mce": cal.maximum_calibration_error(y, proba),
        "aurc": cal.aurc(y, proba),
        "selective_accuracy_at_50": cal.selective_accuracy(y, proba, 0.5),
    })
    return out


def _plots(cal, y, raw, final, out_dir, metrics):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        metrics["plots"] = "matplotlib not installed (pip install trie-judge[plot])"
        return
    fig, ax = plt.subplots(figsize=(5, 5))
    cal.ReliabilityDiagram.from_predictions(y, raw).plot(ax=ax, name="uncalibrated")
    if final is not raw:
        cal.ReliabilityDiagram.from_predictions(y, final).plot(ax=ax, name="calibrated")
    fig.savefig(out_dir / "reliability.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 4))
    cal.RiskCoverageDisplay.from_predictions(y, final).plot(ax=ax)
    fig.savefig(out_dir / "risk_coverage.png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def _generate_baseline(clf, texts, y_lab, labels, batch_size) -> tuple[list[str], dict]:
    """Plain greedy generation with the same prompt: (raw outputs, validity and accuracy, strict and lenient)."""
    from judge.label_paths import generate_unconstrained

    t0 = time.perf_counter()
    gen = generate_unconstrained(clf, texts, batch_size=batch_size)
    gen_s = time.perf_counter() - t0
    names = {n.strip(): lab for n, lab in zip(clf.surfaces_, labels)}
    loose = {_loose(n): lab for n, lab in names.items()}
    exact = [names.get(g.strip()) for g in gen]
    lenient = [loose.get(_loose(g)) for g in gen]
    return gen, {
        "validity": float(np.mean([e is not None for e in exact])),
        "accuracy": float(np.mean([e == t for e, t in zip(exact, y_lab)])),
        "lenient_validity": float(np.mean([e is not None for e in lenient])),
        "lenient_accuracy": float(np.mean([e == t for e, t in zip(lenient, y_lab)])),
        "texts_per_s": len(texts) / gen_s,
    }


def evaluate(dataset: str, out_dir, *, model=None, split: str = "test", data_dir=None, limit: int | None = None,
             seed: int = 0, calibrate_on: str | None = None, calibration_limit: int | None = None,
             bias: str | None = "auto", bias_l2: float = 1.0, rotations: int = 1,
             target_accuracy: float | None = None, baseline: str | None = None, method: str = "auto",
             label_names: str = "dataset", batch_size: int = 8, include_oos: bool = False,
             granularity: str | None = None, fit_on: str | None = None, per_class: int | None = None,
             fit_method: str = "head") -> dict:
    """Evaluate a zero-shot classifier on a dataset split; write the report files to ``out_dir``.

    Scores are checkpointed (`score_with_checkpoint`, ``scores_<split>.npz``),
    so a second run with the same classifier and texts reads them back.

    Parameters
    ----------
    dataset : str
        A name of `judge.datasets` (banking77, clinc150, trec, massive).
    out_dir : str or os.PathLike
        Created if missing. Receives ``metrics.json``, ``predictions.csv``,
        ``reliability.png`` and ``risk_coverage.png`` (with matplotlib), the
        score checkpoints and, with ``calibrate_on``, the calibrated
        classifier in ``classifier/``.
    model : None or str
        Hub id or folder; None: the packaged SmolLM2.
    split : str
    data_dir : str, optional
        Folder with the datasets (default ``$JUDGE_DATA_DIR``, else the hub).
    limit : int, optional
        A seeded stratified sample of this many texts (``seed``).
    seed : int
    calibrate_on : str, optional
        A split to calibrate on (e.g. ``"validation"``); ``calibration_limit``
        samples it.
    calibration_limit : int, optional
    bias : str or None
        Label-bias correction fitted on ``calibrate_on`` (see `judge.Classifier.calibrate`).
    bias_l2 : float
    rotations : int
        Average over this many rotations of the label list.
    target_accuracy : float, optional
        Fit an abstention threshold on ``calibrate_on`` for this accuracy.
    baseline : {None, "generate"}
        Also run plain greedy generation and report its validity and accuracy.
    method : {"auto", "first_token", "exact", "decode"}
    label_names : {"dataset", "natural", "raw"}
        What the model writes: the dataset's readable names, ``a_b`` as ``a b``, or the raw label.
    batch_size : int
    include_oos : bool
        CLINC150: add the out-of-scope class.
    granularity : {None, "coarse", "fine"}
        TREC label granularity.
    fit_on : str, optional
        A split to fit on first (`judge.Classifier.fit`; never ``split`` or ``calibrate_on``).
    per_class : int, optional
        Fit on a seeded draw of this many texts per class of ``fit_on`` (None: all of it).
    fit_method : {"head", "lora", "demos"}

    Returns
    -------
    dict
        The metrics written to ``metrics.json``: ``accuracy``, ``macro_f1``,
        ``validity``, ``uncalibrated`` (and ``calibrated``) metric blocks with
        bootstrap intervals, timings, and ``calibration`` / ``abstention`` /
        ``baseline_generate`` when asked for.

    Examples
    --------
    On the packaged model, 8 TREC test texts, calibrated on 12 validation texts (run from the
    repository root, beside the project's shared folder):

    >>> import tempfile
    >>> m = evaluate("trec", tempfile.mkdtemp(), data_dir="../shared/datasets", limit=8,
    ...              calibrate_on="validation", calibration_limit=12)
    >>> m["n"], 0 <= m["accuracy"] <= 1, sorted(m["calibrated"])[:3]
    (8, True, ['accuracy', 'accuracy_ci', 'aurc'])
    """
    if baseline not in (None, "generate"):
        raise ValueError(f"baseline must be None or 'generate', got {baseline!r}.")
    if fit_on is not None and fit_on in (split, calibrate_on):
        raise ValueError(f"fit_on={fit_on!r} is also the {'evaluated' if fit_on == split else 'calibration'} split; "
                         f"fit, calibrate and evaluate on three different splits (e.g. train, validation, test).")
    if per_class is not None and (fit_on is None or not isinstance(per_class, int) or per_class < 1):
        raise ValueError(f"per_class must be a positive int and needs fit_on, got per_class={per_class!r}, "
                         f"fit_on={fit_on!r}.")
    from sklearn.metrics import f1_score

    from judge import calibration as cal
    from judge import datasets as ds
    from judge.classifier import Classifier

    options = {}
    if include_oos:
        options["include_oos"] = True
    if granularity:
        options["granularity"] = granularity
    test = ds.load(dataset, split=split, data_dir=data_dir, **options)
    if limit and limit < len(test):
        test = test.sample(limit, seed=seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = list(test.label_names)
    names = ds.display_names(dataset, labels) if label_names == "dataset" else None
    clf = Classifier(labels, model, method=method, batch_size=batch_size, progress=False, rotations=rotations,
                     label_names=(names or None) if label_names == "dataset" else label_names)
    texts, y_lab = list(test.texts), list(test.labels)
    pos = {lab: i for i, lab in enumerate(labels)}
    y = np.array([pos[v] for v in y_lab])

    calib = None
    if calibrate_on:
        calib = ds.load(dataset, split=calibrate_on, data_dir=data_dir, **options)
        if calibration_limit and calibration_limit < len(calib):
            calib = calib.sample(calibration_limit, seed=seed)
    t0 = time.perf_counter()
    clf.setup()  # load the model, cache the prompt prefix, compile the labels
    setup_s = time.perf_counter() - t0
    fitted = None
    if fit_on:  # fit first: every score below is the fitted classifier's (its fingerprint says so)
        from judge.adaptation import per_class_indices

        data = ds.load(dataset, split=fit_on, data_dir=data_dir, **options)
        rows = np.arange(len(data))
        if per_class:
            rows = per_class_indices(np.array([pos[v] for v in data.labels]), per_class, seed)
        t0 = time.perf_counter()
        clf.fit([data.texts[i] for i in rows], [data.labels[i] for i in rows], method=fit_method)
        fitted = {"split": fit_on, "per_class": per_class, "n": int(len(rows)), "method": fit_method,
                  "seconds": time.perf_counter() - t0, "l2": getattr(clf.adaptation_, "l2", None)}
    t0 = time.perf_counter()
    scores = score_with_checkpoint(clf, texts, out_dir / f"scores_{split}.npz")
    score_s = time.perf_counter() - t0

    raw = cal_proba = clf.scores_to_proba(scores)  # uncalibrated: the label-free prior only (Classifier(prior=...))
    metrics = {
        "dataset": dataset, "split": split, "options": options, "model": clf.model or "smollm2-135m-instruct",
        "method": clf.method_, "n": len(texts), "n_labels": len(labels),
        "sample": {"limit": limit, "seed": seed, "indices": list(map(int, test.indices))} if limit else None,
        "setup_seconds": setup_s, "scoring_seconds": score_s, "texts_per_s": len(texts) / score_s,
        "prior": clf.prior_for(len(texts)),
        "fit": fitted,
    }
    pred_raw = raw.argmax(1)
    metrics["uncalibrated"] = _metric_block(cal, y, raw)
    metrics["validity"] = float(np.mean([labels[k] in pos for k in pred_raw]))
    if calib is not None:
        cscores = score_with_checkpoint(clf, list(calib.texts), out_dir / f"scores_{calibrate_on}.npz")
        cy = np.array([pos[v] for v in calib.labels])
        clf.calibrate(list(calib.texts), list(calib.labels), scores=cscores, bias=bias,
                      target_accuracy=target_accuracy, bias_l2=bias_l2)
        cal_proba = clf.calibration_.transform(scores)
        metrics["calibration"] = {"split": calibrate_on, "n": len(cy), "temperature": clf.temperature_,
                                  "bias": clf.calibration_.bias_method, "threshold": clf.threshold_}
        metrics["calibrated"] = _metric_block(cal, y, cal_proba)
        if clf.threshold_ is not None:
            keep = cal_proba.max(1) >= clf.threshold_
            metrics["abstention"] = {
                "target_accuracy": target_accuracy, "threshold": clf.threshold_,
                "coverage": float(keep.mean()),
                "selective_accuracy": float((cal_proba.argmax(1)[keep] == y[keep]).mean()) if keep.any() else None,
            }
        clf.save(out_dir / "classifier")
    final = cal_proba
    pred = final.argmax(1)
    metrics["accuracy"] = float((pred == y).mean())
    metrics["macro_f1"] = float(f1_score(y, pred, average="macro", labels=np.arange(len(labels)), zero_division=0))

    gen = None
    if baseline == "generate":
        gen, metrics["baseline_generate"] = _generate_baseline(clf, texts, y_lab, labels, batch_size)

    import pandas as pd

    frame = pd.DataFrame({"text": texts, "label": y_lab, "prediction": [labels[k] for k in pred],
                          "confidence": final.max(1), "prediction_uncalibrated": [labels[k] for k in pred_raw]})
    if clf.threshold_ is not None:
        frame["abstained"] = final.max(1) < clf.threshold_
    if gen is not None:
        frame["generated"] = gen
    frame.to_csv(out_dir / "predictions.csv", index=False)
    _plots(cal, y, raw, final, out_dir, metrics)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics
