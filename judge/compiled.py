"""How a compiled classifier turns texts into label scores: a label set compiled onto the engine.

:class:`CompiledLabels` is what a :class:`judge.Classifier` compiles on first
use: the engine, the prompt split into pieces around the text, the labels'
surfaces and token sequences, the chosen path. The paths:

* ``exact`` — log P(label | prompt) summed over each label's canonical tokens (plus the
  end token where a label's tokens are a prefix of another's): what ``auto`` picks.
* ``first_token`` — each label's canonical first-token log-probability only (what a
  constrained decoder commits to at its first step), renormalised over the labels by the
  caller; not the labels' sequence likelihood. ``auto`` picks it only when every label is a
  single token, where it equals ``exact``.
* ``search`` (and ``predict`` on the exact path) — the certified argmax of full exact scoring
  (or a distribution within a tolerance), expanding only the label-trie subtrees a prefix bound
  cannot rule out: ``auto`` above ``decode_above`` labels.
* ``decode`` — beam search through the label automaton (it can miss the argmax).
* a shortlist — retrieval keeps M labels per text, scored exactly (:func:`score_shortlist`).

The functions below take a ``CompiledLabels``:

* :func:`prompt_items` — texts -> token-level items (whole-prompt
  tokenization, truncation of the text only, a clear error when the prompt
  without any text does not fit).
* :func:`think` — the think-then-answer wrapper: the model writes its
  reasoning greedily, and the answer cue follows; any path scores after it,
  and calibration's content-free inputs go through the same wrapper.
* :func:`score_exact` (``exact`` and ``first_token``) — one pass of the
  engine over the prompt forest.
* :func:`score_decode` — beam search through the label automaton for huge
  label sets, ``top_k`` *distinct* labels, each rescored canonically by the
  engine (label tokens + end token), every other label ``-inf``.

What it deliberately does not do: calibrate or validate user arguments (the
Classifier does).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from judge.engine.protocol import Item, option_context
from judge.labels import label_names_for
from judge.prompts import DEFAULT_PROMPT, PromptTemplate

__all__ = ["CompiledLabels", "compile_labels", "prompt_items", "think", "score_exact", "score_decode", "search_texts", "score_shortlist",
           "zero_shot_scores", "shortlist_of",
           "generate_unconstrained", "THINK_CUE"]

THINK_CUE = "\n\nFinal answer:\n"


@dataclass
class CompiledLabels:
    """A classifier's compiled label set: engine, prompt split around the text, label tokens, path.

    Built by :func:`compile_labels` on a Classifier's first use (``Classifier.compiled_``).

    Attributes
    ----------
    engine : judge.engine.Engine
    prefix, tail : str
        The prompt before and after the text; ``prefix``'s tokens (``root_ids``) are cached.
    names, surfaces : list of str, length K
        What the model sees for each label, and writes (with the answer's lead).
    method : {"first_token", "exact", "decode"}
    label_seqs : list of K lists of int, or None (decode)
        The token sequences scored (end token appended where the policy says).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> c = Classifier(["card_arrival", "exchange_rate"], model, tokenizer=tok, method="exact").compiled_
    >>> c.method, c.surfaces
    ('exact', [' card arrival', ' exchange rate'])
    """

    engine: object
    prefix: str
    tail: str
    add_special: bool
    names: list
    surfaces: list
    method: str
    root_ids: list
    label_seqs: list | None
    first_ids: np.ndarray | None
    max_label_tokens: int
    think: bool
    think_tokens: int
    automaton: object = None
    option_trie: object = None
    rotated: list = None  # the same labels under the other list rotations (Classifier(rotations=R))
    shortlist: object = None  # judge.retrieval.Shortlist, built on first use (Classifier(shortlist=M))
    label_prior: object = None  # the contextual label-free prior, (K,) log-distribution, scored on first use
    label_vectors: object = None  # the embedder's vectors of the labels' texts (Classifier(embedder=...))

    def pieces(self, text: str, extra=()):
        return [(self.prefix, False), (text, True), (self.tail, False), *extra]


def prompt_items(c: CompiledLabels, texts, extras=None) -> list:
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
    limit = getattr(getattr(eng.model_, "config", None), "max_position_embeddings", None)
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
            f"were kept whole.", stacklevel=4)
    return items


def _generate(c: CompiledLabels, prompts, **kwargs):
    import torch

    from judge._math import left_pad

    eng = c.engine
    tok = eng.tokenizer_
    pad = tok.pad_token_id if tok.pad_token_id is not None else eng.end_id_
    ids, att = left_pad(prompts, pad, eng.model_.device)
    with torch.inference_mode():
        out = eng.model_.generate(input_ids=ids, attention_mask=att, pad_token_id=pad,
                                  eos_token_id=list(eng.vocab_.end_token_ids), do_sample=False, **kwargs)
    return ids.shape[1], out


def think(c: CompiledLabels, texts, *, batch_size=8) -> list:
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
    ends = set(c.engine.vocab_.end_token_ids)
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


def score_exact(c: CompiledLabels, texts, *, batch_size=8, progress=False, extras=None, pack=1) -> np.ndarray:
    """log P(label | prompt) (``exact``) or log P(first token) (``first_token``): (n, K) float64.

    One engine pass per batch over the prompt forest (texts and the label trie).

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
    res = c.engine.score_items(items, root=c.root_ids, batch_size=batch_size, progress=progress, pack=pack)
    return np.stack(res) if res else np.zeros((0, len(c.surfaces)))


def score_decode(c: CompiledLabels, texts, *, top_k=5, batch_size=8, extras=None) -> np.ndarray:
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

    eng = c.engine
    K = len(c.surfaces)
    top_k = max(1, min(top_k, K))
    beams = min(K * 4, max(2 * top_k, top_k + 4)) if top_k > 1 else 1
    items = prompt_items(c, texts, extras)
    proc = TrieLogitsProcessor(c.automaton)
    out = np.full((len(items), K), -np.inf)
    ends = set(eng.vocab_.end_token_ids)
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
            if state < 0 or not c.automaton.is_accepting(state):
                continue
            lab = c.automaton.label_at(state)
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


def search_texts(c: CompiledLabels, texts, cal, mode, eps, *, budget=None, batch_size=8):
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
    from judge.engine.options import OptionTrie

    if c.method not in ("exact", "search") or c.think or c.rotated or c.engine.path_ != "tree" or not texts:
        return None
    if c.option_trie is None:
        c.option_trie = OptionTrie(c.label_seqs)
    if not c.option_trie.prefix_free:
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
            f"search_budget (or pass None) to certify them.", stacklevel=4)
    return res


