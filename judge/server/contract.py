"""Pydantic models of the two wire contracts, and their mapping onto `judge.decisions`.

``/v1/systemone`` (TypeSafe System One): ``{"model", "state", "questions": {id: question}}``
with ``noul`` / ``choice`` / ``score`` questions. ``/v1/decisions`` (OpenAI's
Decisions shape): ``{"model", "input", "questions": [...]}`` with
``predicate`` / ``choice`` / ``score`` questions, mapped onto the same three types.

Validation failures become FastAPI's 422 ``{"detail": [{"loc", "msg", "type"}]}``;
every message says what was wrong and how to fix it. Unknown top-level
fields are ignored, as the contract requires.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    field_validator,
    model_validator,
)

from judge.decisions import MAX_OPTIONS, MAX_SCORE_LEVELS, Choice, Score, YesNo, render_value

Text = StrictStr | dict[str, Any] | list[Any]

__all__ = [
    "SystemOneRequest", "NoulQuestion", "ChoiceQuestion", "ScoreQuestion",
    "DecisionsRequest", "to_questions", "decisions_to_questions", "render_input",
]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NoulCriteria(_Lenient):
    true: Text | None = None
    false: Text | None = None


class NoulQuestion(_Lenient):
    type: Literal["noul"]
    instructions: Text | None = None
    criteria: NoulCriteria | None = None


class ChoiceQuestion(_Lenient):
    type: Literal["choice"]
    instructions: Text | None = None
    criteria: dict[str, Text | None]

    @field_validator("criteria", mode="before")
    @classmethod
    def _options(cls, v):
        if isinstance(v, list):
            raise ValueError(f"choice criteria must be an object {{option name: description or null}}, got a list "
                             f"{render_value(v)[:80]}; write e.g. {{\"Billing\": \"Payments\", \"Sales\": null}}")
        if isinstance(v, dict):
            if len(v) < 2:
                raise ValueError(f"a choice question needs at least 2 options, got {len(v)}: {list(v)!r}; "
                                 f"use a noul question for a single statement")
            if len(v) > MAX_OPTIONS:
                raise ValueError(f"a choice question takes at most {MAX_OPTIONS} options, got {len(v)}")
            if "" in v:
                raise ValueError("option names must be non-empty strings; one option name is \"\"")
        return v


class ScoreQuestion(_Lenient):
    type: Literal["score"]
    instructions: Text | None = None
    criteria: list[Text]

    @field_validator("criteria", mode="before")
    @classmethod
    def _levels(cls, v):
        if isinstance(v, dict):
            raise ValueError(f"score criteria must be a list of level descriptions, low to high; the object form "
                             f"{render_value(v)[:80]} is not accepted; write [\"Calm\", \"Frustrated\", \"Very angry\"]")
        if isinstance(v, list) and not 2 <= len(v) <= MAX_SCORE_LEVELS:
            raise ValueError(f"a score question needs 2 to {MAX_SCORE_LEVELS} levels, got {len(v)}")
        if isinstance(v, list) and any(x is None for x in v):
            i = v.index(None)
            raise ValueError(f"score level {i} is null; every level needs a description (string, object or array)")
        return v


SystemOneQuestion = Annotated[NoulQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")]


class SystemOneRequest(_Lenient):
    model: StrictStr
    state: Text
    questions: dict[str, SystemOneQuestion] = Field(min_length=1)
    assets: Any = None

    @field_validator("questions", mode="before")
    @classmethod
    def _ids(cls, v):
        if isinstance(v, dict):
            if not v:
                raise ValueError("questions is empty; ask at least one question, e.g. "
                                 "{\"refund\": {\"type\": \"noul\", \"instructions\": \"Refund?\"}}")
            if "" in v:
                raise ValueError("question ids must be non-empty strings; one id is \"\"")
        return v

    @field_validator("assets")
    @classmethod
    def _no_assets(cls, v):
        if v is not None:
            raise ValueError("assets (images) are not supported: this server runs a text-only model; "
                             "remove \"assets\" and describe the content in state")
        return v


def to_questions(req: SystemOneRequest) -> dict:
    """The request's questions as `Choice` / `YesNo` / `Score`, keyed by id."""
    out = {}
    for qid, q in req.questions.items():
        if isinstance(q, NoulQuestion):
            c = q.criteria or NoulCriteria()
            out[qid] = YesNo(q.instructions, c.true, c.false)
        elif isinstance(q, ChoiceQuestion):
            out[qid] = Choice(q.criteria, q.instructions)
        else:
            out[qid] = Score(q.criteria, q.instructions)
    return out


