"""The two wire contracts: pydantic models, and the one mapping onto `judge.decisions` questions.

``/v1/systemone`` (TypeSafe System One): ``{"model", "state", "questions": {id: question}}``
with ``noul`` / ``choice`` / ``score`` questions. ``/v1/decisions`` (OpenAI's
Decisions shape): ``{"model", "input", "questions": [...]}`` with
``predicate`` / ``choice`` / ``score`` questions, mapped onto the same three types.

This module owns every parse of the wire form: the server validates request bodies
with these models, and `question_from_wire` (used by `judge.server.wire.read_labelled`
for questions in labelled files) validates one question with the same models, so a question means the same thing over HTTP and in a
file. Validation failures become FastAPI's 422 ``{"detail": [{"loc", "msg", "type"}]}``
(see `judge.server.errors`); `error_message` words each pydantic error the same way in
both places, saying what was wrong and how to fix it. Unknown top-level fields are
ignored, as the contract requires.

What it deliberately does not do: import FastAPI (pydantic only), render prompts, or
score.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from judge.decisions.questions import (
    MAX_OPTIONS,
    MAX_SCORE_LEVELS,
    Choice,
    DecisionError,
    Question,
    Score,
    YesNo,
    render_value,
)

Text = StrictStr | dict[str, Any] | list[Any]

__all__ = [
    "SystemOneRequest", "NoulQuestion", "ChoiceQuestion", "ScoreQuestion",
    "DecisionsRequest", "to_question", "to_questions", "question_from_wire", "error_message",
    "decisions_to_questions", "render_input", "cautious_of",
]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NoulCriteria(_Lenient):
    """What counts as yes (``true``) and as no (``false``); either may be missing or null.

    Examples
    --------
    >>> NoulCriteria(true="asks for money back").false is None
    True
    """

    true: Text | None = None
    false: Text | None = None


class NoulQuestion(_Lenient):
    """A yes/no question (``noul``); its answer is P(yes).

    Examples
    --------
    >>> NoulQuestion(type="noul", instructions="Refund?").criteria is None
    True
    """

    type: Literal["noul"]
    instructions: Text | None = None
    criteria: NoulCriteria | None = None
    x_cautious: list[StrictStr] | None = None


class ChoiceQuestion(_Lenient):
    """A choice among named options: ``criteria`` is ``{option name: description or null}``, 2 or more.

    Examples
    --------
    >>> list(ChoiceQuestion(type="choice", criteria={"Billing": "Payments", "Sales": None}).criteria)
    ['Billing', 'Sales']
    """

    type: Literal["choice"]
    instructions: Text | None = None
    criteria: dict[str, Text | None]
    x_cautious: list[StrictStr] | None = None

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
    """A rating: ``criteria`` lists 2 to 10 level descriptions, low to high (the object form is refused).

    Examples
    --------
    >>> len(ScoreQuestion(type="score", criteria=["Calm", "Angry"]).criteria)
    2
    """

    type: Literal["score"]
    instructions: Text | None = None
    criteria: list[Text]
    x_cautious: list[StrictStr] | None = None

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
    """A ``POST /v1/systemone`` body: one state, questions keyed by any non-empty id.

    Examples
    --------
    >>> req = SystemOneRequest(model="jev-latest", state={"text": "hi"}, questions={"q": {"type": "noul"}})
    >>> type(req.questions["q"]).__name__
    'NoulQuestion'
    """

    model: StrictStr
    state: Text
    questions: dict[str, SystemOneQuestion] = Field(min_length=1)
    assets: Any = None
    x_guard: StrictBool | None = None
    #: Fields of ``state`` the caller vouches for (its policy, directory): a guarded request never scans,
    #: cuts or erases them (`judge.decisions.Guard.trusted`); ignored unguarded.
    x_trusted: list[StrictStr] | None = Field(default=None, max_length=64)

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


def to_question(q: NoulQuestion | ChoiceQuestion | ScoreQuestion) -> Question:
    """One validated ``/v1/systemone`` question as a `Choice`, `YesNo` or `Score`.

    Raises
    ------
    DecisionError
        What the question types refuse beyond the schema (e.g. a repeated option).

    Examples
    --------
    >>> to_question(ScoreQuestion(type="score", criteria=["calm", "angry"]))
    Score(levels=('calm', 'angry'), instructions=None)
    """
    if isinstance(q, NoulQuestion):
        c = q.criteria or NoulCriteria()
        return YesNo(q.instructions, c.true, c.false)
    if isinstance(q, ChoiceQuestion):
        return Choice(q.criteria, q.instructions)
    return Score(q.criteria, q.instructions)


def to_questions(req: SystemOneRequest) -> dict:
    """The request's questions as `Choice` / `YesNo` / `Score`, keyed by id.

    Examples
    --------
    >>> req = SystemOneRequest(model="jev-latest", state="hi", questions={"q": {"type": "noul"}})
    >>> to_questions(req)
    {'q': YesNo(instructions=None, true=None, false=None)}
    """
    return {qid: to_question(q) for qid, q in req.questions.items()}


_QUESTION = TypeAdapter(SystemOneQuestion)
_TEXT_BRANCHES = {"str", "dict[str,any]", "list[any]"}  # how pydantic names the branches of Text in a loc


def error_message(err: dict) -> str:
    """The message of one pydantic error, worded for the caller (what was wrong, how to fix it).

    Parameters
    ----------
    err : dict
        One entry of ``ValidationError.errors()``.

    Returns
    -------
    str

    Examples
    --------
    >>> error_message({"type": "union_tag_not_found", "loc": (), "msg": "..."})
    'the question has no "type"; add "type": "noul", "choice" or "score"'
    """
    msg = err.get("msg", "invalid value")
    typ = err.get("type", "value_error")
    loc = list(err.get("loc") or ["body"])
    if typ == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        return (f"question type {ctx.get('tag')!r} is not supported; use one of {ctx.get('expected_tags')} "
                f"(box questions need a vision model)")
    if typ == "union_tag_not_found":
        return "the question has no \"type\"; add \"type\": \"noul\", \"choice\" or \"score\""
    if typ == "json_invalid":
        ctx = err.get("ctx") or {}
        return f"the request body is not valid JSON ({ctx.get('error', 'decode error')}); send one JSON object"
    if typ == "missing":
        return f"field {loc[-1]!r} is required"
    if typ == "value_error" and msg.startswith("Value error, "):
        return msg[len("Value error, "):]
    return msg


def question_from_wire(q: Any, *, where: str = "question") -> Question:
    """A `Choice`, `YesNo` or `Score` from its ``/v1/systemone`` JSON form, validated as the server does.

    Parameters
    ----------
    q : dict
        ``{"type": "noul" | "choice" | "score", "instructions": ..., "criteria": ...}``.
    where : str
        Where the question came from, prefixed to error messages.

    Returns
    -------
    Choice, YesNo or Score

    Raises
    ------
    DecisionError
        The question does not follow the contract: every problem, with its field.

    Examples
    --------
    >>> question_from_wire({"type": "choice", "criteria": {"a": None, "b": "the second"}}).names
    ('a', 'b')
    >>> question_from_wire({"type": "box"}, where="line 3")
    Traceback (most recent call last):
    ...
    judge.decisions.questions.DecisionError: line 3: question type 'box' is not supported; use one of 'noul', 'choice', 'score' (box questions need a vision model).
    """
    try:
        model = _QUESTION.validate_python(q)
    except ValidationError as e:
        problems: list[str] = []
        for err in e.errors():
            loc = [str(x) for x in err.get("loc", ())[1:]]  # loc[0] is the question type
            if loc and loc[-1] in _TEXT_BRANCHES:  # one text field failed every branch of the Text union
                got = err.get("input")
                msg = (f"{'.'.join(loc[:-1])}: must be a string, a JSON object or a JSON array, got "
                       f"{type(got).__name__} {got!r:.60}")
            else:
                msg = f"{'.'.join(loc)}: {error_message(err)}" if loc else error_message(err)
            if msg not in problems:
                problems.append(msg)
        raise DecisionError(f"{where}: {'; '.join(problems)}.") from None
    try:
        return to_question(model)
    except DecisionError as e:
        raise DecisionError(f"{where}: {e}") from None


# ----------------------------------------------------------------------------- /v1/decisions

class InputText(_Lenient):
    """One ``{"type": "input_text", "text": ...}`` part of Decisions instructions.

    Examples
    --------
    >>> InputText(text="Is it spam?").type
    'input_text'
    """

    type: Literal["input_text"] = "input_text"
    text: StrictStr


Instructions = StrictStr | list[InputText]


class PredicateQ(_Lenient):
    """A Decisions ``predicate`` (mapped onto a yes/no question).

    Examples
    --------
    >>> PredicateQ(type="predicate", instructions="The customer wants a refund.").name is None
    True
    """

    type: Literal["predicate"]
    instructions: Instructions
    name: StrictStr | None = None
    x_cautious: list[StrictStr] | None = None


class ChoiceOption(_Lenient):
    """One Decisions choice: a string or boolean ``value`` and an optional description.

    Examples
    --------
    >>> ChoiceOption(value=True).value
    True
    """

    value: StrictStr | StrictBool
    description: StrictStr | None = None


class ChoiceQ(_Lenient):
    """A Decisions ``choice``: 2 or more unique values (``"true"`` and ``true`` may not both appear).

    Examples
    --------
    >>> len(ChoiceQ(type="choice", instructions="Team?", choices=[{"value": "a"}, {"value": "b"}]).choices)
    2
    """

    type: Literal["choice"]
    instructions: Instructions
    choices: list[ChoiceOption] = Field(min_length=2, max_length=MAX_OPTIONS)
    name: StrictStr | None = None
    x_cautious: list[StrictStr | StrictBool] | None = None

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
    """One Decisions score level: a label and an optional description.

    Examples
    --------
    >>> Level(label="calm").description is None
    True
    """

    label: StrictStr
    description: StrictStr | None = None


class ScoreQ(_Lenient):
    """A Decisions ``score``: 2 to 10 levels, low to high.

    Examples
    --------
    >>> len(ScoreQ(type="score", instructions="Anger?", levels=[{"label": "calm"}, {"label": "angry"}]).levels)
    2
    """

    type: Literal["score"]
    instructions: Instructions
    levels: list[Level] = Field(min_length=2, max_length=MAX_SCORE_LEVELS)
    name: StrictStr | None = None
    x_cautious: list[StrictStr] | None = None


DecisionQuestion = Annotated[PredicateQ | ChoiceQ | ScoreQ, Field(discriminator="type")]


class DecisionsRequest(_Lenient):
    """A ``POST /v1/decisions`` body: an input (text or messages) and 1 to 400 questions.

    Examples
    --------
    >>> req = DecisionsRequest(model="jev-latest", input="hi",
    ...                        questions=[{"type": "predicate", "instructions": "A greeting?"}])
    >>> req.questions[0].type
    'predicate'
    """

    model: StrictStr
    input: StrictStr | list[dict[str, Any]] = Field(min_length=1)
    questions: list[DecisionQuestion] = Field(min_length=1, max_length=400)
    x_guard: StrictBool | None = None
    x_trusted: Any = None

    @field_validator("x_trusted")
    @classmethod
    def _no_trusted(cls, v):
        if v is not None:
            raise ValueError("x_trusted names fields of a /v1/systemone JSON-object state; a /v1/decisions input is "
                             "text or messages and has no fields: send the state to /v1/systemone with the trusted "
                             "text as its own field")
        return v


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
    """The Decisions questions as `YesNo` / `Choice` / `Score`, keyed by their position ("0", "1", ...).

    Examples
    --------
    >>> req = DecisionsRequest(model="m", input="hi", questions=[
    ...     {"type": "choice", "instructions": "Team?", "choices": [{"value": "a"}, {"value": True}]}])
    >>> decisions_to_questions(req)["0"].names
    ('a', 'true')
    """
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


# ----------------------------------------------------------------------------- the guard's x_ fields

def cautious_of(req: SystemOneRequest | DecisionsRequest) -> dict:
    """The questions' ``x_cautious`` lists, keyed like the questions the decider gets (answer keys as written).

    A Decisions choice value ``true`` is the option ``"true"``; a Decisions score level is named by
    its number (``"0"``, ``"1"``...) or its label.

    Examples
    --------
    >>> req = SystemOneRequest(model="m", state="s", questions={"q": {"type": "noul", "x_cautious": ["true"]}})
    >>> cautious_of(req)
    {'q': ['true']}
    >>> req = DecisionsRequest(model="m", input="s", questions=[{"type": "score", "instructions": "How bad?",
    ...     "levels": [{"label": "fine"}, {"label": "bad"}], "x_cautious": ["bad"]}])
    >>> cautious_of(req)
    {'0': ['1']}
    """
    if isinstance(req, SystemOneRequest):
        return {qid: list(q.x_cautious) for qid, q in req.questions.items() if q.x_cautious}
    out = {}
    for i, q in enumerate(req.questions):
        if not q.x_cautious:
            continue
        if isinstance(q, ScoreQ):
            labels = {lv.label: str(j) for j, lv in enumerate(q.levels)}
            out[str(i)] = [labels.get(k, k) if isinstance(k, str) else k for k in q.x_cautious]
        else:
            out[str(i)] = [_surface(k) for k in q.x_cautious]
    return out