def score_shortlist(c: CompiledLabels, texts, keep, *, batch_size=8) -> np.ndarray:
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


def compile_labels(clf, engine=None) -> CompiledLabels:
    """Compile a Classifier's labels and prompt (root cache, token sequences, path).

    ``engine`` (the classifier's previous one) is reused when the model, tokenizer,
    device and end-token policy are unchanged; the returned ``CompiledLabels.engine``
    is the one to keep.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["yes", "no"], model, tokenizer=tok)
    >>> compile_labels(clf).root_ids == tok(compile_labels(clf).prefix)["input_ids"]
    True
    """
    from judge.backends import make_scorer

    backend = getattr(clf, "backend", "transformers")
    if backend == "vllm":  # the same token sequences, scored by vLLM
        from judge.backends.vllm import check_classifier

        check_classifier(clf)
    fresh = make_scorer(backend, clf.model, clf.tokenizer, device=clf.device, end_token=clf.end_token)
    same = type(engine) is type(fresh) and engine.model is clf.model and engine.tokenizer is clf.tokenizer \
        and engine.end_token == clf.end_token and engine.device == fresh.device
    eng = engine if same else fresh
    eng.setup()
    prompt = clf.prompt
    prompt = DEFAULT_PROMPT if prompt is None else (
        PromptTemplate.from_string(prompt) if isinstance(prompt, str) else prompt)
    c = _compile_prompt(clf, eng, prompt)
    if clf.rotations > 1:
        if c.method == "decode":
            raise ValueError(f"rotations={clf.rotations} averages over label lists, which the decode path "
                             f"(K > decode_above, or method='decode') does not score; use rotations=1.")
        K = len(clf.labels)
        offsets = sorted({(r * K) // clf.rotations for r in range(1, clf.rotations)} - {0})
        rotated = [_compile_prompt(clf, eng, replace(prompt, rotate=prompt.rotate + o), method=c.method)
                   for o in offsets]
        c.rotated = [r for r in rotated if r.prefix != c.prefix]
        if not c.rotated:
            warnings.warn(f"rotations={clf.rotations} has no effect: the prompt does not list the labels "
                          f"(K={K} > max_listed_labels, or no {{labels}} in the template), so every "
                          f"rotation is the same prompt; scoring once.", stacklevel=3)
        for r in c.rotated:
            eng.set_root(r.root_ids)
    eng.set_root(c.root_ids)
    return c


def _compile_prompt(clf, eng, prompt, method=None):
    """CompiledLabels for one prompt template (one list order)."""
    tok = eng.tokenizer_
    chat = prompt.uses_chat(tok)
    names = label_names_for(clf.labels, clf.label_names, clf.descriptions, clf.describe)
    surfaces = [prompt.label_prefix(tok) + n for n in names]
    prefix, suffix = prompt.split(tok, names)
    tail = suffix.split("{text}", 1)[1]
    if not chat:  # completion prompts start with the tokenizer's BOS: write it into the prompt text
        with_bos = tok("x", add_special_tokens=True)["input_ids"]
        plain = tok("x", add_special_tokens=False)["input_ids"]
        if len(with_bos) == len(plain) + 1 and with_bos[1:] == plain and tok.bos_token:
            prefix = tok.bos_token + prefix
    root = eng.encode([(prefix, False)])
    K = len(clf.labels)
    seqs = firsts = None
    wanted = clf.method if clf.method != "auto" else ("search" if K > clf.decode_above else "auto")
    if wanted == "search" and eng.path_ == "fallback":  # no tree masks on the fallback: beam search instead
        warnings.warn(f"{type(eng.model_).__name__} runs the engine's causal fallback ({eng.check_.get('reason')}), "
                      f"where the certified search cannot run; {K} labels are searched by beam search through "
                      f"the automaton instead (method='decode': it can miss the argmax).", stacklevel=4)
        wanted = "decode"
    if wanted == "decode":
        method, max_tokens = "decode", max(len(x.encode()) for x in surfaces) + 1
    elif wanted == "search":
        from judge.engine.options import OptionTrie

        seqs = eng.option_ids(tail, surfaces, what="Label")
        method, max_tokens = "search", max(len(x) for x in seqs)
    else:
        seqs = eng.option_ids(tail, surfaces, what="Label")
        firsts = np.asarray([s[0] for s in seqs], np.int64)
        distinct = len(set(firsts.tolist())) == K
        # auto: the first-token path only where it scores exactly what the exact path would (every
        # label one token, no end token). Chosen on validation (bench/first_token.py): where labels
        # have several tokens but distinct first ones, exact beat first-token by 4.2 points (51.1 vs
        # 46.9%, batch prior; TREC and 9 ten-label subsets, 1,445 texts).
        single = all(len(x) == 1 for x in seqs)
        method = method or (("first_token" if single else "exact") if clf.method == "auto" else clf.method)
        if method == "first_token" and not distinct:
            dup = [clf.labels[i] for i in range(K) if (firsts == firsts[i]).sum() > 1][:4]
            raise ValueError(
                f"method='first_token' needs every label to start with a different token, but {dup} "
                f"share their first token; use method='exact' (or 'auto').")
        max_tokens = max(len(s) for s in seqs)
    c = CompiledLabels(eng, prefix, tail, False, names, surfaces, method, root, seqs, firsts,
                       max_tokens, clf.think, clf.think_tokens)
    if method == "search":
        c.option_trie = OptionTrie(seqs)
    if method == "decode":
        from judge.automaton.trie import TrieAutomaton

        c.automaton = TrieAutomaton.build(surfaces, eng.vocab_)
    return c


def zero_shot_scores(clf, texts) -> np.ndarray:
    """``clf``'s label log-probabilities by its path, before any ``fit``: ndarray (n, K).

    ``clf`` is a :class:`judge.Classifier` (its public settings choose the path: shortlist,
    search, decode, exact/first-token with rotations, think); ``texts`` are checked strings.

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> zero_shot_scores(Classifier(["yes", "no"], model, tokenizer=tok), ["Is it?"]).shape
    (1, 2)
    """
    c = clf.compiled_
    if not texts:
        return np.zeros((0, len(clf.labels)))
    step = 1 if clf.batch_invariant else clf.batch_size
    show = clf.progress if clf.progress is not None else ("auto" if len(texts) > 4 * step else False)
    if clf.shortlist is not None and c.label_seqs is not None:
        return score_shortlist(c, texts, shortlist_of(clf, c).query(texts), batch_size=step)
    if c.method == "search" and clf.shortlist is None:  # labels within search_tolerance of the mass, the rest -inf
        res = search_texts(c, texts, None, "tolerance", clf.search_tolerance, budget=clf.search_budget,
                           batch_size=step)
        if res is not None:
            object.__setattr__(clf, "search_report_", res)
            return np.nan_to_num(res.dense(len(clf.labels)), nan=-np.inf)
    if c.method == "decode":
        extras = think(c, texts, batch_size=step) if c.think else None
        return score_decode(c, texts, top_k=clf.top_k, batch_size=step, extras=extras)
    pack = 1 if clf.batch_invariant else min(clf.pack, step)
    out = []
    for ci in [c, *(c.rotated or ())]:  # rotations: the mean log-probability over the list orders
        extras = think(ci, texts, batch_size=step) if ci.think else None
        out.append(score_exact(ci, texts, batch_size=max(1, step // pack), progress=show, extras=extras, pack=pack))
    return out[0] if len(out) == 1 else np.mean(out, axis=0)


def shortlist_of(clf, c: CompiledLabels):
    """The retrieval shortlist of ``clf`` (``shortlist=M``), built once per compiled label set.

    ``shortlist_encoder``: None or ``"tfidf"`` (character n-gram TF-IDF, the default: chosen on
    ICD-10-CM validation texts, see the README), ``"minilm"`` (the packaged sentence embedder),
    ``"model"`` (the model's own mean-pooled hidden states), any encoder or callable
    ``list of str -> (n, d)`` (:mod:`judge.encoders`), a list of them (similarities averaged) or a
    mapping of them to weights (``{"tfidf": 0.25, "minilm": 0.75}``: the weighted sum, the ICD-10-CM
    validation choice).

    Examples
    --------
    >>> from judge import Classifier
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> clf = Classifier(["card arrival", "exchange rate"], model, tokenizer=tok, shortlist=1, shortlist_encoder="tfidf")
    >>> shortlist_of(clf, clf.compiled_).query(["what exchange rate"]).tolist()
    [[1]]
    """
    if c.shortlist is None:
        from judge.encoders import LMEncoder
        from judge.retrieval import Shortlist

        def resolve(e):  # the LM's own states need this classifier's model
            return LMEncoder(c.engine.model_, c.engine.tokenizer_) if isinstance(e, str) and e == "model" else e

        enc, weights = clf.shortlist_encoder, None
        if isinstance(enc, dict):  # {encoder: weight}
            enc, weights = list(enc), [float(w) for w in enc.values()]
        enc = [resolve(e) for e in enc] if isinstance(enc, (list, tuple)) else resolve(enc)
        c.shortlist = Shortlist(c.names, clf.shortlist, encoder=enc, weights=weights)
    return c.shortlist
