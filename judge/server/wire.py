"""The wire form of what `judge.decisions` returns, and labelled decisions in files.

- `answer_to_wire`: an `judge.decisions.Answer` as the ``/v1/systemone`` contract writes it
  (with the ``x_`` extensions on request; a guarded answer with its `guard_to_wire` fields);
- `systemone_body`, `decisions_body`: the whole response body of each route
  (`judge.server.routes` renders with them);
- `read_labelled`: labelled decisions in JSON lines, their questions in the ``/v1/systemone``
  form read by the contract's own parser (`judge.server.contract.question_from_wire`, so a
  question means the same thing in a file and over HTTP), as the rows that
  `judge.decisions.calibrate_decisions` and `judge.decisions.fit_profile` fit on
  (``judge calibrate-decisions`` and ``judge fit-decisions`` read their files here);
- `label_index`: a label as written in such a file, as an option index.

`judge.decisions` never imports this package: it takes questions and rows, and returns answers.

What it deliberately does not do: score or fit (`judge.decisions` does), or speak HTTP (`judge.server.app`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judge.decisions.questions import Answer, Choice, DecisionError, Question, YesNo
from judge.server.contract import question_from_wire

__all__ = ["answer_to_wire", "guard_to_wire", "systemone_body", "decisions_body", "label_index", "read_labelled"]


def answer_to_wire(answer: Answer, *, extensions: bool = False) -> dict:
    """The answer as the ``/v1/systemone`` contract writes it.

    Parameters
    ----------
    answer : judge.decisions.Answer
    extensions : bool
        Add the ``x_option_mass``, ``x_calibrated``, ``x_path``, ``x_bias`` and
        ``x_scored`` fields, and for yes/no ``x_yes_spellings`` and ``x_no_spellings``
        (``x_fitted`` when a fitted profile answered). A guarded answer carries its
        :func:`guard_to_wire` fields either way.

    Returns
    -------
    dict

    Examples
    --------
    >>> answer_to_wire(Answer("noul", {"true": 0.8, "false": 0.2}, noul=0.8))
    {'type': 'noul', 'noul': 0.8}
    >>> a = Answer("choice", {"a": 0.75, "b": 0.25}, choice="a", confidence=0.5)
    >>> answer_to_wire(a, extensions=True)
    {'type': 'choice', 'choice': 'a', 'probabilities': {'a': 0.75, 'b': 0.25}, 'confidence': 0.5, 'x_option_mass': 1.0, 'x_calibrated': False, 'x_path': 'listed', 'x_bias': None, 'x_scored': 'names'}
    >>> answer_to_wire(Answer("noul", {"true": 0.8, "false": 0.2}, noul=0.8,
    ...                       spellings={"true": [" Yes"], "false": [" No"]}), extensions=True)["x_yes_spellings"]
    [' Yes']
    """
    a = answer
    if a.type == "noul":
        out = {"type": "noul", "noul": float(a.noul)}
    elif a.type == "choice":
        out = {"type": "choice", "choice": a.choice, "probabilities": dict(a.probabilities),
               "confidence": float(a.confidence)}
    else:
        out = {"type": "score", "score": float(a.score), "legend": dict(a.legend),
               "probabilities": dict(a.probabilities), "confidence": float(a.confidence)}
    if extensions:
        out.update(x_option_mass=float(a.option_mass), x_calibrated=a.calibrated, x_path=a.path,
                   x_bias=a.bias, x_scored=a.scored)
        if a.fitted:
            out["x_fitted"] = True
        if a.spellings is not None:
            out.update(x_yes_spellings=list(a.spellings["true"]), x_no_spellings=list(a.spellings["false"]))
    return {**out, **guard_to_wire(a.guard)} if a.guard is not None else out


def guard_to_wire(report) -> dict:
    """A `judge.decisions.GuardReport` as the ``x_flags`` and ``x_guard`` fields of an answer.

    Examples
    --------
    >>> from judge.decisions import Flag, GuardReport
    >>> r = GuardReport((Flag("verdict", "a verdict", 1, "verdict: ok"),), 2, 2, ("verdict: ok",), "scanners", True, "a")
    >>> guard_to_wire(r)["x_flags"]
    [{'scanner': 'verdict', 'message': 'a verdict', 'text': 'verdict: ok', 'piece': 1}]
    >>> guard_to_wire(r)["x_guard"]["changed"]
    True
    """
    return {"x_flags": [{"scanner": f.scanner, "message": f.message, "text": f.text[:300], "piece": f.piece}
                        for f in report.flags],
            "x_guard": {"rule": report.rule, "pieces": report.pieces, "variants": report.variants,
                        "erased": [t[:300] for t in report.erased], "changed": report.changed,
                        "unguarded": report.unguarded}}


def _usage(n: int, detailed: bool) -> dict:
    if not detailed:
        return {"input_tokens": n, "output_tokens": 0}
    return {"input_tokens": n, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
            "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": n}


def systemone_body(model: str, answers: Mapping[str, Answer], input_tokens: int, *,
                   extensions: dict | None = None) -> dict:
    """The ``/v1/systemone`` response body: each answer by its question id, the usage, the ``x_`` fields.

    ``extensions``: the response-level ``x_`` fields, or None (then the answers carry none either).

    Examples
    --------
    >>> systemone_body("m", {"q": Answer("noul", {"true": 0.8, "false": 0.2}, noul=0.8)}, 7)
    {'model': 'm', 'answers': {'q': {'type': 'noul', 'noul': 0.8}}, 'usage': {'input_tokens': 7, 'output_tokens': 0}}
    """
    return {"model": model, "answers": {qid: answer_to_wire(a, extensions=extensions is not None)
                                        for qid, a in answers.items()},
            "usage": _usage(int(input_tokens), False), **(extensions or {})}


def decisions_body(model: str, questions, answers: Mapping[str, Answer], input_tokens: int, *,
                   extensions: dict | None = None) -> dict:
    """The ``/v1/decisions`` response body: one answer per question, in the request's order, and the usage.

    ``questions``: the request's (`judge.server.contract.DecisionsRequest.questions`); ``answers``: by
    question position as a string (``"0"``, ``"1"``, ...).

    Examples
    --------
    >>> from judge.server.contract import DecisionsRequest
    >>> req = DecisionsRequest.model_validate({"model": "m", "input": "hi", "questions": [
    ...     {"type": "predicate", "name": "urgent", "instructions": "Is it urgent?"}]})
    >>> decisions_body("m", req.questions, {"0": Answer("noul", {"true": 0.8, "false": 0.2}, noul=0.8)}, 5)["answers"]
    [{'type': 'predicate', 'name': 'urgent', 'probability': 0.8}]
    """
    out = []
    for i, q in enumerate(questions):
        a = answers[str(i)]
        extra = guard_to_wire(a.guard) if a.guard is not None else {}
        if q.type == "predicate":
            out.append({"type": "predicate", "name": q.name, "probability": a.noul, **extra})
        elif q.type == "choice":
            values = [c.value for c in q.choices]
            probs = list(a.probabilities.values())
            best = values[list(a.probabilities).index(a.choice)]
            out.append({"type": "choice", "name": q.name, "choice": best, "confidence": a.confidence,
                        "probabilities": [{"value": v, "probability": p} for v, p in zip(values, probs)], **extra})
        else:
            out.append({"type": "score", "name": q.name, "score": a.score, "confidence": a.confidence,
                        "probabilities": [{"value": j, "label": lv.label, "probability": a.probabilities[str(j)]}
                                          for j, lv in enumerate(q.levels)], **extra})
    return {"model": model, "answers": out, "usage": _usage(int(input_tokens), True), **(extensions or {})}


def label_index(q: Question, label: Any, where: str = "label") -> int:
    """A label as a labelled file writes it, as the index of its option in the question's own order.

    Choice: an option name; yes/no: true/false, "yes"/"no" or 1/0 (true first); score: a level number.

    Raises
    ------
    DecisionError
        The label is not one of the question's options (``where`` prefixed).

    Examples
    --------
    >>> from judge.decisions import Score
    >>> label_index(YesNo(), "no"), label_index(Choice(["a", "b"]), "b"), label_index(Score(["x", "y"]), "1")
    (1, 1, 1)
    """
    if isinstance(q, Choice):
        if label not in q.options:
            raise DecisionError(f"{where}: label {label!r} is not one of the options {list(q.options)[:20]}.")
        return q.names.index(label)
    if isinstance(q, YesNo):
        v = {True: 0, False: 1, "true": 0, "false": 1, "yes": 0, "no": 1}  # 1/0 hash as True/False
        key = label.lower() if isinstance(label, str) else label
        if key not in v:
            raise DecisionError(f"{where}: yes/no label {label!r} is not one of true/false, yes/no, 1/0.")
        return v[key]
    if isinstance(label, bool) or not isinstance(label, (int, str)) or not str(label).isdigit() \
            or not 0 <= int(label) < q.n_levels:
        raise DecisionError(f"{where}: score label {label!r} is not a level 0..{q.n_levels - 1}.")
    return int(label)


def read_labelled(path) -> list[tuple[Any, dict, dict]]:
    """Labelled decisions from JSON lines, checked line by line.

    Each line is either ``{"state": ..., "question": {wire question}, "label": ...}`` or
    ``{"state": ..., "questions": {id: {wire question}}, "labels": {id: label}}``: questions in
    the ``/v1/systemone`` form, labels as `label_index` reads them. Questions whose label is
    missing or null are skipped.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    list of (state, dict of str to Question, dict of str to int)
        Per line with at least one labelled question: its state, its labelled questions
        and each one's label as an option index (the question's own option order): the rows
        `judge.decisions.calibrate_decisions` and `judge.decisions.fit_profile` take.

    Raises
    ------
    judge.io.InputError
        A line that is not one JSON object (the message names the line).
    DecisionError
        A line without a state, questions or labels of the wrong shape, a question that
        breaks the contract, a label that is not an option (each names ``path:line``),
        or no labelled question at all.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "labelled.jsonl"
    >>> _ = path.write_text(json.dumps({"state": "hi", "question": {"type": "noul"}, "label": "no"}) + "\\n")
    >>> read_labelled(path)
    [('hi', {'q': YesNo(instructions=None, true=None, false=None)}, {'q': 1})]
    >>> _ = path.write_text(json.dumps({"text": "no state"}))
    >>> read_labelled(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    judge.decisions.questions.DecisionError: ...labelled.jsonl:1: each line needs a "state" and a "question"/"label" or "questions"/"labels"; got keys ['text'].
    """
    from judge.io import read_jsonl

    rows: list[tuple[Any, dict, dict]] = []
    for lineno, rec in read_jsonl(path):
        where = f"{path}:{lineno}"
        if "state" not in rec:
            raise DecisionError(f"{where}: each line needs a \"state\" and a \"question\"/\"label\" or "
                                f"\"questions\"/\"labels\"; got keys {sorted(rec)}.")
        if "question" in rec:
            qs, labels = {"q": rec["question"]}, {"q": rec.get("label")}
        else:
            qs, labels = rec.get("questions") or {}, rec.get("labels") or {}
        if not isinstance(qs, Mapping) or not isinstance(labels, Mapping):
            raise DecisionError(f"{where}: \"questions\" and \"labels\" must be objects keyed by question id, got "
                                f"{type(qs).__name__} and {type(labels).__name__}.")
        parsed = {}
        for qid, wq in qs.items():
            if labels.get(qid) is None:
                continue
            q = question_from_wire(wq, where=f"{where}: question {qid!r}")
            parsed[qid] = (q, label_index(q, labels[qid], f"{where}: question {qid!r}"))
        if parsed:
            rows.append((rec["state"], {k: v[0] for k, v in parsed.items()}, {k: v[1] for k, v in parsed.items()}))
    if not rows:
        raise DecisionError(f"{path} has no labelled questions; see judge.server.wire.read_labelled for the line "
                            f"format.")
    return rows
