"""The scoring paths of a compiled label set, step by step (:class:`judge.compiled.CompiledLabels`).

Each function takes a ``CompiledLabels`` (``c``) and does one step; which path a call takes is
decided in one place, :meth:`judge.compiled.CompiledLabels.score`:

* :func:`prompt_items` — texts -> token-level items (whole-prompt tokenization, truncation of
  the text only, a clear error when the prompt without any text does not fit).
* :func:`think` — the think-then-answer wrapper: the model writes its reasoning greedily, and
  the answer cue follows; any path scores after it, and calibration's content-free inputs go
  through the same wrapper.
* :func:`score_exact` (``exact`` and ``first_token``) — one pass of the scorer over the prompt forest;
  inside :func:`prefetched`, the rows scored ahead in one pass over several label sets' items.
* :func:`search_texts` — the certified search (:class:`judge.engine.protocol.TreeSearch`).
* :func:`score_decode` — beam search through the label automaton for huge label sets,
  ``top_k`` *distinct* labels, each rescored canonically (label tokens + end token), every
  other label ``-inf``.
* :func:`score_shortlist` — the labels retrieval kept per text, scored exactly.
* :func:`generate_unconstrained` — plain greedy generation with the classifier's prompt (a baseline).

What it deliberately does not do: choose a path, calibrate, or validate user arguments.
"""

from __future__ import annotations

import contextlib
import contextvars
import warnings

import numpy as np

from judge._errors import caller_stacklevel
from judge.engine.protocol import (
    HiddenStates,
    Item,
    LocalModel,
    TokenVocabulary,
    default_root,
    option_context,
)

__all__ = ["THINK_CUE", "prefetched", "item_key", "local_model", "states_scorer", "vocabulary", "prompt_items", "think", "score_exact", "score_decode", "search_texts",
           "score_shortlist", "generate_unconstrained"]

THINK_CUE = "\n\nFinal answer:\n"

#: (scorer, {item key: scores}) while :func:`prefetched` is open, else None.
_PREFETCHED = contextvars.ContextVar("judge_prefetched_scores", default=None)


def item_key(item) -> tuple:
    """What an item's scores depend on: its prompt ids, option token sequences and first-token flag.

    Examples
    --------
    >>> item_key(Item([1, 2], [[3], [4, 5]]))
    ((1, 2), ((3,), (4, 5)), False)
    """
    return tuple(item.ids), tuple(tuple(s) for s in item.options), bool(item.first_only)


@contextlib.contextmanager
def prefetched(scorer, items, *, batch_size=8, pack=1, progress=None):
    """Score ``items`` in one call of ``scorer`` now; inside the block, :func:`score_exact` on that scorer
    reads its rows from these results where every item it needs is among them (else it scores as usual).
    Items with the same prompt are scored as one, over the union of their options (a forest shares the
    prompt; each option's log-probability does not depend on the others scored beside it).

    What a call over several label sets uses (`judge.label_sets.classify`): each set's own steps run
    unchanged, their model pass done ahead for all sets at once. An item's scores are keyed by its
    whole content (:func:`item_key`), so a row is never read for another item.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> eng = Engine(*tiny_pair())
    >>> with prefetched(eng, [Item([1, 2, 3], [[7], [8]])]) as memo:
    ...     len(memo)
    1
    """
    items = list(items)
    merged: dict = {}  # items with the same prompt (the content-free inputs of every set, a text asked twice):
    for it in items:   # one item with the union of their options, so the prompt is fed once
        opts = merged.setdefault((tuple(it.ids), bool(it.first_only)), {})
        for o in it.options:
            opts.setdefault(tuple(o), len(opts))
    union = [Item(list(ids), [list(o) for o in opts], first_only) for (ids, first_only), opts in merged.items()]
    root = default_root([it.ids for it in union])  # the prompts' common prefix: computed once
    rows = scorer.score_items(union, root=root, batch_size=batch_size, pack=pack, progress=progress) if union else []
    scored = dict(zip(merged, rows))
    memo = {}
    for it in items:
        k = (tuple(it.ids), bool(it.first_only))
        memo[item_key(it)] = np.asarray([scored[k][merged[k][tuple(o)]] for o in it.options], np.float64)
    token = _PREFETCHED.set((scorer, memo))
    try:
        yield memo
    finally:
        _PREFETCHED.reset(token)


