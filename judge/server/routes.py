"""The two decision routes, each a pair beside its contract: how a parsed body becomes questions,
and how answers become the response body.

A :class:`Route` names its path, its request model (`judge.server.contract`), ``options`` (each
question's option count, which admission limits before anything is built), ``read`` (the
request -> the state and the questions, which admission prices) and ``render`` (the request and a :class:`Served` result -> the response body,
written by `judge.server.wire`). The app (`judge.server.app`) routes, admits and batches; it
holds no wire form of its own. A new route is a new :class:`Route` in :data:`ROUTES`.

What it deliberately does not do: admit, price or score (`judge.server.admission`,
`judge.decisions`), or speak HTTP.

Examples
--------
>>> route_named("systemone").path, [r.name for r in ROUTES]
('/v1/systemone', ['systemone', 'decisions'])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from judge.server.contract import (
    ChoiceQ,
    ChoiceQuestion,
    DecisionsRequest,
    SystemOneRequest,
    decisions_to_questions,
    render_input,
    to_questions,
)
from judge.server.wire import decisions_body, systemone_body

__all__ = ["Route", "Served", "ROUTES", "SYSTEMONE", "DECISIONS", "route_named"]


@dataclass
class Served:
    """What serving one request gave: its answers by question id, and what it cost.

    Attributes
    ----------
    answers : dict of str to judge.decisions.Answer
        In the request's question order.
    input_tokens : int
        The request's own tokens (state and questions), as admission priced them.
    batch_tokens, batch_requests, jobs : int
        Tokens of the scoring calls it shared, the most requests one call served, its jobs.
    compute_ms, total_ms, admit_ms : float
        Scoring time of its calls, queue and scoring, and admission.

    Examples
    --------
    >>> Served({}, 12).extensions()["x_jobs"]
    0
    """

    answers: dict
    input_tokens: int
    batch_tokens: int = 0
    batch_requests: int = 0
    jobs: int = 0
    compute_ms: float = 0.0
    total_ms: float = 0.0
    admit_ms: float = 0.0

    def extensions(self) -> dict:
        """The ``x_`` fields of the response that say what the request cost (with ``extensions`` on)."""
        return {"x_batch_requests": self.batch_requests, "x_batch_input_tokens": self.batch_tokens,
                "x_compute_ms": round(self.compute_ms, 3), "x_total_ms": round(self.total_ms, 3),
                "x_admit_ms": round(self.admit_ms, 3), "x_jobs": self.jobs}


@dataclass(frozen=True)
class Route:
    """One decision route: its path, request model, ``read`` and ``render``.

    Attributes
    ----------
    name, path : str
    request : type of pydantic.BaseModel
        The contract's request model the body is parsed into.
    options : callable
        ``options(req) -> dict``: the option count per question id (admission's ``max_options``),
        read off the parsed body before any question is built.
    read : callable
        ``read(req) -> (state, questions)``: the state (str or mapping) and the questions (id ->
        `judge.decisions.Question`; may raise `judge.decisions.DecisionError`).
    render : callable
        ``render(req, served, *, model, extensions) -> dict``: the response body (``extensions``: the
        response-level ``x_`` fields, or None when the server writes none).

    Examples
    --------
    >>> SYSTEMONE.request.__name__, DECISIONS.path
    ('SystemOneRequest', '/v1/decisions')
    """

    name: str
    path: str
    request: type[BaseModel]
    options: Callable[[Any], dict]
    read: Callable[[Any], tuple[Any, dict]]
    render: Callable[..., dict]


def _options_systemone(req: SystemOneRequest) -> dict:
    return {qid: len(q.criteria) if isinstance(q, ChoiceQuestion) else (len(q.criteria) if q.type == "score" else 2)
            for qid, q in req.questions.items()}


def _options_decisions(req: DecisionsRequest) -> dict:
    return {str(i): len(q.choices) if isinstance(q, ChoiceQ) else (len(q.levels) if q.type == "score" else 2)
            for i, q in enumerate(req.questions)}


def _read_systemone(req: SystemOneRequest):
    return req.state, to_questions(req)


def _read_decisions(req: DecisionsRequest):
    return render_input(req.input), decisions_to_questions(req)


def _render_systemone(req, served: Served, *, model: str, extensions: dict | None) -> dict:
    return systemone_body(model, served.answers, served.input_tokens, extensions=extensions)


def _render_decisions(req, served: Served, *, model: str, extensions: dict | None) -> dict:
    return decisions_body(model, req.questions, served.answers, served.input_tokens, extensions=extensions)


SYSTEMONE = Route("systemone", "/v1/systemone", SystemOneRequest, _options_systemone, _read_systemone,
                  _render_systemone)
DECISIONS = Route("decisions", "/v1/decisions", DecisionsRequest, _options_decisions, _read_decisions,
                  _render_decisions)
#: Every decision route the app serves, in order.
ROUTES = (SYSTEMONE, DECISIONS)


def route_named(route: Route | str) -> Route:
    """The :class:`Route` of a name (``"systemone"``, ``"decisions"``); a Route is returned as it is.

    Examples
    --------
    >>> route_named(DECISIONS) is DECISIONS
    True
    >>> route_named("nope")
    Traceback (most recent call last):
    ...
    ValueError: no route named 'nope'; the routes are ['systemone', 'decisions'].
    """
    if isinstance(route, Route):
        return route
    for r in ROUTES:
        if r.name == route:
            return r
    raise ValueError(f"no route named {route!r}; the routes are {[r.name for r in ROUTES]}.")
