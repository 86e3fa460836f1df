"""Typed decisions: choice, yes/no and score questions about one state.

A *decision* is a question about a piece of content (the **state**) whose
answer is one of a fixed set of options. Three question types cover the
System One wire contract (TypeSafe's ``/v1/systemone``):

========== =============== ====================================================
Python     contract type   options the model may write
========== =============== ====================================================
`Choice`   ``choice``      the option names, exactly as given
`YesNo`    ``noul``        ``Yes`` / ``No``
`Score`    ``score``       the level numbers ``0`` .. ``n-1`` (low to high)
========== =============== ====================================================

`Decider.ask` renders one prompt per question (state first, so every question
of a call shares the state's tokens), scores the exact log-probability of
every option in **one** scoring call, and returns an `Answer` per question
with its probabilities and the contract's reference confidence:

- choice: ``(max p - 1/n) / (1 - 1/n)``
- score: ``max(0, 1 - sum_i p_i |i - mode| / D)`` with ``D = (1/n) sum_i |i - (n-1)/2|``
- yes/no: no confidence (the probability of yes is the answer).

Each question is isolated: its prompt never contains the question id or any
other question, and options are listed (and scored) in a canonical order, so
an answer does not change when the question is renamed, reordered, asked
alone or with others, or when its options are given in another order.

Calibration (`DecisionCalibration`, `calibrate_decisions`) fits one
temperature per question type, and optionally a yes/no log-odds bias and a
per-level score bias, from labelled decisions in JSONL.

What this module deliberately does not do: HTTP (see ``judge.server``), images,
generation, or parsing special tokens out of any text a caller supplies
(user text is always tokenized as plain text).
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Choice",
    "YesNo",
    "Score",
    "Answer",
    "Decider",
    "DecisionError",
    "DecisionCalibration",
    "calibrate_decisions",
    "render_value",
    "MAX_LISTED_OPTIONS",
    "check_questions",
]

#: Above this many options a choice question's options are not listed in the prompt.
MAX_LISTED_OPTIONS = 1000
#: The largest choice question accepted (the decode path's stated limit).
MAX_OPTIONS = 100_000
MAX_SCORE_LEVELS = 10
PROMPT_VERSION = "decisions-v1"

_SYSTEM = ("You answer one question about the content in the user's message. Reply with exactly one "
           "of the listed answers, written exactly as shown, and nothing else.")
_SENTINEL = "\x00JUDGE_DECISION\x00"
_YES, _NO = "Yes", "No"


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
        """The option names in the order given."""
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
        return len(self.levels)


Question = Choice | YesNo | Score


# ----------------------------------------------------------------------------- answers

def choice_confidence(p: np.ndarray) -> float:
    """The reference choice confidence ``(max p - 1/n) / (1 - 1/n)``.

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
        How options were scored (``"listed"`` or ``"unlisted"``: options above
        `MAX_LISTED_OPTIONS` are scored without listing them in the prompt).

    Examples
    --------
    >>> a = Answer("noul", {"true": 0.8, "false": 0.2}, noul=0.8)
    >>> a.to_wire()
    {'type': 'noul', 'noul': 0.8}
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

    def to_wire(self, *, extensions: bool = False) -> dict:
        """The answer as the ``/v1/systemone`` contract writes it (``x_`` fields on request)."""
        if self.type == "noul":
            out = {"type": "noul", "noul": float(self.noul)}
        elif self.type == "choice":
            out = {"type": "choice", "choice": self.choice, "probabilities": dict(self.probabilities),
                   "confidence": float(self.confidence)}
        else:
            out = {"type": "score", "score": float(self.score), "legend": dict(self.legend),
                   "probabilities": dict(self.probabilities), "confidence": float(self.confidence)}
        if extensions:
            out.update(x_option_mass=float(self.option_mass), x_calibrated=self.calibrated, x_path=self.path)
        return out


# ----------------------------------------------------------------------------- prompts

@dataclass(frozen=True)
class _Plan:
    """How one question becomes a query: its prompt pieces and canonical option order."""

    pieces: tuple[tuple[str, bool], ...]
    surfaces: tuple[str, ...]      # what the model writes, in canonical (scoring) order
    order: tuple[int, ...]         # order[j] = index in the question's own order of canonical option j
    listed: bool


