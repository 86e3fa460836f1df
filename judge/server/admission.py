"""Admission: a request parsed, validated, limited and priced before it is queued, off the scoring thread.

`Admission.admit` takes a request body (bytes) and returns an `Admitted` request or
raises the error the caller gets, in this order, cheapest first:

1. JSON and the contract's pydantic models (422 ``detail[]``, worded as FastAPI would);
2. the served model name (404);
3. counts: questions per request and options per question (413 naming the limit), and a
   lower bound on tokens (every option is at least one scored token);
4. long texts (a state, instructions, descriptions over 16k characters) counted in pieces,
   so a hostile 4 MB string is refused after a bounded amount of tokenizing, never
   holding the interpreter for seconds;
5. the plan (`Decider.plan_request`: every question's prompt, lowered to the token-level items
   the engine scores) and its exact price, counted on those items, question chunk by chunk,
   stopping as soon as a budget is exceeded: the state plus the longest question
   (``max_state_tokens``), the request (``max_request_tokens``), and the model's context (a
   question's deepest token: its prompt and its longest option, at most
   ``max_position_embeddings`` and the engine's ``max_batch_tokens``) -> 413.

A guarded request (``"x_guard": true``, a question's ``x_cautious``, or ``judge serve --guard``)
is priced with its erased variants (`judge.decisions.RequestPlan.guard_tokens`): they multiply
the tokens fed, so they count against ``max_request_tokens`` and size its jobs.

An admitted request is cut into *jobs* (`Admitted.jobs`: consecutive questions of at most
``max_job_tokens`` tokens each), which the `MicroBatcher` serves in turn with other requests.
Every question is scored alone (its prompt holds only the state and itself), so the cut never
changes an answer beyond float rounding. Each job carries its plan (`Admitted.work`), cut from
the request's: the batcher scores it as it is (`Decider.answer`), so a question is planned and
tokenized once per request. A guard's variants depend on every question planned with it, so a
guarded request is planned whole when it is one job and at most 16 questions (its pricing
chunk); otherwise each of its jobs is planned again, here, for its own questions (as a guarded
`Decider.ask` of those questions would).

What it deliberately does not do: score, queue, or write responses.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from judge._errors import LabelError
from judge.decisions import Choice, DecisionError, Guard, Score, YesNo, render_value
from judge.decisions.planning import join_plans
from judge.decisions.prompts import state_text
from judge.engine.passes import DEFAULT_MAX_BATCH_TOKENS, model_context
from judge.server.contract import cautious_of
from judge.server.errors import ApiError
from judge.server.routes import route_named

__all__ = ["Admission", "Admitted", "Invalid"]

_CHUNK = 16_384  # characters tokenized at a time when a text is long
_PRICE_CHUNK = 16  # questions priced per count_tokens call


class Invalid(Exception):
    """A request the decision layer refuses (answered 422 on ``body.questions``).

    Examples
    --------
    >>> str(Invalid("option 'a' is given twice"))
    "option 'a' is given twice"
    """


@dataclass(frozen=True)
class Admitted:
    """A request that passed admission: its state, questions and price.

    Attributes
    ----------
    state : str, dict or list
    questions : dict of str to Choice, YesNo or Score
    n_state : int
        Tokens of the template and the state (shared by every question).
    tokens : dict of str to int
        Each question's own tokens (its text and its options' scored tokens; with a
        guard, also what its erased variants add).
    total : int
        ``n_state + sum(tokens.values())`` (the response's ``usage.input_tokens``).
    guard : judge.decisions.Guard or None
        The request's guard (None: unguarded).
    work : tuple of (judge.decisions.RequestPlan, int, int)
        Its jobs as the batcher takes them: each job's plan, questions and tokens (filled by
        `Admission.price`; empty for an `Admitted` built by hand).

    Examples
    --------
    >>> a = Admitted("hi", {"a": YesNo("?"), "b": YesNo("!")}, 10, {"a": 5, "b": 6}, 21)
    >>> [(sorted(qs), n) for (_, qs, _), size, n in a.jobs(max_tokens=16, max_questions=8)]
    [(['a'], 15), (['b'], 16)]
    """

    state: Any
    questions: dict
    n_state: int
    tokens: dict
    total: int
    guard: Any = None
    work: tuple = ()

    def jobs(self, *, max_tokens: int, max_questions: int) -> list[tuple[tuple, int, int]]:
        """Consecutive questions cut into ``((state, questions, guard), n_questions, tokens)`` jobs.

        A job holds at most ``max_questions`` questions and, unless one question alone is
        larger, at most ``max_tokens`` tokens (the state counted in each job); its guard
        names the cautious options of its own questions only.
        """
        out, cur, n = [], {}, self.n_state

        def close():
            g = self.guard
            if g is not None:
                g = dataclasses.replace(g, cautious={k: v for k, v in g.cautious.items() if k in cur})
            out.append(((self.state, cur, g if g is not None else False), len(cur), n))

        for qid, q in self.questions.items():
            t = self.tokens[qid]
            if cur and (n + t > max_tokens or len(cur) >= max_questions):
                close()
                cur, n = {}, self.n_state
            cur[qid] = q
            n += t
        close()
        return out


def _parse(body: bytes, content_type: str | None, model):
    """The body as ``model``, with FastAPI's semantics (JSON only for a JSON content type) and errors."""
    data: Any = body
    if content_type:
        import email.message

        msg = email.message.Message()
        msg["content-type"] = content_type
        sub = msg.get_content_subtype()
        if msg.get_content_maintype() == "application" and (sub == "json" or sub.endswith("+json")):
            try:
                data = json.loads(body)
            except json.JSONDecodeError as e:
                raise RequestValidationError([{"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error",
                                               "input": {}, "ctx": {"error": e.msg}}]) from None
            except UnicodeDecodeError as e:
                raise RequestValidationError([{"type": "json_invalid", "loc": ("body",), "msg": "JSON decode error",
                                               "input": {}, "ctx": {"error": f"not UTF-8 ({e.reason})"}}]) from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise RequestValidationError([{**err, "loc": ("body", *err.get("loc", ()))} for err in e.errors()]) from None


