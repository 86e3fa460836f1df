"""`Decider`: answer typed questions about a state with a causal LM, through one scorer.

`Decider.ask` renders one prompt per question (`judge.decisions.prompts`, in the style
chosen for its type), scores the exact log-probability of every scored string of every
question in **one** call of ``scorer.score(queries)`` (the `judge.engine.Scorer`
protocol: a `judge.engine.Engine` by default, or any scorer passed in, e.g. the
reference `judge.testing.Reference`), sums the strings that count for the same option
(the spellings of yes and no), corrects the model's label-free bias, applies a
calibration profile when one is set, and returns an `Answer` per question with the
contract's reference confidence.

**Bias correction, on by default, no labels** (`judge.decisions.priors`): the first time a
question *shape* (everything but the state) is seen, it is also asked about each of
`CONTENT_FREE`'s states in that same scoring call; their mean answer, the shape's prior,
is cached and divided out of every answer (``bias="contextual"``, the default: answers
never depend on other requests). ``bias="running"`` replaces it, once ``warm_up`` states
were asked the question, by their mean answer (a running batch prior: answers depend on
earlier traffic, not on their own micro-batch). ``bias=None`` switches it off.

**Guard, opt-in** (`judge.decisions.guard`): a guarded call also scores, in the same scoring
call, variants of its state with pieces erased (flagged by the content scanners, or each in
turn for questions with cautious options) and answers so that no planted piece decides.

`Decider.ask_many` does the same for several states at once (the server's micro-batches),
`Decider.count_tokens` counts a request's tokens with the scorer's own tokenizer (the
server's budget), `Decider.describe` says how it answers (``/v1/models``).

What it deliberately does not do: tokenize (the scorer does), build prompts
(`judge.decisions.prompts`), fit calibration (`judge.decisions.calibration`), or speak
HTTP (`judge.server`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judge.backends import check_backend
from judge.decisions.calibration import (
    DecisionCalibration,
    make_answer,
    option_scores,
    prior_in_question_order,
)
from judge.decisions.guard import Guard, combine, resolve_guard, state_variants, variant_cost
from judge.decisions.pieces import canonical
from judge.decisions.priors import BIAS_METHODS, QuestionPriors
from judge.decisions.profiles import DecisionProfile
from judge.decisions.prompts import (
    CONTENT_FREE,
    PROMPT_VERSION,
    Plan,
    plan_question,
    state_text,
)
from judge.decisions.questions import (
    Answer,
    Choice,
    DecisionError,
    Question,
    Score,
    YesNo,
    check_questions,
)
from judge.decisions.setup import build_scorer, model_name_of, resolve_styles
from judge.engine.protocol import Closing, option_context

__all__ = ["Decider"]



class Decider(Closing):
    """Answer typed questions about a state with a causal LM.

    Parameters
    ----------
    model : str, os.PathLike, PreTrainedModel or None
        ``None``: the packaged SmolLM2 (loaded lazily on first use). A hub id or
        folder, or a loaded model (then ``tokenizer`` is required). Ignored for
        scoring when ``scorer`` is given.
    tokenizer : PreTrainedTokenizerBase, optional
    device : str, optional
    chat : bool or None
        Force the tokenizer's chat template on (True) or off (False) for every
        question type; None: as the style says (`DEFAULT_STYLES`: chat for score
        questions, completion for choice and yes/no).
    style : PromptStyle, dict of str to PromptStyle, or None
        How questions are put to the model: one style for every type, or per type
        (``"choice"``, ``"noul"``, ``"score"``; missing types use the default).
    bias : {"contextual", "running", None}
        The label-free bias correction (the module docstring). ``"contextual"`` is the
        default because its answers never depend on other requests (the contract's
        isolation), not because it won on measured data: on validation a running prior
        kept answers more varied (bench/decisions_quality.py select; the README).
    warm_up : int
        With ``bias="running"``: distinct states a question shape must have been
        asked about before their mean answer distribution replaces its content-free
        prior.
    calibration : DecisionCalibration, str, os.PathLike or None
        A profile (or the path of one) applied to every answer, on top of the bias
        correction.
    scorer : judge.engine.Scorer, optional
        A built scorer (an ``Engine``, or ``judge.testing.Reference`` in tests);
        default: ``judge.engine.Engine(model, tokenizer, device=device)``, built on
        first use. A scorer that loads lazily is loaded through its ``setup()``.
    engine : judge.engine.Scorer, optional
        The former name of ``scorer`` (``"auto"`` means the default).
    backend : {"transformers", "vllm"}
        The default scorer (`judge.backends.make_scorer`): ``Engine``, or ``VLLMScorer`` (vLLM's env).
    guard : Guard, bool or None
        Guard every call that does not say otherwise (`judge.decisions.guard`): ``True`` is
        ``Guard()``; None or False: unguarded (the answers of an unguarded decider, bit for bit).
    profile : DecisionProfile, str, os.PathLike or None
        Fitted heads (`judge.decisions.profiles`, or the path of one): questions it has a head
        for are answered by it (instead of a calibration profile).

    Attributes
    ----------
    scorer_ : judge.engine.Scorer
        The scorer (built on first use).
    styles_ : dict of str to PromptStyle
        The style of each question type, resolved for this tokenizer.
    priors_ : judge.decisions.priors.QuestionPriors or None
        The bias correction's state.
    last_usage_ : dict
        ``{"input_tokens": int, "output_tokens": 0}`` of the last call.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> d = Decider(*tiny_pair())
    >>> a = d.ask("I was charged twice", {"refund": YesNo("Refund?"), "team": Choice(["Billing", "Tech"])})
    >>> 0 <= a["refund"].noul <= 1, a["team"].choice in ("Billing", "Tech")
    (True, True)
    """

    def __init__(self, model=None, tokenizer=None, *, device=None, backend="transformers", chat: bool | None = None,
                 style=None, bias: str | None = "contextual", warm_up: int = 8, calibration=None, scorer=None, engine=None,
                 guard=None, profile=None):
        self.backend = check_backend(backend)
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.chat = chat
        self.style = style
        self.bias = bias
        self.warm_up = warm_up
        self.calibration = calibration
        self.scorer = scorer
        self.engine = engine
        self.guard = guard
        self.profile = profile
        self.last_usage_ = {"input_tokens": 0, "output_tokens": 0}

    # -- state
    @property
    def scorer_(self):
        """The scorer: the one given, else an ``Engine`` built on first use.

        Examples
        --------
        >>> from judge.testing import Reference, tiny_pair
        >>> type(Decider(*tiny_pair()).scorer_).__name__, type(Decider(scorer=Reference(*tiny_pair())).scorer_).__name__
        ('Engine', 'Reference')
        """
        if not hasattr(self, "_scorer"):
            self._scorer = build_scorer(self.scorer, self.engine, self.model, self.tokenizer, self.backend,
                                        self.device)
        return self._scorer

    def close(self) -> None:
        """Release the scorer this Decider built (one passed in stays the caller's); idempotent.

        >>> from judge.testing import tiny_pair
        >>> with Decider(*tiny_pair()) as d: _ = d.tokenizer_
        >>> "_scorer" in vars(d)
        False
        """
        scorer = self.__dict__.pop("_scorer", None)
        if scorer is not None and scorer is not self.scorer and scorer is not self.engine:
            scorer.close()

    @property
    def tokenizer_(self):
        """The scorer's tokenizer (sets the scorer up: loads the model on first use).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> Decider(*tiny_pair()).tokenizer_ is tiny_pair()[1]
        True
        """
        scorer = self.scorer_
        scorer.setup()
        return scorer.tokenizer_

    @property
    def calibration_(self) -> DecisionCalibration | None:
        """The calibration profile (loaded from its path on first use), or None.

        A profile fitted with another prompt version or bias correction than this
        decider's is applied, with a warning once: it was fitted on other scores.

        Examples
        --------
        >>> Decider(calibration=DecisionCalibration({"noul": 2.0})).calibration_.temperature
        {'noul': 2.0}
        """
        c = self.calibration
        if c is None:
            return None
        if not isinstance(c, DecisionCalibration):
            if not hasattr(self, "_cal_loaded"):
                self._cal_loaded = DecisionCalibration.load(c)
            c = self._cal_loaded
        meta = c.meta or {}
        seen = (meta.get("prompt_version"), meta.get("bias"))
        if meta.get("prompt_version") and seen != (PROMPT_VERSION, self.bias) and not getattr(self, "_warned", False):
            self._warned = True
            warnings.warn(f"The calibration profile was fitted with prompts {seen[0]!r} and bias {seen[1]!r}; this "
                          f"decider uses {PROMPT_VERSION!r} and bias {self.bias!r}. Refit it with `judge "
                          f"calibrate-decisions`.", UserWarning, stacklevel=2)
        return c

    @property
    def profile_(self):
        """The fitted profile (loaded from its path on first use), or None.

        Examples
        --------
        >>> Decider().profile_ is None
        True
        """
        if self.profile is None or isinstance(self.profile, DecisionProfile):
            return self.profile
        if getattr(self, "_profile_from", None) != self.profile:
            self._profile_loaded, self._profile_from = DecisionProfile.load(self.profile), self.profile
        return self._profile_loaded

    @property
    def styles_(self) -> dict:
        """The style of each question type for this tokenizer (``chat`` resolved).

        Raises
        ------
        DecisionError
            ``chat=True`` (or a style with ``chat=True`` given) but the tokenizer has
            no chat template; a style that is not a PromptStyle.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> Decider(*tiny_pair(), chat=True).styles_["choice"].chat
        True
        """
        return resolve_styles(self.style, self.chat, bool(getattr(self.tokenizer_, "chat_template", None)))

    @property
    def model_name(self) -> str:
        """The model's hub id, folder or class name (the packaged model's name when none was given).

        Examples
        --------
        >>> Decider().model_name
        'smollm2-135m-instruct'
        """
        return model_name_of(self.model, self.scorer if self.scorer is not None else self.engine)

    def uses_chat(self, qtype: str = "choice") -> bool:
        """Whether questions of ``qtype`` use the tokenizer's chat template.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> Decider(*tiny_pair()).uses_chat(), Decider(*tiny_pair(), chat=True).uses_chat("noul")
        (False, True)
        """
        return self.styles_[qtype].chat

    def describe(self) -> dict:
        """How this decider answers: prompt version, styles, bias correction, calibration (``/v1/models``).

        Returns
        -------
        dict

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> info = Decider(*tiny_pair()).describe()
        >>> info["bias"]["method"], info["bias"]["inputs"], Decider(bias="running").describe()["bias"]["warm_up"]
        ('contextual', ['N/A', '', '[MASK]'], 8)
        """
        priors, cal = self.priors_, self.calibration_
        bias = {"method": None} if priors is None else {**priors.describe(), "inputs": list(CONTENT_FREE)}
        return {"prompt_version": PROMPT_VERSION, "styles": {t: dataclasses.asdict(s) for t, s in self.styles_.items()},
                "bias": bias, "calibrated": cal is not None,
                "calibration": None if cal is None else {"temperature": cal.temperature, **cal.meta}}

    @property
    def priors_(self) -> QuestionPriors | None:
        """The bias correction's per-shape priors (built on first use), or None when ``bias=None``.

        Raises
        ------
        DecisionError
            ``bias`` is not one of "running", "contextual" or None.

        Examples
        --------
        >>> Decider(bias="contextual").priors_.method, Decider(bias=None).priors_
        ('contextual', None)
        """
        if self.bias is not None and self.bias not in BIAS_METHODS:
            raise DecisionError(f"Decider(bias={self.bias!r}) is not a bias correction; use 'contextual' (the "
                                f"default: content-free inputs), 'running' (a running batch prior) or None (off).")
        if self.bias is None:
            return None
        if getattr(self, "_priors", None) is None or self._priors.method != self.bias:
            self._priors = QuestionPriors(self.bias, warm_up=self.warm_up)
        return self._priors

    # -- work
    def plan(self, state: Any, question: Question) -> Plan:
        """The prompt pieces and scored strings of one question (for inspection and tests).

        Parameters
        ----------
        state : str, dict or list
        question : Choice, YesNo or Score

        Returns
        -------
        judge.decisions.prompts.Plan

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> Decider(*tiny_pair()).plan("text", Choice(["b", "a"])).surfaces
        (' a', ' b')
        """
        if not isinstance(question, (Choice, YesNo, Score)):
            raise DecisionError(f"A question must be a Choice, YesNo or Score, got {type(question).__name__}.")
        return self._plan(state_text(state), question, self.styles_)

    def _plan(self, st, q: Question, styles: dict, untrusted: bool = False) -> Plan:
        p = plan_question(self.tokenizer_, st, q, styles[q.type], untrusted=untrusted)
        if isinstance(q, YesNo):  # spellings this tokenizer writes with the same tokens are scored once
            tail = option_context(p.question)
            seen, drop = set(), []
            for j, ids in enumerate(self.scorer_.option_ids(tail, list(p.surfaces), what="Answer spelling")):
                if tuple(ids) in seen:
                    drop.append(j)
                seen.add(tuple(ids))
            p = p.without(drop) if drop else p
        return p

    def count_tokens(self, state: Any, questions: Mapping[str, Question], *, guard=None) -> dict:
        """Tokens a request feeds the model, counted with the scorer's own tokenizer.

        Parameters
        ----------
        state : str, dict or list
        questions : mapping of str to Choice, YesNo or Score
        guard : Guard, bool or None
            As for `ask` (None: the decider's ``guard``). A guarded question also feeds
            each erased variant of the state from its first erased character on, and
            its own prompt once per variant: ``"guard"`` counts them (an upper bound:
            variants that questions share are counted for each).

        Returns
        -------
        dict
            ``{"state": int, "questions": {id: int}, "total": int}``: the template and
            the state (shared by every question), each question's own prompt text plus
            its scored strings' tokens, and their sum (a new question shape's one-time
            content-free queries are not counted); with a guard also ``"guard": {id: int}``,
            the tokens its variants add, included in ``"total"``.

        Raises
        ------
        DecisionError
            A bad state or question.
        judge.LabelError
            An option the tokenizer cannot spell as plain text.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> n = Decider(*tiny_pair()).count_tokens("I was charged twice", {"a": YesNo("Refund?")})
        >>> n["total"] == n["state"] + n["questions"]["a"], n["state"] > 0
        (True, True)
        """
        check_questions(questions)
        g = self.guard_of((state, questions, guard))
        styles, st = self.styles_, state_text(canonical(state) if g is not None and g.canonical else state)
        scorer = self.scorer_
        plans = {qid: self._plan(st, q, styles, untrusted=bool(g and g.framing)) for qid, q in questions.items()}
        n_state = len(scorer.encode(next(iter(plans.values())).head))
        per = {}
        for qid, p in plans.items():
            after_user = "".join(t for t, _ in p.pieces[max((i for i, (_, u) in enumerate(p.pieces) if u), default=-1) + 1:])
            options = scorer.option_ids(after_user, list(p.surfaces), what="Option")
            per[qid] = len(scorer.encode(p.question)) + sum(len(x) for x in options)
        out = {"state": n_state, "questions": per, "total": n_state + sum(per.values())}
        if g is not None:
            out["guard"] = variant_cost(st, state_variants(state, questions, g, self.tokenizer_)[1], per, scorer.encode)
            out["total"] += sum(out["guard"].values())
        return out

    def guard_of(self, call) -> Guard | None:
        """The guard a call runs under: its own third element, else the decider's ``guard``; None when off.

        Examples
        --------
        >>> Decider(guard=True).guard_of(("text", {})).max_pieces, Decider(guard=True).guard_of(("text", {}, False))
        (12, None)
        """
        return resolve_guard(call[2] if len(call) > 2 and call[2] is not None else self.guard)

    def _score(self, calls, update: bool) -> tuple[list[dict[str, list]], list]:
        """Per call and question, per variant of its state (one when unguarded): (per-surface log-probs, log prior
        or None, plan, prior's source); and per call its guard plan (or None). One score() call.

        ``update``: count the answered distributions into the running priors (answers do; log_probs do not).
        """
        from judge.calibration import contextual_bias
        from judge.engine import Query

        styles = self.styles_
        queries, plans, keys, gplans = [], [], [], []
        for ci, call in enumerate(calls):
            state, questions = call[0], call[1]
            check_questions(questions)
            guard = self.guard_of(call)
            gplan, variants = state_variants(state, questions, guard, self.tokenizer_)
            gplans.append(gplan)
            for qid, q in questions.items():
                for vi, st in enumerate(variants[qid]):
                    p = self._plan(st, q, styles, untrusted=bool(guard and guard.framing))
                    plans.append(p)
                    keys.append((ci, qid, vi))
                    queries.append(Query(pieces=p.pieces, options=p.surfaces))
        out: list[dict] = [{} for _ in calls]
        if not queries:
            self.last_usage_ = {"input_tokens": 0, "output_tokens": 0}
            return out, gplans
        n_asked = len(queries)
        todo: dict[tuple, int] = {}  # new shapes: where their content-free queries start
        priors = self.priors_
        if priors is not None:
            for (ci, qid, _), p in zip(keys, plans):
                if p.shape not in todo and priors.needs_content_free(p.shape):
                    q = calls[ci][1][qid]
                    todo[p.shape] = len(queries)
                    guard = self.guard_of(calls[ci])
                    for cf in CONTENT_FREE:
                        c = self._plan(cf, q, styles, untrusted=bool(guard and guard.framing))
                        queries.append(Query(pieces=c.pieces, options=c.surfaces))
        scorer = self.scorer_
        # A lone query: its template text before the state (the same for every request) is the
        # scorer's cached root, computed once per scorer. Several queries share their common
        # prefix anyway (the engine keeps the questions of one state in one forest row).
        root = scorer.encode(plans[0].pieces[:1]) if len(queries) == 1 else None
        scores = [np.asarray(s, dtype=np.float64) for s in scorer.score(queries, root=root)]
        usage = scorer.last_usage_ or {}
        self.last_usage_ = {"input_tokens": int(usage.get("input_tokens", 0)), "output_tokens": 0}
        for shape, at in todo.items():
            plan = plans[next(i for i, p in enumerate(plans) if p.shape == shape)]
            rows = np.stack([plan.per_option(scores[at + j]) for j in range(len(CONTENT_FREE))])
            priors.set_content_free(shape, contextual_bias(rows)[list(plan.canonical)])
        # every answer of this call uses the priors as they stood before it; then the call is counted
        got = [(prior_in_question_order(p, priors.prior(p.shape)), priors.source(p.shape)) if priors is not None
               else (None, None) for p in plans]
        for (ci, qid, _), p, s, (b, src) in zip(keys, plans, scores[:n_asked], got):
            out[ci].setdefault(qid, []).append((s, b, p, src))
        if update and priors is not None:  # the states as given (a guard's variants are not traffic)
            priors.observe([(p.shape, state_text(calls[ci][0]), p.per_option(s)[list(p.canonical)])
                            for (ci, _, vi), p, s in zip(keys, plans, scores[:n_asked]) if vi == 0])
        return out, gplans

    def log_probs(self, calls: Sequence[tuple[Any, Mapping[str, Question]]]) -> list[dict[str, np.ndarray]]:
        """Log-probabilities of every question's options, bias-corrected, in one scoring call.

        Parameters
        ----------
        calls : sequence of (state, mapping of str to question)

        Returns
        -------
        list of dict of str to ndarray of shape (K,)
            Per call, per question id: each option's log-probability (the sum over
            the strings scored for it), minus its content-free log prior when the
            bias correction is on, in the question's own option order; not
            normalised, not calibrated. What answers and calibration profiles are
            computed from; of the states as given (a guard is not applied).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> lp = Decider(*tiny_pair(), bias=None).log_probs([("hi", {"q": Choice(["a", "b", "c"])})])
        >>> lp[0]["q"].shape, bool((lp[0]["q"] < 0).all())
        ((3,), True)
        """
        calls = [(c[0], c[1], False) for c in calls]
        return [{qid: option_scores(s, b, p) for qid, [(s, b, p, _)] in scored.items()}
                for scored in self._score(calls, update=False)[0]]

    def observe(self, calls: Sequence[tuple[Any, Mapping[str, Question]]]) -> None:
        """Count states into the running bias priors without answering (one scoring call).

        What answering them would do to the priors (`ask_many` counts every state it
        answers): warm a server up on past traffic, or let `calibrate_decisions` fit a
        profile on the prior its traffic converges to. Nothing happens unless
        ``bias="running"``.

        Parameters
        ----------
        calls : sequence of (state, mapping of str to question)

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> d = Decider(*tiny_pair(), bias="running", warm_up=2)
        >>> d.observe([(s, {"q": YesNo("Animal?")}) for s in ("a cat", "a car")])
        >>> d.ask("a dog", {"q": YesNo("Animal?")})["q"].bias
        'running'
        """
        if self.bias == "running":
            self._score([(c[0], c[1], False) for c in calls], update=True)

    def ask_many(self, calls: Sequence[tuple]) -> list[dict[str, Answer]]:
        """`ask` for several (state, questions) pairs in one scoring call (the server's micro-batches).

        Parameters
        ----------
        calls : sequence of (state, mapping of str to question) or (state, questions, guard)
            ``guard``: a `Guard`, True (``Guard()``), False (off) or None (the decider's ``guard``).

        Returns
        -------
        list of dict of str to Answer
            One dict per call, keyed like its questions.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> d = Decider(*tiny_pair())
        >>> out = d.ask_many([("a cat", {"q": YesNo("Animal?")}), ("a car", {"q": YesNo("Animal?")})])
        >>> len(out), sorted(out[0])
        (2, ['q'])
        """
        scored, gplans = self._score(calls, update=True)
        cal, prof = self.calibration_, self.profile_
        fitted = {} if prof is None else prof.fitted(self, calls, scored)
        out = []
        for i, call in enumerate(calls):
            answers = {}
            for qid, q in call[1].items():
                got = [make_answer(q, *v, cal, fitted.get((i, qid, vi))) for vi, v in enumerate(scored[i][qid])]
                if gplans[i] is None:
                    answers[qid] = got[0]
                else:
                    j, report = combine(qid, q, got, gplans[i], self.guard_of(call))
                    answers[qid] = dataclasses.replace(got[j], guard=report)
            out.append(answers)
        return out

    def ask(self, state: Any, questions: Mapping[str, Question], *, guard=None) -> dict[str, Answer]:
        """Answer every question about ``state`` (one scoring call for all of them).

        Parameters
        ----------
        state : str, dict or list
            The content; JSON objects and arrays are shown as canonical JSON.
        questions : mapping of str to Choice, YesNo or Score
            Ids are any non-empty strings; they are never shown to the model.
        guard : Guard, bool or None
            This call's guard (None: the decider's ``guard``; False: off).

        Returns
        -------
        dict of str to Answer
            Keyed like ``questions``; guarded answers carry their `GuardReport` (``.guard``).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> a = Decider(*tiny_pair()).ask({"text": "Calm down"}, {"mood": Score(["calm", "angry"])})["mood"]
        >>> sorted(a.probabilities), 0 <= a.score <= 1
        (['0', '1'], True)
        """
        return self.ask_many([(state, questions, guard)])[0]
