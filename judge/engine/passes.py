"""Forward passes under a memory budget: which rows go together, on which cached root, and the pass itself.

A scoring call's items (prompt ids and option token sequences) become rows of a prompt
forest (:func:`judge.engine.forest.build_rows`: one row per group, so the questions about
one state share its tokens). :func:`plan_passes` sizes them into forward passes whose
memory is bounded by two settings, never by the call:

* ``max_tokens`` (T) bounds the key columns of a pass, ``B x (R + N)``: B rows, each padded
  to N fed tokens, each holding the R columns of the pass's cached root;
* ``max_logits`` (P) bounds the logit rows of a pass, ``B x`` the most read positions of a row
  (nodes whose next-token distribution is read).

A group too large for one pass is split, exactly: the prompt its items share beyond the root
(the state) becomes a cached root of its own (computed once, shared by each of its rows) and
its items are spread over rows; an item still too large has its whole prompt cached and its
options split into chunks. An option's log-probability depends only on its own prompt and
path, so a split changes scores by float rounding only (tested against one row).

:func:`tree_pass` runs one pass (the tree mask from :mod:`judge.engine.masks`, one forward,
float64 normalisation); :func:`memory_bound` is the peak memory of any call as a formula of
the settings and the model's shape (documented in :doc:`/serving`, checked by a test).

What it deliberately does not do: tokenize, cache roots (the engine does), or choose the
fallback path.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from judge.engine.forest import build_rows, common_prefix
from judge.engine.masks import native_gqa, tree_masks

__all__ = ["Pass", "plan_passes", "tree_pass", "memory_bound", "model_context", "default_max_logits",
           "DEFAULT_MAX_BATCH_TOKENS", "self_check_probe", "keep_mode", "read_logits"]

#: Tokens per scoring call and per forward pass unless told otherwise: the engine's, the server's jobs and
#: ``judge serve --max-batch-tokens`` (one number, written once; it bounds memory: :func:`memory_bound`).
DEFAULT_MAX_BATCH_TOKENS = 8192


@dataclass
class _Unit:
    """One row to be: (item index, option indices or None for all) pieces sharing one root."""

    root: tuple
    pieces: list
    n: int  # fed tokens (an upper bound where pieces were costed apart)
    reads: int  # read positions (idem)


@dataclass
class Pass:
    """One forward pass: a cached root and its rows.

    Attributes
    ----------
    root : tuple of int
        The token prefix whose key/values every row of the pass reads from the cache.
    rows : list of list of (int, list of int or None)
        Per row, its pieces: an item's index in the call and the indices of the options
        scored in this row (None: all of them).
    tokens, logits : int
        The pass's key columns ``B x (R + N)`` and logit rows ``B x max reads`` (upper bounds).

    Examples
    --------
    >>> Pass(root=(1, 2), rows=[[(0, None)]]).rows[0][0]
    (0, None)
    """

    root: tuple
    rows: list
    tokens: int = 0
    logits: int = 0
    _units: list = field(default_factory=list, repr=False)


def _cost(items, root) -> tuple[int, int]:
    """(fed tokens, read positions) of ``items`` in one row under ``root``."""
    row = build_rows([_Sub(it.ids, it.options, it.first_only, 0) for it in items], root)[0]
    reads = {int(row.parent[n]) for s in row.slots for p in s.option_paths for n in p}
    return int(np.count_nonzero(row.fed)), len(reads)


@dataclass
class _Sub:
    ids: list
    options: list
    first_only: bool = False
    group: int = 0


def _too_big(what: str, need: int, limit: int, name: str) -> ValueError:
    return ValueError(f"{what} needs {need} {'key columns' if name == 'max_batch_tokens' else 'logit rows'} in one "
                      f"forward pass, over the engine's {name}={limit}; raise {name} (memory grows with it) or "
                      f"shorten the prompt or option.")


def _item_units(items, i, root, T, P) -> list[_Unit]:
    """An item too large for a row: its prompt cached whole, its options in chunks."""
    it = items[i]
    head = tuple(it.ids[:-1])
    root = head if len(head) > common_prefix(head, root) else tuple(root)
    R = len(root)
    units, cur, seen = [], [], set()
    for j, seq in enumerate(it.options):
        new = set() if it.first_only else {tuple(seq[:k]) for k in range(1, len(seq))}
        add = len(new - seen)
        if R + 1 + len(new) > T:
            raise _too_big(f"Option {j} ({len(seq)} tokens) after a {len(it.ids)}-token prompt", R + 1 + len(new), T,
                           "max_batch_tokens")
        if 1 + len(new) > P:
            raise _too_big(f"Option {j} ({len(seq)} tokens)", 1 + len(new), P, "max_batch_logits")
        if cur and (R + 1 + len(seen) + add > T or 1 + len(seen) + add > P):
            units.append(_Unit(root, [(i, cur)], 1 + len(seen), 1 + len(seen)))
            cur, seen = [], set()
        cur.append(j)
        seen |= new
    if cur:
        units.append(_Unit(root, [(i, cur)], 1 + len(seen), 1 + len(seen)))
    return units


def _group_units(items, idxs, root, T, P) -> list[_Unit]:
    """One group's rows: one row when it fits, else split on a cached trunk (see the module docstring)."""
    n, reads = _cost([items[i] for i in idxs], root)
    if len(root) + n <= T and reads <= P:
        return [_Unit(tuple(root), [(i, None) for i in idxs], n, reads)]
    trunk = list(items[idxs[0]].ids[:-1])
    for i in idxs[1:]:
        trunk = trunk[:common_prefix(trunk, items[i].ids[:-1])]
    root = tuple(trunk) if len(trunk) > common_prefix(trunk, root) else tuple(root)
    R = len(root)
    units, cur, cn, cr = [], [], 0, 0
    for i in idxs:
        ni, ri = _cost([items[i]], root)
        if R + ni > T or ri > P:
            units += _item_units(items, i, root, T, P)
            continue
        if cur and (R + cn + ni > T or cr + ri > P):
            units.append(_Unit(root, cur, cn, cr))
            cur, cn, cr = [], 0, 0
        cur.append((i, None))
        cn, cr = cn + ni, cr + ri
    if cur:
        units.append(_Unit(root, cur, cn, cr))
    return units


