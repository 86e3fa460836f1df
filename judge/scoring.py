"""Scoring every label in one or two forward passes on top of a cached prompt.

Three paths, chosen by :class:`judge.Classifier` (``method="auto"``):

* ``first_token``: every label starts with a different token, so one forward
  pass over the text gives the K first-token log-probabilities.
* ``exact``: log P(label | prompt) for every label, summed over its canonical
  tokens, with shared token prefixes computed once: the labels' token trie is
  flattened and run in one extra forward pass with a tree-shaped attention
  mask (each trie token sees the prompt and its own ancestors), on top of the
  prompt's KV cache. Equal to scoring each label by its own forward pass, to
  floating-point tolerance (the tests check this against that brute force).
* ``decode``: beam search through the :class:`~judge.automaton.trie.TrieAutomaton` as a
  ``LogitsProcessor`` (:mod:`judge.automaton.hf`), for huge label sets; the top
  labels get their sequence log-probabilities, the rest ``-inf``.

The prompt's shared prefix (instructions, label list) is run once per
classifier; each batch of texts reuses its keys and values.

What it deliberately does not do: decide which path to use, or calibrate.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

__all__ = ["TokenTrie", "PrefixCache", "score_batch", "brute_force_scores", "left_pad"]


def left_pad(sequences, pad_id: int, device=None):
    """Left-pad token id lists into a batch, so every row ends at the last column.

    Parameters
    ----------
    sequences : list of list of int, length B
    pad_id : int

    Returns
    -------
    ids : LongTensor of shape (B, L)
    attention : LongTensor of shape (B, L)
        1 for real tokens, 0 for padding.

    Examples
    --------
    >>> ids, att = left_pad([[5, 6], [7]], pad_id=0)
    >>> ids.tolist(), att.tolist()
    ([[5, 6], [0, 7]], [[1, 1], [0, 1]])
    """
    import torch

    L = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), L), pad_id, dtype=torch.long)
    att = torch.zeros((len(sequences), L), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, L - len(s):] = torch.as_tensor(s, dtype=torch.long)
        att[i, L - len(s):] = 1
    return ids.to(device), att.to(device)


@dataclass(frozen=True, eq=False)
class TokenTrie:
    """The labels' token sequences as a trie; node 0 is the root (the prompt's end).

    Attributes
    ----------
    parent, token, depth : ndarray of int64, shape (n_nodes,)
        For the root: -1, -1, 0.
    paths : ndarray of int64, shape (K, max_len)
        Node ids along each label's sequence, padded with -1.
    internal : ndarray of int64
        Non-root nodes that have children, in breadth-first order: the only
        tokens that must be fed to the model (leaves need no logits).

    Examples
    --------
    >>> t = TokenTrie.build([[5, 6], [5, 7], [8]])
    >>> t.n_nodes, t.internal.tolist(), t.paths.tolist()
    (5, [1], [[1, 2], [1, 3], [4, -1]])
    """

    parent: np.ndarray
    token: np.ndarray
    depth: np.ndarray
    paths: np.ndarray
    internal: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    def passes(self, limit: int) -> list[dict]:
        """The trie forward passes for ``limit`` tokens per pass, computed once and cached.

        Each pass: ``nodes`` (M,) fed to the model, ``ancestors`` (M, M) bool
        tree mask (ancestor-or-self), ``depth`` (M,), and ``children``/``rows``:
        the non-root nodes whose parent is in this pass and that parent's row.
        """
        cache = self.__dict__.setdefault("_passes", {})  # frozen dataclass: memo in __dict__
        if limit not in cache:
            out = []
            for chunk in _chunks(self, limit):
                index = {int(n): j for j, n in enumerate(chunk)}
                anc = np.zeros((len(chunk), len(chunk)), bool)
                for j, n in enumerate(chunk):
                    a = int(n)
                    while a > 0:
                        anc[j, index[a]] = True
                        a = int(self.parent[a])
                kids = np.flatnonzero(np.isin(self.parent, chunk))
                rows = np.array([index[int(self.parent[k])] for k in kids], np.int64)
                out.append({"nodes": chunk, "ancestors": anc, "depth": self.depth[chunk],
                            "children": kids, "rows": rows})
            cache[limit] = out
        return cache[limit]

    @classmethod
    def build(cls, sequences) -> TokenTrie:
        parent, token, depth = [-1], [-1], [0]
        children: list[dict[int, int]] = [{}]
        paths = []
        for seq in sequences:
            if len(seq) == 0:
                raise ValueError("A label has an empty token sequence; every label needs at least one token.")
            node, path = 0, []
            for t in seq:
                nxt = children[node].get(int(t))
                if nxt is None:
                    nxt = len(parent)
                    children[node][int(t)] = nxt
                    parent.append(node)
                    token.append(int(t))
                    depth.append(depth[node] + 1)
                    children.append({})
                node = nxt
                path.append(node)
            paths.append(path)
        width = max(len(p) for p in paths)
        pad = np.full((len(paths), width), -1, np.int64)
        for i, p in enumerate(paths):
            pad[i, : len(p)] = p
        depth_a = np.asarray(depth, np.int64)
        internal = np.array([n for n in range(1, len(parent)) if children[n]], np.int64)
        internal = internal[np.argsort(depth_a[internal], kind="stable")]
        return cls(np.asarray(parent, np.int64), np.asarray(token, np.int64), depth_a, pad, internal)


def _cache_kwarg(model) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _snapshot(cache) -> list[tuple]:
    """Per-layer (keys, values) of a transformers cache, across versions."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    if hasattr(cache, "key_cache"):
        return list(zip(cache.key_cache, cache.value_cache))
    return [(k, v) for k, v in cache]  # legacy tuple of tuples