def _lines(label_desc: Iterable[tuple[str, Any]]) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    for name, desc in label_desc:
        out += [("\n- ", False), (name, True)]
        if desc is not None:
            out += [(": ", False), (render_value(desc), True)]
    return out


def _question_pieces(q: Question, listed: bool) -> tuple[list[tuple[str, bool]], list[str], list[int]]:
    """(pieces after the state, surfaces in canonical order, order)."""
    pieces: list[tuple[str, bool]] = [("\n\nQuestion: ", False)]
    if isinstance(q, Choice):
        names = q.names
        order = sorted(range(len(names)), key=lambda i: names[i])
        surfaces = [names[i] for i in order]
        pieces += [(render_value(q.instructions), True)] if q.instructions is not None else \
            [("Which answer fits the content best?", False)]
        if listed:
            pieces += [("\n\nAnswers:", False)] + _lines((names[i], q.options[names[i]]) for i in order)
        else:
            pieces += [(f"\n\nAnswer with the name of one of {len(names)} options.", False)]
        return pieces, surfaces, order
    if isinstance(q, YesNo):
        pieces += [(render_value(q.instructions), True)] if q.instructions is not None else \
            [("Is the following true of the content?", False)]
        pieces += [("\n\nAnswers:", False)] + _lines([(_YES, q.true), (_NO, q.false)])
        return pieces, [_YES, _NO], [0, 1]
    n = q.n_levels
    pieces += [(render_value(q.instructions), True)] if q.instructions is not None else \
        [("Which level fits the content best?", False)]
    pieces += [(f"\n\nAnswers (a level from 0 to {n - 1}, low to high):", False)]
    for i, d in enumerate(q.levels):
        pieces += [(f"\n- {i}: ", False), (render_value(d), True)]
    return pieces, [str(i) for i in range(n)], list(range(n))


def _merge(pieces: Iterable[tuple[str, bool]]) -> tuple[tuple[str, bool], ...]:
    out: list[tuple[str, bool]] = []
    for text, user in pieces:
        if not text:
            continue
        if out and out[-1][1] == user and not user:
            out[-1] = (out[-1][0] + text, user)
        else:
            out.append((text, user))
    return tuple(out)


def _plan(tokenizer, state_text: str, q: Question, chat: bool) -> _Plan:
    listed = not (isinstance(q, Choice) and len(q.options) > MAX_LISTED_OPTIONS)
    body, surfaces, order = _question_pieces(q, listed)
    content = [("Content:\n", False), (state_text, True), *body]
    if chat:
        msgs = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _SENTINEL}]
        full = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        if full.count(_SENTINEL) != 1:
            raise DecisionError("The tokenizer's chat template dropped or repeated the user message; "
                                "use Decider(chat=False).")
        before, after = full.split(_SENTINEL)
        pieces = [(before, False), *content, (after, False)]
    else:
        pieces = [(_SYSTEM + "\n\n", False), *content, ("\n\nAnswer:", False)]
        surfaces = [" " + s for s in surfaces]
    return _Plan(_merge(pieces), tuple(surfaces), tuple(order), listed)


# ----------------------------------------------------------------------------- scoring

@dataclass(frozen=True)
class _Query:
    """Same fields as ``judge.engine.Query`` (used until that lands)."""

    pieces: tuple[tuple[str, bool], ...]
    options: tuple[str, ...]


def _make_query(pieces, options):
    try:
        from judge.engine import Query
    except ImportError:
        Query = _Query
    return Query(pieces=tuple(pieces), options=tuple(options))


def _encode(tokenizer, text: str, user: bool) -> list[int]:
    kw = {"split_special_tokens": True} if user else {}
    return list(tokenizer(text, add_special_tokens=False, **kw)["input_ids"])


def _special_pattern(tokenizer):
    import re

    specials = sorted({t for t in getattr(tokenizer, "all_special_tokens", []) if t}, key=len, reverse=True)
    return re.compile("(" + "|".join(map(re.escape, specials)) + ")") if specials else None