def plan_passes(items, root=(), *, max_tokens: int, max_logits: int, max_rows: int = 8, pack: int = 1) -> list[Pass]:
    """Forward passes for ``items`` within the budgets (see the module docstring).

    Parameters
    ----------
    items : list of judge.engine.Item
        Items of one group share a row (their common prompt tokens fed once) while it fits.
    root : sequence of int
        The cached root of the call.
    max_tokens : int
        Key columns per pass, ``B x (R + N)`` (T).
    max_logits : int
        Logit rows per pass (P).
    max_rows : int
        Rows per pass (B).
    pack : int
        Consecutive groups (longest prompts first) merged into one row.

    Returns
    -------
    list of Pass
        Every option of every item is scored in exactly one row of one pass; the passes of
        one root are consecutive, the call's own root first.

    Raises
    ------
    ValueError
        A single option (after its whole prompt is cached) does not fit the budgets; the
        message names the setting to raise.

    Examples
    --------
    >>> from judge.engine import Item
    >>> items = [Item([1, 2, 3, 4, 5], [[7], [8, 9]]), Item([1, 2, 3, 6], [[7], [8]])]
    >>> [(p.root, p.rows) for p in plan_passes(items, (1,), max_tokens=64, max_logits=64)]
    [((1,), [[(0, None), (1, None)]])]
    >>> [(p.root, p.rows) for p in plan_passes(items, (1,), max_tokens=6, max_logits=64)]   # split on the trunk
    [((1, 2, 3), [[(0, None)]]), ((1, 2, 3), [[(1, None)]])]
    """
    T, P = int(max_tokens), int(max_logits)
    if T < 2 or P < 1 or max_rows < 1:
        raise ValueError(f"plan_passes needs max_tokens >= 2, max_logits >= 1 and max_rows >= 1, got {T}, {P}, "
                         f"{max_rows}.")
    root = tuple(int(t) for t in root)
    if len(root) + 1 > T:
        raise _too_big(f"The cached root ({len(root)} tokens)", len(root) + 1, T, "max_batch_tokens")
    groups: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        groups.setdefault(it.group, []).append(i)
    order = sorted(groups.values(), key=lambda g: -max(len(items[i].ids) for i in g))
    if pack > 1:
        order = [[i for g in order[s:s + pack] for i in g] for s in range(0, len(order), pack)]
    by_root: dict[tuple, list[_Unit]] = {root: []}
    for grp in order:
        for u in _group_units(items, grp, root, T, P):
            by_root.setdefault(u.root, []).append(u)
    passes = []
    for r, units in by_root.items():
        units.sort(key=lambda u: -u.n)
        cur: list[_Unit] = []
        for u in units:
            if cur and (len(cur) >= max_rows or (len(cur) + 1) * (len(r) + cur[0].n) > T
                        or (len(cur) + 1) * max(u.reads, max(c.reads for c in cur)) > P):
                passes.append(_close(r, cur))
                cur = []
            cur.append(u)
        if cur:
            passes.append(_close(r, cur))
    return passes


