"""The three question types, their answers, and the contract's reference confidences.

A *decision* is a question about a piece of content (the **state**) whose answer is
one of a fixed set of options. Three types cover the System One wire contract
(TypeSafe's ``/v1/systemone``):

========== =============== ====================================================
Python     contract type   options the model may write
========== =============== ====================================================
`Choice`   ``choice``      what each option means (see `judge.decisions.prompts`)
`YesNo`    ``noul``        ``Yes`` / ``No`` (several spellings, summed)
`Score`    ``score``       the levels ``0`` .. ``n-1`` (low to high)
========== =============== ====================================================

Here: the frozen question dataclasses (validated when built, with errors that say what
was wrong and how to fix it), `render_value` (the one way a state, instructions or a
description becomes text), `Answer` (one question's probabilities; the server writes its
wire form, `judge.server.wire.answer_to_wire`) and the reference confidences:

- choice: ``(max p - 1/n) / (1 - 1/n)``
- score: ``max(0, 1 - sum_i p_i |i - mode| / D)`` with ``D = (1/n) sum_i |i - (n-1)/2|``
- yes/no: none (the probability of yes is the answer).

What it deliberately does not do: build prompts (`judge.decisions.prompts`), score
(`judge.decisions.decider`), calibrate (`judge.decisions.calibration`) or parse the
JSON wire form of a question (`judge.server.contract` owns that). It imports numpy only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "MAX_LISTED_OPTIONS",
    "MAX_OPTIONS",
    "MAX_SCORE_LEVELS",
    "Answer",
    "Choice",
    "DecisionError",
    "Question",
    "Score",
    "YesNo",
    "check_questions",
    "choice_confidence",
    "render_value",
    "score_confidence",
]

#: Above this many options a choice question's options are not listed in the prompt.
MAX_LISTED_OPTIONS = 1000
#: The largest choice question accepted (the decode path's stated limit).
MAX_OPTIONS = 100_000
#: The most levels a score question may have (the contract's limit).
MAX_SCORE_LEVELS = 10


class DecisionError(ValueError):
    """A question, a state or an answer label that cannot be used.

    Examples
    --------
    >>> from judge.decisions import Choice, DecisionError
    >>> try:
    ...     Choice(["only one"])
    ... except DecisionError as e:
    ...     print(str(e)[:38])
    A Choice needs at least 2 options, got
    """


# ----------------------------------------------------------------------------- rendering

def render_value(value: Any) -> str:
    """Text the model sees for a state, instructions or a description.

    A string is shown as is; a JSON object or array as canonical JSON (keys
    sorted, no insignificant whitespace, non-ASCII kept), so equal values
    always render to the same text.

    Parameters
    ----------
    value : str, dict, list, int, float, bool or None

    Returns
    -------
    str

    Raises
    ------
    DecisionError
        A value JSON cannot write (a NaN, an object of another type).

    Examples
    --------
    >>> render_value("Refund, please")
    'Refund, please'
    >>> render_value({"b": [1, 2], "a": "é"})
    '{"a":"é","b":[1,2]}'
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise DecisionError(f"Cannot render {type(value).__name__} value {value!r:.80} as text: {e}; "
                            f"pass a string or a JSON object/array of finite numbers.") from None


def _check_text(value: Any, what: str, *, optional: bool = True) -> Any:
    if value is None and optional:
        return None
    if not isinstance(value, (str, Mapping, list, tuple)):
        raise DecisionError(f"{what} must be a string, a JSON object or a JSON array, got "
                            f"{type(value).__name__} {value!r:.60}.")
    render_value(value)
    return value


# ----------------------------------------------------------------------------- question types