# ----------------------------------------------------------------------------- /v1/decisions

class InputText(_Lenient):
    type: Literal["input_text"] = "input_text"
    text: StrictStr


Instructions = StrictStr | list[InputText]


class PredicateQ(_Lenient):
    type: Literal["predicate"]
    instructions: Instructions
    name: StrictStr | None = None


class ChoiceOption(_Lenient):
    value: StrictStr | StrictBool
    description: StrictStr | None = None


class ChoiceQ(_Lenient):
    type: Literal["choice"]
    instructions: Instructions
    choices: list[ChoiceOption] = Field(min_length=2, max_length=MAX_OPTIONS)
    name: StrictStr | None = None

    @model_validator(mode="after")
    def _unique(self):
        seen = set()
        for c in self.choices:
            key = (type(c.value), c.value)
            if key in seen:
                raise ValueError(f"choice value {c.value!r} is given twice; values must be unique")
            if c.value == "":
                raise ValueError("choice values must be non-empty")
            seen.add(key)
        surfaces = [_surface(c.value) for c in self.choices]
        if len(set(surfaces)) != len(surfaces):
            raise ValueError("a string choice value equals a boolean one's text (e.g. \"true\" and true); "
                             "the model cannot tell them apart: rename one")
        return self


class Level(_Lenient):
    label: StrictStr
    description: StrictStr | None = None


class ScoreQ(_Lenient):
    type: Literal["score"]
    instructions: Instructions
    levels: list[Level] = Field(min_length=2, max_length=MAX_SCORE_LEVELS)
    name: StrictStr | None = None


DecisionQuestion = Annotated[PredicateQ | ChoiceQ | ScoreQ, Field(discriminator="type")]


class DecisionsRequest(_Lenient):
    model: StrictStr
    input: StrictStr | list[dict[str, Any]] = Field(min_length=1)
    questions: list[DecisionQuestion] = Field(min_length=1, max_length=400)


def _surface(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else v


def _instr(i) -> str:
    return i if isinstance(i, str) else "\n".join(p.text for p in i)


def render_input(inp) -> str:
    """The Decisions ``input`` as the state text: a string as is; messages as ``role: text`` lines.

    Examples
    --------
    >>> render_input([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}])
    'user: hi\\nassistant: yo'
    """
    if isinstance(inp, str):
        return inp
    lines = []
    for item in inp:
        role, content = item.get("role"), item.get("content")
        if isinstance(role, str) and content is not None:
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):
                text = "\n".join(str(p.get("text", p.get("refusal", ""))) if isinstance(p, dict) and
                                 ("text" in p or "refusal" in p) else render_value(p) for p in content)
            else:
                text = render_value(content)
            lines.append(f"{role}: {text}")
        else:
            lines.append(render_value(item))
    return "\n".join(lines)


def decisions_to_questions(req: DecisionsRequest) -> dict:
    """The Decisions questions as `YesNo` / `Choice` / `Score`, keyed by their position ("0", "1", ...)."""
    out = {}
    for i, q in enumerate(req.questions):
        if isinstance(q, PredicateQ):
            out[str(i)] = YesNo(_instr(q.instructions))
        elif isinstance(q, ChoiceQ):
            out[str(i)] = Choice({_surface(c.value): c.description for c in q.choices}, _instr(q.instructions))
        else:
            out[str(i)] = Score([lv.label if lv.description is None else f"{lv.label}: {lv.description}"
                                 for lv in q.levels], _instr(q.instructions))
    return out
