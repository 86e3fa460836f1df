"""A request's plan: its questions' prompts, lowered to the token-level items that are scored, and their price.

`plan_request` does all the work that depends on one request alone: the guard's variants of
its state (`judge.decisions.guard.state_variants`), each question's prompt (`plan_one`), and
the lowering of every prompt and option to tokens (`judge.engine.lower_queries`: the one
rule, options tokenized after the prompt's last 64 characters). It returns a frozen
`RequestPlan`, priced on those very items (`RequestPlan.price`). `judge.decisions.Decider.answer`
scores a plan's items as they are (with a `judge.engine.Lowering` scorer, such as the
``Engine``), so the server's admission plans a request once, prices it, and hands the plan to
the batcher, which neither plans nor tokenizes it again. Only a new question shape's one-time
content-free queries (the bias correction's) are planned at scoring time.

What it deliberately does not do: score, correct the bias, calibrate or combine a guard's
variants (`judge.decisions.Decider.answer`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judge.decisions.guard import state_variants, variant_cost
from judge.decisions.pieces import canonical
from judge.decisions.prompts import Plan, plan_question, state_text
from judge.decisions.questions import DecisionError, Question, YesNo
from judge.engine.protocol import (
    HiddenStates,
    Query,
    default_root,
    lower_queries,
    lowers,
    option_context,
    row_key,
)

__all__ = ["RequestPlan", "join_plans", "plan_one", "plan_request", "score_plans"]


def plan_one(scorer, tokenizer, state, question: Question, style, *, untrusted: bool = False) -> Plan:
    """One question's prompt and scored strings (`judge.decisions.prompts.plan_question`) for this scorer.

    Yes/no spellings that this scorer's tokenizer writes with the same tokens are scored once.

    Parameters
    ----------
    scorer : judge.engine.Scorer
    tokenizer : PreTrainedTokenizerBase
    state : str or tuple of str
        The state's text (`judge.decisions.prompts.state_text`) or a guard variant's pieces.
    question : Choice, YesNo or Score
    style : judge.decisions.PromptStyle
    untrusted : bool
        The guard's framing (`judge.decisions.prompts.UNTRUSTED_NOTE`).

    Examples
    --------
    >>> from judge.decisions import PromptStyle
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> eng = Engine(*tiny_pair())
    >>> len(plan_one(eng, eng.setup().tokenizer_, "hi", YesNo("Is it?"), PromptStyle()).surfaces) <= 8
    True
    """
    p = plan_question(tokenizer, state, question, style, untrusted=untrusted)
    if isinstance(question, YesNo):  # spellings this tokenizer writes with the same tokens are scored once
        seen, drop = set(), []
        for j, ids in enumerate(scorer.option_ids(option_context(p.question), list(p.surfaces), what="Answer spelling")):
            if tuple(ids) in seen:
                drop.append(j)
            seen.add(tuple(ids))
        p = p.without(drop) if drop else p
    return p


@dataclass(frozen=True)
class RequestPlan:
    """One request planned and lowered: what `judge.decisions.Decider.answer` scores, and its price.

    Attributes
    ----------
    state : str, dict or list
        The state as given.
    text : str
        Its text (`judge.decisions.prompts.state_text`).
    questions : dict of str to Choice, YesNo or Score
    guard : judge.decisions.Guard or None
        The guard the request runs under (None: unguarded).
    call_plan : judge.decisions.guard.CallPlan or None
        The guard's pieces, flags and variants (None: unguarded).
    entries : tuple of (str, int, judge.decisions.prompts.Plan)
        Per question (in order) and per variant of its state (the state as given first): the prompt.
    items : tuple of judge.engine.Item
        Per entry, its prompt's token ids and its options' scored token ids (``group`` numbered
        within this request; the batch renumbers them).
    keys : tuple
        Per entry, its forest row key (`judge.engine.row_key`).
    n_state : int
        Tokens of the template and the state (shared by every question).
    tokens : dict of str to int
        Per question, its own tokens: its prompt's tokens past the state's, plus its options'
        scored tokens, counted on ``items``.
    guard_tokens : dict of str to int
        Per question, what its erased variants add (`judge.decisions.guard.variant_cost`; empty unguarded).

    Examples
    --------
    >>> from judge.decisions import Decider
    >>> from judge.testing import tiny_pair
    >>> rp = Decider(*tiny_pair()).plan_request("I was charged twice", {"a": YesNo("Refund?")})
    >>> rp.total == len(rp.items[0].ids) + sum(len(o) for o in rp.items[0].options), len(rp.entries)
    (True, 1)
    """

    state: Any
    text: str
    questions: Mapping[str, Question]
    guard: Any = None
    call_plan: Any = None
    entries: tuple = ()
    items: tuple = ()
    keys: tuple = ()
    n_state: int = 0
    tokens: Mapping[str, int] = field(default_factory=dict)
    guard_tokens: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Tokens the request feeds the model: ``n_state`` plus every question's tokens and its variants'."""
        return self.n_state + sum(self.tokens.values()) + sum(self.guard_tokens.values())

    def price(self) -> dict:
        """``{"state": int, "questions": {id: int}, "total": int}`` (and ``"guard": {id: int}`` when guarded).

        The form `judge.decisions.Decider.count_tokens` returns.
        """
        out = {"state": self.n_state, "questions": dict(self.tokens), "total": self.total}
        if self.call_plan is not None:
            out["guard"] = dict(self.guard_tokens)
        return out

    def part(self, qids: Sequence[str]) -> RequestPlan:
        """The plan of some of its questions (an unguarded plan's questions are planned apart: exact).

        Raises
        ------
        ValueError
            A guarded plan: a guard's variants depend on every question it was planned with.
        """
        if self.call_plan is not None:
            raise ValueError("A guarded plan cannot be cut: plan the questions together with plan_request.")
        keep = set(qids)
        sel = [i for i, (qid, _, _) in enumerate(self.entries) if qid in keep]
        return RequestPlan(self.state, self.text, {k: q for k, q in self.questions.items() if k in keep}, None, None,
                           tuple(self.entries[i] for i in sel), tuple(self.items[i] for i in sel),
                           tuple(self.keys[i] for i in sel), self.n_state,
                           {k: v for k, v in self.tokens.items() if k in keep}, {})

    def queries(self) -> list[Query]:
        """Its entries as text-level queries (for a scorer that is not a `judge.engine.Lowering`)."""
        return [Query(pieces=p.pieces, options=p.surfaces) for _, _, p in self.entries]