class PrefixCache:
    """Keys and values of the shared prompt prefix, computed once.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    prefix_ids : list of int, length P0 (may be empty)

    Examples
    --------
    >>> pc = PrefixCache(model, [1, 2, 3])    # doctest: +SKIP
    >>> pc.length                              # doctest: +SKIP
    3
    """

    def __init__(self, model, prefix_ids):
        import torch

        self.length = len(prefix_ids)
        self.kv = None
        if self.length:
            dev = model.device
            ids = torch.tensor([prefix_ids], dtype=torch.long, device=dev)
            with torch.inference_mode():
                out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
            self.kv = [(k.detach(), v.detach()) for k, v in _snapshot(cache)]

    def expand(self, batch: int):
        """A fresh DynamicCache holding the prefix ``batch`` times (the stored copy is never modified)."""
        from transformers import DynamicCache

        cache = DynamicCache()
        if self.kv is None:
            return cache
        for i, (k, v) in enumerate(self.kv):
            cache.update(k.expand(batch, *k.shape[1:]), v.expand(batch, *v.shape[1:]), i)
        return cache


def _forward(model, kw, input_ids, mask, position_ids, cache, logits_to_keep):
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                use_cache=True, logits_to_keep=logits_to_keep, **{kw: cache})
    return out.logits