def _prompt_ids(tokenizer, pieces) -> list[int]:
    """Token ids of the rendered prompt, as one tokenizer call on the joined text would give them,
    except that special-token text inside user pieces stays plain text.

    Template pieces are cut at their special tokens; the text between them
    (template and user text joined) is tokenized in one call with
    ``split_special_tokens=True``.
    """
    pat = _special_pattern(tokenizer)
    runs: list[tuple[str, bool]] = []  # (text, is_special)
    for text, user in pieces:
        parts = [text] if user or pat is None else pat.split(text)
        for j, part in enumerate(parts):
            special = not user and pat is not None and j % 2 == 1
            if not part:
                continue
            if not special and runs and not runs[-1][1]:
                runs[-1] = (runs[-1][0] + part, False)
            else:
                runs.append((part, special))
    ids: list[int] = []
    for text, special in runs:
        ids += [tokenizer.convert_tokens_to_ids(text)] if special else _encode(tokenizer, text, True)
    return ids


def _reference_score(model, tokenizer, queries, *, chunk: int = 64, end_id: int | None = None
                     ) -> tuple[list[np.ndarray], int]:
    """log P(option | prompt) per query, simply and exactly (a stand-in for ``Engine.score``).

    Each prompt is tokenized whole (`_prompt_ids`: special tokens only where
    the template wrote them, so user text never becomes control tokens); each
    option is tokenized on its own, as plain text; an option whose tokens are
    a prefix of another option's gets the end-of-answer token appended
    (``end_id``, default the tokenizer's EOS), so its probability is that of
    the model stopping there and never contains the longer option's. The prompt is
    run once; options are run in chunks on copies of its KV cache; the option
    tokens' log-softmax is summed in float64.

    Returns
    -------
    scores : list of ndarray of shape (K_q,), float64
    input_tokens : int
        Prompt plus option tokens processed.
    """
    import inspect

    import torch

    device = next(model.parameters()).device
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"
    out: list[np.ndarray] = []
    n_tokens = 0
    with torch.inference_mode():
        for q in queries:
            p_ids = _prompt_ids(tokenizer, q.pieces)
            o_ids = [_encode(tokenizer, o, True) for o in q.options]
            prefixes = {tuple(x[:j]) for x in o_ids for j in range(1, len(x))}
            if prefixes & {tuple(x) for x in o_ids}:
                end = tokenizer.eos_token_id if end_id is None else end_id
                o_ids = [x + [end] if tuple(x) in prefixes else x for x in o_ids]
            if not p_ids:
                raise DecisionError("A query has an empty prompt; it needs at least one token before the answer.")
            if any(not o for o in o_ids):
                raise DecisionError("An option tokenizes to no tokens; option strings must be non-empty.")
            n_tokens += len(p_ids) + sum(map(len, o_ids))
            res = model(input_ids=torch.tensor([p_ids], device=device), use_cache=True, logits_to_keep=1)
            first = torch.log_softmax(res.logits[0, -1].double(), -1)
            cache = getattr(res, cache_kw, None) or res.past_key_values
            P = len(p_ids)
            scores = np.empty(len(o_ids), dtype=np.float64)
            for s in range(0, len(o_ids), chunk):
                part = o_ids[s:s + chunk]
                lens = [len(o) for o in part]
                L = max(lens)
                if L == 1:
                    scores[s:s + len(part)] = [float(first[o[0]]) for o in part]
                    continue
                inp = torch.tensor([o[:-1] + [o[-1]] * (L - len(o) + 1) for o in part], device=device)[:, :L - 1]
                c = copy.deepcopy(cache)
                c.batch_repeat_interleave(len(part))
                pos = torch.arange(P, P + L - 1, device=device).unsqueeze(0).expand(len(part), -1)
                mask = torch.ones(len(part), P + L - 1, dtype=torch.long, device=device)
                logits = model(input_ids=inp, **{cache_kw: c}, position_ids=pos, attention_mask=mask,
                               use_cache=True).logits
                lp = torch.log_softmax(logits.double(), -1)
                for j, o in enumerate(part):
                    total = float(first[o[0]])
                    for t in range(1, len(o)):
                        total += float(lp[j, t - 1, o[t]])
                    scores[s + j] = total
            out.append(scores)
    return out, n_tokens


