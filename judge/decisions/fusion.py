"""The zero-shot fusion on the decisions' choice questions: the embedder's state-option similarity beside the LM.

A :class:`judge.decisions.Decider` with an ``embedder`` (the default ``"auto"``: the packaged
all-MiniLM-L6-v2 beside the packaged LM) answers every **choice** question by
:data:`judge.fusion.DEFAULT_FUSION` of two experts, as `judge.Classifier` does for labels:

* the LM's option scores: each option's exact log-probability with the content-free prior divided
  out (what the Decider answered by before);
* the embedder's cosine similarity between the question and the state (the question's instructions,
  a newline, the state's text) and each option (``name: description``, :func:`judge.fusion.label_texts`).

Chosen on sys1bench's validation seed, leaving each generator out (bench/decisions_fusion.py,
bench/results/decisions_fusion_validation.json): choice questions gain (median accuracy minus
majority -12.5 -> -4.2 points); yes/no options carry no text of their own and score questions lose
at every weight, so those are the LM alone. Under a guard each variant of the state is read as that
variant's text: a sentence the guard erased reaches neither expert.

``"auto"`` gives the fusion only to the packaged model (a decider built with no model, scorer or
engine): a weight chosen beside a 135M LM would drown a stronger one, so any other model answers by
the LM alone unless an embedder is named. Without the ``embed`` extra ``"auto"`` is the LM alone, with
one notice. A decider with a fitted profile (``profile=``) answers those questions by its heads, fitted
on the LM's scores: the fusion is off there.

The fusion enters the Decider as a correction of each choice's option scores, beside the prior
(:func:`fuse_scored`): answers, ``log_probs`` and calibration profiles all read the fused scores.

What it deliberately does not do: fuse yes/no or score questions, or fit the weight on labels.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ChoiceFusion", "choice_fusion", "state_of_plan", "fuse_scored"]


@dataclass(frozen=True)
class ChoiceFusion:
    """The embedder and the fusion a Decider answers choice questions with; ``fusion`` None: the LM alone.

    Attributes
    ----------
    encoder : callable or None
        ``encoder(list of str) -> (n, d)`` (`judge.encoders.get_encoder`).
    fusion : judge.fusion.Fusion or None

    Examples
    --------
    >>> ChoiceFusion(None, None).fusion is None
    True
    """

    encoder: Any
    fusion: Any


def choice_fusion(embedder, *, packaged: bool, profile=None, warn: bool = True) -> ChoiceFusion:
    """What ``Decider(embedder=...)`` fuses choice questions with (the module docstring's rules).

    Parameters
    ----------
    embedder : "auto", None, str or encoder
    packaged : bool
        The decider runs the packaged model (no model, scorer or engine given).
    profile : optional
        The decider's fitted profile: the fusion is off beside one.
    warn : bool
        Warn once where ``"auto"`` cannot have its embedder (the ``embed`` extra missing).

    Examples
    --------
    >>> choice_fusion(None, packaged=True).fusion is None, choice_fusion("auto", packaged=False).fusion is None
    (True, True)
    >>> choice_fusion(lambda texts: np.ones((len(texts), 2)), packaged=False).fusion
    Fusion(weight=0.6, temperature=0.02)
    """
    from judge.encoders import EMBED_EXTRA, embedder_installed, get_encoder
    from judge.fusion import DEFAULT_FUSION

    if embedder is None or profile is not None or (embedder == "auto" and not packaged):
        return ChoiceFusion(None, None)
    if embedder == "auto":
        if not embedder_installed():
            if warn:
                warnings.warn(f"Decider(embedder='auto') answers choice questions by the LM alone here: the sentence "
                              f"embedder it fuses beside the LM is not installed; {EMBED_EXTRA}. Pass embedder=None "
                              f"to silence this.", UserWarning, stacklevel=4)
            return ChoiceFusion(None, None)
        embedder = "minilm"
    return ChoiceFusion(get_encoder(embedder), DEFAULT_FUSION)


def state_of_plan(plan) -> str:
    """The state's text a query was built from (its user pieces before the question): a guard's variant's own.

    Examples
    --------
    >>> from judge.decisions import Choice
    >>> from judge.decisions.prompts import PromptStyle, plan_question
    >>> state_of_plan(plan_question(None, "Lost my card.", Choice(["refund", "verify"]), PromptStyle()))
    'Lost my card.'
    """
    return "".join(t for t, user in plan.head if user)


def _texts(q, plan) -> tuple[str, list[str]]:
    from judge.decisions.prompts import is_opaque_id, state_text
    from judge.fusion import label_texts

    instructions = "" if q.instructions is None else state_text(q.instructions)
    described = {n: None if d is None else (state_text(d) or None) for n, d in q.options.items()}
    # an opaque id (o0, A, a UUID) is no part of an option's meaning, as the LM never scores it: the embedder
    # reads its description alone, so the answer does not depend on which id carries which description
    options = [described[n] if described.get(n) and is_opaque_id(n) else t
               for n, t in zip(q.names, label_texts(list(q.names), descriptions=described))]
    return f"{instructions}\n{state_of_plan(plan)}".strip(), options


def fuse_scored(fuser: ChoiceFusion, questions, scored) -> None:
    """Fuse every choice question's option scores in ``scored`` (in place), by ``fuser``; nothing if it is off.

    Parameters
    ----------
    fuser : ChoiceFusion
    questions : sequence of mapping of str to question
        Per call, its questions.
    scored : list of dict of str to list of (s, prior, plan, source)
        The Decider's per call, question and variant scores: the strings' log-probabilities ``s``, the
        prior in question order (or None), the plan, the prior's source. A choice's entry comes back
        with ``prior`` replaced by ``plan.per_option(s) - fused``, so that what the Decider reads as
        ``per_option(s) - prior`` is the fused score (the option mass, the source and the plan unchanged).

    Examples
    --------
    >>> from judge.decisions import Choice
    >>> from judge.decisions.prompts import PromptStyle, plan_question
    >>> q = Choice(["refund", "verify"])
    >>> plan = plan_question(None, "Lost.", q, PromptStyle())
    >>> scored = [{"q": [(np.log([0.5, 0.5]), None, plan, None)]}]
    >>> stub = ChoiceFusion(lambda t: np.array([[1.0, 0.0] if "refund" in x else [0.0, 1.0] for x in t]), None)
    >>> fuse_scored(stub, [{"q": q}], scored)       # fusion None: nothing changes
    >>> scored[0]["q"][0][1] is None
    True
    """
    if fuser.fusion is None:
        return
    from judge._math import unit_rows

    where = [(ci, qid, vi) for ci, call in enumerate(questions) for qid, q in call.items() if q.type == "choice"
             for vi in range(len(scored[ci].get(qid, ())))]
    if not where:
        return
    pairs = [_texts(questions[ci][qid], scored[ci][qid][vi][2]) for ci, qid, vi in where]
    states = sorted({s for s, _ in pairs})
    options = sorted({o for _, opts in pairs for o in opts})
    X = dict(zip(states, unit_rows(np.asarray(fuser.encoder(states), np.float64))))
    L = dict(zip(options, unit_rows(np.asarray(fuser.encoder(options), np.float64))))
    for (ci, qid, vi), (state, opts) in zip(where, pairs):
        s, prior, plan, source = scored[ci][qid][vi]
        raw = plan.per_option(s)
        lm = raw - prior if prior is not None else raw
        sim = np.array([X[state] @ L[o] for o in opts])
        fused = fuser.fusion.combine(lm[None, :], sim[None, :])[0]
        scored[ci][qid][vi] = (s, np.where(np.isfinite(raw), raw - fused, 0.0), plan, source)  # -inf stays -inf
