"""How a question about a state becomes a prompt and the option strings scored after it.

`plan_question` turns one (state text, question) pair into a `Plan`:

- the prompt as ``(text, is_user)`` pieces: the template's system line, ``Content:``
  and the state first (so every question of a call shares the state's tokens), then
  the question, its options listed in a canonical order (sorted by name for a choice;
  ``Yes``/``No``; levels ``0..n-1``) and the answer cue. With a chat template the
  template's own text wraps the user message; otherwise a plain completion prompt
  ending in ``Answer:`` is used and the options get a leading space;
- the option *surfaces* (what the model writes) in that canonical order, and the
  permutation back to the question's own order.

The question id and the other questions of a call never appear in a prompt, and options
are listed in the canonical order whatever order the caller gave, so an answer does not
depend on them. Pieces flagged as user text (the state, instructions, option names and
descriptions) are data: the scorer tokenizes them as plain text, never as control tokens.

`PROMPT_VERSION` names this wording (calibration profiles record it).

What it deliberately does not do: tokenize (the scorer's ``encode`` does, once, in one
place), score, or decide how answers are normalised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from judge.decisions.questions import (
    MAX_LISTED_OPTIONS,
    Choice,
    DecisionError,
    Question,
    YesNo,
    render_value,
)

__all__ = ["PROMPT_VERSION", "Plan", "plan_question", "state_text"]

PROMPT_VERSION = "decisions-v1"

_SYSTEM = ("You answer one question about the content in the user's message. Reply with exactly one "
           "of the listed answers, written exactly as shown, and nothing else.")
_SENTINEL = "\x00JUDGE_DECISION\x00"
_YES, _NO = "Yes", "No"


@dataclass(frozen=True)
class Plan:
    """How one question becomes a query: its prompt pieces and canonical option order.

    Attributes
    ----------
    pieces : tuple of (str, bool)
        The whole prompt (adjacent template pieces merged); True marks user text.
    surfaces : tuple of str
        What the model writes for each option, in canonical (scoring) order.
    order : tuple of int
        ``order[j]`` is the index, in the question's own option order, of canonical option ``j``.
    listed : bool
        Whether the options are listed in the prompt (False above `MAX_LISTED_OPTIONS`).
    head : tuple of (str, bool)
        The leading pieces up to and including the state: what every question of one call shares.
    question : tuple of (str, bool)
        The pieces after the state: this question's own text (``head + question`` is the
        prompt).

    Examples
    --------
    >>> p = plan_question(None, "I was charged twice", YesNo("Refund?"), chat=False)
    >>> p.surfaces, p.order, p.listed
    ((' Yes', ' No'), (0, 1), True)
    >>> "".join(t for t, _ in p.head + p.question) == "".join(t for t, _ in p.pieces)
    True
    """

    pieces: tuple[tuple[str, bool], ...]
    surfaces: tuple[str, ...]
    order: tuple[int, ...]
    listed: bool
    head: tuple[tuple[str, bool], ...] = ()
    question: tuple[tuple[str, bool], ...] = ()


def state_text(state: Any) -> str:
    """The text of a state: a string as is, a JSON object or array as canonical JSON.

    Parameters
    ----------
    state : str, dict or list

    Returns
    -------
    str

    Raises
    ------
    DecisionError
        Any other type.

    Examples
    --------
    >>> state_text({"b": 1, "a": [True, None]})
    '{"a":[true,null],"b":1}'
    """
    if not isinstance(state, (str, Mapping, list, tuple)):
        raise DecisionError(f"state must be a string, a JSON object or a JSON array, got "
                            f"{type(state).__name__} {state!r:.60}.")
    return render_value(state)


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
    """Drop empty pieces and join adjacent template pieces (user pieces stay apart)."""
    out: list[tuple[str, bool]] = []
    for text, user in pieces:
        if not text:
            continue
        if out and out[-1][1] == user and not user:
            out[-1] = (out[-1][0] + text, user)
        else:
            out.append((text, user))
    return tuple(out)


def plan_question(tokenizer, state: str, question: Question, chat: bool) -> Plan:
    """The prompt pieces and option surfaces of one question about a state.

    Parameters
    ----------
    tokenizer : PreTrainedTokenizerBase or None
        Its chat template wraps the prompt when ``chat`` is True (unused otherwise).
    state : str
        The state's text (see `state_text`).
    question : Choice, YesNo or Score
    chat : bool
        Use the tokenizer's chat template; False: a plain completion prompt.

    Returns
    -------
    Plan

    Raises
    ------
    DecisionError
        The chat template dropped or repeated the user message.

    Examples
    --------
    >>> from judge.decisions import Choice
    >>> from judge.testing import tiny_pair
    >>> p = plan_question(tiny_pair()[1], "text", Choice(["b", "a"], "Pick"), chat=True)
    >>> p.surfaces, p.order
    (('a', 'b'), (1, 0))
    >>> p.pieces[0][0].startswith("<|im_start|>system")
    True
    """
    listed = not (isinstance(question, Choice) and len(question.options) > MAX_LISTED_OPTIONS)
    body, surfaces, order = _question_pieces(question, listed)
    if chat:
        msgs = [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": _SENTINEL}]
        full = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        if full.count(_SENTINEL) != 1:
            raise DecisionError("The tokenizer's chat template dropped or repeated the user message; "
                                "use Decider(chat=False).")
        before, after = full.split(_SENTINEL)
    else:
        before, after = _SYSTEM + "\n\n", "\n\nAnswer:"
        surfaces = [" " + s for s in surfaces]
    head = [(before, False), ("Content:\n", False), (state, True)]
    rest = [*body, (after, False)]
    return Plan(_merge(head + rest), tuple(surfaces), tuple(order), listed, _merge(head), _merge(rest))
