"""`Decider`: answer typed questions about a state with a causal LM, through one scorer.

`Decider.ask` renders one prompt per question (`judge.decisions.prompts`), scores the
exact log-probability of every option of every question in **one** call of
``scorer.score(queries)`` (the `judge.engine.Scorer` protocol: a `judge.engine.Engine`
by default, or any scorer passed in, e.g. the reference `judge.testing.Reference`),
normalises them over the options, applies a calibration profile when one is set, and
returns an `Answer` per question with the contract's reference confidence.
`Decider.ask_many` does the same for several states at once (the server's
micro-batches), `Decider.count_tokens` counts a request's tokens with the scorer's
own tokenizer (the server's budget).

What it deliberately does not do: tokenize (the scorer does), build prompts
(`judge.decisions.prompts`), fit calibration (`judge.decisions.calibration`), or speak
HTTP (`judge.server`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judge._math import softmax
from judge.decisions.calibration import DecisionCalibration
from judge.decisions.prompts import Plan, plan_question, state_text
from judge.decisions.questions import (
    MAX_LISTED_OPTIONS,
    Answer,
    Choice,
    DecisionError,
    Question,
    Score,
    YesNo,
    check_questions,
    choice_confidence,
    score_confidence,
)

__all__ = ["Decider"]


def _name_of(model) -> str | None:
    if model is None:
        return None
    if isinstance(model, (str, os.PathLike)):
        return str(model)
    cfg = getattr(model, "config", None)
    return getattr(cfg, "_name_or_path", None) or type(model).__name__


class Decider:
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
        Use the tokenizer's chat template (None: when it has one).
    calibration : DecisionCalibration, str, os.PathLike or None
        A profile (or the path of one) applied to every answer.
    scorer : judge.engine.Scorer, optional
        A built scorer (an ``Engine``, or ``judge.testing.Reference`` in tests);
        default: ``judge.engine.Engine(model, tokenizer, device=device)``, built on
        first use. A scorer that loads lazily is loaded through its ``setup()``.
    engine : judge.engine.Scorer, optional
        The former name of ``scorer`` (``"auto"`` means the default).

    Attributes
    ----------
    scorer_ : judge.engine.Scorer
        The scorer (built on first use).
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

    def __init__(self, model=None, tokenizer=None, *, device=None, chat: bool | None = None, calibration=None,
                 scorer=None, engine=None):
        self.model = model
        self.tokenizer = tokenizer
        self.device = device
        self.chat = chat
        self.calibration = calibration
        self.scorer = scorer
        self.engine = engine
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
            self._scorer = self._build_scorer()
        return self._scorer

    @property
    def engine_(self):
        """The former name of `scorer_`.

        Examples
        --------
        >>> d = Decider()
        >>> d.engine_ is d.scorer_
        True
        """
        return self.scorer_

    def _build_scorer(self):
        from judge.engine import Engine, Scorer

        given, engine = self.scorer, self.engine
        if isinstance(engine, str):
            if engine != "auto":
                raise DecisionError(f"Decider(engine={engine!r}) is no longer a mode: scoring always goes through "
                                    f"one Scorer. Pass scorer=judge.testing.Reference(model, tokenizer) for the "
                                    f"reference, or leave it out for judge.engine.Engine.")
            engine = None
        if given is not None and engine is not None:
            raise DecisionError("Decider got both scorer= and engine=; pass only scorer= (engine= is its old name).")
        given = given if given is not None else engine
        if given is None and self.model is not None and isinstance(self.model, Scorer):
            given = self.model  # an already built scorer passed as the model (older calls)
        if given is None:
            return Engine(self.model, self.tokenizer, device=self.device)
        if not isinstance(given, Scorer):
            missing = [m for m in ("setup", "encode", "option_ids", "score", "score_items", "last_usage_")
                       if not hasattr(given, m)]
            raise DecisionError(f"scorer must answer judge.engine.Scorer; {type(given).__name__} lacks {missing}. "
                                f"Pass a judge.engine.Engine or a judge.testing.Reference.")
        return given

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

        Examples
        --------
        >>> Decider(calibration=DecisionCalibration({"noul": 2.0})).calibration_.temperature
        {'noul': 2.0}
        """
        c = self.calibration
        if c is None or isinstance(c, DecisionCalibration):
            return c
        if not hasattr(self, "_cal_loaded"):
            self._cal_loaded = DecisionCalibration.load(c)
        return self._cal_loaded

    @property
    def model_name(self) -> str:
        """The model's hub id, folder or class name (the packaged model's name when none was given).

        Examples
        --------
        >>> Decider().model_name
        'smollm2-135m-instruct'
        """
        name = _name_of(self.model)
        given = self.scorer if self.scorer is not None else self.engine
        if name is None and given is not None and not isinstance(given, str):
            # an Engine keeps what it was built from in .model; the reference holds its model_
            name = _name_of(given.model if hasattr(given, "model") else getattr(given, "model_", None))
        return name or "smollm2-135m-instruct"

    def uses_chat(self) -> bool:
        """Whether prompts use the tokenizer's chat template.

        Raises
        ------
        DecisionError
            ``chat=True`` but the tokenizer has no chat template.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> Decider(*tiny_pair()).uses_chat(), Decider(*tiny_pair(), chat=False).uses_chat()
        (True, False)
        """
        tok = self.tokenizer_
        has = bool(getattr(tok, "chat_template", None))
        if self.chat and not has:
            raise DecisionError("Decider(chat=True) but the tokenizer has no chat template; use chat=False.")
        return has if self.chat is None else bool(self.chat)

    # -- work
    def plan(self, state: Any, question: Question) -> Plan:
        """The prompt pieces and option surfaces of one question (for inspection and tests).

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
        ('a', 'b')
        """
        if not isinstance(question, (Choice, YesNo, Score)):
            raise DecisionError(f"A question must be a Choice, YesNo or Score, got {type(question).__name__}.")
        return plan_question(self.tokenizer_, state_text(state), question, self.uses_chat())

    def count_tokens(self, state: Any, questions: Mapping[str, Question]) -> dict:
        """Tokens a request feeds the model, counted with the scorer's own tokenizer.

        Parameters
        ----------
        state : str, dict or list
        questions : mapping of str to Choice, YesNo or Score

        Returns
        -------
        dict
            ``{"state": int, "questions": {id: int}, "total": int}``: the template and
            the state (shared by every question), each question's own prompt text plus
            its options' scored tokens, and their sum.

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
        tok, chat, st = self.tokenizer_, self.uses_chat(), state_text(state)
        scorer = self.scorer_
        plans = {qid: plan_question(tok, st, q, chat) for qid, q in questions.items()}
        n_state = len(scorer.encode(next(iter(plans.values())).head))
        per = {}
        for qid, p in plans.items():
            after_user = "".join(t for t, _ in p.pieces[max((i for i, (_, u) in enumerate(p.pieces) if u), default=-1) + 1:])
            options = scorer.option_ids(after_user, list(p.surfaces), what="Option")
            per[qid] = len(scorer.encode(p.question)) + sum(len(x) for x in options)
        return {"state": n_state, "questions": per, "total": n_state + sum(per.values())}

    def log_probs(self, calls: Sequence[tuple[Any, Mapping[str, Question]]]) -> list[dict[str, np.ndarray]]:
        """Raw log P(option | prompt) of every question, in one scoring call.

        Parameters
        ----------
        calls : sequence of (state, mapping of str to question)

        Returns
        -------
        list of dict of str to ndarray of shape (K,)
            Per call, per question id: the options' log-probabilities in the
            question's own option order (not normalised, not calibrated).

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> lp = Decider(*tiny_pair()).log_probs([("hi", {"q": Choice(["a", "b", "c"])})])
        >>> lp[0]["q"].shape, bool((lp[0]["q"] < 0).all())
        ((3,), True)
        """
        from judge.engine import Query

        chat = self.uses_chat()
        tok = self.tokenizer_
        queries, plans, keys = [], [], []
        for ci, (state, questions) in enumerate(calls):
            st = state_text(state)
            check_questions(questions)
            for qid, q in questions.items():
                p = plan_question(tok, st, q, chat)
                plans.append(p)
                keys.append((ci, qid))
                queries.append(Query(pieces=p.pieces, options=p.surfaces))
        out: list[dict[str, np.ndarray]] = [{} for _ in calls]
        if not queries:
            self.last_usage_ = {"input_tokens": 0, "output_tokens": 0}
            return out
        scorer = self.scorer_
        # A lone query: its template text before the state (the same for every request) is the
        # scorer's cached root, computed once per scorer. Several queries share their common
        # prefix anyway (the engine keeps the questions of one state in one forest row).
        root = scorer.encode(plans[0].pieces[:1]) if len(queries) == 1 else None
        scores = scorer.score(queries, root=root)
        usage = scorer.last_usage_ or {}
        self.last_usage_ = {"input_tokens": int(usage.get("input_tokens", 0)), "output_tokens": 0}
        for (ci, qid), p, s in zip(keys, plans, scores):
            s = np.asarray(s, dtype=np.float64)
            raw = np.empty(len(s))
            raw[list(p.order)] = s
            out[ci][qid] = raw
        return out

    def ask_many(self, calls: Sequence[tuple[Any, Mapping[str, Question]]]) -> list[dict[str, Answer]]:
        """`ask` for several (state, questions) pairs in one scoring call (the server's micro-batches).

        Parameters
        ----------
        calls : sequence of (state, mapping of str to question)

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
        raw = self.log_probs(calls)
        cal = self.calibration_
        return [{qid: _answer(q, raw[i][qid], cal) for qid, q in questions.items()}
                for i, (_, questions) in enumerate(calls)]

    def ask(self, state: Any, questions: Mapping[str, Question]) -> dict[str, Answer]:
        """Answer every question about ``state`` (one scoring call for all of them).

        Parameters
        ----------
        state : str, dict or list
            The content; JSON objects and arrays are shown as canonical JSON.
        questions : mapping of str to Choice, YesNo or Score
            Ids are any non-empty strings; they are never shown to the model.

        Returns
        -------
        dict of str to Answer
            Keyed like ``questions``.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> a = Decider(*tiny_pair()).ask({"text": "Calm down"}, {"mood": Score(["calm", "angry"])})["mood"]
        >>> sorted(a.probabilities), 0 <= a.score <= 1
        (['0', '1'], True)
        """
        return self.ask_many([(state, questions)])[0]


def _answer(q: Question, log_p: np.ndarray, cal: DecisionCalibration | None) -> Answer:
    mass = float(np.exp(np.logaddexp.reduce(log_p)))
    p = cal.apply(q.type, log_p) if cal is not None else softmax(log_p)
    p = np.clip(p, 0.0, 1.0)
    p = p / p.sum()
    calibrated = cal is not None
    if isinstance(q, YesNo):
        return Answer("noul", {"true": float(p[0]), "false": float(p[1])}, noul=float(p[0]),
                      option_mass=mass, calibrated=calibrated)
    if isinstance(q, Choice):
        names = q.names
        best = int(np.argmax(p))
        listed = len(names) <= MAX_LISTED_OPTIONS
        return Answer("choice", {n: float(v) for n, v in zip(names, p)}, choice=names[best],
                      confidence=choice_confidence(p), option_mass=mass, calibrated=calibrated,
                      path="listed" if listed else "unlisted")
    n = q.n_levels
    score = float(np.dot(np.arange(n), p))
    return Answer("score", {str(i): float(v) for i, v in enumerate(p)}, score=min(max(score, 0.0), n - 1.0),
                  legend={str(i): d for i, d in enumerate(q.levels)},
                  confidence=score_confidence(p), option_mass=mass, calibrated=calibrated)