@dataclass(frozen=True)
class Choice:
    """Pick one of several named options (the contract's ``choice``).

    Parameters
    ----------
    options : mapping of str to description, or sequence of str
        Option names (what the answer's probabilities are keyed by, byte for
        byte) and optional descriptions (a string, a JSON object/array, or
        None). At least 2, at most 100,000 options; above
        `MAX_LISTED_OPTIONS` they are not listed in the prompt.
    instructions : str, dict or list, optional
        The question.

    Raises
    ------
    DecisionError
        Fewer than 2 options, a repeated or empty name, a description that is
        not text or JSON.

    Examples
    --------
    >>> q = Choice({"Billing": "Payments, refunds", "Technical": None}, instructions="Which team?")
    >>> q.type, q.names
    ('choice', ('Billing', 'Technical'))
    """

    options: Any
    instructions: Any = None

    def __post_init__(self):
        opts = self.options
        if isinstance(opts, str) or not isinstance(opts, (Mapping, Sequence)):
            raise DecisionError(f"Choice options must be a mapping {{name: description}} or a list of names, "
                                f"got {type(opts).__name__} {opts!r:.60}.")
        items = list(opts.items()) if isinstance(opts, Mapping) else [(o, None) for o in opts]
        names = [n for n, _ in items]
        bad = [n for n in names if not isinstance(n, str) or not n]
        if bad:
            raise DecisionError(f"Choice option names must be non-empty strings, got {bad[0]!r}.")
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise DecisionError(f"Choice option {dup!r} is given twice; option names must be unique.")
        if len(names) < 2:
            raise DecisionError(f"A Choice needs at least 2 options, got {len(names)}: {names!r}; "
                                f"use YesNo for a single statement.")
        if len(names) > MAX_OPTIONS:
            raise DecisionError(f"A Choice takes at most {MAX_OPTIONS} options, got {len(names)}.")
        for n, d in items:
            _check_text(d, f"The description of option {n!r}")
        _check_text(self.instructions, "Choice instructions")
        object.__setattr__(self, "options", dict(items))

    type = "choice"

    @property
    def names(self) -> tuple[str, ...]:
        """The option names in the order given.

        Examples
        --------
        >>> Choice(["b", "a"]).names
        ('b', 'a')
        """
        return tuple(self.options)


@dataclass(frozen=True)
class YesNo:
    """A yes/no question or statement (the contract's ``noul``).

    Parameters
    ----------
    instructions : str, dict or list, optional
        The question or statement to evaluate.
    true, false : str, dict or list, optional
        What counts as yes, and as no (either may be missing).

    Examples
    --------
    >>> YesNo("Does the customer want a refund?", true="They ask for money back").type
    'noul'
    """

    instructions: Any = None
    true: Any = None
    false: Any = None

    def __post_init__(self):
        _check_text(self.instructions, "YesNo instructions")
        _check_text(self.true, "YesNo true description")
        _check_text(self.false, "YesNo false description")

    type = "noul"


@dataclass(frozen=True)
class Score:
    """Rate the state on ordered levels, low to high (the contract's ``score``).

    Parameters
    ----------
    levels : sequence of str, dict or list
        Level descriptions; level ``i`` is worth ``i``. 2 to 10 levels.
    instructions : str, dict or list, optional

    Examples
    --------
    >>> Score(["Calm", "Frustrated", "Very angry"], instructions="How frustrated?").n_levels
    3
    """

    levels: Any
    instructions: Any = None

    def __post_init__(self):
        lv = self.levels
        if isinstance(lv, (str, Mapping)) or not isinstance(lv, Sequence):
            raise DecisionError(f"Score levels must be a list of level descriptions, low to high, got "
                                f"{type(lv).__name__} {lv!r:.60}; write e.g. [\"Calm\", \"Angry\"].")
        if not 2 <= len(lv) <= MAX_SCORE_LEVELS:
            raise DecisionError(f"A Score needs 2 to {MAX_SCORE_LEVELS} levels, got {len(lv)}.")
        for i, d in enumerate(lv):
            _check_text(d, f"Score level {i}", optional=False)
        _check_text(self.instructions, "Score instructions")
        object.__setattr__(self, "levels", tuple(lv))

    type = "score"

    @property
    def n_levels(self) -> int:
        """The number of levels.

        Examples
        --------
        >>> Score(["low", "high"]).n_levels
        2
        """
        return len(self.levels)


Question = Choice | YesNo | Score


def check_questions(questions) -> None:
    """Raise DecisionError unless ``questions`` is a non-empty mapping of non-empty str ids to questions.

    Parameters
    ----------
    questions : mapping of str to Choice, YesNo or Score

    Examples
    --------
    >>> check_questions({"q": YesNo("Is it?")})
    >>> check_questions({})
    Traceback (most recent call last):
    ...
    judge.decisions.questions.DecisionError: questions must be a non-empty mapping {id: question}, got {}.
    """
    if not isinstance(questions, Mapping) or not questions:
        raise DecisionError(f"questions must be a non-empty mapping {{id: question}}, got {questions!r:.60}.")
    for qid, q in questions.items():
        if not isinstance(qid, str) or not qid:
            raise DecisionError(f"Question ids must be non-empty strings, got {qid!r}.")
        if not isinstance(q, (Choice, YesNo, Score)):
            raise DecisionError(f"Question {qid!r} must be a Choice, YesNo or Score, got {type(q).__name__}.")


