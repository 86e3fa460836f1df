"""Decision calibration: a temperature per question type, a yes/no bias, per-level score biases.

`DecisionCalibration` is the fitted, frozen profile (saved as JSON, loaded by
``Decider(calibration=PATH)``). Calibrated probabilities are
``softmax((log_p - b) / T)`` of a question's exact option log-probabilities — the package's one
bias convention, the same as `judge.calibration.state.Calibration`'s (a bias is subtracted from
the log-probabilities, then the temperature divides) — fitted by maximum likelihood with the
package's one pair of fitters (`judge.calibration`):

- choice: one temperature (`judge.calibration.TemperatureScaler`; questions with
  different option counts are fitted together, the shorter rows padded with ``-inf``);
  no bias, since option names change from question to question;
- yes/no: a temperature and a log-odds bias toward yes
  (`judge.calibration.fit_bias_temperature`);
- score: one temperature for all, and, for each number of levels seen often enough, a
  per-level bias with its own temperature (`judge.calibration.fit_bias_temperature`).

`calibrate_decisions` takes labelled decisions (states, questions, labels as option
indices; ``judge calibrate-decisions`` reads them from JSON lines with
`judge.server.wire.read_labelled`), scores them with a `Decider` (its prompt styles and
bias correction, no profile) and fits a profile that goes on top of them.

What it deliberately does not do: score (the `Decider` does), implement an optimiser
(`judge.calibration` does), or read files and the wire form (`judge.server.wire` does).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from judge._math import softmax
from judge.decisions.prompts import PROMPT_VERSION
from judge.decisions.questions import (
    Answer,
    Choice,
    DecisionError,
    Question,
    YesNo,
    choice_confidence,
    score_confidence,
)

__all__ = ["DecisionCalibration", "calibrate_decisions", "labelled_rows"]

_TYPES = ("choice", "noul", "score")


@dataclass(frozen=True)
class DecisionCalibration:
    """Fitted decision calibration: a temperature per question type and optional biases.

    Calibrated probabilities are ``softmax((log_p - bias) / T)`` (the convention of
    `judge.calibration.state.Calibration`), where ``log_p`` are the options' exact
    log-probabilities. ``T`` is ``temperature[type]``, or for a score question of ``n``
    levels ``score_temperature[str(n)]`` when that is set; ``bias`` is
    ``[-noul_bias / 2, noul_bias / 2]`` for yes/no questions (``noul_bias`` is a shift of the
    yes-minus-no log-odds toward yes, before the temperature), ``score_bias[str(n)]`` for score
    questions of ``n`` levels, and zero otherwise. Profiles written before version 3 stored
    their biases after the temperature (``softmax(log_p / T + b)``); `load` converts them
    (``b_now = -T b_then``), so they give the same probabilities.

    Parameters
    ----------
    temperature : dict of str to float
        Keys among ``"choice"``, ``"noul"``, ``"score"``; missing types use 1.
    noul_bias : float
    score_bias : dict of str to list of float
        ``{"3": [b0, b1, b2], ...}`` keyed by the number of levels.
    meta : dict
        Counts and NLL before/after, model and prompt version (informational).
    score_temperature : dict of str to float
        The temperature fitted together with ``score_bias[n]``, keyed like it.
        Profiles written before it existed have none (then ``temperature["score"]``
        applies).

    Examples
    --------
    >>> cal = DecisionCalibration({"noul": 2.0}, noul_bias=0.0)
    >>> cal.apply("noul", np.log([0.9, 0.1])).round(3)
    array([0.75, 0.25])
    >>> DecisionCalibration({"noul": 1.0}, noul_bias=np.log(9)).apply("noul", np.log([0.5, 0.5])).round(3)
    array([0.9, 0.1])
    """

    temperature: dict = field(default_factory=dict)
    noul_bias: float = 0.0
    score_bias: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    score_temperature: dict = field(default_factory=dict)

    FORMAT = "trie-judge/decision-calibration"

    @classmethod
    def from_log_probs(cls, log_probs: Mapping[str, Sequence[tuple[Any, int]]], *, bias: bool = True,
                       min_per_level_set: int = 20, l2: float = 1.0, meta: Mapping | None = None
                       ) -> DecisionCalibration:
        """Fit a profile on labelled option log-probabilities.

        Parameters
        ----------
        log_probs : mapping of str to sequence of (array of shape (K,), int)
            Per question type (``"choice"``, ``"noul"``, ``"score"``): each question's
            option log-probabilities in its own option order and the index of the
            right option. ``K`` may differ between choice questions.
        bias : bool
            Also fit the yes/no bias and, for every number of score levels seen at
            least ``min_per_level_set`` times, a per-level bias.
        min_per_level_set : int
        l2 : float
            Penalty on ``bias / T`` for the bias fits (see
            `judge.calibration.fit_bias_temperature`); it keeps a fit on few rows sane.
        meta : mapping, optional
            Extra informational fields (e.g. the model name).

        Returns
        -------
        DecisionCalibration
            ``meta`` holds ``n`` (rows per type), ``nll_<type>`` (mean NLL before and
            after) and the prompt version.

        Examples
        --------
        Scores that are too sharp by a factor 2.5:

        >>> rng = np.random.default_rng(0)
        >>> rows = []
        >>> for _ in range(2000):
        ...     z = rng.normal(0, 3, size=3)
        ...     rows.append((z, int(rng.choice(3, p=np.exp(z / 2.5) / np.exp(z / 2.5).sum()))))
        >>> cal = DecisionCalibration.from_log_probs({"choice": rows})
        >>> bool(2.2 < cal.temperature["choice"] < 2.8), cal.meta["n"]
        (True, {'choice': 2000})
        """
        from judge.calibration import TemperatureScaler, fit_bias_temperature

        unknown = sorted(set(log_probs) - set(_TYPES))
        if unknown:
            raise DecisionError(f"log_probs has unknown question types {unknown}; use keys among {list(_TYPES)}.")
        temperature: dict = {}
        score_bias: dict = {}
        score_temperature: dict = {}
        noul_bias = 0.0
        rows: dict = {}
        for qtype in _TYPES:
            items = [(np.asarray(z, dtype=np.float64), int(y)) for z, y in log_probs.get(qtype, ())]
            if not items:
                continue
            rows[qtype] = items
            y = np.array([y for _, y in items])
            if qtype == "noul" and bias:
                b, t = fit_bias_temperature(np.stack([z for z, _ in items]), y, l2=l2)
                noul_bias = float(b[1] - b[0])
            else:
                t = TemperatureScaler().fit(_padded([z for z, _ in items]), y).temperature_
            temperature[qtype] = float(t)
            if qtype == "score" and bias:
                for n in sorted({len(z) for z, _ in items}):
                    sub = [(z, yy) for z, yy in items if len(z) == n]
                    if len(sub) >= min_per_level_set:
                        b, tn = fit_bias_temperature(np.stack([z for z, _ in sub]), np.array([yy for _, yy in sub]),
                                                     l2=l2)
                        score_bias[str(n)] = [float(x) for x in b]
                        score_temperature[str(n)] = float(tn)
        fitted = cls(temperature, float(noul_bias), score_bias, {}, score_temperature)
        info: dict = {"prompt_version": PROMPT_VERSION, "n": {k: len(v) for k, v in rows.items()}}
        for qtype, items in rows.items():
            info[f"nll_{qtype}"] = {"before": _mean_nll(items, softmax),
                                    "after": _mean_nll(items, lambda z, q=qtype: fitted.apply(q, z))}
        info.update(meta or {})
        return cls(temperature, float(noul_bias), score_bias, info, score_temperature)

    def apply(self, qtype: str, log_p: np.ndarray) -> np.ndarray:
        """Calibrated probabilities of one question.

        Parameters
        ----------
        qtype : {"choice", "noul", "score"}
        log_p : ndarray of shape (K,)
            The options' log-probabilities, in the question's own option order.

        Returns
        -------
        ndarray of shape (K,)
            Sums to 1.

        Examples
        --------
        >>> cal = DecisionCalibration({"score": 2.0}, score_bias={"2": [-1.0, 1.0]})
        >>> cal.apply("score", np.log([0.5, 0.5])).round(3)
        array([0.731, 0.269])
        """
        z = np.asarray(log_p, dtype=np.float64)
        key = str(len(z))
        if qtype == "noul":
            z = z - np.array([-self.noul_bias / 2, self.noul_bias / 2])
        elif qtype == "score" and key in self.score_bias:
            z = z - np.asarray(self.score_bias[key], dtype=np.float64)
        return softmax(z / float(self._temperature(qtype, key)))

    def _temperature(self, qtype: str, key: str) -> float:
        if qtype == "score" and key in self.score_temperature:
            return self.score_temperature[key]
        return self.temperature.get(qtype, 1.0)

    def to_dict(self) -> dict:
        """The profile as a JSON-ready dict (what `save` writes).

        Examples
        --------
        >>> DecisionCalibration({"noul": 1.5}).to_dict()["temperature"]
        {'noul': 1.5}
        """
        return {"format": self.FORMAT, "version": 3, "bias": "subtracted before the temperature",
                "temperature": dict(self.temperature),
                "noul_bias": float(self.noul_bias), "score_bias": dict(self.score_bias),
                "score_temperature": dict(self.score_temperature), "meta": dict(self.meta)}

    def save(self, path) -> Path:
        """Write the profile as JSON; returns the path.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> path = DecisionCalibration({"noul": 1.5}).save(pathlib.Path(tempfile.mkdtemp()) / "p.json")
        >>> DecisionCalibration.load(path).temperature
        {'noul': 1.5}
        """
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path) -> DecisionCalibration:
        """Read a profile written by `save` (any version so far; biases of versions 1-2 converted, see the class).

        Raises
        ------
        DecisionError
            The file is missing, not JSON, not a profile, or has a temperature that is
            not a positive number.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> old = pathlib.Path(tempfile.mkdtemp()) / "v1.json"   # written before score_temperature
        >>> _ = old.write_text('{"format": "trie-judge/decision-calibration", "version": 1, '
        ...                    '"temperature": {"score": 2.0}, "noul_bias": 0.3, "score_bias": {"2": [0.1, -0.1]}}')
        >>> cal = DecisionCalibration.load(old)
        >>> cal.noul_bias, cal.score_bias, cal.score_temperature   # in today's convention: -T b
        (0.3, {'2': [-0.2, 0.2]}, {})
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise DecisionError(f"Cannot read the calibration profile {str(path)!r}: {e}; write one with "
                                f"`judge calibrate-decisions FILE --out PROFILE`.") from None
        if not isinstance(data, dict) or data.get("format") != cls.FORMAT:
            raise DecisionError(f"{str(path)!r} is not a decision calibration profile (format "
                                f"{data.get('format') if isinstance(data, dict) else None!r}, expected {cls.FORMAT!r}).")
        temps = {k: float(v) for k, v in data.get("temperature", {}).items()}
        score_temps = {k: float(v) for k, v in (data.get("score_temperature") or {}).items()}
        bad = {k: v for k, v in {**temps, **score_temps}.items() if not (math.isfinite(v) and v > 0)}
        if bad:
            raise DecisionError(f"Calibration profile {str(path)!r} has non-positive temperatures {bad}; "
                                f"refit it with `judge calibrate-decisions`.")
        noul_bias, score_bias = float(data.get("noul_bias", 0.0)), dict(data.get("score_bias", {}))
        if int(data.get("version", 1)) < 3:  # biases were added after the temperature: b_now = -T b_then
            noul_bias *= temps.get("noul", 1.0)
            score_bias = {k: [-score_temps.get(k, temps.get("score", 1.0)) * float(x) for x in v]
                          for k, v in score_bias.items()}
        return cls(temps, noul_bias, score_bias, dict(data.get("meta", {})), score_temps)


