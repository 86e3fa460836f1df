"""`Decider`: answer typed questions about a state with a causal LM, through one scorer.

`Decider.ask` renders one prompt per question (`judge.decisions.prompts`, in the style
chosen for its type), scores the exact log-probability of every scored string of every
question in **one** call of ``scorer.score(queries)`` (the `judge.engine.Scorer`
protocol: a `judge.engine.Engine` by default, or any scorer passed in, e.g. the
reference `judge.testing.Reference`), sums the strings that count for the same option
(the spellings of yes and no), corrects the model's label-free bias, applies a
calibration profile when one is set, and returns an `Answer` per question with the
contract's reference confidence.

**Bias correction**, on by default and label-free (`judge.decisions.priors`: a question shape's prior
from `CONTENT_FREE` states asked in the same call, divided out; ``bias="running"``: a running batch
prior; ``bias=None``: off). **Guard**, opt-in (`judge.decisions.guard`): variants of the state with
pieces erased, scored in the same call, so that no planted piece decides. **Choice questions** fuse
a sentence embedder's state-option similarity beside the LM (`judge.decisions.fusion`).

`Decider.ask_many` answers several states at once, in two steps that may run apart:
`Decider.plan_request` plans, lowers and prices a request (`judge.decisions.planning.RequestPlan`;
the server's admission, off the scoring thread) and `Decider.answer` scores several plans in one
call. `Decider.count_tokens` is a plan's price, `Decider.describe` how it answers (``/v1/models``).
Its parameters are fixed once built (assigning one raises): what it sets up lazily always follows them.

What it deliberately does not do: tokenize (the scorer does, through
`judge.decisions.planning`), build prompts (`judge.decisions.prompts`), fit calibration
(`judge.decisions.calibration`), or speak HTTP or the JSON wire form (`judge.server`).
"""

from __future__ import annotations

import dataclasses
import threading
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
from judge.decisions.fusion import ChoiceFusion, choice_fusion, fuse_scored
from judge.decisions.guard import Guard, combine, resolve_guard
from judge.decisions.planning import RequestPlan, plan_one, plan_request, score_plans
from judge.decisions.priors import BIAS_METHODS, QuestionPriors
from judge.decisions.profiles import DecisionProfile
from judge.decisions.prompts import CONTENT_FREE, PROMPT_VERSION, Plan, state_text
from judge.decisions.questions import (
    Answer,
    Choice,
    DecisionError,
    Question,
    Score,
    YesNo,
    check_questions,
)
from judge.decisions.setup import FixedAfterInit, build_scorer, model_name_of, resolve_styles
from judge.engine.protocol import Closing

__all__ = ["Decider"]

#: The lock every Decider's lazy setup (Decider._once) runs under: setup is rare; a Decider stays picklable.
_SETUP_LOCK = threading.RLock()