def plan_request(scorer, tokenizer, styles: Mapping, state: Any, questions: Mapping[str, Question],
                 guard=None) -> RequestPlan:
    """Plan, lower and price one request (see the module docstring).

    Parameters
    ----------
    scorer : judge.engine.Scorer
        Its ``encode`` and ``option_ids`` lower the prompts.
    tokenizer : PreTrainedTokenizerBase
    styles : dict of str to PromptStyle
        Per question type (`judge.decisions.Decider.styles_`).
    state : str, dict or list
    questions : mapping of str to Choice, YesNo or Score
        Checked by the caller (`judge.decisions.questions.check_questions`).
    guard : judge.decisions.Guard or None

    Returns
    -------
    RequestPlan

    Raises
    ------
    DecisionError
        A bad state, question or guard.
    judge.LabelError
        An option the tokenizer cannot spell as plain text.

    Examples
    --------
    >>> from judge.decisions import DEFAULT_STYLES
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> eng = Engine(*tiny_pair()).setup()
    >>> rp = plan_request(eng, eng.tokenizer_, DEFAULT_STYLES, "hi", {"a": YesNo("Is it?"), "b": YesNo("Or?")})
    >>> [qid for qid, _, _ in rp.entries], rp.total == rp.n_state + rp.tokens["a"] + rp.tokens["b"]
    (['a', 'b'], True)
    """
    call_plan, variants = state_variants(state, questions, guard, tokenizer)
    untrusted = bool(guard and guard.framing)
    entries = tuple((qid, vi, plan_one(scorer, tokenizer, st, q, styles[q.type], untrusted=untrusted))
                    for qid, q in questions.items() for vi, st in enumerate(variants[qid]))
    keys = tuple(row_key(p.pieces) for _, _, p in entries)
    items = tuple(lower_queries(scorer, [Query(pieces=p.pieces, options=p.surfaces) for _, _, p in entries], keys=keys))
    n_state = len(scorer.encode(entries[0][2].head)) if entries else 0
    tokens = {qid: max(0, len(it.ids) - n_state) + sum(len(o) for o in it.options)
              for (qid, vi, _), it in zip(entries, items) if vi == 0}
    text = state_text(state)
    # a guard reads the state in its canonical form (`judge.decisions.pieces.canonical`): its variants priced on it
    read = state_text(canonical(state)) if call_plan is not None and guard.canonical else text
    extra = {} if call_plan is None else variant_cost(read, variants, tokens, scorer.encode)
    return RequestPlan(state, text, dict(questions), guard, call_plan, entries, items, keys, n_state, tokens, extra)