def _padded(rows: list[np.ndarray]) -> np.ndarray:
    """Ragged rows as one (n, K_max) array, padded with -inf (an option that does not exist)."""
    out = np.full((len(rows), max(len(z) for z in rows)), -np.inf)
    for i, z in enumerate(rows):
        out[i, : len(z)] = z
    return out


def _mean_nll(items, proba) -> float:
    return float(np.mean([-math.log(max(float(proba(z)[y]), 1e-300)) for z, y in items]))


def labelled_rows(labelled, caller: str) -> list:
    """``labelled`` as a list of (state, questions, labels) rows; a path is refused, naming the reader to use.

    Examples
    --------
    >>> labelled_rows([("s", {}, {})], "fit")
    [('s', {}, {})]
    >>> labelled_rows("labelled.jsonl", "fit")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: fit takes labelled rows...
    """
    import os

    if isinstance(labelled, (str, bytes, os.PathLike)):
        raise TypeError(f"{caller} takes labelled rows (state, questions, labels), not the path {labelled!r}: read "
                        f"a JSON-lines file with judge.server.wire.read_labelled (the [serve] extra), or run "
                        f"`judge calibrate-decisions` / `judge fit-decisions` on it.")
    return list(labelled)


def calibrate_decisions(labelled, decider, *, bias: bool = True, min_per_level_set: int = 20,
                        batch: int = 8) -> DecisionCalibration:
    """Fit a `DecisionCalibration` from labelled decisions.

    Parameters
    ----------
    labelled : sequence of (state, dict of str to Question, dict of str to int)
        Per state, its labelled questions and each one's label as an option index (the
        question's own option order). ``judge calibrate-decisions`` reads them from JSON
        lines (questions in the ``/v1/systemone`` form) with `judge.server.wire.read_labelled`.
    decider : Decider
        Its model scores the questions, with its prompt styles and its bias
        correction (the profile goes on top of them); its own profile is not used.
        With ``bias="running"`` the states are first counted into its running priors
        (`Decider.observe`: a second scoring pass), so the profile is fitted on the
        prior that traffic like this converges to.
    bias : bool
        Also fit a yes/no bias and, for every number of score levels seen at
        least ``min_per_level_set`` times, a per-level bias.
    min_per_level_set : int
    batch : int
        Lines scored per scoring call.

    Returns
    -------
    DecisionCalibration

    Raises
    ------
    DecisionError
        No labelled question at all.
    TypeError
        A path instead of rows (read it with `judge.server.wire.read_labelled`).

    Examples
    --------
    >>> from judge.decisions import Decider, YesNo
    >>> from judge.testing import tiny_pair
    >>> rows = [(f"ticket {i}", {"q": YesNo("Refund?")}, {"q": i % 2}) for i in range(6)]
    >>> cal = calibrate_decisions(rows, Decider(*tiny_pair()))
    >>> cal.meta["n"], cal.temperature["noul"] > 0
    ({'noul': 6}, True)
    """
    rows = labelled_rows(labelled, "calibrate_decisions")
    if not rows:
        raise DecisionError("calibrate_decisions got no labelled questions.")
    by_type: dict[str, list[tuple[np.ndarray, int]]] = {t: [] for t in _TYPES}
    if decider.bias == "running":  # fit on the prior these states converge to, as a server's traffic would
        for s in range(0, len(rows), batch):
            decider.observe([(st, qs) for st, qs, _ in rows[s:s + batch]])
    for s in range(0, len(rows), batch):
        part = rows[s:s + batch]
        raw = decider.log_probs([(st, qs) for st, qs, _ in part])
        for (_, qs, labels), lps in zip(part, raw):
            for qid, q in qs.items():
                lp = lps[qid]
                by_type[q.type].append((lp - np.logaddexp.reduce(lp), labels[qid]))
    return DecisionCalibration.from_log_probs(by_type, bias=bias, min_per_level_set=min_per_level_set,
                                              meta={"model": decider.model_name, "bias": decider.bias})