def _close(root, units) -> Pass:
    B = len(units)
    return Pass(root, [u.pieces for u in units], B * (len(root) + units[0].n), B * max(u.reads for u in units), units)


_KEEP_MODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its keep_mode


def keep_mode(model) -> str:
    """How ``model``'s forward takes a per-row ``logits_to_keep`` of shape (B, P): ``"rows"``, ``"union"`` or ``"all"``.

    ``"rows"``: it keeps row b's own positions (transformers' ``slice_logits_to_keep``, 5.20 and
    later). ``"union"``: it indexes every row by the whole tensor (``hidden[:, keep]``, a (B, B, P)
    result: transformers 5.19 and earlier, vLLM's pin), so the positions are passed as one 1-D
    set and gathered per row. ``"all"``: it ignores or refuses the argument, so every position's
    logits are computed and gathered. Probed once per model by a 3-token forward of two rows.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> keep_mode(tiny_pair()[0]) in ("rows", "union", "all")
    True
    """
    mode = _KEEP_MODES.get(model)
    if mode is None:
        import torch

        x = torch.tensor([[0, 1, 2], [2, 1, 0]], device=model.device)
        keep = torch.tensor([[0], [2]], device=model.device)
        try:
            with torch.inference_mode():
                shape = tuple(model(input_ids=x, attention_mask=torch.ones_like(x), logits_to_keep=keep,
                                    use_cache=False).logits.shape[:-1])
        except (TypeError, IndexError, ValueError, RuntimeError):  # a forward that refuses a (B, P) tensor there
            shape = None
        mode = "rows" if shape == (2, 1) else "union" if shape == (2, 2, 1) else "all"
        _KEEP_MODES[model] = mode
    return mode


def read_logits(model, keep, **inputs):
    """``model(**inputs)`` with the logits of row b kept at positions ``keep[b]`` only, on any transformers.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    keep : torch.Tensor of int64, shape (B, P)
        Positions per row (a row with fewer reads repeats its last).
    **inputs
        The forward's other arguments.

    Returns
    -------
    out : the model's output
    logits : torch.Tensor, shape (B, P, V)
        ``logits[b, j]`` is row b's next-token logits at position ``keep[b, j]``, however the
        installed transformers takes ``logits_to_keep`` (:func:`keep_mode`).

    Examples
    --------
    >>> import torch
    >>> from judge.testing import tiny_pair
    >>> model = tiny_pair()[0]
    >>> ids = torch.tensor([[5, 6, 7], [7, 6, 5]])
    >>> _, got = read_logits(model, torch.tensor([[2, 0], [1, 1]]), input_ids=ids)
    >>> full = model(input_ids=ids).logits
    >>> tuple(got.shape[:2]), bool(torch.allclose(got[0, 0], full[0, 2], atol=1e-5)), bool(torch.allclose(got[1, 1], full[1, 1], atol=1e-5))
    ((2, 2), True, True)
    """
    import torch

    mode = keep_mode(model)
    if mode == "rows":
        out = model(logits_to_keep=keep, **inputs)
        return out, out.logits
    if mode == "union":
        wanted, at = torch.unique(keep, sorted=True, return_inverse=True)
        out = model(logits_to_keep=wanted, **inputs)
    else:
        out, at = model(**inputs), keep
    return out, torch.take_along_dim(out.logits, at[..., None], dim=1)