class _ReferenceEngine:
    """The interface of ``judge.engine.Engine`` over `_reference_score` (used until it lands)."""

    def __init__(self, model=None, tokenizer=None, *, device=None):
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.last_usage_: dict = {"input_tokens": 0}

    def _load(self):
        if not hasattr(self, "model_"):
            from judge.models import load_model

            self.model_, self.tokenizer_ = load_model(self.model, self.tokenizer, device=self.device)

    def score(self, queries) -> list[np.ndarray]:
        self._load()
        scores, n = _reference_score(self.model_, self.tokenizer_, queries)
        self.last_usage_ = {"input_tokens": int(n)}
        return scores


def _new_engine(kind, model, tokenizer, device):
    if kind == "reference":
        return _ReferenceEngine(model, tokenizer, device=device)
    if kind != "auto":
        raise DecisionError(f"engine must be 'auto', 'reference' or an object with score(queries), got {kind!r}.")
    try:
        from judge.engine import Engine
    except ImportError:
        Engine = _ReferenceEngine
    return Engine(model, tokenizer, device=device)


def _score(engine, queries, *, root_pieces=None) -> tuple[list[np.ndarray], int]:
    """The one place decisions are scored: ``engine.score(queries)`` and its input token count.

    ``engine`` is a ``judge.engine.Engine`` (or `_ReferenceEngine`), or a
    ``(model, tokenizer)`` pair scored by `_reference_score`. ``root_pieces``
    (the template text before the state, the same for every request) is
    passed as the engine's cached root for a lone query, so it is computed
    once per server, not once per request; several queries share their
    common prefix anyway: the engine keeps the questions of one state in one
    forest row, so the state is fed once.
    """
    if isinstance(engine, tuple):
        return _reference_score(engine[0], engine[1], queries)
    import inspect

    queries = list(queries)
    kw = {}
    params = inspect.signature(engine.score).parameters
    if root_pieces and len(queries) == 1 and hasattr(engine, "tokenizer_") and "root" in params:
        kw["root"] = _prompt_ids(engine.tokenizer_, root_pieces)
    scores = engine.score(queries, **kw)
    usage = getattr(engine, "last_usage_", None) or {}
    return [np.asarray(s, dtype=np.float64) for s in scores], int(usage.get("input_tokens", 0))


# ----------------------------------------------------------------------------- calibration

def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - np.max(z)
    e = np.exp(z)
    return e / e.sum()


