"""The server's routes, its wire bodies and its counters (judge.server.routes, .wire, .counters).

Each decision route is one `Route` (parse and render beside its contract): the app serves exactly
the routes in ``ROUTES``; admission limits a body before a single question is built (a route's
``read`` is never reached by an over-limit body); the response bodies come from the one wire
module; every count ``/healthz`` reports sits in one thread-safe `Counters`.
"""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from judge.decisions import Answer, Decider  # noqa: E402
from judge.server.admission import Admission  # noqa: E402
from judge.server.app import ServerConfig, create_app  # noqa: E402
from judge.server.counters import Counters  # noqa: E402
from judge.server.errors import ApiError  # noqa: E402
from judge.server.routes import DECISIONS, ROUTES, SYSTEMONE, Served, route_named  # noqa: E402
from judge.server.wire import answer_to_wire, systemone_body  # noqa: E402

CHOICE = {"type": "choice", "instructions": "Which team?", "criteria": {"Billing": None, "Technical": None}}


@pytest.fixture(scope="module")
def decider(tiny_llama):
    return Decider(*tiny_llama, bias=None)


def test_the_app_serves_exactly_the_routes_of_the_table(decider):
    app = create_app(decider, ServerConfig(max_wait_ms=0))
    posted = {r.path for r in app.routes if "POST" in getattr(r, "methods", ())}
    assert {r.path for r in ROUTES} <= posted
    assert posted - {r.path for r in ROUTES} == set()  # no decision route outside the table (no classifier here)


def test_a_route_by_name_or_object_admits_the_same(decider):
    adm = Admission(decider, lambda name: None)
    raw = json.dumps({"model": "m", "state": "hi", "questions": {"q": CHOICE}}).encode()
    a = adm.admit(raw, "application/json", "systemone")[1]
    b = adm.admit(raw, "application/json", SYSTEMONE)[1]
    assert a.total == b.total and list(a.questions) == list(b.questions) == ["q"]
    with pytest.raises(ValueError, match="no route named 'nope'.*systemone"):
        adm.admit(raw, "application/json", "nope")


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
def test_limits_are_checked_before_any_question_is_built(decider, route):
    """An over-limit body is refused 413 without ``read`` running (a 10^5-option question costs nothing to refuse)."""
    calls = []

    def spy(req):
        calls.append(req)
        return route.read(req)

    spied = dataclasses.replace(route, read=spy)
    adm = Admission(decider, lambda name: None, max_options=3)
    opts = [f"option {i}" for i in range(4)]
    payload = ({"model": "m", "state": "hi", "questions": {"q": {**CHOICE, "criteria": dict.fromkeys(opts)}}} if route is SYSTEMONE
               else {"model": "m", "input": "hi", "questions": [{"type": "choice", "name": "q", "instructions": "Which?",
                                                                  "choices": [{"value": o} for o in opts]}]})
    with pytest.raises(ApiError) as err:
        adm.admit(json.dumps(payload).encode(), "application/json", spied)
    assert err.value.status == 413 and "max_options" in str(err.value) and calls == []
    payload_ok = json.loads(json.dumps(payload))
    if route is SYSTEMONE:
        payload_ok["questions"]["q"]["criteria"] = dict.fromkeys(opts[:3])
    else:
        payload_ok["questions"][0]["choices"] = payload_ok["questions"][0]["choices"][:3]
    adm.admit(json.dumps(payload_ok).encode(), "application/json", spied)
    assert len(calls) == 1


def test_systemone_body_carries_the_guard_and_the_extensions_only_when_asked():
    a = Answer("choice", {"a": 0.75, "b": 0.25}, choice="a", confidence=0.5)
    plain = systemone_body("m", {"q": a}, 9)
    assert plain == {"model": "m", "answers": {"q": answer_to_wire(a)}, "usage": {"input_tokens": 9, "output_tokens": 0}}
    ext = systemone_body("m", {"q": a}, 9, extensions=Served({"q": a}, 9, jobs=2).extensions())
    assert ext["x_jobs"] == 2 and ext["answers"]["q"]["x_path"] == "listed"


def test_both_routes_answer_through_the_app_and_healthz_counts_them(decider):
    app = create_app(decider, ServerConfig(max_wait_ms=0))
    with TestClient(app) as client:
        r1 = client.post(SYSTEMONE.path, json={"model": "jev-latest", "state": "hi", "questions": {"q": CHOICE}})
        r2 = client.post(DECISIONS.path, json={"model": "jev-latest", "input": "hi", "questions": [
            {"type": "choice", "name": "team", "instructions": "Which team?",
             "choices": [{"value": "Billing"}, {"value": "Technical"}]}]})
        health = client.get("/healthz").json()
    assert r1.status_code == r2.status_code == 200, (r1.text, r2.text)
    assert r1.json()["answers"]["q"]["choice"] in ("Billing", "Technical")
    assert r2.json()["answers"][0]["choice"] in ("Billing", "Technical")
    assert r2.json()["usage"]["total_tokens"] == r2.json()["usage"]["input_tokens"] > 0
    assert health["in_flight"] == 0 and health["scoring_calls"] == 2  # both requests (the warm-up is not counted)
    assert health["scored_tokens"] > 0 and "admitting" not in health


def test_counters_are_exact_under_threads():
    c = Counters()

    def work():
        for _ in range(2000):
            c.add("scored_tokens", 2)
            with c.during("admitting"):
                pass

    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.get("scored_tokens") == 16 * 2000 * 2 and c.get("admitting") == 0
    assert set(c.snapshot()) >= {"in_flight", "disconnected", "server_errors", "scoring_calls", "scoring_s"}


def test_route_named_refuses_an_unknown_name():
    assert route_named("decisions") is DECISIONS
    with pytest.raises(ValueError, match="the routes are"):
        route_named("classify")
