"""Hidden states of prompts: the decoder's final-layer state at a prompt's last token (its answer slot), or mean-pooled.

The second thing the engine package does with a model besides scoring options: :func:`states_of_prompts`
runs the decoder (no LM head) over prompts that share a cached root, for

* ``fit``'s answer-slot features and decision profiles, through the scorer's
  :class:`judge.engine.protocol.HiddenStates` capability (`judge.engine.Engine.hidden_states`), and
* :class:`judge.encoders.LMEncoder` (a text's tokens mean-pooled, no prompt).

Where options are scored as well, the engine reads the same states from its scoring pass instead
(`judge.engine.Engine.score_items_states`: one forward for both).

What it deliberately does not do: score options (:mod:`judge.engine.passes`).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

__all__ = ["states_of_prompts"]

_ROOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {root ids: key/values}
_ROOTS_LOCK = threading.Lock()


def _root_kv(model, decoder, root: tuple):
    import torch
    from transformers import DynamicCache

    from judge._math import cache_keyword

    with _ROOTS_LOCK:
        hit = _ROOTS.setdefault(model, {}).get(root)
    if hit is not None:
        return hit
    cache = DynamicCache()
    x = torch.tensor([list(root)], dtype=torch.long, device=model.device)
    with torch.inference_mode():
        decoder(input_ids=x, use_cache=True, **{cache_keyword(decoder): cache})
    kv = [(layer.keys, layer.values) for layer in cache.layers]
    with _ROOTS_LOCK:
        store = _ROOTS.setdefault(model, {})
        if len(store) > 8:
            store.clear()
        store[root] = kv
    return kv


def _states(model, decoder, seqs, root, kv, batch_size, pooling):
    """Final-layer state of each ``root + seq`` (last token, or mean over ``seq``): list of (b, d) float64."""
    import torch
    from transformers import DynamicCache

    from judge._math import cache_keyword

    R = len(root)
    dev = model.device
    out = []
    for s in range(0, len(seqs), batch_size):
        part = seqs[s:s + batch_size]
        B, L = len(part), max(len(x) for x in part)
        ids = torch.zeros((B, L), dtype=torch.long)
        att = torch.zeros((B, R + L), dtype=torch.long)
        att[:, :R] = 1
        for b, x in enumerate(part):  # right padding: the padding follows every real token
            ids[b, : len(x)] = torch.as_tensor(x, dtype=torch.long)
            att[b, R: R + len(x)] = 1
        kw = {"input_ids": ids.to(dev), "attention_mask": att.to(dev),
              "position_ids": (R + torch.arange(L)).expand(B, L).to(dev)}
        if kv is not None:
            cache = DynamicCache()
            for i, (k, v) in enumerate(kv):
                cache.update(k.expand(B, *k.shape[1:]), v.expand(B, *v.shape[1:]), i)
            kw[cache_keyword(decoder)] = cache
            kw["use_cache"] = True
        with torch.inference_mode():
            h = decoder(**kw).last_hidden_state
        if pooling == "last":
            last = torch.as_tensor([len(x) - 1 for x in part], device=h.device)
            out.append(h[torch.arange(B, device=h.device), last].double().cpu().numpy())
        else:
            m = att[:, R:].to(h.device).unsqueeze(-1).to(h.dtype)
            out.append(((h * m).sum(1) / m.sum(1)).double().cpu().numpy())
    return out


def states_of_prompts(model, prompts, root=(), *, batch_size: int = 16, pooling: str = "last") -> np.ndarray:
    """Final-layer hidden state of each prompt, at its last token or mean-pooled: (n, d) float64.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM; its decoder (``model.get_decoder()``) is run, not its LM head.
    prompts : list of list of int, length n
        Token ids of each prompt (at least one token each).
    root : sequence of int
        A token prefix shared by the prompts (the instructions): its keys/values are computed once
        per model and reused for every prompt that starts with it.
    batch_size : int
    pooling : {"last", "mean"}
        The state at the prompt's last token (where the next token is predicted: the answer slot),
        or the mean over the prompt's tokens after the shared root.

    Returns
    -------
    ndarray of float64, shape (n, d)
        ``d`` = the model's hidden size; rows in the order of ``prompts``.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> with_root = states_of_prompts(model, [[1, 2, 3, 4], [1, 2, 5]], root=[1, 2])
    >>> whole = states_of_prompts(model, [[1, 2, 3, 4], [1, 2, 5]])
    >>> with_root.shape, bool(np.abs(with_root - whole).max() < 1e-4)
    ((2, 64), True)
    >>> states_of_prompts(model, [[1, 2, 3]], pooling="mean").shape
    (1, 64)
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}.")
    if pooling not in ("last", "mean"):
        raise ValueError(f"pooling must be 'last' or 'mean', got {pooling!r}.")
    prompts = [list(map(int, p)) for p in prompts]
    if any(not p for p in prompts):
        raise ValueError("Every prompt needs at least one token; got an empty one.")
    decoder = model.get_decoder()
    root = tuple(int(t) for t in root) if pooling == "last" else ()  # mean pooling: over the whole prompt
    out = np.zeros((len(prompts), int(model.config.get_text_config().hidden_size)))
    groups: dict[int, list[int]] = {}  # shared prefix length -> prompts (a prompt tokenized whole may
    for i, p in enumerate(prompts):    # merge its text's first token with the root's last one)
        m = 0
        while m < min(len(root), len(p) - 1) and p[m] == root[m]:
            m += 1
        groups.setdefault(m, []).append(i)
    for m, members in groups.items():
        members.sort(key=lambda i: len(prompts[i]))
        kv = _root_kv(model, decoder, root[:m]) if m else None
        got = _states(model, decoder, [prompts[i][m:] for i in members], root[:m], kv, batch_size, pooling)
        out[members] = np.concatenate(got)
    return out