def score_plans(scorer, plans: Sequence[RequestPlan], extra: Sequence[Plan] = (), *, root=None, states=False):
    """Scores of every entry of ``plans``, then of the ``extra`` prompts, in one call of the scorer.

    A `judge.engine.Lowering` scorer (`judge.engine.lowers`) scores the plans' items as they are
    (``extra`` is lowered here, and rows are regrouped over the whole call: what ``scorer.score``
    of the same queries computes, bit for bit); another scorer gets the text queries.

    Parameters
    ----------
    scorer : judge.engine.Scorer
    plans : sequence of RequestPlan
    extra : sequence of judge.decisions.prompts.Plan
        Prompts planned at scoring time (a new shape's content-free queries).
    root : sequence of int, optional
        The root to cache (default: the scorer's, the common prefix of the prompts).
    states : bool
        Also return each entry's answer-slot hidden state, read from the same forward pass
        (`judge.engine.protocol.HiddenStates`; a fitted profile's features).

    Returns
    -------
    list of ndarray
        Per entry, then per extra prompt: each scored string's log-probability.
    ndarray of shape (n, d)
        Only with ``states``: per entry, then per extra prompt, the answer-slot state.

    Raises
    ------
    DecisionError
        ``states`` with a scorer that cannot give them (no lowering or no hidden states: vLLM's).

    Examples
    --------
    >>> from judge.decisions import DEFAULT_STYLES
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> eng = Engine(*tiny_pair()).setup()
    >>> rp = plan_request(eng, eng.tokenizer_, DEFAULT_STYLES, "hi", {"a": YesNo("Is it?")})
    >>> [s.shape == (len(p.surfaces),) for s, (_, _, p) in zip(score_plans(eng, [rp]), rp.entries)]
    [True]
    """
    queries = [Query(pieces=c.pieces, options=c.surfaces) for c in extra]
    if states and not (lowers(scorer) and isinstance(scorer, HiddenStates)):
        raise DecisionError(f"Fitted decision profiles read the model's hidden states; the scorer "
                            f"{type(scorer).__name__} cannot give them (judge.engine.protocol.HiddenStates). Use the "
                            f"transformers engine (backend='transformers').")
    if not lowers(scorer):
        return scorer.score([q for rp in plans for q in rp.queries()] + queries, root=root)
    keys = [k for rp in plans for k in rp.keys] + [row_key(q.pieces) for q in queries]
    items = [it for rp in plans for it in rp.items] + lower_queries(scorer, queries)
    groups: dict = {}
    items = [dataclasses.replace(it, group=groups.setdefault(k, len(groups))) for it, k in zip(items, keys)]
    root = root if root is not None else default_root([it.ids for it in items])
    return scorer.score_items_states(items, root=root) if states else scorer.score_items(items, root=root)


def join_plans(parts: Sequence[RequestPlan]) -> RequestPlan:
    """One plan of several unguarded plans of the same state (a request planned chunk by chunk).

    Examples
    --------
    >>> from judge.decisions import Decider
    >>> from judge.testing import tiny_pair
    >>> d = Decider(*tiny_pair())
    >>> a, b = (d.plan_request("hi", {k: YesNo("?")}, guard=False) for k in "ab")
    >>> joined = join_plans([a, b])
    >>> list(joined.questions), joined.total == a.total + b.total - a.n_state
    (['a', 'b'], True)
    """
    if any(p.call_plan is not None for p in parts):
        raise ValueError("Guarded plans cannot be joined: plan the questions together with plan_request.")
    return dataclasses.replace(parts[0], questions={k: q for p in parts for k, q in p.questions.items()},
                               entries=tuple(e for p in parts for e in p.entries),
                               items=tuple(it for p in parts for it in p.items),
                               keys=tuple(k for p in parts for k in p.keys),
                               tokens={k: v for p in parts for k, v in p.tokens.items()})
