"""Fitted decision profiles: per question, a head learnt from a few labelled states (issue 29 B).

What `judge.Classifier.fit` fits for a label set, fitted here per question *shape* (its type,
instructions and options; not the state, not the option order): multinomial logistic
regression on the hidden state at the question's answer slot, with the question's zero-shot
scores (the `Decider`'s bias-corrected log-probabilities) as its offset, the L2 chosen by
cross-validation (`judge.adaptation.fit_head`, reused); the states are read from the same forward
pass that scores the question (`judge.engine.protocol.HiddenStates.score_items_states`), when fitting
and when answering.
With no labelled examples a question is answered zero-shot, as before.

* `fit_profile` takes labelled rows (``judge fit-decisions`` reads them from JSON lines with
  `judge.server.wire.read_labelled`) and returns a `DecisionProfile`;
* `DecisionProfile` holds one `judge.adaptation.LinearHead` per question shape; ``save`` /
  ``load`` write one JSON file; ``log_probs`` answers a scored question from its head;
* a `Decider` given ``profile=`` answers every question it has a head for from that head
  (``Answer.fitted``), guarded variants included (each variant's own answer-slot state).

Probabilities stay over the question's options, in its own order (the wire contract does not
change); the head's classes are kept in a canonical order (choice: option names sorted; yes/no:
true, false; score: levels), so the same question with its options reordered is the same shape.

Beside the answer-slot state the head may read the state text through the other encoders
(``features="auto"``: a sentence embedding, ``embed``, and word TF-IDF fitted on the labelled
states, ``tfidf``), each kept for a question shape only where cross-validated NLL says it helps
(`judge.adaptation.fit_head_choosing`, the same choice `Classifier.fit` makes).

What it deliberately does not do: calibrate after the head, or work without the transformers model (the answer-slot states are the model's own hidden
states; a scorer without ``model_``, such as vLLM's, cannot give them).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judge.decisions.guard import answer_keys
from judge.decisions.questions import Choice, DecisionError, Question, YesNo, render_value

__all__ = ["AUTO_FEATURES", "DecisionProfile", "PROFILE_FORMAT", "canonical_keys", "fit_profile", "question_key"]

PROFILE_FORMAT = "trie-judge decision profile v1"


def canonical_keys(q: Question) -> tuple[str, ...]:
    """A question's answer keys in the order its head's classes are kept.

    Examples
    --------
    >>> canonical_keys(Choice(["b", "a"])), canonical_keys(YesNo("?"))
    (('a', 'b'), ('true', 'false'))
    """
    return tuple(sorted(q.names)) if isinstance(q, Choice) else answer_keys(q)


def question_key(q: Question) -> str:
    """The shape of a question (type, instructions, options with their descriptions; not their order), hashed.

    Examples
    --------
    >>> question_key(Choice({"a": "x", "b": None}, "Which?")) == question_key(Choice({"b": None, "a": "x"}, "Which?"))
    True
    >>> question_key(Choice(["a", "b"], "Which?")) == question_key(Choice(["a", "b"], "Which one?"))
    False
    """
    if isinstance(q, Choice):
        opts: Any = sorted((n, render_value(d) if d is not None else None) for n, d in q.options.items())
    elif isinstance(q, YesNo):
        opts = [render_value(d) if d is not None else None for d in (q.true, q.false)]
    else:
        opts = [render_value(d) for d in q.levels]
    blob = json.dumps([q.type, render_value(q.instructions) if q.instructions is not None else None, opts],
                      ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]


def _answer_states(decider, plans) -> np.ndarray:
    """The hidden state at each plan's answer slot (its prompt's last token): (n, d), in a pass of its own.

    Where the plans are scored anyway, `Decider.answer` reads these states from that scoring pass instead."""
    from judge.engine.protocol import HiddenStates, Item

    scorer = decider.scorer_
    if not isinstance(scorer, HiddenStates):
        raise DecisionError(f"Fitted decision profiles read the model's hidden states; the scorer "
                            f"{type(scorer).__name__} cannot give them (judge.engine.protocol.HiddenStates). Use "
                            f"the transformers engine (backend='transformers').")
    by_head: dict[tuple, list[int]] = {}  # the questions about one state: its keys/values computed once
    for i, p in enumerate(plans):
        by_head.setdefault(p.head, []).append(i)
    out = None
    for head, idx in by_head.items():
        H = scorer.hidden_states([Item(scorer.encode(plans[i].pieces), []) for i in idx], root=scorer.encode(head))
        out = np.zeros((len(plans), H.shape[1])) if out is None else out
        out[idx] = H
    return out


def _state_texts(plans) -> list[str]:
    """The state each plan asks about, as the model reads it (its first user piece; a guard's variant: erased)."""
    return [next((t for t, u in p.pieces if u), "") for p in plans]


def _embedded(embedder, texts, memo: dict) -> np.ndarray:
    """Sentence vectors of ``texts`` (n, e): every text not in ``memo`` for this embedder embedded in one batch, once."""
    from judge.encoders import get_encoder

    spec = json.dumps(embedder, sort_keys=True, default=str)
    new = sorted({t for t in texts if (spec, t) not in memo})
    if new:
        memo.update(zip(((spec, t) for t in new), np.asarray(get_encoder(embedder)(new), np.float64)))
    return np.stack([memo[spec, t] for t in texts])


def _blocks(head, hidden, texts, memo: dict) -> dict:
    """The feature blocks ``head`` reads, for answer-slot states ``hidden`` (n, d) and state ``texts``
    (sentence vectors through ``memo``: `_embedded`)."""
    names = [b for b, _ in head.blocks]
    out = {"hidden": hidden} if "hidden" in names else {}
    if "embed" in names:
        out["embed"] = _embedded(head.embedder, list(texts), memo)
    if "tfidf" in names:
        out["tfidf"] = head.tfidf.encode(list(texts))
    return out


#: The feature sets ``fit_profile(features="auto")`` chooses among per question shape, by
#: cross-validated NLL (the zero-shot scores are every set's offset; ``hidden+scores`` is the head
#: without the other encoders).
AUTO_FEATURES = ("hidden+scores", "hidden+embed+scores", "hidden+tfidf+scores", "hidden+embed+tfidf+scores")


@dataclass
class DecisionProfile:
    """Heads fitted per question shape (see the module docstring).

    Parameters
    ----------
    heads : dict of str to judge.adaptation.LinearHead
        Keyed by `question_key`.
    questions : dict of str to dict
        Per key: ``type``, ``instructions`` (shortened), ``classes`` (canonical answer keys),
        ``n`` (labelled states), ``counts`` (per class), ``l2``.
    meta : dict
        ``model``, ``prompt_version``, ``bias`` of the decider it was fitted with.

    Examples
    --------
    >>> from judge.adaptation import LinearHead
    >>> h = LinearHead(np.zeros((2, 3)), np.zeros(2), 1.0, np.zeros(3), np.ones(3), 1.0)
    >>> p = DecisionProfile({"k": h}, {"k": {"type": "noul", "classes": ["true", "false"], "n": 4}})
    >>> p.describe()["questions"][0]["n"]
    4
    """

    heads: dict
    questions: dict
    meta: dict = field(default_factory=dict)

    def describe(self) -> dict:
        """What the profile answers (``/v1/models``): one entry per question shape.

        Examples
        --------
        >>> DecisionProfile({}, {}).describe()
        {'format': 'trie-judge decision profile v1', 'questions': [], 'meta': {}}
        """
        return {"format": PROFILE_FORMAT, "questions": [{"key": k, **v} for k, v in self.questions.items()],
                "meta": dict(self.meta)}

    def save(self, path) -> None:
        """Write the profile as one JSON file (heads' arrays as lists).

        Examples
        --------
        >>> import tempfile, pathlib
        >>> from judge.adaptation import LinearHead
        >>> h = LinearHead(np.ones((2, 3)), np.zeros(2), 0.5, np.zeros(3), np.ones(3), 1.0)
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "profile.json"
        >>> DecisionProfile({"k": h}, {"k": {"type": "noul"}}).save(path)
        >>> DecisionProfile.load(path).heads["k"].offset_scale
        0.5
        """
        heads = {k: {"config": h.config(), "arrays": {n: np.asarray(a).tolist() for n, a in h.arrays().items()}}
                 for k, h in self.heads.items()}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"format": PROFILE_FORMAT, "meta": self.meta, "questions": self.questions, "heads": heads}, fh)

    @classmethod
    def load(cls, path) -> DecisionProfile:
        """Read a profile written by `save`.

        Raises
        ------
        DecisionError
            Not a decision profile (the format is named), or a head that does not check.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "x.json"
        >>> _ = path.write_text('{"temperature": {}}')
        >>> DecisionProfile.load(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        judge.decisions.questions.DecisionError: ...x.json is not a decision profile (no "format": "trie-judge decision profile v1"); write one with `judge fit-decisions` or DecisionProfile.save.
        """
        from judge.adaptation import from_saved

        with open(os.fspath(path), encoding="utf-8") as fh:
            raw = json.load(fh)
        if not isinstance(raw, dict) or raw.get("format") != PROFILE_FORMAT:
            raise DecisionError(f"{path} is not a decision profile (no \"format\": \"{PROFILE_FORMAT}\"); write one "
                                f"with `judge fit-decisions` or DecisionProfile.save.")
        heads = {}
        for k, h in raw["heads"].items():
            try:
                c = {"kind": "head", **h["config"]}
                arrays = {n: np.asarray(a, np.float64) for n, a in h["arrays"].items()}
                heads[k] = from_saved(c, arrays, len(arrays["bias"]))
            except (KeyError, ValueError, TypeError) as e:
                raise DecisionError(f"{path}: the head of question {k} does not check ({e}); fit the profile "
                                    f"again.") from None
        return cls(heads, raw.get("questions", {}), raw.get("meta", {}))

    def answers_any(self, calls) -> bool:
        """Whether a head answers any question of ``calls`` (sequence of (state, mapping of id to question)).

        Examples
        --------
        >>> DecisionProfile({}, {}).answers_any([("s", {"q": YesNo("?")})])
        False
        """
        return any(question_key(q) in self.heads for _, qs in calls for q in qs.values())

    def fitted(self, decider, calls, scored, states=None) -> dict:
        """`log_probs` for every scored variant of every question of a `Decider` call: ``{(call, qid, variant): lp}``.

        ``scored``: the Decider's per call, question and variant ``(log-probs, prior, plan, source)``;
        ``states``: ``{(call, qid, variant): answer-slot state}`` read from that same scoring pass (else
        the states are computed here, in a second pass).

        Examples
        --------
        >>> DecisionProfile({}, {}).fitted(None, [("s", {"q": YesNo("?")})], [{"q": []}])
        {}
        """
        from judge.decisions.calibration import option_scores

        keys = [(i, qid, vi) for i, call in enumerate(calls) for qid in call[1] for vi in range(len(scored[i][qid]))]
        got = self.log_probs(decider, [(calls[i][1][qid], scored[i][qid][vi][2], option_scores(*scored[i][qid][vi][:3]))
                                       for i, qid, vi in keys], states=None if states is None else [states[k] for k in keys])
        return {k: v for k, v in zip(keys, got) if v is not None}

    def log_probs(self, decider, entries: Sequence[tuple], states=None) -> list:
        """Log-probabilities from the heads for scored questions that have one (one batch of hidden states).

        Parameters
        ----------
        decider : judge.decisions.Decider
        entries : sequence of (question, plan, z)
            ``z``: the question's zero-shot (bias-corrected) log-probabilities, its own option order.
        states : sequence of ndarray of shape (d,), optional
            Each entry's answer-slot state, read where it was scored (`Decider.answer` does); None:
            computed here from the plans (`judge.engine.protocol.HiddenStates`, a second pass).

        Returns
        -------
        list of ndarray of shape (K,) or None
            Per entry, in the question's own option order; None where the profile has no head.

        Examples
        --------
        >>> DecisionProfile({}, {}).log_probs(None, [(YesNo("?"), None, np.zeros(2))])
        [None]
        """
        todo = [(i, self.heads[question_key(q)]) for i, (q, _, _) in enumerate(entries)
                if question_key(q) in self.heads]
        out: list = [None] * len(entries)
        if not todo:
            return out
        plans = [entries[i][1] for i, _ in todo]
        H = _answer_states(decider, plans) if states is None else np.stack([states[i] for i, _ in todo])
        texts = _state_texts(plans)
        memo: dict = {}  # every distinct state embedded once per embedder, in one batch, for the whole call
        by_embedder: dict = {}
        for (_, head), t in zip(todo, texts):
            if any(b == "embed" for b, _ in head.blocks):
                by_embedder.setdefault(json.dumps(head.embedder, sort_keys=True, default=str), (head.embedder, []))[1].append(t)
        for embedder, some in by_embedder.values():
            _embedded(embedder, some, memo)
        for j, ((i, head), h) in enumerate(zip(todo, H)):
            q, _, z = entries[i]
            keys, canon = answer_keys(q), canonical_keys(q)
            perm = [keys.index(k) for k in canon]  # canonical position -> question position
            lp = head.log_proba(np.asarray(z, np.float64)[perm][None], _blocks(head, h[None], texts[j:j + 1], memo))[0]
            back = np.empty(len(keys))
            back[perm] = lp
            out[i] = back
        return out


