"""Generating a document with ``model.generate``, and the distribution over each big enum's values.

* :func:`generate_structured` — one JSON document inside a :class:`~judge.structured.decode.StructuredSchema`,
  as a :class:`StructuredResult` listing each trie-handled value as a :class:`FieldChoice`.
* :func:`value_distribution` — ``softmax_k log P(canonical tokens of value k | context)``:
  every value scored by a :class:`~judge.engine.Scorer` (by default a
  :class:`~judge.engine.Engine` on the model), in one ``score_items`` call. The engine is exact
  on every architecture (per-layer sliding windows on logical positions, or its causal
  fallback for ALiBi and local/linear attention), so the distribution equals scoring each
  value by its own forward pass.

A value's *canonical tokens* are its label (``lead`` + JSON string, e.g. ``' "get_user"'``)
tokenized alone (the automaton lets the model spell it any way, so the generated tokens may
differ). Big enums are scored in pieces of about ``2**26 / V`` value tokens each (``V``: the
vocabulary size), which bounds the logits one forward pass keeps.

What it deliberately does not do: sample (``model.generate`` does), batch documents, or
add an end token after values (JSON strings are prefix-free, so no value's tokens are a
prefix of another's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from judge._math import softmax
from judge.engine.protocol import Item, Scorer
from judge.structured.decode import StructuredLogitsProcessor, StructuredSchema

__all__ = ["FieldChoice", "StructuredResult", "generate_structured", "value_distribution"]

_LOGITS_PER_PASS = 1 << 26  # value tokens per scored piece x vocabulary size


@dataclass
class FieldChoice:
    """One trie-handled enum value of the output.

    Attributes
    ----------
    path : str
        Where the field is (``/tool``, ``/tags/*``).
    value : str
        The value chosen.
    values : tuple of str
        The field's values (the enum, in schema order).
    proba : ndarray of float64, shape (len(values),) or None
        Distribution over ``values`` at the point where the model chose the
        value (:func:`value_distribution`); None unless requested.

    Examples
    --------
    >>> FieldChoice("/tool", "get", ("get", "set")).proba is None
    True
    """

    path: str
    value: str
    values: tuple
    proba: np.ndarray | None = None


@dataclass
class StructuredResult:
    """A generated JSON document.

    Attributes
    ----------
    text : str
    value : object or None
        ``json.loads(text)``; None if generation was cut short (``complete`` is False).
    complete : bool
        The grammar reached its end (and the EOS token) within ``max_new_tokens``.
    fields : list of FieldChoice
    token_ids : list of int
        Generated tokens (EOS excluded).

    Examples
    --------
    >>> StructuredResult('{"a": 1}', {"a": 1}, True).fields
    []
    """

    text: str
    value: object
    complete: bool
    fields: list = field(default_factory=list)
    token_ids: list = field(default_factory=list)


def generate_structured(model, tokenizer, schema, prompt: str, *, compiled: StructuredSchema | None = None,
                        max_new_tokens: int = 256, return_distributions: bool = False,
                        scorer: Scorer | None = None, **generate_kwargs) -> StructuredResult:
    """Generate one JSON document for ``schema`` after ``prompt`` with ``model.generate``.

    Parameters
    ----------
    model : transformers.PreTrainedModel (causal LM)
    tokenizer : transformers.PreTrainedTokenizerFast
    schema : dict
        JSON schema (supported subset: see :mod:`judge.structured`).
    prompt : str
        Text before the JSON (apply a chat template yourself if wanted).
    compiled : StructuredSchema, optional
        Reuse a compiled schema (compile once, generate many times).
    max_new_tokens : int
    return_distributions : bool
        Also compute each trie field's distribution over its values
        (:func:`value_distribution`; all fields in one ``score_items`` call).
    scorer : judge.engine.Scorer, optional
        Scores the distributions (default: a :class:`judge.engine.Engine` on ``model`` and
        ``tokenizer``, built for this call; pass one to reuse it across calls).
    **generate_kwargs
        Passed to ``model.generate`` (``do_sample``, ``temperature``, ...).

    Returns
    -------
    StructuredResult

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> schema = {"type": "object", "properties": {
    ...     "tool": {"enum": ["get_user", "set_user", "list_orders"]}, "urgent": {"type": "boolean"}}}
    >>> res = generate_structured(model, tok, schema, "Tool call:", compiled=StructuredSchema(
    ...     schema, tok, enum_threshold=3), max_new_tokens=40, return_distributions=True)
    >>> res.complete, sorted(res.value), res.fields[0].value in res.fields[0].values
    (True, ['tool', 'urgent'], True)
    >>> res.fields[0].proba.shape, round(float(res.fields[0].proba.sum()), 6)
    ((3,), 1.0)
    """
    import torch

    c = compiled if compiled is not None else StructuredSchema(schema, tokenizer)
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False) if prompt else []
    if not prompt_ids and tokenizer.bos_token_id is not None:
        prompt_ids = [tokenizer.bos_token_id]
    if not prompt_ids:
        raise ValueError("The prompt is empty and the tokenizer has no BOS token; pass a non-empty prompt.")
    ids = torch.tensor([prompt_ids], device=model.device)
    proc = StructuredLogitsProcessor(c, ids.shape[1])
    kwargs = {"do_sample": False, **generate_kwargs}
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else c.eos_token_id
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), logits_processor=[proc],
                             max_new_tokens=max_new_tokens, eos_token_id=c.eos_token_id,
                             pad_token_id=pad, **kwargs)
    gen = out[0, ids.shape[1]:].tolist()
    st = proc.state(gen)
    if gen and gen[-1] == c.eos_token_id:
        gen = gen[:-1]
    text = tokenizer.decode(gen, skip_special_tokens=False)
    complete = st.done and not st.dead
    value = json.loads(text) if complete else None
    fields, asks = [], []
    for slot_i, start, _end, lab in st.events:
        if lab < 0:
            continue
        slot = c.slots[slot_i]
        fields.append(FieldChoice(slot.path, slot.values[lab], slot.values))
        asks.append((prompt_ids + gen[:start], slot.labels))
    if return_distributions and fields:
        for fc, p in zip(fields, _distributions(_checked_scorer(model, tokenizer, scorer), tokenizer, asks)):
            fc.proba = p
    return StructuredResult(text, value, complete, fields, gen)


def value_distribution(model, tokenizer, context_ids, labels, *, scorer: Scorer | None = None) -> np.ndarray:
    """Distribution over ``labels`` right after ``context_ids``, each spelled canonically.

    ``softmax_k log P(tokens(labels[k]) | context)``, ``tokens`` being the label tokenized
    alone; all labels scored by ``scorer`` in one ``score_items`` call (exact on every
    architecture with the default :class:`judge.engine.Engine`).

    Parameters
    ----------
    model : transformers.PreTrainedModel or None
        The causal LM (may be None when ``scorer`` is given).
    tokenizer : transformers.PreTrainedTokenizerBase
        Spells the labels.
    context_ids : list of int, length >= 1
    labels : list of str, length K >= 1
        The texts that may follow (for a structured field: ``EnumSlot.labels``).
    scorer : judge.engine.Scorer, optional
        Default: a :class:`judge.engine.Engine` on ``model`` and ``tokenizer`` (cheap to build:
        the engine's self-check runs once per model and process).

    Returns
    -------
    ndarray of float64, shape (K,)

    Raises
    ------
    ValueError
        No context or no labels, a label that tokenizes to nothing, or a ``scorer`` on another model.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> ctx = tok.encode('Tool call: {"tool":', add_special_tokens=False)
    >>> p = value_distribution(model, tok, ctx, [' "get_user"', ' "set_user"', ' "list_orders"'])
    >>> p.shape, round(float(p.sum()), 6)
    ((3,), 1.0)
    """
    context = [int(t) for t in context_ids]
    if not context:
        raise ValueError("value_distribution needs at least one context token; got none. Pass the prompt's "
                         "ids (with a BOS token if the prompt is empty).")
    labels = [str(x) for x in labels]
    if not labels:
        raise ValueError("value_distribution needs at least one label; got none.")
    return _distributions(_checked_scorer(model, tokenizer, scorer), tokenizer, [(context, labels)])[0]


def _checked_scorer(model, tokenizer, scorer):
    if scorer is None:
        from judge.engine import Engine

        if model is None:
            raise ValueError("No model and no scorer: pass model=... or scorer=judge.engine.Engine(model, tokenizer).")
        return Engine(model, tokenizer)
    if not isinstance(scorer, Scorer):
        raise TypeError(f"scorer must answer judge.engine.Scorer (score_items, setup, ...), "
                        f"got {type(scorer).__name__}.")
    scorer.setup()
    used = getattr(scorer, "model_", None)
    if model is not None and used is not None and used is not model:
        raise ValueError(f"scorer scores with another model ({type(used).__name__} at {id(used):#x}) than the "
                         f"one given ({type(model).__name__} at {id(model):#x}); pass the same model, or model=None.")
    return scorer


def _distributions(scorer, tokenizer, asks) -> list[np.ndarray]:
    """One distribution per ``(context ids, labels)`` ask, all scored in one ``score_items`` call."""
    budget = max(64, _LOGITS_PER_PASS // max(1, len(tokenizer)))
    spelled: dict[tuple, list] = {}
    items, where = [], []  # where[i]: (ask, value indices) of item i
    for a, (ctx, labels) in enumerate(asks):
        key = tuple(labels)
        if key not in spelled:
            spelled[key] = [list(tokenizer.encode(lab, add_special_tokens=False)) for lab in labels]
            empty = [lab for lab, s in zip(labels, spelled[key]) if not s]
            if empty:
                raise ValueError(f"Label(s) {empty[:3]!r} tokenize to nothing; every value needs a token.")
        seqs = spelled[key]
        order = sorted(range(len(seqs)), key=lambda k: seqs[k])  # neighbours share trie prefixes
        piece, n = [], 0
        for k in order + [None]:
            if piece and (k is None or n + len(seqs[k]) > budget):
                items.append(Item(list(ctx), [seqs[j] for j in piece], group=len(items)))
                where.append((a, piece))
                piece, n = [], 0
            if k is not None:
                piece.append(k)
                n += len(seqs[k])
    ctxs = [it.ids for it in items]
    root = min(ctxs, key=len) if len(items) > 1 else []  # each context extends the first one
    root = root if all(c[: len(root)] == root for c in ctxs) else []
    per_pass = max(1, budget // max(sum(len(s) for s in it.options) for it in items))
    scores = scorer.score_items(items, root=root, batch_size=per_pass)
    out = [np.empty(len(labels), np.float64) for _, labels in asks]
    for (a, piece), s in zip(where, scores):
        out[a][piece] = s
    return [softmax(s) for s in out]
