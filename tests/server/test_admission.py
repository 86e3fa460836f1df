"""Admission at every limit: a request exactly at a limit is admitted, one unit over is refused.

In process (no HTTP server): ``Admission.admit`` on request bodies, with the tiny random Llama
behind a `Decider`. Each limit is met exactly (``n == limit``: admitted) and passed by one
(``limit + 1``: 413 naming the limit), on both routes where it applies: questions per request,
options per question, the request's tokens, the state plus the longest question, the model's
context (where the answer is checked against the engine itself: admitted exactly when the
engine can score it), and the cut of a request into jobs. tests/server/test_limits.py checks
the same limits through a real server, past the limit.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

from judge.decisions import Decider, YesNo  # noqa: E402
from judge.engine import Engine  # noqa: E402
from judge.server.admission import Admission, Admitted  # noqa: E402
from judge.server.app import ServerConfig  # noqa: E402
from judge.server.errors import ApiError  # noqa: E402

NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}


@pytest.fixture(scope="module")
def decider(tiny_llama):
    return Decider(*tiny_llama, bias=None)


def _admission(decider, **limits):
    def check_model(name):
        if name != "jev-latest":
            raise ApiError(404, f"model {name!r} is not served here")

    return Admission(decider, check_model, **limits)


def _systemone(questions, state="I was charged twice."):
    return json.dumps({"model": "jev-latest", "state": state, "questions": questions}).encode()


def _decisions(questions, state="I was charged twice."):
    return json.dumps({"model": "jev-latest", "input": state, "questions": questions}).encode()


def _admit(adm, body, route="systemone"):
    return adm.admit(body, "application/json", route)[1]


def _refused(adm, body, route="systemone") -> str:
    with pytest.raises(ApiError) as err:
        adm.admit(body, "application/json", route)
    assert err.value.status == 413, err.value
    return str(err.value)


def _choice(k):
    return {"type": "choice", "instructions": "Which queue?", "criteria": {f"o{i}": None for i in range(k)}}


def test_defaults_are_the_servers():
    adm = Admission(None, lambda name: None)
    cfg = ServerConfig()
    assert (adm.max_questions, adm.max_options, adm.max_request_tokens, adm.max_state_tokens, adm.max_job_tokens,
            adm.max_job_questions) == (cfg.max_questions, cfg.max_options, cfg.max_request_tokens,
                                       cfg.max_state_tokens, cfg.max_batch_tokens, cfg.max_batch_questions)


def test_questions_at_the_limit_are_admitted_one_more_is_413(decider):
    adm = _admission(decider, max_questions=5)
    a = _admit(adm, _systemone({f"q{i}": NOUL for i in range(5)}))
    assert list(a.questions) == [f"q{i}" for i in range(5)]
    msg = _refused(adm, _systemone({f"q{i}": NOUL for i in range(6)}))
    assert "6 questions, over this server's limit of 5 per request (max_questions)" in msg
    d = [{"type": "predicate", "instructions": f"Is it {i}?"} for i in range(5)]
    assert len(_admit(adm, _decisions(d), "decisions").questions) == 5
    assert "6 questions" in _refused(adm, _decisions(d + d[:1]), "decisions")


@pytest.mark.parametrize("route", ["systemone", "decisions"])
def test_options_at_the_limit_are_admitted_one_more_is_413(decider, route):
    adm = _admission(decider, max_options=7)

    def req(k):
        if route == "systemone":
            return _systemone({"q": _choice(k)})
        return _decisions([{"type": "choice", "instructions": "Which queue?",
                            "choices": [{"value": f"o{i}"} for i in range(k)]}])

    a = _admit(adm, req(7), route)
    assert len(a.questions["q" if route == "systemone" else "0"].names) == 7
    msg = _refused(adm, req(8), route)
    qid = "q" if route == "systemone" else "0"  # a decisions question is named by its position
    assert f"question '{qid}' has 8 options, over this server's limit of 7 per question (max_options)" in msg


def test_score_and_yes_no_questions_count_their_options(decider):
    """A score question has one option per level, a yes/no question two: the option limit applies to both."""
    levels = {"type": "score", "instructions": "How angry?", "criteria": ["calm", "cross", "furious"]}
    assert _admit(_admission(decider, max_options=3), _systemone({"q": levels}))
    assert "has 3 options" in _refused(_admission(decider, max_options=2), _systemone({"q": levels}))
    assert _admit(_admission(decider, max_options=2), _systemone({"q": NOUL}))
    assert "has 2 options" in _refused(_admission(decider, max_options=1), _systemone({"q": NOUL}))
    d = [{"type": "score", "instructions": "How angry?", "levels": [{"label": "calm"}, {"label": "cross"}]}]
    assert _admit(_admission(decider, max_options=2), _decisions(d), "decisions")
    assert "has 2 options" in _refused(_admission(decider, max_options=1), _decisions(d), "decisions")


def test_request_tokens_at_the_budget_are_admitted_one_under_is_413(decider):
    qs = {f"q{i}": {"type": "noul", "instructions": f"Is statement {i} about a refund?"} for i in range(40)}
    body = _systemone(qs)
    total = _admit(_admission(decider), body).total
    counted = decider.count_tokens("I was charged twice.", {q: YesNo(v["instructions"]) for q, v in qs.items()})
    assert total == counted["total"] > 40 * 2  # the price is the decider's own count
    a = _admit(_admission(decider, max_request_tokens=total), body)
    assert a.total == total == a.n_state + sum(a.tokens.values())
    msg = _refused(_admission(decider, max_request_tokens=total - 1), body)
    assert f"over the {total - 1}-token budget (max_request_tokens)" in msg
    # refused on the exact price (not the options' floor: 80 options are far under the budget)
    assert "the request is at least" in msg and "counted 40 of 40 questions" in msg


def test_the_options_floor_is_checked_before_any_tokenizing(decider, monkeypatch):
    """Every option is at least one scored token: a request whose options alone pass the budget is refused
    without counting its tokens; one whose options exactly fill it is priced exactly."""
    counted = []
    real = decider.plan_request
    monkeypatch.setattr(decider, "plan_request", lambda *a, **k: counted.append(1) or real(*a, **k))
    adm = _admission(decider, max_request_tokens=20)
    msg = _refused(adm, _systemone({"a": _choice(11), "b": _choice(10)}))
    assert "the request's 21 options are at least 21 tokens, over the 20-token budget" in msg and not counted
    msg = _refused(adm, _systemone({"a": _choice(10), "b": _choice(10)}))
    assert "the request is at least" in msg and counted  # at the floor: priced exactly, then over


def test_state_plus_longest_question_at_the_budget_is_admitted_one_under_is_413(decider):
    long_q = {"type": "choice", "instructions": "Which of these queues handles the refund of a double charge?",
              "criteria": {"Billing": "Payments, invoices, refunds", "Technical": None}}
    body = _systemone({"short": NOUL, "long": long_q})
    a = _admit(_admission(decider), body)
    need = a.n_state + max(a.tokens.values())
    assert a.tokens["long"] > a.tokens["short"]
    assert _admit(_admission(decider, max_state_tokens=need), body).total == a.total
    msg = _refused(_admission(decider, max_state_tokens=need - 1), body)
    assert f"the state plus the longest question is {need} tokens, over the {need - 1}-token budget" in msg


@pytest.mark.parametrize("limit_by", ["model", "engine"])
def test_the_context_limit_admits_what_the_engine_can_score(tiny_llama, limit_by):
    """A state one word longer at a time, across the deepest position allowed (the model's context, or the
    engine's max_batch_tokens): never admitted when the engine refuses it, refused with a 413 naming the
    limit, and both sides of the boundary reached. At the model's context admission and the engine count the
    same positions (the prompt and the longest option): the same answer at every length. Against
    max_batch_tokens the engine needs one column fewer (it never feeds an option's last token) while
    admission counts that token too: one length, exactly, is refused though scorable."""
    from judge.testing import tiny_model

    model, tok = tiny_llama
    limit = 160
    if limit_by == "model":
        d = Decider(tiny_model("llama", tok, max_position_embeddings=limit), tok, bias=None)
        what = f"the model's {limit}-token context (max_position_embeddings)"
    else:
        d = Decider(scorer=Engine(model, tok, max_batch_tokens=limit), bias=None)
        what = f"the engine's max_batch_tokens ({limit})"
    adm = _admission(d)
    assert adm.context() == (limit, what)
    q = {"type": "choice", "instructions": "Which team?", "criteria": {"Billing": None, "Technical support": None}}
    rows = []
    for n in range(116, 142):
        state = "word " * n
        try:
            _admit(adm, _systemone({"q": q}, state=state))
            admitted = True
        except ApiError as e:
            assert e.status == 413 and what in str(e) and "question 'q' needs" in str(e), e
            admitted = False
        try:
            d.ask(state, _questions({"q": q}, state))
            scored = True
        except ValueError as e:
            assert str(limit) in str(e), e
            scored = False
        rows.append((n, admitted, scored))
    assert rows[0][1:] == (True, True) and rows[-1][1:] == (False, False), rows  # both sides reached
    assert all(s for _, a, s in rows if a), rows  # admitted: scorable
    extra = [n for n, a, s in rows if s and not a]
    assert extra == ([] if limit_by == "model" else extra[:1]) and len(extra) == (limit_by == "engine"), rows
    flips = [i for i in range(1, len(rows)) if rows[i][1] != rows[i - 1][1]]
    assert len(flips) == 1, rows  # one boundary: every longer state is refused


def _questions(qs, state):
    from judge.server.contract import SystemOneRequest, to_questions

    return to_questions(SystemOneRequest(model="jev-latest", state=state, questions=qs))


def test_jobs_hold_at_most_their_limits_and_exactly_them():
    a = Admitted("s", {"a": YesNo("?"), "b": YesNo("?"), "c": YesNo("?")}, 10, {"a": 5, "b": 6, "c": 7}, 28)

    def cut(**kw):
        return [(sorted(qs), size, n) for (_, qs, _), size, n in a.jobs(**kw)]

    assert cut(max_tokens=28, max_questions=3) == [(["a", "b", "c"], 3, 28)]  # exactly at both limits: one job
    assert cut(max_tokens=27, max_questions=3) == [(["a", "b"], 2, 21), (["c"], 1, 17)]
    assert cut(max_tokens=28, max_questions=2) == [(["a", "b"], 2, 21), (["c"], 1, 17)]
    assert cut(max_tokens=21, max_questions=8) == [(["a", "b"], 2, 21), (["c"], 1, 17)]
    assert cut(max_tokens=20, max_questions=8) == [(["a"], 1, 15), (["b"], 1, 16), (["c"], 1, 17)]
    assert cut(max_tokens=1, max_questions=1) == [(["a"], 1, 15), (["b"], 1, 16), (["c"], 1, 17)]  # one alone is larger


def test_a_request_for_another_model_or_out_of_contract_is_refused_before_pricing(decider, monkeypatch):
    from fastapi.exceptions import RequestValidationError

    monkeypatch.setattr(decider, "plan_request", lambda *a, **k: pytest.fail("priced a refused request"))
    adm = _admission(decider)
    with pytest.raises(ApiError) as err:
        adm.admit(json.dumps({"model": "other", "state": "x", "questions": {"q": NOUL}}).encode(),
                  "application/json", "systemone")
    assert err.value.status == 404
    with pytest.raises(RequestValidationError) as bad:
        adm.admit(b'{"model": "jev-latest", "state": "x"', "application/json", "systemone")
    assert bad.value.errors() == [{"type": "json_invalid", "loc": ("body", 36), "msg": "JSON decode error",
                                   "input": {}, "ctx": {"error": "Expecting ',' delimiter"}}]  # as FastAPI words it
    with pytest.raises(RequestValidationError) as bad:
        adm.admit(b'{"model": "jev-latest", "state": "\xff"}', "application/json", "systemone")
    assert bad.value.errors() == [{"type": "json_invalid", "loc": ("body",), "msg": "JSON decode error", "input": {},
                                   "ctx": {"error": "not UTF-8 (invalid start byte)"}}]
    with pytest.raises(RequestValidationError) as bad:
        adm.admit(_systemone({"q": {"type": "nope"}}), "application/json", "systemone")
    assert all(e["loc"][0] == "body" for e in bad.value.errors())
    for ctype in ("text/plain", "text/json", "application/x-www-form-urlencoded"):  # not JSON by its content type:
        with pytest.raises(RequestValidationError):                                # validated as bytes, refused
            adm.admit(_systemone({"q": NOUL}), ctype, "systemone")


def test_a_json_subtype_is_parsed_as_json(decider):
    adm = _admission(decider)
    for ctype in ("application/json", "application/json; charset=utf-8", "application/problem+json"):
        assert list(adm.admit(_systemone({"q": NOUL}), ctype, "systemone")[1].questions) == ["q"], ctype


def test_options_that_cannot_be_told_apart_are_invalid_with_the_decision_layers_reason(decider):
    """A question the decision layer refuses while pricing is `Invalid` (422) with its message, on both routes
    and through `price` directly."""
    from judge.decisions import Choice
    from judge.server.admission import Invalid

    adm = _admission(decider)
    why = r"Choice options cannot be told apart by what they mean: 'A', 'B' would all be scored as 'Billing'"
    with pytest.raises(Invalid, match=why):
        adm.admit(_systemone({"q": {"type": "choice", "instructions": "?", "criteria": {"A": "Billing",
                                                                                    "B": "Billing"}}}),
                  "application/json", "systemone")
    with pytest.raises(Invalid, match=why):
        adm.admit(_decisions([{"type": "choice", "instructions": "?", "choices": [
            {"value": "A", "description": "Billing"}, {"value": "B", "description": "Billing"}]}]),
            "application/json", "decisions")
    with pytest.raises(Invalid, match=why):
        adm.price("hi", {"q": Choice({"A": "Billing", "B": "Billing"}, instructions="?")})
    with pytest.raises(Invalid, match="Question 'q' must be a Choice, YesNo or Score, got str"):
        adm.price("hi", {"q": "Is it?"})


def test_context_names_what_sets_it(tiny_llama):
    model, tok = tiny_llama
    model_ctx = "the model's 4096-token context (max_position_embeddings)"
    assert _admission(Decider(model, tok, bias=None)).context() == (4096, model_ctx)
    for t, want in ((4095, (4095, "the engine's max_batch_tokens (4095)")), (4096, (4096, model_ctx)),
                    (4097, (4096, model_ctx))):  # the engine's T sets it only when it is the smaller
        assert _admission(Decider(scorer=Engine(model, tok, max_batch_tokens=t), bias=None)).context() == want


def test_long_texts_are_refused_after_counting_a_bounded_prefix(decider):
    """A state or a question over 16k characters is counted in pieces cut at a space in each piece's second
    half, and refused as soon as the count is clearly over the limit (the smaller of the state budget and the
    model's context, named), without tokenizing the rest; the count it reports is a lower bound."""
    encode = decider.scorer_.encode
    word = "a" * 9999 + " "  # a space every 10,000 characters: the first piece is cut at 10,000, not 16,384
    state = word * 6
    for budget, limit, named in ((200, 200, "the 200-token budget (max_state_tokens)"),
                                 (32768, 4096, "the model's 4096-token context (max_position_embeddings)")):
        adm = _admission(decider, max_state_tokens=budget)
        msg = _refused(adm, _systemone({"q": NOUL}, state=state))
        m = __import__("re").search(r"the state is more than (\d+) tokens \(counted on its first (\d+) characters "
                                    r"of 60000\), over (.*); shorten the state or split it over several requests\.$",
                                    msg)
        assert m, msg
        n, first = int(m[1]), int(m[2])
        pieces = (first + 1) // 10000
        assert m[3] == named and (first + 1) % 10000 == 0 and first < 50000  # cut before a space, stopped early
        whole = len(encode([(state[:first], True)]))
        assert limit < n <= whole, (n, whole)  # over the limit, and no more than the prefix really holds
        if pieces > 1:  # stopped at the first piece that went over: the pieces before it were not
            assert len(encode([(state[:first - 10000], True)])) - (pieces - 1) <= limit
    long_q = {"type": "noul", "instructions": "Is it " + "b" * 20000 + "?"}
    msg = _refused(_admission(decider, max_state_tokens=300), _systemone({"q": long_q}))
    assert msg.startswith("question 'q' is more than ") and "over the 300-token budget (max_state_tokens); " \
        "shorten its instructions or descriptions." in msg
    assert "(counted on its first 16384 characters of " in msg, msg  # no space to cut at: the whole first piece
    short = "word " * 3300  # 16,500 characters, about 3,300 tokens: counted in pieces, under both limits
    assert _admit(_admission(decider), _systemone({"q": NOUL}, state=short)).n_state > 3300
