"""Attention masks the model really applies: the plan per layer type, and the tree masks.

* :func:`mask_plan` reads a model's config and says how a tree mask can be expressed
  exactly: one 4D mask for every layer (``"single"``), one per layer type (``"dict"``,
  mixed sliding/full models such as gemma3), or not at all (ALiBi, local or linear
  attention, unknown layer types: the engine then uses its exact fallback).
* :func:`tree_masks` turns rows of a :class:`~judge.engine.forest.Forest` into the
  additive masks of one forward pass, windows applied on logical positions.
* :func:`additive` turns boolean masks into the model's additive float masks.
* :class:`native_gqa` lets transformers' sdpa path on CPU use torch's grouped-query
  attention with such a mask instead of copying the key/value heads.

What it deliberately does not do: run the model or decide between tree and fallback on
numbers (the engine's self-check does).
"""

from __future__ import annotations

import inspect
import os

import numpy as np

from judge.engine.forest import Forest

__all__ = ["mask_plan", "tree_masks", "additive", "remap_parents", "native_gqa"]


def mask_plan(model):
    """How to express the tree mask for this model: ``(kind, windows)`` or ``(None, reason)``.

    kind ``"single"``: one 4D mask for every layer, window ``windows[None]``;
    kind ``"dict"``: one mask per layer type ``{type: window}``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> mask_plan(SimpleNamespace(config=SimpleNamespace(sliding_window=16)))
    ('single', {None: 16})
    >>> mask_plan(SimpleNamespace(config=SimpleNamespace(alibi=True)))[0] is None
    True
    """
    cfg = getattr(model, "config", None)
    cfg = getattr(cfg, "text_config", None) or cfg
    if cfg is None:
        return None, "the model has no config"
    if getattr(cfg, "alibi", False) or getattr(cfg, "model_type", "") in ("bloom", "mpt", "jais"):
        return None, "ALiBi attention biases are computed from the 2D padding mask, not from a tree mask"
    if getattr(cfg, "attention_layers", None) or getattr(cfg, "attention_types", None):
        return None, "its local attention layers build their own masks"
    types = getattr(cfg, "layer_types", None)
    window = getattr(cfg, "sliding_window", None)
    if types is None:
        use = getattr(cfg, "use_sliding_window", True)
        return "single", {None: int(window) if (window and use) else None}
    windows = {}
    for t in set(types):
        if t == "full_attention":
            windows[t] = None
        elif t == "sliding_attention":
            windows[t] = int(window) if window else None
        else:
            return None, f"layer type {t!r} has no tree-mask equivalent"
    if len(set(windows.values())) == 1:
        return "single", {None: next(iter(windows.values()))}
    try:
        src = inspect.getsource(inspect.getmodule(type(model)))
    except (OSError, TypeError):
        src = ""
    if "isinstance(causal_mask_mapping := attention_mask, dict)" not in src:
        return None, "its layers differ in window but it does not accept a mask per layer type"
    return "dict", windows


def additive(masks: dict, kind: str, dtype, device):
    """Boolean masks ``{layer type: (B, N, C)}`` -> additive float masks of shape (B, 1, N, C).

    Returns one tensor for ``kind="single"``, else the dict keyed by layer type.

    Examples
    --------
    >>> import torch
    >>> m = additive({None: np.array([[[True, False]]])}, "single", torch.float32, "cpu")
    >>> m.shape, bool(m[0, 0, 0, 0] == 0), bool(m[0, 0, 0, 1] < -1e30)
    (torch.Size([1, 1, 1, 2]), True, True)
    """
    import torch

    neg = torch.finfo(dtype).min
    out = {}
    for name, m in masks.items():
        t = torch.zeros(m.shape, dtype=dtype)
        t.masked_fill_(torch.from_numpy(~m), neg)
        out[name] = t[:, None].to(device)
    return out[None] if kind == "single" else out


def remap_parents(row: Forest, nodes: np.ndarray) -> np.ndarray:
    """Parents of ``nodes`` as indices into ``nodes`` (-1: hangs off the root cache).

    Examples
    --------
    >>> f = Forest()
    >>> end = f.add_path([5, 6], -1, 0)
    >>> remap_parents(f, f.fed_nodes()).tolist()
    [-1, 0]
    """
    index = {int(n): j for j, n in enumerate(nodes)}
    return np.asarray([index.get(int(row.parent[n]), -1) for n in nodes], np.int64)


