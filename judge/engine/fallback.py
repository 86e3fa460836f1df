"""The exact fallback: each prompt an ordinary causal pass, its options continued from its cache.

Used for models whose attention a tree mask cannot express exactly (ALiBi, local or linear
attention, unknown layer types) or that fail the engine's self-check. Nothing custom is
given to the model: no 4D mask, no positions; the options' later tokens run as one
right-padded batch on a copy of the prompt's cache (one at a time for caches that cannot
be repeated along the batch, such as recurrent or linear-attention states).

What it deliberately does not do: share a prompt's work between items (the tree pass does).
"""

from __future__ import annotations

import numpy as np

from judge._math import cache_keyword, lse64

__all__ = ["score_fallback"]


def score_fallback(model, items) -> tuple[list[np.ndarray], int]:
    """log P(option | prompt) for every option of every item, by ordinary causal passes.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    items : list of judge.engine.Item

    Returns
    -------
    scores : list of ndarray of float64, shape (K_i,)
    fed : int
        Tokens run through the model.

    Examples
    --------
    >>> from judge.engine import Item
    >>> from judge.testing import tiny_pair
    >>> scores, fed = score_fallback(tiny_pair()[0], [Item([1, 2, 3], [[7], [8, 9]])])
    >>> scores[0].shape, fed
    ((2,), 4)
    """
    import torch

    dev = model.device
    kw = cache_keyword(model)
    out = []
    fed = 0
    with torch.inference_mode():
        for it in items:
            x = torch.tensor([it.ids], dtype=torch.long, device=dev)
            res = model(input_ids=x, use_cache=True, logits_to_keep=1)
            cache = getattr(res, "cache", None) or getattr(res, "past_key_values", None)
            first = res.logits[0, -1]
            lse0 = lse64(first[None])[0]
            fed += len(it.ids)
            scores = np.zeros(len(it.options))
            longer = [k for k, s in enumerate(it.options) if len(s) > 1 and not it.first_only]
            for k, s in enumerate(it.options):
                if len(s):  # an empty option adds nothing to the prompt: log P = 0
                    scores[k] = float(first[s[0]].double() - lse0)
            if longer:
                scores += _continue(model, it, cache, longer, kw, dev)
                fed += sum(len(it.options[k]) - 1 for k in longer)
            out.append(scores)
    return out, fed


def _continue(model, it, cache, longer, kw, dev) -> np.ndarray:
    """Options' later tokens continued from the prompt's cache: batched, or one at a time for
    caches that cannot be repeated along the batch (recurrent / linear-attention states)."""
    add = np.zeros(len(it.options))
    try:
        vals = _continuation(model, it, cache, longer, kw, dev)
    except (AttributeError, NotImplementedError, TypeError):
        vals = [_continuation(model, it, cache, [k], kw, dev)[0] for k in longer]
    add[longer] = vals
    return add


def _continuation(model, it, cache, rows, kw, dev):
    """Log-probs of tokens 2.. of options ``rows`` continued from ``cache`` as one right-padded batch."""
    import copy

    import torch

    L = max(len(it.options[k]) - 1 for k in rows)
    n = len(rows)
    inp = torch.zeros((n, L), dtype=torch.long)
    att = torch.zeros((n, len(it.ids) + L), dtype=torch.long)
    att[:, : len(it.ids)] = 1
    for r, k in enumerate(rows):
        s = it.options[k][:-1]
        inp[r, : len(s)] = torch.as_tensor(s)
        att[r, len(it.ids): len(it.ids) + len(s)] = 1
    c = copy.deepcopy(cache)
    if n > 1:
        c.batch_repeat_interleave(n)
    lg = model(input_ids=inp.to(dev), attention_mask=att.to(dev), use_cache=True, **{kw: c}).logits
    out = []
    for r, k in enumerate(rows):
        s = it.options[k]
        x = lg[r, : len(s) - 1]
        out.append(float((x[torch.arange(len(s) - 1), torch.as_tensor(s[1:])].double() - lse64(x)).sum()))
    return out