@dataclass(frozen=True)
class DecisionCalibration:
    """Fitted decision calibration: a temperature per question type and optional biases.

    Calibrated probabilities are ``softmax(log_p / T[type] + bias)``, where
    ``log_p`` are the options' exact log-probabilities; ``bias`` is a log-odds
    shift toward yes (yes/no questions) or a per-level vector for score
    questions of that many levels. Choice questions get no bias (their option
    names change from question to question).

    Parameters
    ----------
    temperature : dict of str to float
        Keys among ``"choice"``, ``"noul"``, ``"score"``; missing types use 1.
    noul_bias : float
    score_bias : dict of str to list of float
        ``{"3": [b0, b1, b2], ...}`` keyed by the number of levels.
    meta : dict
        Counts and NLL before/after, model and prompt version (informational).

    Examples
    --------
    >>> cal = DecisionCalibration({"noul": 2.0}, noul_bias=0.0)
    >>> cal.apply("noul", np.log([0.9, 0.1])).round(3)
    array([0.75, 0.25])
    """

    temperature: dict = field(default_factory=dict)
    noul_bias: float = 0.0
    score_bias: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    FORMAT = "trie-judge/decision-calibration"

    def apply(self, qtype: str, log_p: np.ndarray) -> np.ndarray:
        """Calibrated probabilities, shape (K,), for one question's log-probabilities."""
        z = np.asarray(log_p, dtype=np.float64) / float(self.temperature.get(qtype, 1.0))
        if qtype == "noul":
            z = z + np.array([self.noul_bias / 2, -self.noul_bias / 2])
        elif qtype == "score" and str(len(z)) in self.score_bias:
            z = z + np.asarray(self.score_bias[str(len(z))], dtype=np.float64)
        return _softmax(z)

    def to_dict(self) -> dict:
        return {"format": self.FORMAT, "version": 1, "temperature": dict(self.temperature),
                "noul_bias": float(self.noul_bias), "score_bias": dict(self.score_bias), "meta": dict(self.meta)}

    def save(self, path) -> Path:
        """Write the profile as JSON; returns the path."""
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path) -> DecisionCalibration:
        """Read a profile written by `save`."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise DecisionError(f"Cannot read the calibration profile {str(path)!r}: {e}; write one with "
                                f"`judge calibrate-decisions FILE --out PROFILE`.") from None
        if not isinstance(data, dict) or data.get("format") != cls.FORMAT:
            raise DecisionError(f"{str(path)!r} is not a decision calibration profile (format "
                                f"{data.get('format') if isinstance(data, dict) else None!r}, expected {cls.FORMAT!r}).")
        temps = {k: float(v) for k, v in data.get("temperature", {}).items()}
        bad = {k: v for k, v in temps.items() if not (math.isfinite(v) and v > 0)}
        if bad:
            raise DecisionError(f"Calibration profile {str(path)!r} has non-positive temperatures {bad}.")
        return cls(temps, float(data.get("noul_bias", 0.0)), dict(data.get("score_bias", {})), dict(data.get("meta", {})))


def _fit(items: list[tuple[np.ndarray, int]], *, with_bias: str | None) -> tuple[float, np.ndarray | float, float, float]:
    """Fit T (and a bias) by maximum likelihood. Returns (T, bias, nll_before, nll_after)."""
    from scipy.optimize import minimize

    def nll(params):
        t = math.exp(params[0])
        total = 0.0
        for z, y in items:
            zz = z / t
            if with_bias == "noul":
                zz = zz + np.array([params[1] / 2, -params[1] / 2])
            elif with_bias == "score":
                zz = zz + np.asarray(params[1:])
            zz = zz - zz.max()
            total -= zz[y] - math.log(np.exp(zz).sum())
        return total / len(items)

    n_bias = 0 if with_bias is None else (1 if with_bias == "noul" else len(items[0][0]))
    x0 = np.zeros(1 + n_bias)
    res = minimize(nll, x0, method="L-BFGS-B", bounds=[(-4.0, 4.0)] + [(-10.0, 10.0)] * n_bias)
    bias: np.ndarray | float = 0.0
    if with_bias == "noul":
        bias = float(res.x[1])
    elif with_bias == "score":
        b = np.asarray(res.x[1:])
        bias = b - b.mean()
    return math.exp(float(res.x[0])), bias, float(nll(x0)), float(res.fun)


def _label_index(q: Question, label: Any, where: str) -> int:
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


def calibrate_decisions(path, decider: Decider, *, bias: bool = True, min_per_level_set: int = 20,
                        batch: int = 8) -> DecisionCalibration:
    """Fit a `DecisionCalibration` from labelled decisions in JSONL.

    Each line is either ``{"state": ..., "question": {wire question}, "label": ...}``
    or ``{"state": ..., "questions": {id: {wire question}}, "labels": {id: label}}``
    (questions in the ``/v1/systemone`` form). Labels: an option name (choice),
    true/false or "yes"/"no" (noul), a level number (score). Questions whose
    label is missing or null are skipped.

    Parameters
    ----------
    path : str or os.PathLike
    decider : Decider
        Its model scores the questions (uncalibrated).
    bias : bool
        Also fit a yes/no bias and, for every number of score levels seen at
        least ``min_per_level_set`` times, a per-level bias.
    batch : int
        Lines scored per scoring call.

    Returns
    -------
    DecisionCalibration

    Examples
    --------
    >>> cal = calibrate_decisions("labelled.jsonl", Decider())   # doctest: +SKIP
    >>> cal.save("profile.json")                                # doctest: +SKIP
    """
    rows: list[tuple[Any, dict, dict]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DecisionError(f"{path}:{lineno}: not JSON ({e}); each line must be one JSON object.") from None
            if not isinstance(rec, dict) or "state" not in rec:
                raise DecisionError(f"{path}:{lineno}: each line needs a \"state\" and a \"question\"/\"label\" "
                                    f"or \"questions\"/\"labels\"; got keys {sorted(rec) if isinstance(rec, dict) else rec!r}.")
            if "question" in rec:
                qs, labels = {"q": rec["question"]}, {"q": rec.get("label")}
            else:
                qs, labels = rec.get("questions") or {}, rec.get("labels") or {}
            parsed = {}
            for qid, wq in qs.items():
                if labels.get(qid) is None:
                    continue
                q = question_from_wire(wq, where=f"{path}:{lineno}: question {qid!r}")
                parsed[qid] = (q, _label_index(q, labels[qid], f"{path}:{lineno}: question {qid!r}"))
            if parsed:
                rows.append((rec["state"], {k: v[0] for k, v in parsed.items()}, {k: v[1] for k, v in parsed.items()}))
    if not rows:
        raise DecisionError(f"{path} has no labelled questions; see calibrate_decisions for the line format.")
    by_type: dict[str, list[tuple[np.ndarray, int]]] = {"choice": [], "noul": [], "score": []}
    for s in range(0, len(rows), batch):
        part = rows[s:s + batch]
        raw = decider._log_probs([(st, qs) for st, qs, _ in part])
        for (_, qs, labels), lps in zip(part, raw):
            for qid, q in qs.items():
                lp = lps[qid]
                by_type[q.type].append((lp - np.logaddexp.reduce(lp), labels[qid]))
    temperature, meta, score_bias, noul_bias = {}, {"prompt_version": PROMPT_VERSION, "n": {}}, {}, 0.0
    for qtype, items in by_type.items():
        if not items:
            continue
        t, _, before, after = _fit(items, with_bias=None)
        if bias and qtype == "noul":
            t, noul_bias, before, after = _fit(items, with_bias="noul")
        temperature[qtype] = t
        meta["n"][qtype] = len(items)
        meta[f"nll_{qtype}"] = {"before": before, "after": after}
        if bias and qtype == "score":
            for n in sorted({len(z) for z, _ in items}):
                sub = [(z, y) for z, y in items if len(z) == n]
                if len(sub) >= min_per_level_set:
                    z_t = [(z / t, y) for z, y in sub]
                    _, b, _, _ = _fit(z_t, with_bias="score")
                    score_bias[str(n)] = [float(x) for x in b]
    meta["model"] = decider.model_name
    return DecisionCalibration(temperature, float(noul_bias), score_bias, meta)


# ----------------------------------------------------------------------------- wire questions

def question_from_wire(q: Any, *, where: str = "question") -> Question:
    """A `Choice`, `YesNo` or `Score` from its ``/v1/systemone`` JSON form.

    Examples
    --------
    >>> question_from_wire({"type": "noul", "instructions": "Spam?", "criteria": {"true": "Ads"}})
    YesNo(instructions='Spam?', true='Ads', false=None)
    """
    if not isinstance(q, Mapping):
        raise DecisionError(f"{where} must be an object with a \"type\", got {type(q).__name__}.")
    t = q.get("type")
    crit = q.get("criteria")
    try:
        if t == "noul":
            if crit is not None and not isinstance(crit, Mapping):
                raise DecisionError(f"noul criteria must be an object {{\"true\": ..., \"false\": ...}} or null, got {crit!r:.60}.")
            crit = crit or {}
            return YesNo(q.get("instructions"), crit.get("true"), crit.get("false"))
        if t == "choice":
            if not isinstance(crit, Mapping):
                raise DecisionError(f"choice criteria must be an object {{option name: description}}, got {crit!r:.60}.")
            return Choice(dict(crit), q.get("instructions"))
        if t == "score":
            return Score(crit, q.get("instructions"))
    except DecisionError as e:
        raise DecisionError(f"{where}: {e}") from None
    raise DecisionError(f"{where}: type {t!r} is not one of 'choice', 'noul', 'score'.")


# ----------------------------------------------------------------------------- the decider


def check_questions(questions) -> None:
    """Raise DecisionError unless ``questions`` is a non-empty mapping of non-empty str ids to questions.

    Examples
    --------
    >>> check_questions({"q": YesNo("Is it?")})
    >>> check_questions({})
    Traceback (most recent call last):
    ...
    judge.decisions.DecisionError: questions must be a non-empty mapping {id: question}, got {}.
    """
    if not isinstance(questions, Mapping) or not questions:
        raise DecisionError(f"questions must be a non-empty mapping {{id: question}}, got {questions!r:.60}.")
    for qid, q in questions.items():
        if not isinstance(qid, str) or not qid:
            raise DecisionError(f"Question ids must be non-empty strings, got {qid!r}.")
        if not isinstance(q, (Choice, YesNo, Score)):
            raise DecisionError(f"Question {qid!r} must be a Choice, YesNo or Score, got {type(q).__name__}.")

class Decider:
    """Answer typed questions about a state with a causal LM.

    Parameters
    ----------
    model : str, PreTrainedModel, Engine or None
        ``None``: the packaged SmolLM2 (loaded lazily on first use). A hub id or
        folder, or a loaded model (then ``tokenizer`` is required), or an
        already built scoring engine (anything with ``score(queries)``).
    tokenizer : PreTrainedTokenizerBase, optional
    device : str, optional
    chat : bool or None
        Use the tokenizer's chat template (None: when it has one).
    calibration : DecisionCalibration, str, os.PathLike or None
        A profile (or the path of one) applied to every answer.
    engine : {"auto", "reference"} or Engine
        ``"auto"``: ``judge.engine.Engine`` (one forward pass over the prompt
        forest); ``"reference"``: the simple per-query scorer
        ``_reference_score`` (slower, for checks); or a built engine.

    Attributes
    ----------
    engine_ : the scoring engine (after first use)
    last_usage_ : dict
        ``{"input_tokens": int, "output_tokens": 0}`` of the last call.

    Examples
    --------
    >>> d = Decider()                                                     # doctest: +SKIP
    >>> a = d.ask("I was charged twice", {"refund": YesNo("Refund?")})    # doctest: +SKIP
    >>> 0 <= a["refund"].noul <= 1                                        # doctest: +SKIP
    True
    """

    def __init__(self, model=None, tokenizer=None, *, device=None, chat: bool | None = None, calibration=None,
                 engine="auto"):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.chat = chat
        self.calibration = calibration
        self.engine = engine
        self.last_usage_ = {"input_tokens": 0, "output_tokens": 0}

    # -- state
    @property
    def engine_(self):
        if not hasattr(self, "_engine"):
            m, e = self.model, self.engine
            if not isinstance(e, str):
                self._engine = e
            elif m is not None and not isinstance(m, (str, os.PathLike)) and callable(getattr(m, "score", None)):
                self._engine = m
            else:
                self._engine = _new_engine(e, m, self.tokenizer, self.device)
        return self._engine

    @property
    def tokenizer_(self):
        eng = self.engine_
        if not hasattr(eng, "tokenizer_"):
            load = getattr(eng, "_load", None) or getattr(eng, "setup", None)
            if load is not None:
                load()
            else:  # an engine that loads on first score(): trigger it with a tiny query
                eng.score([_make_query((("x", False),), ("y",))])
        return eng.tokenizer_

    @property
    def calibration_(self) -> DecisionCalibration | None:
        c = self.calibration
        if c is None or isinstance(c, DecisionCalibration):
            return c
        if not hasattr(self, "_cal_loaded"):
            self._cal_loaded = DecisionCalibration.load(c)
        return self._cal_loaded

    @property
    def model_name(self) -> str:
        m = self.model
        if m is None:
            return "smollm2-135m-instruct"
        if isinstance(m, (str, os.PathLike)):
            return str(m)
        cfg = getattr(m, "config", None) or getattr(getattr(m, "model_", None), "config", None)
        return getattr(cfg, "_name_or_path", None) or type(m).__name__

    def uses_chat(self) -> bool:
        tok = self.tokenizer_
        has = bool(getattr(tok, "chat_template", None))
        if self.chat and not has:
            raise DecisionError("Decider(chat=True) but the tokenizer has no chat template; use chat=False.")
        return has if self.chat is None else bool(self.chat)

    # -- work
    def plan(self, state: Any, question: Question) -> _Plan:
        """The prompt pieces and option surfaces of one question (for inspection and tests)."""
        if not isinstance(question, (Choice, YesNo, Score)):
            raise DecisionError(f"A question must be a Choice, YesNo or Score, got {type(question).__name__}.")
        return _plan(self.tokenizer_, _state_text(state), question, self.uses_chat())

    def _log_probs(self, calls: Sequence[tuple[Any, Mapping[str, Question]]]) -> list[dict[str, np.ndarray]]:
        """Raw log P(option | prompt) per question, in each question's own option order; one scoring call."""
        chat = self.uses_chat()
        tok = self.tokenizer_
        queries, plans, keys = [], [], []
        for ci, (state, questions) in enumerate(calls):
            st = _state_text(state)
            check_questions(questions)
            for qid, q in questions.items():
                p = _plan(tok, st, q, chat)
                plans.append(p)
                keys.append((ci, qid))
                queries.append(_make_query(p.pieces, p.surfaces))
        scores, n_tokens = _score(self.engine_, queries, root_pieces=plans[0].pieces[:1] if plans else None)
        self.last_usage_ = {"input_tokens": int(n_tokens), "output_tokens": 0}
        out: list[dict[str, np.ndarray]] = [{} for _ in calls]
        for (ci, qid), p, s in zip(keys, plans, scores):
            raw = np.empty(len(s))
            raw[list(p.order)] = s
            out[ci][qid] = raw
        return out

    def ask_many(self, calls: Sequence[tuple[Any, Mapping[str, Question]]]) -> list[dict[str, Answer]]:
        """`ask` for several (state, questions) pairs in one scoring call (the server's micro-batches)."""
        raw = self._log_probs(calls)
        cal = self.calibration_
        return [{qid: _answer(q, raw[i][qid], cal) for qid, q in questions.items()}
                for i, (_, questions) in enumerate(calls)]

    def ask(self, state: Any, questions: Mapping[str, Question]) -> dict[str, Answer]:
        """Answer every question about ``state`` (one scoring call for all of them).

        Parameters
        ----------
        state : str, dict or list
            The content; JSON objects and arrays are shown as canonical JSON.
        questions : mapping of str to Choice, YesNo or Score
            Ids are any non-empty strings; they are never shown to the model.

        Returns
        -------
        dict of str to Answer
            Keyed like ``questions``.
        """
        return self.ask_many([(state, questions)])[0]