def _euler(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entry and exit times of a depth-first walk: k is an ancestor-or-self of q iff tin[k] <= tin[q] < tout[k]."""
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n + 1)]  # index n: the roots (parent -1)
    for j, p in enumerate(parent.tolist()):
        children[p if p >= 0 else n].append(j)
    tin, tout = np.empty(n, np.int64), np.empty(n, np.int64)
    t, stack = 0, [(j, False) for j in reversed(children[n])]
    while stack:
        node, done = stack.pop()
        if done:
            tout[node] = t
            continue
        tin[node] = t
        t += 1
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children[node]))
    return tin, tout


def tree_masks(rows, fed, n_root: int, plan, kind: str, dtype, device, *, block: int = 256):
    """Additive masks per layer type for a batch of forest rows, built blockwise in the model's dtype.

    Only the mask the model reads is allocated, ``(B, 1, N, R + N)`` in ``dtype``; it is filled
    ``block`` query rows at a time (ancestry from the entry/exit times of a depth-first walk),
    so no boolean or integer copy of the whole mask, and no N x N ancestor matrix, exists.
    Equal to :func:`~judge.engine.forest.row_mask` on every row (tested).

    Parameters
    ----------
    rows : list of Forest, length B
    fed : list of ndarray of int64
        Per row, the nodes fed (in order), N_b of them.
    n_root : int
        Root-cache columns (R).
    plan, kind : from :func:`mask_plan`
    dtype, device : the model's
    block : int
        Query rows filled at a time.

    Returns
    -------
    Tensor of shape (B, 1, N, R + N), or a dict of them keyed by layer type
        ``N = max N_b``; padding tokens see themselves only.

    Examples
    --------
    >>> import torch
    >>> f = Forest(); _ = f.add_path([5, 6], -1, 0)
    >>> m = tree_masks([f], [f.fed_nodes()], 0, {None: None}, "single", torch.float32, "cpu")
    >>> m.shape, (m[0, 0] == 0).int().tolist()
    (torch.Size([1, 1, 2, 2]), [[1, 0], [1, 1]])
    """
    import torch

    R = n_root
    N = max(len(f) for f in fed)
    neg = torch.finfo(dtype).min
    per_row = []
    for row, nodes in zip(rows, fed):
        tin, tout = _euler(remap_parents(row, nodes))
        per_row.append((torch.from_numpy(np.asarray(row.position, np.int64)[nodes]),
                        torch.from_numpy(np.asarray(row.root_len, np.int64)[nodes]),
                        torch.from_numpy(tin), torch.from_numpy(tout)))
    out = {}
    for name, window in plan.items():
        m = torch.full((len(rows), 1, N, R + N), neg, dtype=dtype)
        for b, (pos, rl, tin, tout) in enumerate(per_row):
            n = len(pos)
            key_pos = torch.cat([torch.arange(R), pos]) if window is not None else None
            for a in range(0, n, block):
                z = min(n, a + block)
                allow = torch.empty((z - a, R + n), dtype=torch.bool)
                if R:
                    torch.lt(torch.arange(R)[None, :], rl[a:z, None], out=allow[:, :R])
                allow[:, R:] = (tin[None, :] <= tin[a:z, None]) & (tin[a:z, None] < tout[None, :])
                if window is not None:
                    allow &= (pos[a:z, None] - key_pos[None, :]) < window
                m[b, 0, a:z, : R + n].masked_fill_(allow, 0.0)
            if n < N:  # padding tokens see themselves only
                m[b, 0, torch.arange(n, N), R + torch.arange(n, N)] = 0.0
        out[name] = m.to(device)
    return out[None] if kind == "single" else out


class native_gqa:
    """On CPU, let transformers' sdpa path use torch's native grouped-query attention with a mask.

    transformers repeats the key/value heads (``repeat_kv``, a copy of the whole cache per layer)
    whenever a mask is given, because CUDA kernels then fall back to the math kernel anyway. On
    CPU the math kernel is what runs in both cases, and native GQA gives bit-identical scores
    (checked on SmolLM2) at about half the time of a tree pass. Scoped to our forward calls
    (under the engine's lock); a user's own setting of the variable is left alone.

    Examples
    --------
    >>> import os
    >>> with native_gqa("cpu"):
    ...     on = os.environ.get("TRANSFORMERS_SDPA_FORCE_GQA")
    >>> on == "1" or "TRANSFORMERS_SDPA_FORCE_GQA" in os.environ
    True
    """

    def __init__(self, device):
        self.on = getattr(device, "type", str(device)) == "cpu" and "TRANSFORMERS_SDPA_FORCE_GQA" not in os.environ

    def __enter__(self):
        if self.on:
            os.environ["TRANSFORMERS_SDPA_FORCE_GQA"] = "1"

    def __exit__(self, *exc):
        if self.on:
            os.environ.pop("TRANSFORMERS_SDPA_FORCE_GQA", None)