def local_model(engine, what: str):
    """``engine`` as a :class:`~judge.engine.protocol.LocalModel`, or a clear refusal naming ``what`` needs it.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> local_model(Engine(*tiny_pair()).setup(), "think=True").model_ is not None
    True
    >>> local_model(object(), "think=True")
    Traceback (most recent call last):
    ...
    TypeError: think=True needs the model in this process (judge.engine.protocol.LocalModel), which a object does not declare; use backend='transformers'.
    """
    if not isinstance(engine, LocalModel):
        raise TypeError(f"{what} needs the model in this process (judge.engine.protocol.LocalModel), which a "
                        f"{type(engine).__name__} does not declare; use backend='transformers'.")
    return engine


def states_scorer(engine, what: str):
    """``engine`` as a :class:`~judge.engine.protocol.HiddenStates` scorer, or a clear refusal naming ``what`` needs it.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> states_scorer(Engine(*tiny_pair()), "fit") is not None
    True
    >>> states_scorer(object(), "fit")
    Traceback (most recent call last):
    ...
    TypeError: fit needs the model's hidden states (judge.engine.protocol.HiddenStates), which a object does not declare; use backend='transformers'.
    """
    if not isinstance(engine, HiddenStates):
        raise TypeError(f"{what} needs the model's hidden states (judge.engine.protocol.HiddenStates), which a "
                        f"{type(engine).__name__} does not declare; use backend='transformers'.")
    return engine


def vocabulary(engine, what: str):
    """``engine``'s :class:`judge.automaton.Vocabulary` (:class:`~judge.engine.protocol.TokenVocabulary`), or a
    clear refusal naming ``what`` needs it.

    Examples
    --------
    >>> from judge.engine import Engine
    >>> from judge.testing import tiny_pair
    >>> len(vocabulary(Engine(*tiny_pair()).setup(), "method='decode'").end_token_ids) >= 1
    True
    """
    if not isinstance(engine, TokenVocabulary):
        raise TypeError(f"{what} needs the tokenizer's vocabulary (judge.engine.protocol.TokenVocabulary), which a "
                        f"{type(engine).__name__} does not declare; use backend='transformers'.")
    return engine.vocab_


def prompt_items(c, texts, extras=None) -> list:
    """Token items for ``texts``; over-long texts are cut in the text only (with a warning).

    Parameters
    ----------
    c : CompiledLabels
    texts : list of str, length n
    extras : list of tuples of pieces, optional
        Per text, prompt pieces appended after the answer cue (think-then-answer).

    Returns
    -------
    list of n judge.engine.Item
        Prompt ids (tokenized whole) and the label token sequences; ``group`` = text index.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["yes", "no"], model, tokenizer=tok).compiled_
    >>> items = prompt_items(c, ["Is it?"])
    >>> items[0].ids == tok(c.prefix + "Is it?" + c.tail)["input_ids"]
    True
    """
    eng = c.engine
    tok = eng.tokenizer_
    model = eng.model_ if isinstance(eng, LocalModel) else None
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    reserve = c.max_label_tokens + 1 + ((c.think_tokens + 8) if c.think else 0)
    items, cut_rows, cut_total = [], 0, 0
    for i, t in enumerate(texts):
        extra = extras[i] if extras is not None else ()
        ids = eng.encode(c.pieces(t, extra), add_special_tokens=c.add_special)
        if limit and len(ids) + reserve > limit:
            text_ids = tok(t, add_special_tokens=False)["input_ids"]
            fixed = len(ids) - len(text_ids)
            keep = limit - reserve - fixed
            if keep < 1:
                raise ValueError(
                    f"The prompt without any text needs {fixed} tokens and the answer up to {reserve}, "
                    f"but the model's context is {limit} tokens; shorten the label names, leave the label "
                    f"list out of the prompt (PromptTemplate(max_listed_labels=0)), or use method='decode'.")
            while keep >= 1:
                t2 = tok.decode(text_ids[:keep], skip_special_tokens=True)
                ids = eng.encode(c.pieces(t2, extra), add_special_tokens=c.add_special)
                if len(ids) + reserve <= limit:
                    break
                keep -= max(1, len(ids) + reserve - limit)
            cut_rows += 1
            cut_total += len(text_ids) - keep
        items.append(Item(ids, c.label_seqs or [[0]], first_only=c.method == "first_token", group=i))
    if cut_rows:
        warnings.warn(
            f"{cut_rows} text(s) were longer than the model's context ({limit} tokens) allows and were "
            f"truncated, {cut_total} text tokens cut in all; the instructions, label list and answer slot "
            f"were kept whole.", stacklevel=caller_stacklevel())
    return items