def _state_text(state: Any) -> str:
    if not isinstance(state, (str, Mapping, list, tuple)):
        raise DecisionError(f"state must be a string, a JSON object or a JSON array, got "
                            f"{type(state).__name__} {state!r:.60}.")
    return render_value(state)


def _answer(q: Question, log_p: np.ndarray, cal: DecisionCalibration | None) -> Answer:
    mass = float(np.exp(np.logaddexp.reduce(log_p)))
    p = cal.apply(q.type, log_p) if cal is not None else _softmax(log_p)
    p = np.clip(p, 0.0, 1.0)
    p = p / p.sum()
    calibrated = cal is not None
    if isinstance(q, YesNo):
        return Answer("noul", {"true": float(p[0]), "false": float(p[1])}, noul=float(p[0]),
                      option_mass=mass, calibrated=calibrated)
    if isinstance(q, Choice):
        names = q.names
        best = int(np.argmax(p))
        listed = len(names) <= MAX_LISTED_OPTIONS
        return Answer("choice", {n: float(v) for n, v in zip(names, p)}, choice=names[best],
                      confidence=choice_confidence(p), option_mass=mass, calibrated=calibrated,
                      path="listed" if listed else "unlisted")
    n = q.n_levels
    score = float(np.dot(np.arange(n), p))
    return Answer("score", {str(i): float(v) for i, v in enumerate(p)}, score=min(max(score, 0.0), n - 1.0),
                  legend={str(i): d for i, d in enumerate(q.levels)},
                  confidence=score_confidence(p), option_mass=mass, calibrated=calibrated)