def score_batch(model, prefix: PrefixCache, suffixes, trie: TokenTrie | None, *, max_nodes_per_pass=1024):
    """Log-probabilities of the first tokens or of every trie node, for a batch of texts.

    Parameters
    ----------
    model : transformers.PreTrainedModel
    prefix : PrefixCache
        Shared prompt prefix (length P0).
    suffixes : list of list of int, length B
        Per-text token ids after the prefix, up to where the answer starts.
    trie : TokenTrie or None
        ``None``: return the full next-token log-softmax at the answer start.
    max_nodes_per_pass : int
        Trie tokens per forward pass; larger tries are split into several
        passes (whole first-token subtrees each), all on the same cache.

    Returns
    -------
    ndarray of float32
        ``trie is None``: shape (B, V), log-softmax at the answer start.
        Otherwise shape (B, n_nodes): log P(node's token | prompt, ancestors),
        0 at the root.
    """
    import torch

    kw = _cache_kwarg(model)
    dev = model.device
    dtype = next(model.parameters()).dtype
    neg = torch.finfo(dtype).min
    B = len(suffixes)
    lens = torch.tensor([len(s) for s in suffixes], device=dev)
    if int(lens.min()) < 1:
        raise ValueError("Every text needs at least one token after the shared prefix.")
    S = int(lens.max())
    P0 = prefix.length
    pad = S - lens
    ids, att = left_pad(suffixes, 0, dev)  # the answer starts at column S - 1 for every row
    col = torch.arange(S, device=dev)
    real = att.bool()  # (B, S)
    allow = (col[None, None, :] <= col[None, :, None]) & real[:, None, :]  # (B, S, S) causal over real tokens
    allow |= torch.eye(S, dtype=torch.bool, device=dev)[None]  # padding rows see themselves: never empty
    mask = torch.zeros((B, 1, S, P0 + S), dtype=dtype, device=dev)
    mask[:, 0, :, P0:] = torch.where(allow, 0.0, neg).to(dtype)
    pos = (P0 + (col[None, :] - pad[:, None]).clamp(min=0)).long()
    cache = prefix.expand(B)
    with torch.inference_mode():
        logits = _forward(model, kw, ids, mask, pos, cache, 1)[:, -1, :].float()
        root = torch.log_softmax(logits, dim=-1)
        if trie is None:
            return root.cpu().numpy()
        out = torch.zeros((B, trie.n_nodes), dtype=torch.float32, device=dev)
        tok = torch.as_tensor(trie.token, device=dev)
        par = torch.as_tensor(trie.parent, device=dev)
        first = torch.nonzero(par == 0).flatten()
        out[:, first] = root[:, tok[first]]
        if trie.internal.size == 0:
            return out.cpu().numpy()
        past = P0 + S  # columns already in the cache
        for step in trie.passes(max_nodes_per_pass):
            chunk = step["nodes"]
            M = len(chunk)
            tmask = torch.full((B, 1, M, past + M), neg, dtype=dtype, device=dev)
            tmask[:, 0, :, :P0] = 0
            tmask[:, 0, :, P0:P0 + S] = torch.where(real[:, None, :], 0.0, neg).to(dtype)
            anc = torch.as_tensor(step["ancestors"], device=dev)
            tmask[:, 0, :, past:] = torch.where(anc, 0.0, neg).to(dtype)[None]
            depth = torch.as_tensor(step["depth"], device=dev)
            tpos = (P0 + lens[:, None] + depth[None, :] - 1).long()
            tids = tok[torch.as_tensor(chunk, device=dev)][None, :].expand(B, M)
            tl = _forward(model, kw, tids, tmask, tpos, cache, 0).float()
            lp = torch.log_softmax(tl, dim=-1)  # (B, M, V)
            kids = torch.as_tensor(step["children"], device=dev)
            rows = torch.as_tensor(step["rows"], device=dev)
            out[:, kids] = lp[:, rows, tok[kids]]
            past += M
        return out.cpu().numpy()


def _chunks(trie: TokenTrie, limit: int):
    """Internal nodes grouped by first-token subtree, each group at most ``limit`` (unless one subtree is larger)."""
    top = {}
    for n in trie.internal.tolist():
        a = n
        while trie.parent[a] != 0:
            a = int(trie.parent[a])
        top.setdefault(a, []).append(n)
    chunk: list[int] = []
    for nodes in top.values():
        if chunk and len(chunk) + len(nodes) > limit:
            yield np.asarray(chunk, np.int64)
            chunk = []
        chunk.extend(nodes)
    if chunk:
        yield np.asarray(chunk, np.int64)


def label_scores(node_logprobs: np.ndarray, trie: TokenTrie) -> np.ndarray:
    """Sum node log-probabilities along each label's path: (B, n_nodes) -> (B, K)."""
    paths = trie.paths
    vals = node_logprobs[:, np.where(paths >= 0, paths, 0)]  # (B, K, D)
    vals = np.where((paths >= 0)[None], vals, 0.0)
    return vals.sum(axis=-1, dtype=np.float64)


def brute_force_scores(model, prompt_ids, label_ids) -> np.ndarray:
    """log P(label | prompt) for each label by its own full forward pass (the reference).

    Parameters
    ----------
    prompt_ids : list of int
    label_ids : list of list of int, length K

    Returns
    -------
    ndarray of float64, shape (K,)
    """
    import torch

    out = []
    with torch.inference_mode():
        for lab in label_ids:
            ids = torch.tensor([list(prompt_ids) + list(lab)], device=model.device)
            lp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
            P = len(prompt_ids)
            out.append(sum(float(lp[P - 1 + j, t]) for j, t in enumerate(lab)))
    return np.asarray(out, np.float64)