def _generate(c, prompts, **kwargs):
    import torch

    from judge._math import left_pad

    eng = local_model(c.engine, "Generating text (think=True, method='decode', the unconstrained baseline)")
    tok = eng.tokenizer_
    pad = tok.pad_token_id if tok.pad_token_id is not None else eng.end_id_
    ids, att = left_pad(prompts, pad, eng.model_.device)
    with torch.inference_mode():
        out = eng.model_.generate(input_ids=ids, attention_mask=att, pad_token_id=pad,
                                  eos_token_id=list(vocabulary(eng, "Generating text").end_token_ids), do_sample=False, **kwargs)
    return ids.shape[1], out


def think(c, texts, *, batch_size=8) -> list:
    """The model's greedy reasoning for each text, then the answer cue: per text, extra prompt pieces.

    Returns
    -------
    list of n tuples ``((reasoning, True), (THINK_CUE, False))``
        The reasoning is user-like text (never control tokens).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["yes", "no"], model, tokenizer=tok, think=True, think_tokens=4).compiled_
    >>> extra = think(c, ["Is it?"])
    >>> extra[0][1] == (THINK_CUE, False)
    True
    """
    items = prompt_items(c, texts)
    ends = set(vocabulary(c.engine, "think=True").end_token_ids)
    out = []
    for s in range(0, len(items), batch_size):
        L, gen = _generate(c, [it.ids for it in items[s:s + batch_size]], max_new_tokens=c.think_tokens)
        for row in gen[:, L:].tolist():
            keep = []
            for t in row:
                if t in ends:
                    break
                keep.append(t)
            reasoning = c.engine.tokenizer_.decode(keep, skip_special_tokens=True)
            out.append(((reasoning, True), (THINK_CUE, False)))
    return out


def score_exact(c, texts, *, batch_size=8, progress=False, extras=None, pack=1, states=False):
    """log P(label | prompt) (``exact``) or log P(first token) (``first_token``): (n, K) float64.

    One engine pass per batch over the prompt forest (texts and the label trie). ``states``: also
    each text's answer-slot hidden state from that same pass, ``(scores, (n, d))`` (a
    :class:`~judge.engine.protocol.HiddenStates` engine).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["card_arrival", "exchange_rate"], model, tokenizer=tok, method="exact").compiled_
    >>> score_exact(c, ["Where is my card?", "Rate?"]).shape
    (2, 2)
    """
    items = prompt_items(c, texts, extras)
    ahead = _PREFETCHED.get()
    if ahead is not None and ahead[0] is c.engine and not states and items:
        rows = [ahead[1].get(item_key(it)) for it in items]
        if all(r is not None for r in rows):
            return np.stack(rows)
    if states:
        res, H = states_scorer(c.engine, "states=True").score_items_states(
            items, root=c.root_ids, batch_size=batch_size, pack=pack, progress=progress)
        return (np.stack(res) if res else np.zeros((0, len(c.surfaces)))), H
    res = c.engine.score_items(items, root=c.root_ids, batch_size=batch_size, progress=progress, pack=pack)
    return np.stack(res) if res else np.zeros((0, len(c.surfaces)))


def score_decode(c, texts, *, top_k=5, batch_size=8, extras=None) -> np.ndarray:
    """Beam search through the automaton; ``top_k`` distinct labels rescored exactly, the rest ``-inf``.

    Returns
    -------
    ndarray of float64, shape (n, K)
        Exact log P(label + end token) for the labels found, ``-inf`` elsewhere.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> codes = ["A01", "A02", "B10", "B11"]
    >>> c = Classifier(codes, model, tokenizer=tok, method="decode").compiled_
    >>> s = score_decode(c, ["Cholera"], top_k=2)
    >>> s.shape, int(np.isfinite(s).sum())
    ((1, 4), 2)
    """
    from judge.automaton.hf import TrieLogitsProcessor

    eng = local_model(c.engine, "method='decode'")
    K = len(c.surfaces)
    top_k = max(1, min(top_k, K))
    beams = min(K * 4, max(2 * top_k, top_k + 4)) if top_k > 1 else 1
    items = prompt_items(c, texts, extras)
    proc = TrieLogitsProcessor(c.label_automaton())
    out = np.full((len(items), K), -np.inf)
    ends = set(vocabulary(eng, "method='decode'").end_token_ids)
    max_new = c.max_label_tokens + 1
    for s in range(0, len(items), batch_size):
        batch = items[s:s + batch_size]
        kw = dict(max_new_tokens=max_new)
        if beams > 1:
            kw.update(num_beams=beams, num_return_sequences=beams, length_penalty=0.0, early_stopping=True)
        L = max(len(it.ids) for it in batch)
        bound = proc.bind(L)
        _, gen = _generate(c, [it.ids for it in batch], logits_processor=[bound], **kw)
        seqs = gen[:, L:].tolist()
        for r, seq in enumerate(seqs):
            row = s + r // beams
            cut = next((i + 1 for i, t in enumerate(seq) if t in ends), len(seq))
            state = bound.state(seq[:cut])
            if state < 0 or not proc.automaton.is_accepting(state):
                continue
            lab = proc.automaton.label_at(state)
            found = out[row]
            if lab is not None and not np.isfinite(found[lab]) and np.isfinite(found).sum() < top_k:
                found[lab] = 0.0  # mark; rescored below
    # canonical rescoring of the labels found, with the end token (the model writes the label and stops)
    ctx = option_context(c.tail)
    for r, it in enumerate(items):
        labs = np.flatnonzero(np.isfinite(out[r]))
        if not len(labs):
            continue
        seqs = eng.option_ids(ctx, [c.surfaces[k] for k in labs], end_token=True)
        res = eng.score_items([Item(it.ids, seqs)], root=c.root_ids)[0]
        out[r, labs] = res
    return out


