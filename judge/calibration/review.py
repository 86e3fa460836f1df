"""What a calibration can claim from the texts it was fitted on, and what it says when it cannot.

``Classifier.calibrate`` fits a bias, a temperature and a threshold on a few labelled texts; on
few texts those fits mislead without a word (a threshold that abstains on every text, a
temperature of 0.02 from texts the scores separate perfectly, an accuracy measured on the very
texts it was fitted on). This module holds the checks and the words:

- :func:`min_texts_for_target`: below this many texts no threshold can certify a target accuracy
  (``calibrate`` refuses, before anything is scored);
- :func:`review_calibration`: the warnings a fitted calibration carries (too few texts for its
  labels, a temperature outside :data:`TEMPERATURE_RANGE`, a threshold that abstains on every text),
  each with what to do; ``calibrate`` emits them and keeps them in the report;
- :func:`cross_fitted`: the report's figures measured on texts each fold's calibration never saw;
- :func:`abstention_reason` and :func:`prediction_records`: every answer as a record that says
  why it was abstained on (the CLI's JSON lines, the server's ``/v1/classify``, Python's
  ``Classifier.predict_records``);
- :func:`describe_calibration`: the one-line repr of a fitted :class:`~judge.calibration.state.Calibration`.

What it deliberately does not do: fit anything itself (:mod:`judge.calibration.state` does; the
cross-fitting takes the fitting function) or score texts.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MIN_CALIBRATION_TEXTS", "MIN_TEXTS_PER_LABEL", "TEMPERATURE_RANGE", "CROSS_FIT_MAX",
           "min_texts_for_target", "check_target_size", "review_calibration", "threshold_words", "cross_fitted",
           "abstention_reason",
           "prediction_records", "describe_calibration"]

#: Below ``max(MIN_CALIBRATION_TEXTS, MIN_TEXTS_PER_LABEL * K)`` labelled texts ``calibrate`` warns: the
#: fitted temperature and bias then vary a lot from one draw of texts to the next.
MIN_CALIBRATION_TEXTS = 20
MIN_TEXTS_PER_LABEL = 2
#: A fitted temperature outside this range is flagged: below, the scores separate the calibration texts
#: (almost) perfectly and the probabilities become 0 or 1; above, the scores carry almost nothing about
#: the labels on them. (The benchmarks' fitted temperatures lie between 0.93 and 7.8.)
TEMPERATURE_RANGE = (0.1, 100.0)
#: The report's cross-fitted figures are computed up to this many calibration texts (above it the
#: in-sample figures are close to them and the refits cost more).
CROSS_FIT_MAX = 5000


def min_texts_for_target(target_accuracy: float, confidence: float = 0.95) -> int:
    """The fewest labelled texts on which any threshold can certify ``target_accuracy``.

    Even when every answer is right, ``n`` answers only certify accuracy ``(1 - confidence) ** (1 / n)``
    (the one-sided Clopper-Pearson bound), so ``n`` must reach ``log(1 - confidence) / log(target)``.

    Parameters
    ----------
    target_accuracy, confidence : float in (0, 1)

    Returns
    -------
    int

    Examples
    --------
    >>> min_texts_for_target(0.9), min_texts_for_target(0.7), min_texts_for_target(0.9, confidence=0.8)
    (29, 9, 16)
    """
    return int(math.ceil(math.log(1.0 - confidence) / math.log(target_accuracy) - 1e-9))


def check_target_size(n: int, n_labels: int, target_accuracy, confidence) -> None:
    """Raise a ValueError when ``n`` texts are too few to certify ``target_accuracy`` at all.

    Examples
    --------
    >>> check_target_size(40, 5, 0.9, 0.95)
    >>> check_target_size(10, 5, 0.9, 0.95)
    Traceback (most recent call last):
    ...
    ValueError: calibrate(target_accuracy=0.9) needs at least 29 labelled texts at confidence=0.95: even if all 10 were answered right, they would certify an accuracy of only 0.741 (Clopper-Pearson lower bound), so the threshold would abstain on every text. Pass at least 29 texts (at least a few per label: 5 labels), lower target_accuracy or confidence, or pass coverage=... to keep a fraction of the answers instead.
    """
    if target_accuracy is None:
        return
    need = min_texts_for_target(float(target_accuracy), float(confidence))
    if n < need:
        best = (1.0 - confidence) ** (1.0 / n)
        raise ValueError(
            f"calibrate(target_accuracy={target_accuracy:g}) needs at least {need} labelled texts at "
            f"confidence={confidence:g}: even if all {n} were answered right, they would certify an accuracy of only "
            f"{best:.3f} (Clopper-Pearson lower bound), so the threshold would abstain on every text. Pass at least "
            f"{need} texts (at least a few per label: {n_labels} labels), lower target_accuracy or confidence, or "
            f"pass coverage=... to keep a fraction of the answers instead.")


def review_calibration(report: dict, y, n_labels: int) -> list[str]:
    """The warnings a fitted calibration carries, each saying what is wrong and what to do.

    Parameters
    ----------
    report : dict
        :meth:`Calibration.fit`'s report (``n``, ``temperature``, ``threshold``, ``accuracy``, ...;
        ``cross_fitted`` when :func:`cross_fitted` added it).
    y : ndarray of int, shape (n,)
        The calibration texts' label indices.
    n_labels : int

    Returns
    -------
    list of str

    Examples
    --------
    >>> r = {"n": 10, "temperature": 0.0248, "threshold": None, "accuracy": 1.0}
    >>> [w.split(":")[0] for w in review_calibration(r, np.arange(10) % 5, 5)]
    ['too few calibration texts', 'temperature outside the sane range']
    """
    n = int(report["n"])
    out = []
    need = max(MIN_CALIBRATION_TEXTS, MIN_TEXTS_PER_LABEL * n_labels)
    if n < need:
        absent = n_labels - len(set(np.asarray(y).tolist()))
        cf = report.get("cross_fitted")
        seen = "" if not cf else (f"; on texts each fold's calibration never saw (cross-fitted) accuracy was "
                                  f"{cf['accuracy']:.3f} against {report['accuracy']:.3f} in-sample")
        out.append(f"too few calibration texts: {n} labelled texts for {n_labels} labels"
                   f"{f' ({absent} of them without any)' if absent else ''}, below max({MIN_CALIBRATION_TEXTS}, "
                   f"{MIN_TEXTS_PER_LABEL} per label) = {need}. The fitted temperature and bias vary a lot from one "
                   f"draw of texts to another, and the report's figures are measured on these same texts{seen}. "
                   f"Calibrate on at least {need} texts the classifier (and fit()) never saw.")
    T = report.get("temperature")
    lo, hi = TEMPERATURE_RANGE
    if T is not None and T < lo:
        out.append(f"temperature outside the sane range: the fitted temperature {T:.4g} is below {lo:g}: the scores "
                   f"separate these {n} texts (almost) perfectly ({report['accuracy']:.0%} right), so the "
                   f"probabilities become 0 or 1 and NLL near 0. Texts fit() learned from, or too few texts, do "
                   f"that; calibrate on more texts that neither fit() nor the prompt's choice saw.")
    elif T is not None and T > hi:
        out.append(f"temperature outside the sane range: the fitted temperature {T:.4g} is above {hi:g}: on these "
                   f"{n} texts the scores say almost nothing about the labels ({report['accuracy']:.0%} right), so "
                   f"every probability is flattened towards uniform. Check that y matches the texts, describe the "
                   f"labels, or fit() on labelled texts first.")
    th = report.get("threshold")
    if th is not None and th > 1.0:
        out.append(f"the threshold abstains on every text: {threshold_words(report)}; predict(abstain=True) will "
                   f"answer None for every text. Lower target_accuracy or confidence, calibrate on more texts, "
                   f"or use coverage=... to keep a fraction of the answers.")
    return out


def threshold_words(report: dict) -> str:
    """How the report's threshold was chosen, in words (for warnings and abstention reasons).

    Examples
    --------
    >>> threshold_words({"n": 40, "threshold": 0.61, "target_accuracy": 0.9, "confidence": 0.95})
    'threshold 0.610 certifies accuracy >= 0.9 at 95% confidence on 40 calibration texts'
    """
    n, th = report.get("n"), report.get("threshold")
    if report.get("target_accuracy") is not None:
        if th is not None and th > 1.0:
            return (f"no threshold certifies accuracy >= {report['target_accuracy']:g} at "
                    f"{report.get('confidence', 0.95):.0%} confidence on the {n} calibration texts")
        return (f"threshold {th:.3f} certifies accuracy >= {report['target_accuracy']:g} at "
                f"{report.get('confidence', 0.95):.0%} confidence on {n} calibration texts")
    if report.get("coverage_target") is not None:
        return f"threshold {th:.3f} keeps about {report['coverage_target']:.0%} of the {n} calibration texts"
    return f"threshold {th:.3f}"


def cross_fitted(fit, scores, y, *, folds: int = 5, seed: int = 0) -> dict | None:
    """Accuracy, NLL and ECE of a calibration on texts it was not fitted on (k-fold cross-fitting).

    Parameters
    ----------
    fit : callable ``(scores (m, K), y (m,)) -> Calibration``
        Fits the same calibration (same bias method, temperature) on a fold's training rows.
    scores : ndarray of shape (n, K)
    y : ndarray of int, shape (n,)
    folds : int
    seed : int

    Returns
    -------
    dict or None
        ``{"folds", "accuracy", "nll", "ece", "measured_on"}``; None below 4 texts or above :data:`CROSS_FIT_MAX`.

    Examples
    --------
    >>> from judge.calibration.state import Calibration
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 40)
    >>> s = np.log(np.full((40, 2), 0.5)) + 1.5 * np.eye(2)[y] + rng.normal(0, 1, (40, 2))
    >>> r = cross_fitted(lambda s_, y_: Calibration.fit(("a", "b"), s_, y_), s, y)
    >>> r["folds"], 0.5 < r["accuracy"] <= 1.0
    (5, True)
    """
    from sklearn.model_selection import KFold

    from judge.calibration.metrics import expected_calibration_error, negative_log_likelihood

    scores, y = np.asarray(scores, np.float64), np.asarray(y, np.int64)
    n = len(y)
    if n < 4 or n > CROSS_FIT_MAX:
        return None
    k = min(folds, n // 2)
    proba = np.zeros_like(scores)
    for tr, te in KFold(k, shuffle=True, random_state=seed).split(scores):
        proba[te] = fit(scores[tr], y[tr]).transform(scores[te])
    return {"folds": k, "accuracy": float((proba.argmax(1) == y).mean()),
            "nll": float(negative_log_likelihood(y, proba)), "ece": float(expected_calibration_error(y, proba)),
            "measured_on": f"each of the {n} calibration texts scored by a calibration fitted on the other "
                           f"{k - 1} folds ({k}-fold cross-fitting)"}


def abstention_reason(confidence: float, report: dict) -> str:
    """Why an answer of top probability ``confidence`` is abstained on, under the report's threshold.

    Examples
    --------
    >>> abstention_reason(0.42, {"n": 40, "threshold": 0.61, "target_accuracy": 0.9, "confidence": 0.95})
    'confidence 0.420 is below the threshold 0.610 (threshold 0.610 certifies accuracy >= 0.9 at 95% confidence on 40 calibration texts)'
    >>> abstention_reason(1.0, {"n": 10, "threshold": 1.0000000000000002, "target_accuracy": 0.9})
    'no answer is given: no threshold certifies accuracy >= 0.9 at 95% confidence on the 10 calibration texts'
    """
    th = report.get("threshold")
    if th is not None and th > 1.0:
        return f"no answer is given: {threshold_words(report)}"
    return f"confidence {confidence:.3f} is below the threshold {th:.3f} ({threshold_words(report)})"


def prediction_records(labels, proba, *, threshold=None, report=None, top_k=None) -> list[dict]:
    """One record per text: the label (None when abstained), its probability, the top labels, and why.

    Parameters
    ----------
    labels : sequence of str, length K
    proba : ndarray of shape (n, K)
    threshold : float, optional
        Abstain where the top probability is below it (None: answer every text).
    report : dict, optional
        The calibration report the threshold comes from (for the reason's words).
    top_k : int, optional
        The most probable labels written per record (None: all K, most probable first).

    Returns
    -------
    list of n dicts
        ``label`` (str or None), ``confidence`` (the top probability), ``probabilities``
        ({label: p}, most probable first), ``abstained`` (bool), ``abstain_reason`` (str, or None when answered).

    Examples
    --------
    >>> recs = prediction_records(["billing", "cards"], np.array([[0.9, 0.1], [0.55, 0.45]]), threshold=0.6,
    ...                           report={"n": 40, "threshold": 0.6, "coverage_target": 0.8})
    >>> [(r["label"], r["abstained"]) for r in recs]
    [('billing', False), (None, True)]
    >>> recs[1]["abstain_reason"]
    'confidence 0.550 is below the threshold 0.600 (threshold 0.600 keeps about 80% of the 40 calibration texts)'
    """
    proba = np.asarray(proba, np.float64)
    k = proba.shape[1] if top_k is None else min(int(top_k), proba.shape[1])
    out = []
    for row in proba:
        top = np.argsort(-row, kind="stable")[:k]
        best = int(np.argmax(row))
        conf = float(row[best])
        abstained = threshold is not None and conf < threshold
        out.append({"label": None if abstained else labels[best], "confidence": round(conf, 6),
                    "probabilities": {labels[j]: round(float(row[j]), 6) for j in top},
                    "abstained": bool(abstained),
                    "abstain_reason": abstention_reason(conf, dict(report or {}, threshold=threshold))
                    if abstained else None})
    return out


def describe_calibration(cal) -> str:
    """A fitted calibration in one line (its repr): labels, texts, bias, temperature, threshold, accuracy.

    Examples
    --------
    >>> from judge.calibration.state import Calibration
    >>> cal = Calibration(("a", "b"), np.zeros(2), 2.0, None, np.full((2, 2), 0.5), np.array([0, 1]))
    >>> describe_calibration(cal)
    'Calibration(K=2, n=2, bias=None, temperature=2, threshold=None)'
    """
    r = cal.report or {}
    parts = [f"K={len(cal.labels)}", f"n={len(cal.y)}", f"bias={cal.bias_method!r}",
             f"temperature={'None' if cal.temperature is None else format(cal.temperature, '.4g')}",
             f"threshold={'None' if cal.threshold is None else format(cal.threshold, '.4g')}"]
    if "accuracy" in r:
        parts.append(f"accuracy={r['accuracy']:.3f} (in-sample)")
    cf = r.get("cross_fitted")
    if cf:
        parts.append(f"cross-fitted accuracy={cf['accuracy']:.3f}")
    if r.get("warnings"):
        parts.append(f"warnings={len(r['warnings'])}")
    return f"Calibration({', '.join(parts)})"