# ----------------------------------------------------------------------------- answers

def choice_confidence(p: np.ndarray) -> float:
    """The reference choice confidence ``(max p - 1/n) / (1 - 1/n)``.

    Parameters
    ----------
    p : ndarray of shape (n,)
        The options' probabilities (sum 1).

    Returns
    -------
    float
        In [0, 1]: 0 for a uniform answer, 1 for a certain one.

    Examples
    --------
    >>> round(choice_confidence(np.array([0.5, 0.25, 0.25])), 6)
    0.25
    """
    n = len(p)
    return float(min(1.0, max(0.0, (float(np.max(p)) - 1.0 / n) / (1.0 - 1.0 / n))))


def score_confidence(p: np.ndarray) -> float:
    """The reference score confidence ``max(0, 1 - sum p_i |i - mode| / D)``.

    ``D = (1/n) sum_i |i - (n-1)/2|`` is the spread of the uniform distribution.

    Parameters
    ----------
    p : ndarray of shape (n,)
        The levels' probabilities, low to high (sum 1).

    Returns
    -------
    float
        In [0, 1].

    Examples
    --------
    >>> score_confidence(np.array([0.0, 1.0, 0.0]))
    1.0
    >>> round(score_confidence(np.array([0.5, 0.0, 0.5])), 6)   # D = 2/3, spread = 1
    0.0
    """
    n = len(p)
    i = np.arange(n)
    mode = int(np.argmax(p))
    d = float(np.mean(np.abs(i - (n - 1) / 2)))
    return float(min(1.0, max(0.0, 1.0 - float(np.sum(p * np.abs(i - mode))) / d)))


@dataclass(frozen=True)
class Answer:
    """The answer to one question.

    Attributes
    ----------
    type : {"choice", "noul", "score"}
    probabilities : dict of str to float
        choice: keyed by option name (the caller's order); noul: ``{"true", "false"}``;
        score: ``{"0", ..., "n-1"}``. Sums to 1.
    choice : str or None
        The most probable option (choice questions).
    noul : float or None
        P(yes) (yes/no questions).
    score : float or None
        ``sum_i i * p_i`` (score questions).
    legend : dict or None
        ``{"0": level description, ...}`` (score questions).
    confidence : float or None
        The reference confidence (choice and score; None for yes/no).
    option_mass : float
        Total probability the model put on the listed options before
        renormalising (low values: the model wanted to say something else).
    calibrated : bool
        Whether a calibration profile was applied.
    path : str
        Whether the options were listed in the prompt (``"listed"``) or not
        (``"unlisted"``: the prompt style, or more than `MAX_LISTED_OPTIONS` options).
    bias : str or None
        The label-free bias correction applied (``"contextual"``), or None.
    scored : str
        What the model was scored on writing: ``"names"``, ``"descriptions"``,
        ``"names and descriptions"``, ``"mixed"``, ``"level numbers"``, ``"level
        descriptions"``, ``"level numbers and descriptions"`` or ``"yes/no spellings"``.
    spellings : dict or None
        Yes/no questions: ``{"true": [...], "false": [...]}``, the spellings whose
        probabilities were summed for each side.
    guard : judge.decisions.guard.GuardReport or None
        What the guard flagged and erased (guarded answers only).
    fitted : bool
        Whether a fitted profile's head gave the probabilities (`judge.decisions.profiles`).

    Examples
    --------
    >>> a = Answer("noul", {"true": 0.8, "false": 0.2}, noul=0.8)
    >>> a.noul, a.calibrated
    (0.8, False)
    """

    type: str
    probabilities: dict
    choice: str | None = None
    noul: float | None = None
    score: float | None = None
    legend: dict | None = None
    confidence: float | None = None
    option_mass: float = 1.0
    calibrated: bool = False
    path: str = "listed"
    bias: str | None = None
    scored: str = "names"
    spellings: dict | None = None
    guard: Any = None
    fitted: bool = False