def generate_unconstrained(clf, texts, *, max_new_tokens=None, batch_size=8) -> list[str]:
    """Plain greedy generation with the classifier's prompt (the unconstrained baseline): n strings.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> out = generate_unconstrained(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?"], max_new_tokens=3)
    >>> len(out), isinstance(out[0], str)
    (1, True)
    """
    c = clf.compiled_
    items = prompt_items(c, list(texts))
    max_new = max_new_tokens or c.max_label_tokens + 8
    out = []
    for s in range(0, len(items), batch_size):
        L, gen = _generate(c, [it.ids for it in items[s:s + batch_size]], max_new_tokens=max_new)
        out += c.engine.tokenizer_.batch_decode(gen[:, L:], skip_special_tokens=True)
    return out


def search_texts(c, texts, cal, mode, eps, *, budget=None, batch_size=8):
    """Certified search (``Engine.search``) where it applies, else None.

    ``mode="argmax"``: the labels expanded prove the argmax of full exact scoring (after the
    calibration ``cal``'s bias and temperature, when given); ``"tolerance"``: a distribution
    within total variation ``eps``. None on paths where the bound does not apply (first-token,
    decode, think, rotations, the fallback, options that are not prefix-free).

    Returns
    -------
    judge.engine.SearchResult or None
        ``.dense(K)``: (n, K) exact log-probabilities where expanded, NaN elsewhere.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["card_arrival", "exchange_rate", "pin_blocked"], model, tokenizer=tok, method="exact").compiled_
    >>> res = search_texts(c, ["Where is my card?"], None, "argmax", 0.0)
    >>> res.dense(3).shape, bool(res.certified[0])
    ((1, 3), True)
    """
    if not texts or not c.searchable():
        return None
    items = prompt_items(c, texts)
    res = c.engine.search(items, c.option_trie, root=c.root_ids,
                          bias=None if cal is None else cal.bias,
                          temperature=None if cal is None else cal.temperature,
                          mode=mode, eps=eps, budget=budget, batch_size=batch_size)
    open_rows = int((~res.certified).sum())
    if open_rows:
        what = "argmax" if mode == "argmax" else f"tolerance {eps}"
        warnings.warn(
            f"{open_rows} of {len(texts)} answers are not certified: the search for the {what} spent its "
            f"budget of {budget} tokens per text first; they are the best labels found "
            f"(search_report_.gap says by how much an unexpanded label could still beat them). Raise "
            f"search_budget (or pass None) to certify them.", stacklevel=caller_stacklevel())
    return res


def score_shortlist(c, texts, keep, *, batch_size=8) -> np.ndarray:
    """Exact log P(label | prompt) of each text's shortlisted labels, ``-inf`` for the rest: (n, K).

    Parameters
    ----------
    c : CompiledLabels
    texts : list of str, length n
    keep : ndarray of int, shape (n, M)
        Per text, the label indices to score (``judge.retrieval.Shortlist.query``).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["card_arrival", "exchange_rate", "pin_blocked"], model, tokenizer=tok, method="exact").compiled_
    >>> s = score_shortlist(c, ["Where is my card?"], np.array([[0, 2]]))
    >>> bool(np.isinf(s[0, 1])), bool(np.isfinite(s[0, [0, 2]]).all())
    (True, True)
    """
    keep = np.asarray(keep, np.int64)
    items = prompt_items(c, texts)
    for it, row in zip(items, keep):
        it.options = [c.label_seqs[k] for k in row]
    res = c.engine.score_items(items, root=c.root_ids, batch_size=batch_size)
    out = np.full((len(texts), len(c.surfaces)), -np.inf)
    for i, (row, r) in enumerate(zip(keep, res)):
        out[i, row] = r
    return out