def _lse(logits):
    """log-sum-exp over the last axis: the max in the logits' dtype, the sum of exponentials in float64.

    Within 2e-8 nats of a float64 log-sum-exp (a float32 one is off by up to 6e-5 over a 262k
    vocabulary), 3-4x faster on CPU for a 49k vocabulary (no float64 copy of the logits); in row
    chunks of at most 2^24 values, so its memory is bounded. (M, V) -> float64 (M,).
    """
    import torch

    out = torch.empty(logits.shape[0], dtype=torch.float64, device=logits.device)
    step = max(1, (1 << 24) // max(1, logits.shape[-1]))
    for i in range(0, logits.shape[0], step):
        x = logits[i:i + step]
        m = x.amax(-1, keepdim=True)
        out[i:i + step] = m.squeeze(-1).double() + torch.exp(x - m).sum(-1, dtype=torch.float64).log()
    return out


def tree_pass(model, mask_plan, dtype, rid, items, grad: bool = False, states: bool = False) -> tuple:
    """One forward pass over the rows of ``items`` (one row per ``group``) on the cached root ``rid``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    mask_plan : tuple
        ``(kind, windows)`` from :func:`judge.engine.masks.mask_plan`.
    dtype : torch.dtype
        The model's parameter dtype (the additive mask's).
    rid : tuple
        ``(root ids, per-layer (keys, values) or None)``.
    items : list of judge.engine.Item
    grad : bool
        Keep the autograd graph (results are torch tensors).
    states : bool
        Also read each item's answer-slot state from this same pass: the decoder's final-layer
        output (``model.get_decoder()``, after its final norm; no LM head) at the prompt's last
        token, the position every option's first token is predicted from.

    Returns
    -------
    results : list of ndarray of float64 (or torch.Tensor when ``grad``), shape (K_i,)
    fed : int
        Tokens fed.
    hidden : ndarray of float64, shape (len(items), d)
        Only with ``states``: the answer-slot states (NaN rows for an item whose options are all empty).

    Examples
    --------
    >>> from judge.engine import Engine, Item
    >>> from judge.testing import tiny_pair
    >>> eng = Engine(*tiny_pair()).setup()
    >>> res, fed = tree_pass(eng.model_, eng.mask_plan_, eng.dtype_, ((), None), [Item([1, 2, 3], [[7], [8, 9]])])
    >>> res[0].shape, fed
    ((2,), 4)
    >>> tree_pass(eng.model_, eng.mask_plan_, eng.dtype_, ((), None), [Item([1, 2, 3], [[7]])], states=True)[2].shape
    (1, 64)
    """
    import contextlib

    import torch
    from transformers import DynamicCache

    from judge._math import cache_keyword

    root_ids, kv = rid
    R = len(root_ids) if kv is not None else 0
    rows = build_rows(items, root_ids if kv is not None else ())
    if len(rows) > 1 and keep_mode(model) != "rows":
        # this transformers cannot keep logits per row: a batch would compute B times the logit rows the
        # memory bound counts, so each row gets its own pass (the same scores, float rounding aside)
        return _row_by_row(model, mask_plan, dtype, rid, items, rows, grad, states)
    fed = [row.fed_nodes() for row in rows]
    B, N = len(rows), max(len(f) for f in fed)
    dev = model.device
    ids = torch.zeros((B, N), dtype=torch.long)
    pos = torch.zeros((B, N), dtype=torch.long)
    reads = []  # per row: fed-index of every node whose logits are read
    for b, (row, nodes) in enumerate(zip(rows, fed)):
        ids[b, : len(nodes)] = torch.as_tensor(np.asarray(row.tokens)[nodes])
        pos[b, : len(nodes)] = torch.as_tensor(np.asarray(row.position)[nodes])
        reads.append(sorted({int(row.parent[n]) for s in row.slots for p in s.option_paths for n in p}))
    index = [{int(n): j for j, n in enumerate(nodes)} for nodes in fed]
    P = max(1, max(len(r) for r in reads))  # a row whose options are all empty reads nothing
    keep = torch.zeros((B, P), dtype=torch.long)
    for b, r in enumerate(reads):
        cols = [index[b][n] for n in r]
        keep[b, : len(cols)] = torch.as_tensor(cols, dtype=torch.long)
        keep[b, len(cols):] = cols[-1] if cols else 0
    slots = [(b, slot.query, next((index[b][int(row.parent[p[0]])] for p in slot.option_paths if p), None))
             for b, row in enumerate(rows) for slot in row.slots] if states else []
    captured: list = []
    hook = _answer_slot_hook(model, slots, captured) if states else None
    kind, plan = mask_plan
    mask = tree_masks(rows, fed, R, plan, kind, dtype, dev)
    cache = DynamicCache()
    if kv is not None:
        for i, (k, v) in enumerate(kv):
            cache.update(k.expand(B, *k.shape[1:]), v.expand(B, *v.shape[1:]), i)
    mode = contextlib.nullcontext() if grad else torch.inference_mode()
    with mode, native_gqa(dev):
        try:
            out, logits = read_logits(model, keep.to(dev), input_ids=ids.to(dev), attention_mask=mask,
                                      position_ids=pos.to(dev), use_cache=not grad, **{cache_keyword(model): cache})
        finally:
            if hook is not None:
                hook.remove()
        del mask, cache
        logits = logits.reshape(B, P, -1)
        del out
        results = [None] * len(items)
        for b, row in enumerate(rows):
            r = reads[b]
            lse = torch.logsumexp(logits[b, : len(r)].double(), -1) if grad else _lse(logits[b, : len(r)])
            at = {n: j for j, n in enumerate(r)}
            for slot in row.slots:
                parents = [at[int(row.parent[n])] for p in slot.option_paths for n in p]
                toks = [row.tokens[n] for p in slot.option_paths for n in p]
                lens = [len(p) for p in slot.option_paths]
                if grad:  # the same sums, kept on the autograd graph
                    seg = torch.repeat_interleave(torch.arange(len(lens)), torch.as_tensor(lens)).to(dev)
                    vals = logits[b, parents, toks].double() - lse[parents]
                    results[slot.query] = torch.zeros(len(lens), dtype=torch.float64, device=dev).index_add(0, seg, vals)
                    continue
                lp = (logits[b, parents, toks].double() - lse[parents]).cpu().numpy()
                # per option, the sum of its tokens' log-probabilities; an empty option: 0 (np.add.reduceat
                # would give it the next option's first token, so only the non-empty segments are reduced)
                res = np.zeros(len(lens))
                full = np.flatnonzero(lens)
                if len(full):
                    res[full] = np.add.reduceat(lp, np.r_[0, np.cumsum(lens)[:-1]][full])
                results[slot.query] = res
    if not states:
        return results, int(sum(len(f) for f in fed))
    hidden = np.full((len(items), captured[0].shape[1]), np.nan)
    for (_, query, at), h in zip(slots, captured[0]):
        if at is not None:
            hidden[query] = h
    return results, int(sum(len(f) for f in fed)), hidden


def self_check_probe(mask_plan, special, n_vocab: int) -> tuple[list, list, int | None]:
    """The engine's self-check probe: (root ids, three items, the smallest sliding window or None).

    A root longer than the smallest sliding window (24 tokens without one), random non-special
    tokens (seeded); items 0 and 2 share one row and the whole root, item 1 sees half of it.

    Examples
    --------
    >>> root, items, w = self_check_probe(("single", {None: None}), [False] * 100, 100)
    >>> len(root), [len(it.options) for it in items], w
    (24, [4, 4, 4], None)
    """
    from judge.engine.protocol import Item

    windows = [w for w in mask_plan[1].values() if w]
    w = min(windows) if windows else None
    n_root = (w + 8) if (w and w <= 2048) else 24
    pool = np.flatnonzero(~np.asarray(special, bool))
    toks = [int(t) for t in np.random.default_rng(0).choice(pool[pool < n_vocab], n_root + 40)]
    root = toks[:n_root]
    opts = [toks[n_root:n_root + 1], toks[n_root:n_root + 3], toks[n_root + 3:n_root + 5], toks[n_root + 5:n_root + 6]]
    items = [Item(root + toks[n_root + 6:n_root + 11], opts, group=0),
             Item(root[: n_root // 2] + toks[n_root + 11:n_root + 20], opts, group=1),
             Item(root + toks[n_root + 20:n_root + 22], opts, group=0)]
    return root, items, w


def _row_by_row(model, mask_plan, dtype, rid, items, rows, grad, states) -> tuple:
    """:func:`tree_pass` over ``rows`` one row at a time (a row: the items of one group), results in item order."""
    results, fed, hidden = [None] * len(items), 0, None
    for row in rows:
        q = sorted({slot.query for slot in row.slots})
        got = tree_pass(model, mask_plan, dtype, rid, [items[i] for i in q], grad, states)
        for j, i in enumerate(q):
            results[i] = got[0][j]
        fed += got[1]
        if states:
            if hidden is None:
                hidden = np.full((len(items), got[2].shape[1]), np.nan)
            hidden[q] = got[2]
    return (results, fed, hidden) if states else (results, fed)


def _answer_slot_hook(model, slots, captured: list):
    """A forward hook on the decoder that keeps its final-layer output at each slot's answer position.

    ``slots``: (row, query, fed index of the prompt's last token or None); ``captured`` receives the
    (len(slots), d) float64 rows, gathered inside the hook (the (B, N, d) output is not kept)."""
    import torch

    def keep(module, args, output):
        h = output[0] if isinstance(output, tuple) else output.last_hidden_state
        b = torch.as_tensor([r for r, _, at in slots], dtype=torch.long, device=h.device)
        j = torch.as_tensor([at if at is not None else 0 for _, _, at in slots], dtype=torch.long, device=h.device)
        captured[:] = [h[b, j].detach().double().cpu().numpy()]

    return model.get_decoder().register_forward_hook(keep)


# ----------------------------------------------------------------------------- memory

def _text_config(model_or_config):
    cfg = getattr(model_or_config, "config", model_or_config)
    return getattr(cfg, "text_config", None) or cfg


def model_context(model) -> int | None:
    """The model's trained context in tokens (``max_position_embeddings``), or None when it has none.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> model_context(SimpleNamespace(config=SimpleNamespace(max_position_embeddings=8192)))
    8192
    """
    n = getattr(_text_config(model), "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None


def default_max_logits(vocab_size: int) -> int:
    """The default logit rows per pass: 2^26 float32 logits (256 MiB), at least 256 rows.

    Examples
    --------
    >>> default_max_logits(49152)
    1365
    """
    return max(256, (1 << 26) // max(1, int(vocab_size)))


def memory_bound(model, *, max_batch_tokens: int, max_batch_logits: int, dtype_bytes: int = 4,
                 mask_types: int = 1) -> dict:
    """Peak memory of one scoring call above an idle process, as a formula of the settings (bytes).

    With T = ``max_batch_tokens``, P = ``max_batch_logits``, s = ``dtype_bytes``, L layers,
    h key/value heads of dimension d, hidden size H, MLP size I, vocabulary V:

    * ``kv = 2 T (2 L h d s)``: the pass's key/value cache (root copies included) and the
      engine's root cache (at most T tokens in all);
    * ``activations = T s (8 H + 4 I)``: one layer's hidden states, q/k/v, MLP (transient);
    * ``mask = mask_types T^2 s``: the additive tree mask (``B N (R + N) <= T^2``);
    * ``logits = P V s + min(P V, 2^24) 8``: the read positions' logits and one float64
      chunk of their log-sum-exp.

    Parameters
    ----------
    model : PreTrainedModel or its config
    max_batch_tokens, max_batch_logits : int
    dtype_bytes : int
        4 for float32, 2 for bfloat16/float16.
    mask_types : int
        Distinct attention windows (one mask each; 2 for mixed sliding/full models).

    Returns
    -------
    dict
        ``{"kv", "activations", "mask", "logits", "total"}`` in bytes.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576,
    ...                       intermediate_size=1536, vocab_size=49152)   # SmolLM2-135M
    >>> round(memory_bound(cfg, max_batch_tokens=8192, max_batch_logits=1365)["total"] / 2**30, 2)
    1.66
    """
    cfg = _text_config(model)
    L, H, V = int(cfg.num_hidden_layers), int(cfg.hidden_size), int(cfg.vocab_size)
    heads = int(cfg.num_attention_heads)
    h = int(getattr(cfg, "num_key_value_heads", None) or heads)
    d = int(getattr(cfg, "head_dim", None) or H // heads)
    inter = int(getattr(cfg, "intermediate_size", None) or 4 * H)
    T, P, s = int(max_batch_tokens), int(max_batch_logits), int(dtype_bytes)
    out = {"kv": 2 * T * 2 * L * h * d * s, "activations": T * s * (8 * H + 4 * inter),
           "mask": mask_types * T * T * s, "logits": P * V * s + min(P * V, 1 << 24) * 8}
    out["total"] = sum(out.values())
    return out