def prior_in_question_order(plan, prior):
    """A shape's prior (canonical option order) in the order of ``plan``'s question; None stays None."""
    return None if prior is None else plan.from_canonical(prior)


def option_scores(s: np.ndarray, prior: np.ndarray | None, plan) -> np.ndarray:
    """Each option's log-probability (its scored strings summed), minus the label-free prior: (K,), question order.

    Examples
    --------
    >>> from judge.decisions.prompts import PromptStyle, plan_question
    >>> plan = plan_question(None, "x", Choice(["a", "b"]), PromptStyle())
    >>> option_scores(np.log([0.5, 0.25]), np.log([0.5, 0.5]), plan).round(3).tolist()
    [0.0, -0.693]
    """
    z = plan.per_option(s)
    return z - prior if prior is not None else z


def make_answer(q: Question, s: np.ndarray, prior: np.ndarray | None, plan, source: str | None,
                cal: DecisionCalibration | None, fitted: np.ndarray | None = None) -> Answer:
    """The `Answer` to ``q`` from its scored strings' log-probabilities ``s``: summed per option, the
    label-free ``prior`` divided out, then ``cal``'s profile (or a softmax), with the contract's confidence.
    ``fitted``: log-probabilities (question order) from a fitted profile's head, used instead (no ``cal``)."""
    mass = float(np.exp(np.logaddexp.reduce(s)))
    z = option_scores(s, prior, plan)
    if fitted is not None:
        p, cal = np.exp(np.asarray(fitted, np.float64)), None
    else:
        p = cal.apply(q.type, z) if cal is not None else softmax(z)
    p = np.clip(p, 0.0, 1.0)
    p = p / p.sum()
    common = dict(option_mass=mass, calibrated=cal is not None, fitted=fitted is not None,
                  bias=source if prior is not None else None,
                  scored=plan.scored, path="listed" if plan.listed else "unlisted")
    if isinstance(q, YesNo):
        spell = {"true": [t for t, i in zip(plan.surfaces, plan.order) if i == 0],
                 "false": [t for t, i in zip(plan.surfaces, plan.order) if i == 1]}
        return Answer("noul", {"true": float(p[0]), "false": float(p[1])}, noul=float(p[0]), spellings=spell,
                      **common)
    if isinstance(q, Choice):
        names = q.names
        return Answer("choice", {n: float(v) for n, v in zip(names, p)}, choice=names[int(np.argmax(p))],
                      confidence=choice_confidence(p), **common)
    n = q.n_levels
    score = float(np.dot(np.arange(n), p))
    return Answer("score", {str(i): float(v) for i, v in enumerate(p)}, score=min(max(score, 0.0), n - 1.0),
                  legend={str(i): d for i, d in enumerate(q.levels)}, confidence=score_confidence(p), **common)