def _texts(q) -> list[str]:
    if isinstance(q, Choice):
        return [render_value(q.instructions), *q.names, *(render_value(d) for d in q.options.values())]
    if isinstance(q, YesNo):
        return [render_value(x) for x in (q.instructions, q.true, q.false)]
    if isinstance(q, Score):
        return [render_value(q.instructions), *(render_value(x) for x in q.levels)]
    return []


class Admission:
    """Parse, validate, limit and price requests (run it in threads apart from the scoring thread).

    Parameters
    ----------
    decider : judge.decisions.Decider
    check_model : callable
        ``check_model(name)`` raises `ApiError` 404 for a model this server does not serve.
    max_questions, max_options : int
        Questions per request, options per choice question.
    max_request_tokens, max_state_tokens : int
        The token budgets (the request; the state plus the longest question).
    max_job_tokens, max_job_questions : int
        How a request is cut into jobs (see `Admitted.jobs`).
    guard : bool
        Guard requests that do not say (``x_guard``); a request with ``x_cautious`` on a
        question is guarded unless it says ``"x_guard": false``.

    Examples
    --------
    >>> from judge.decisions import Decider
    >>> from judge.testing import tiny_pair
    >>> adm = Admission(Decider(*tiny_pair()), lambda name: None)
    >>> body = b'{"model": "m", "state": "hi", "questions": {"q": {"type": "noul"}}}'
    >>> req, a = adm.admit(body, "application/json", "systemone")
    >>> list(a.questions), a.total == a.n_state + a.tokens["q"]
    (['q'], True)
    """

    def __init__(self, decider, check_model: Callable[[str], None], *, max_questions: int = 1024,
                 max_options: int = 10_000, max_request_tokens: int = 65536, max_state_tokens: int = 32768,
                 max_job_tokens: int = DEFAULT_MAX_BATCH_TOKENS, max_job_questions: int = 256, guard: bool = False):
        self.decider = decider
        self.check_model = check_model
        self.max_questions, self.max_options = max_questions, max_options
        self.max_request_tokens, self.max_state_tokens = max_request_tokens, max_state_tokens
        self.max_job_tokens, self.max_job_questions = max_job_tokens, max_job_questions
        self.guard = bool(guard)

    # ---------------------------------------------------------------- limits
    def context(self) -> tuple[int | None, str]:
        """The deepest position a question may reach, and what sets it (the model's context or the engine's T).

        Examples
        --------
        >>> from judge.decisions import Decider
        >>> from judge.testing import tiny_pair
        >>> Admission(Decider(*tiny_pair()), lambda n: None).context()[0] > 0
        True
        """
        scorer = self.decider.scorer_
        scorer.setup()
        ctx = model_context(getattr(scorer, "model_", None))
        t = getattr(scorer, "max_batch_tokens", None)
        if t is not None and (ctx is None or t < ctx):
            return int(t), f"the engine's max_batch_tokens ({t})"
        return ctx, f"the model's {ctx}-token context (max_position_embeddings)"

    def _counts(self, n_questions: int, options: dict) -> None:
        if n_questions > self.max_questions:
            raise ApiError(413, f"the request has {n_questions} questions, over this server's limit of "
                                f"{self.max_questions} per request (max_questions); send them in several requests.")
        for qid, k in options.items():
            if k > self.max_options:
                raise ApiError(413, f"question {qid!r} has {k} options, over this server's limit of "
                                    f"{self.max_options} per question (max_options); split the options over "
                                    f"several questions or ask the operator to raise --max-options.")
        floor = sum(options.values())
        if floor > self.max_request_tokens:
            raise ApiError(413, f"the request's {floor} options are at least {floor} tokens, over the "
                                f"{self.max_request_tokens}-token budget (max_request_tokens); send fewer "
                                f"questions or options per request.")

    def _long_text(self, encode, text: str, limit: int, limit_what: str, what: str, fix: str) -> None:
        """Count a long text in pieces (the GIL is released between them); 413 when clearly over ``limit``."""
        if len(text) <= _CHUNK:
            return
        n, i, pieces = 0, 0, 0
        while i < len(text):
            j = min(len(text), i + _CHUNK)
            if j < len(text):
                k = text.rfind(" ", i + _CHUNK // 2, j)
                j = k if k > i else j
            n += len(encode([(text[i:j], True)]))
            pieces += 1
            i = j
            if n - pieces > limit:  # a cut can change the count by a token or so
                raise ApiError(413, f"{what} is more than {n - pieces} tokens (counted on its first {i} "
                                    f"characters of {len(text)}), over {limit_what}; {fix}.")
            time.sleep(0)

    # ---------------------------------------------------------------- admit
    def admit(self, body: bytes, content_type: str | None, route):
        """Admit one request body for ``route`` (a `judge.server.routes.Route`, or its name: "systemone", "decisions").

        Returns
        -------
        (request model, Admitted)

        Raises
        ------
        fastapi.exceptions.RequestValidationError
            The body does not follow the contract (422).
        ApiError
            404 (model), 413 (a limit or budget, named in the message).
        Invalid
            The decision layer refused a question (422).
        """
        route = route_named(route)
        req = _parse(body, content_type, route.request)
        self.check_model(req.model)
        self._counts(len(req.questions), route.options(req))  # limits first: before any question is built
        try:
            state, questions = route.read(req)
        except DecisionError as e:
            raise Invalid(str(e)) from None
        cautious = cautious_of(req)
        on = req.x_guard if req.x_guard is not None else (self.guard or bool(cautious))
        try:
            guard = Guard(cautious=cautious, trusted=tuple(req.x_trusted or ())) if on else None
        except DecisionError as e:
            raise Invalid(str(e)) from None
        return req, self.price(state, questions, guard)

    def price(self, state, questions: dict, guard=None) -> Admitted:
        """Count ``questions`` about ``state`` against every budget (see the module docstring).

        ``guard``: a `judge.decisions.Guard` (its erased variants are priced) or None (unguarded).

        Examples
        --------
        >>> from judge.decisions import Decider
        >>> from judge.testing import tiny_pair
        >>> adm = Admission(Decider(*tiny_pair()), lambda n: None, max_request_tokens=60)
        >>> adm.price("hi", {f"q{i}": YesNo("Is it?") for i in range(40)})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        judge.server.errors.ApiError: the request is at least ... tokens (counted 16 of 40 questions), over the 60-token budget (max_request_tokens); send fewer questions per request.
        """
        d = self.decider
        scorer = d.scorer_
        ctx, ctx_what = self.context()
        budget = f"the {self.max_state_tokens}-token budget (max_state_tokens)"
        state_limit, state_what = (ctx, ctx_what) if ctx and ctx < self.max_state_tokens else \
            (self.max_state_tokens, budget)
        try:
            self._long_text(scorer.encode, state_text(state), state_limit, state_what, "the state",
                            "shorten the state or split it over several requests")
            for qid, q in questions.items():
                self._long_text(scorer.encode, "\n".join(_texts(q)), state_limit, state_what, f"question {qid!r}",
                                "shorten its instructions or descriptions")
            ids = list(questions)
            tokens: dict[str, int] = {}
            chunks, total, longest = [], 0, 0
            for s in range(0, len(ids), _PRICE_CHUNK):
                chunk = {qid: questions[qid] for qid in ids[s:s + _PRICE_CHUNK]}
                g = None if guard is None else dataclasses.replace(
                    guard, cautious={k: v for k, v in guard.cautious.items() if k in chunk})
                plan = d.plan_request(state, chunk, guard=g if g is not None else False)
                chunks.append(plan)
                tokens.update({k: v + plan.guard_tokens.get(k, 0) for k, v in plan.tokens.items()})
                total = plan.n_state + sum(tokens.values())
                longest = max(longest, *plan.tokens.values())
                if plan.n_state + longest > self.max_state_tokens:
                    raise ApiError(413, f"the state plus the longest question is {plan.n_state + longest} tokens, over "
                                        f"the {self.max_state_tokens}-token budget (max_state_tokens); shorten the "
                                        f"state or split the question.")
                if total > self.max_request_tokens:
                    what = " with the guard's erased variants of the state" if guard is not None else ""
                    fix = "; or a shorter state, or \"x_guard\": false" if guard is not None else ""
                    raise ApiError(413, f"the request is at least {total} tokens{what} (counted {len(tokens)} of "
                                        f"{len(ids)} questions), over the {self.max_request_tokens}-token budget "
                                        f"(max_request_tokens); send fewer questions per request{fix}.")
                if ctx:
                    self._deepest(plan, ctx, ctx_what)
            admitted = Admitted(state, questions, chunks[0].n_state, tokens, total, guard)
            jobs = admitted.jobs(max_tokens=self.max_job_tokens, max_questions=self.max_job_questions)
            if guard is None:
                whole = join_plans(chunks) if len(chunks) > 1 else chunks[0]
                work = [(whole if len(jobs) == 1 else whole.part(qs), n, t) for (_, qs, _), n, t in jobs]
            elif len(jobs) == 1 and len(ids) <= _PRICE_CHUNK:  # the plan priced is the plan scored
                work = [(chunks[0], n, t) for _, n, t in jobs]
            else:  # a guard's variants depend on the questions planned together: each job is planned for its own
                work = [(d.plan_request(state, qs, guard=g), n, t) for (_, qs, g), n, t in jobs]
        except (DecisionError, LabelError) as e:
            raise Invalid(str(e)) from None
        if guard is not None:
            unknown = sorted(set(guard.cautious) - set(questions))
            if unknown:
                raise Invalid(f"x_cautious names question(s) {unknown} that are not in the request.")
        return dataclasses.replace(admitted, work=tuple(work))

    def _deepest(self, plan, ctx: int, ctx_what: str) -> None:
        """413 when a question's prompt plus its longest option (the items the engine will score) is over ``ctx``."""
        for (qid, _, _), it in zip(plan.entries, plan.items):
            longest = max((len(o) for o in it.options), default=0)
            if len(it.ids) + longest > ctx:
                raise ApiError(413, f"question {qid!r} needs {len(it.ids) + longest} positions (the state, the question "
                                    f"and its longest option: {len(it.ids)} + {longest} tokens), over {ctx_what}; "
                                    f"shorten the state or the question, or use a model with a longer context.")