class Decider(FixedAfterInit, Closing):
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
        kept answers more varied (bench/decisions_quality.py select; :doc:`/decisions_design`).
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
    embedder : "auto", None, str or encoder
        A sentence embedder beside the LM on choice questions (`judge.decisions.fusion`): ``"auto"``,
        the packaged MiniLM beside the packaged model (none beside another model or a profile); None: the LM alone.

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

    FIXED = ("model", "tokenizer", "device", "backend", "chat", "style", "bias", "warm_up", "calibration", "scorer",
             "engine", "guard", "profile", "embedder")

    def __init__(self, model=None, tokenizer=None, *, device=None, backend="transformers", chat: bool | None = None,
                 style=None, bias: str | None = "contextual", warm_up: int = 8, calibration=None, scorer=None, engine=None,
                 guard=None, profile=None, embedder="auto"):
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
        self.embedder = embedder
        self.last_usage_ = {"input_tokens": 0, "output_tokens": 0}
        object.__setattr__(self, "_built", True)  # the parameters are fixed from here (FixedAfterInit)

    def _once(self, name, build, fresh=lambda v: v is not None):
        """``self.<name>``, built by ``build()`` (unless ``fresh``) once, whichever thread (admission, batcher) comes first."""
        v = self.__dict__.get(name)
        if not fresh(v):
            with _SETUP_LOCK:
                v = self.__dict__.get(name)
                if not fresh(v):
                    v = build()
                    setattr(self, name, v)
        return v

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
        return self._once("_scorer", lambda: build_scorer(self.scorer, self.engine, self.model, self.tokenizer,
                                                          self.backend, self.device))

    def close(self) -> None:
        """Release the scorer this Decider built (one passed in stays the caller's); idempotent.

        >>> from judge.testing import tiny_pair
        >>> with Decider(*tiny_pair()) as d: _ = d.tokenizer_
        >>> "_scorer" in vars(d)
        False
        """
        with _SETUP_LOCK:
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
            c = self._once("_cal_loaded", lambda: DecisionCalibration.load(self.calibration))
        meta = c.meta or {}
        seen = (meta.get("prompt_version"), meta.get("bias"))
        if meta.get("prompt_version") and seen != (PROMPT_VERSION, self.bias) and not self._warn_once():
            warnings.warn(f"The calibration profile was fitted with prompts {seen[0]!r} and bias {seen[1]!r}; this "
                          f"decider uses {PROMPT_VERSION!r} and bias {self.bias!r}. Refit it with `judge "
                          f"calibrate-decisions`.", UserWarning, stacklevel=2)
        return c

    def _warn_once(self) -> bool:  # whether the calibration's warning was given already (and, from now on, it was)
        with _SETUP_LOCK:
            warned, self._warned = getattr(self, "_warned", False), True
        return warned

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
        return self._once("_profile_of", lambda: DecisionProfile.load(self.profile))

    @property
    def styles_(self) -> dict:
        """The style of each question type for this tokenizer (``chat`` resolved).

        DecisionError where ``chat=True`` (or a style with ``chat=True``) meets a tokenizer without a chat
        template, or a style is not a PromptStyle.

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

        DecisionError where ``bias`` is not one of "running", "contextual" or None.

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
        return self._once("_priors", lambda: QuestionPriors(self.bias, warm_up=self.warm_up))

    # -- work
    def plan(self, state: Any, question: Question) -> Plan:
        """The prompt pieces and scored strings of one question (a `judge.decisions.prompts.Plan`; for inspection):
        ``state`` a str, dict or list, ``question`` a Choice, YesNo or Score.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> Decider(*tiny_pair()).plan("text", Choice(["b", "a"])).surfaces
        (' a', ' b')
        """
        if not isinstance(question, (Choice, YesNo, Score)):
            raise DecisionError(f"A question must be a Choice, YesNo or Score, got {type(question).__name__}.")
        return plan_one(self.scorer_, self.tokenizer_, state_text(state), question, self.styles_[question.type])

    def plan_request(self, state: Any, questions: Mapping[str, Question], *, guard=None) -> RequestPlan:
        """Plan one request: its prompts, lowered to the token-level items `answer` scores, and their price.

        Parameters
        ----------
        state : str, dict or list
        questions : mapping of str to Choice, YesNo or Score
        guard : Guard, bool or None
            As for `ask` (None: the decider's ``guard``).

        Returns a `judge.decisions.planning.RequestPlan` (DecisionError or LabelError for a bad request).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> d, q = Decider(*tiny_pair()), {"a": YesNo("Refund?")}
        >>> d.answer([d.plan_request("I was charged twice", q)]) == [Decider(*tiny_pair()).ask("I was charged twice", q)]
        True
        """
        check_questions(questions)
        return plan_request(self.scorer_, self.tokenizer_, self.styles_, state, questions,
                            self.guard_of((state, questions, guard)))

    def count_tokens(self, state: Any, questions: Mapping[str, Question], *, guard=None) -> dict:
        """Tokens a request feeds the model: the price of its plan (`plan_request`; `RequestPlan.price`).

        ``{"state": int, "questions": {id: int}, "total": int}``: the template and the state (shared), each
        question's own tokens (its prompt past the state, its options as scored) and their sum (a new shape's
        content-free queries not counted); guarded, also ``"guard": {id: int}``, a bound on what its erased
        variants add, included in ``"total"``.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> n = Decider(*tiny_pair()).count_tokens("I was charged twice", {"a": YesNo("Refund?")})
        >>> n["total"] == n["state"] + n["questions"]["a"], n["state"] > 0
        (True, True)
        """
        return self.plan_request(state, questions, guard=guard).price()

    def guard_of(self, call) -> Guard | None:
        """The guard a call runs under: its own third element, else the decider's ``guard``; None when off.

        Examples
        --------
        >>> Decider(guard=True).guard_of(("text", {})).max_pieces, Decider(guard=True).guard_of(("text", {}, False))
        (12, None)
        """
        return resolve_guard(call[2] if len(call) > 2 and call[2] is not None else self.guard)

    def _template_root(self, pieces) -> list:
        """Token ids of a prompt's template text before the state (cached: the same for every request)."""
        text = "".join(t for t, _ in pieces)
        cache = self.__dict__.setdefault("_roots", {})
        ids = cache.get(text)  # one lookup: another thread may empty the cache between two
        if ids is None:
            ids = self.scorer_.encode(pieces)
            if len(cache) > 64:
                cache = self._roots = {}  # a new cache, not cleared in place under a reader
            cache[text] = ids
        return list(ids)

    def _score(self, plans: Sequence[RequestPlan], update: bool, states: bool = False):
        """Per plan and question, per variant of its state (one when unguarded): (per-surface log-probs, log prior
        or None, plan, prior's source). One score() call.

        ``update``: count the answered distributions into the running priors (answers do; log_probs do not).
        ``states``: also ``{(plan, qid, variant): answer-slot state}``, read from the same forward pass.
        """
        from judge.calibration import contextual_bias

        keys = [(ci, qid, vi) for ci, rp in enumerate(plans) for qid, vi, _ in rp.entries]
        asked = [p for rp in plans for _, _, p in rp.entries]
        out: list[dict] = [{} for _ in plans]
        if not asked:
            self.last_usage_ = {"input_tokens": 0, "output_tokens": 0}
            return (out, {}) if states else out
        n_asked = len(asked)
        todo: dict[tuple, int] = {}  # new shapes: where their content-free queries start
        extra: list[Plan] = []
        priors = self.priors_
        if priors is not None:
            for (ci, qid, _), p in zip(keys, asked):
                if p.shape not in todo and priors.needs_content_free(p.shape):
                    q, g = plans[ci].questions[qid], plans[ci].guard
                    todo[p.shape] = n_asked + len(extra)
                    extra += [plan_one(self.scorer_, self.tokenizer_, cf, q, self.styles_[q.type],
                                       untrusted=bool(g and g.framing)) for cf in CONTENT_FREE]
        # A lone query: its template text before the state (the same for every request) is the
        # scorer's cached root, computed once per scorer. Several queries share their common
        # prefix anyway (the engine keeps the questions of one state in one forest row).
        root = self._template_root(asked[0].pieces[:1]) if n_asked + len(extra) == 1 else None
        ran = score_plans(self.scorer_, plans, extra, root=root, states=states)
        scores = [np.asarray(s, dtype=np.float64) for s in (ran[0] if states else ran)]
        usage = self.scorer_.last_usage_ or {}
        self.last_usage_ = {"input_tokens": int(usage.get("input_tokens", 0)), "output_tokens": 0}
        for shape, at in todo.items():
            plan = asked[next(i for i, p in enumerate(asked) if p.shape == shape)]
            rows = np.stack([plan.per_option(scores[at + j]) for j in range(len(CONTENT_FREE))])
            priors.set_content_free(shape, contextual_bias(rows)[list(plan.canonical)])
        # every answer of this call uses the priors as they stood before it; then the call is counted
        got = [(prior_in_question_order(p, priors.prior(p.shape)), priors.source(p.shape)) if priors is not None
               else (None, None) for p in asked]
        for (ci, qid, _), p, s, (b, src) in zip(keys, asked, scores[:n_asked], got):
            out[ci].setdefault(qid, []).append((s, b, p, src))
        if update and priors is not None:  # the states as given (a guard's variants are not traffic)
            priors.observe([(p.shape, plans[ci].text, p.per_option(s)[list(p.canonical)])
                            for (ci, _, vi), p, s in zip(keys, asked, scores[:n_asked]) if vi == 0])
        fuse_scored(self.fuser_, [rp.questions for rp in plans], out)  # choices: the embedder beside the LM
        return (out, dict(zip(keys, ran[1][:n_asked]))) if states else out

    @property
    def fuser_(self) -> ChoiceFusion:
        """What choice questions are fused with now (`judge.decisions.fusion.choice_fusion`)."""
        return choice_fusion(self.embedder, packaged=self.model is None and self.scorer is None and self.engine
                             in (None, "auto"), profile=self.profile)

    def log_probs(self, calls: Sequence[tuple[Any, Mapping[str, Question]]], *, states: bool = False):
        """Log-probabilities of every question's options, bias-corrected (choices fused), in one scoring call.

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
        list of dict of str to ndarray of shape (d,)
            Only with ``states=True``: per call and question, the answer-slot hidden state read from
            the same forward pass (what a fitted profile's head reads; `fit_profile` fits on it).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> lp = Decider(*tiny_pair(), bias=None).log_probs([("hi", {"q": Choice(["a", "b", "c"])})])
        >>> lp[0]["q"].shape, bool((lp[0]["q"] < 0).all())
        ((3,), True)
        """
        plans = [self.plan_request(c[0], c[1], guard=False) for c in calls]
        got = self._score(plans, update=False, states=states)
        lps = [{qid: option_scores(s, b, p) for qid, [(s, b, p, _)] in scored.items()}
               for scored in (got[0] if states else got)]
        return (lps, [{qid: got[1][ci, qid, 0] for qid in rp.questions} for ci, rp in enumerate(plans)]) if states else lps

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
            self._score([self.plan_request(c[0], c[1], guard=False) for c in calls], update=True)

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
        return self.answer([self.plan_request(c[0], c[1], guard=c[2] if len(c) > 2 else None) for c in calls])

    def answer(self, plans: Sequence[RequestPlan]) -> list[dict[str, Answer]]:
        """Answer planned requests (`plan_request`) in one scoring call, without planning them again.

        Parameters
        ----------
        plans : sequence of judge.decisions.planning.RequestPlan
            Made by this decider (its scorer's tokens, its styles).

        Returns
        -------
        list of dict of str to Answer
            One dict per plan, keyed like its questions; what `ask_many` returns for the same calls.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> d = Decider(*tiny_pair())
        >>> [sorted(a) for a in d.answer([d.plan_request("a cat", {"q": YesNo("Animal?")})])]
        [['q']]
        """
        plans, (cal, prof) = list(plans), (self.calibration_, self.profile_)
        calls = [(rp.state, rp.questions) for rp in plans]
        fitted, heads = {}, prof is not None and prof.answers_any(calls)  # heads read the scoring pass's states
        scored = self._score(plans, update=True, states=heads)
        if heads:
            scored, fitted = scored[0], prof.fitted(self, calls, scored[0], scored[1])
        out = []
        for i, rp in enumerate(plans):
            answers = {}
            for qid, q in rp.questions.items():
                got = [make_answer(q, *v, cal, fitted.get((i, qid, vi))) for vi, v in enumerate(scored[i][qid])]
                if rp.call_plan is None:
                    answers[qid] = got[0]
                else:
                    j, report = combine(qid, q, got, rp.call_plan, rp.guard)
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