def fit_profile(labelled, decider, *, cv: int = 5, random_state: int = 0, batch: int = 8, features="auto",
                embedder="minilm") -> DecisionProfile:
    """Fit a head per question shape from labelled states.

    Parameters
    ----------
    labelled : sequence of (state, dict of str to Question, dict of str to int)
        Labelled states: per state, its questions and each one's label as an option index (the
        question's own order); ``judge fit-decisions`` reads them from JSON lines with
        `judge.server.wire.read_labelled`.
    decider : judge.decisions.Decider
        Its model, prompts and bias correction give the states and the zero-shot offset (its
        own profile and calibration are not used).
    cv, random_state : int
        Cross-validation of the L2 strength (`judge.adaptation.fit_head`).
    batch : int
        Lines scored per scoring call.
    features : "auto", "hidden" or sequence of str
        The head's feature sets: ``"auto"`` (`AUTO_FEATURES`, chosen per question shape by
        cross-validated NLL), ``"hidden"`` (the answer-slot state alone, the zero-shot scores as
        offset), or the candidates themselves (`judge.adaptation.fit_head_choosing`'s names).
        ``auto`` is the default, chosen on validation (sys1bench seeds 3131/3132, states unseen in
        training: median accuracy minus majority +33.3 points at N = 32 against +25.0 for
        ``hidden``, +6.7 against -3.7 at N = 8; bench/results/decisions_profiles_validate_*.json).
    embedder : str
        The sentence encoder of an ``embed`` block (`judge.encoders.get_encoder`; the packaged
        all-MiniLM-L6-v2 by default).

    Returns
    -------
    DecisionProfile

    Raises
    ------
    DecisionError
        No question shape with at least 2 labelled states (shapes with one are left zero-shot,
        with a warning).
    TypeError
        A path instead of rows.

    Examples
    --------
    >>> from judge.decisions import Decider
    >>> from judge.testing import tiny_pair
    >>> rows = [(f"ticket {i}", {"q": YesNo("Refund?")}, {"q": i % 2}) for i in range(6)]
    >>> prof = fit_profile(rows, Decider(*tiny_pair()), cv=2)
    >>> [q["n"] for q in prof.questions.values()]
    [6]
    """
    from judge.adaptation import fit_head_choosing
    from judge.adaptation.fit import parse_features
    from judge.decisions.calibration import labelled_rows
    from judge.decisions.prompts import PROMPT_VERSION

    cands = list(AUTO_FEATURES if features == "auto" else ("hidden+scores",) if features == "hidden"
                 else (features,) if isinstance(features, str) else features)

    def reads_state_with_offset(c) -> bool:
        try:
            bl, of = parse_features(c)
        except (ValueError, TypeError, AttributeError):
            return False
        return "hidden" in bl and "scores" in of and "similarity" not in of

    if not cands or not all(reads_state_with_offset(c) for c in cands):
        raise DecisionError(f"fit_profile features must be 'hidden', 'auto' or feature sets that read the hidden "
                            f"state with the zero-shot scores as offset (e.g. 'hidden+embed+scores'); got {features!r}.")
    rows = labelled_rows(labelled, "fit_profile")
    if not rows:
        raise DecisionError("fit_profile got no labelled states.")
    per: dict[str, dict] = {}
    for s in range(0, len(rows), batch):
        part = rows[s:s + batch]
        lps, hs = decider.log_probs([(st, qs) for st, qs, _ in part], states=True)  # one pass: scores and states
        for (st, qs, labels), lp, h in zip(part, lps, hs):
            for qid, q in qs.items():
                keys, canon = answer_keys(q), canonical_keys(q)
                perm = [keys.index(k) for k in canon]
                g = per.setdefault(question_key(q), {"q": q, "z": [], "y": [], "plans": [], "h": []})
                g["z"].append(np.asarray(lp[qid], np.float64)[perm])
                g["y"].append(canon.index(keys[labels[qid]]))
                g["plans"].append(decider.plan(st, q))
                g["h"].append(h[qid])
    few = {k: g for k, g in per.items() if len(g["y"]) < 2}
    if len(few) == len(per):
        q = next(iter(few.values()))["q"]
        raise DecisionError(f"Question {render_value(q.instructions)[:60]!r} has 1 labelled state; a fitted profile "
                            f"needs at least 2 per question (it cross-validates), and no question has more.")
    if few:
        warnings.warn(f"{len(few)} question shape(s) with a single labelled state are left zero-shot: "
                      f"{[render_value(g['q'].instructions)[:40] for g in few.values()][:5]}.", UserWarning,
                      stacklevel=2)
    heads, questions, memo = {}, {}, {}  # memo: a state asked several questions is embedded once
    for key, g in per.items():
        if key in few:
            continue
        q, y = g["q"], np.asarray(g["y"])
        K = len(canonical_keys(q))
        blocks = {"hidden": np.stack(g["h"])}
        texts = _state_texts(g["plans"])
        need = {b for c in cands for b in parse_features(c)[0]}
        if "embed" in need:
            blocks["embed"] = _embedded(embedder, texts, memo)
        tfidf = None
        if "tfidf" in need:  # word 1-2 grams fitted on this shape's labelled states (no labels: unsupervised)
            from judge.encoders import TfidfEncoder

            tfidf = TfidfEncoder(analyzer="word").fit(texts)
            blocks["tfidf"] = tfidf.encode(texts)
        head = fit_head_choosing(cands, blocks, y, K, scores=np.stack(g["z"]), cv=cv, random_state=random_state,
                                 embedder=embedder if "embed" in need else None, tfidf=tfidf)
        heads[key] = head
        questions[key] = {"type": q.type, "instructions": render_value(q.instructions)[:200]
                          if q.instructions is not None else None, "classes": list(canonical_keys(q)),
                          "n": int(len(y)), "counts": np.bincount(y, minlength=K).tolist(), "l2": float(head.l2),
                          "features": head.report.get("features", "hidden+scores")}
    return DecisionProfile(heads, questions, {"model": decider.model_name, "prompt_version": PROMPT_VERSION,
                                              "bias": decider.bias, "single_state_shapes_left": len(few)})
