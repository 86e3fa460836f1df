"""The prompt forest: every token to feed in one forward pass, who it sees, where it sits.

A batch of scoring work is a forest of token segments hanging off a cached
root (the instructions every call shares): per item the uncached rest of its
prompt, per question its own branch, and at every answer slot the token trie
of that question's options. Prompts that share token prefixes share nodes, so
a state asked many questions is fed once.

:class:`Forest` holds one *row* of a forward pass: nodes in feeding order
(parents before children), each with its token, its parent (``-1``: hangs off
the root cache), its logical position and how many root columns it sees.
:func:`row_mask` turns a row into the additive attention mask the model will
apply, per layer type: a token sees the root columns its item shares and its
own ancestors, and under a sliding window only those within the window
measured on *logical* positions (what the model would see had the path been
run alone).

What it deliberately does not do: run the model (:mod:`judge.engine` does), or
tokenize (:mod:`judge.prompts` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Forest", "Slot", "build_rows", "row_mask", "ancestors", "common_prefix"]


@dataclass
class Slot:
    """One question's answer slot in a row: where its options' log-probabilities are read.

    Attributes
    ----------
    query : int
        Index of the query in the ``score`` call.
    node : int
        Row node of the prompt's last token (its logits give the first option tokens).
    option_paths : list of list of int
        Per option, the row nodes of its tokens (children of ``node`` first);
        an option token whose node is not fed (a leaf) still has a node id.

    Examples
    --------
    >>> Slot(query=0, node=3, option_paths=[[4], [5, 6]]).option_paths[1]
    [5, 6]
    """

    query: int
    node: int
    option_paths: list


@dataclass
class Forest:
    """One row of a forward pass over a prompt forest.

    Attributes
    ----------
    tokens, parent, position, root_len : list of int, one entry per node
        Feeding order is node order. ``parent`` -1 hangs off the root cache;
        ``root_len`` is how many root-cache columns the node (and its whole
        subtree) may attend to.
    fed : list of bool
        Whether the node is fed to the model (leaves of option tries are not:
        nothing is read from their logits).
    slots : list of Slot

    Examples
    --------
    >>> f = Forest()
    >>> end = f.add_path([11, 12], -1, 0)          # a prompt of two tokens, off the root cache
    >>> a = f.add(7, end, 0, fed=False)            # an option token under the answer slot
    >>> len(f), f.position, f.fed_nodes().tolist()
    (3, [0, 1, 2], [0, 1])
    """

    tokens: list = field(default_factory=list)
    parent: list = field(default_factory=list)
    position: list = field(default_factory=list)
    root_len: list = field(default_factory=list)
    fed: list = field(default_factory=list)
    slots: list = field(default_factory=list)
    _children: list = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, token: int, parent: int, root_len: int, *, fed: bool = True, share: bool = True) -> int:
        """Add (or reuse, when ``share``) the child of ``parent`` with ``token``; returns its node id."""
        key = (int(parent), int(token), int(root_len))
        table = self._children
        if not table:
            table.append({})  # index 0: children of the root cache
        slot = table[parent + 1]
        if share and key in slot:
            node = slot[key]
            if fed:
                self.fed[node] = True
            return node
        node = len(self.tokens)
        self.tokens.append(int(token))
        self.parent.append(int(parent))
        self.position.append(int(root_len) if parent < 0 else self.position[parent] + 1)
        self.root_len.append(int(root_len))
        self.fed.append(bool(fed))
        table.append({})
        if share:
            slot[key] = node
        return node

    def add_path(self, tokens, parent: int, root_len: int) -> int:
        """Add a chain of fed tokens under ``parent``; returns the last node (``parent`` if empty)."""
        node = parent
        for t in tokens:
            node = self.add(t, node, root_len)
        return node

    def fed_nodes(self) -> np.ndarray:
        """Row nodes that are fed, in feeding order: ndarray of int64, shape (N,)."""
        return np.flatnonzero(np.asarray(self.fed, bool)).astype(np.int64)


def ancestors(parent: np.ndarray) -> np.ndarray:
    """Ancestor-or-self matrix of a forest given parents in topological order.

    Parameters
    ----------
    parent : ndarray of int64, shape (N,)
        ``parent[j] < j`` or -1.

    Returns
    -------
    ndarray of bool, shape (N, N)
        ``out[q, k]``: node k is node q or one of its ancestors.

    Examples
    --------
    >>> ancestors(np.array([-1, 0, 0, 2])).astype(int).tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 1, 1]]
    """
    n = len(parent)
    out = np.zeros((n, n), bool)
    for j in range(n):
        p = parent[j]
        if p >= 0:
            out[j] = out[p]
        out[j, j] = True
    return out


def row_mask(positions: np.ndarray, parent: np.ndarray, root_len: np.ndarray, n_root: int,
             window: int | None) -> np.ndarray:
    """Which keys each fed token may attend to, for one layer type.

    Parameters
    ----------
    positions : ndarray of int64, shape (N,)
        Logical positions of the fed tokens.
    parent : ndarray of int64, shape (N,)
        Parent among the fed tokens (-1: hangs off the root cache).
    root_len : ndarray of int64, shape (N,)
        Root-cache columns each fed token may see (a prefix of the root).
    n_root : int
        Root-cache columns present in the KV cache (R).
    window : int or None
        Sliding window of the layer type: key k is visible from query q only
        when ``pos_q - pos_k < window`` (transformers' convention).

    Returns
    -------
    ndarray of bool, shape (N, R + N)

    Examples
    --------
    >>> m = row_mask(np.array([2, 3, 3]), np.array([-1, 0, 0]), np.array([2, 2, 2]), 2, None)
    >>> m.astype(int).tolist()
    [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 0, 1]]
    >>> row_mask(np.array([2, 3]), np.array([-1, 0]), np.array([2, 2]), 2, 2).astype(int).tolist()
    [[0, 1, 1, 0], [0, 0, 1, 1]]
    """
    N = len(positions)
    allow = np.zeros((N, n_root + N), bool)
    if n_root:
        allow[:, :n_root] = np.arange(n_root)[None, :] < root_len[:, None]
    allow[:, n_root:] = ancestors(parent)
    if window is not None:
        key_pos = np.concatenate([np.arange(n_root), positions])
        allow &= (positions[:, None] - key_pos[None, :]) < window
    return allow


def common_prefix(a, b, limit=None) -> int:
    """Length of the longest common prefix of two token sequences (at most ``limit``).

    Examples
    --------
    >>> common_prefix([1, 2, 3, 4], [1, 2, 9]), common_prefix([1, 2, 3], [1, 2, 3], limit=2)
    (2, 2)
    """
    n = min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def build_rows(items, root_ids) -> list[Forest]:
    """One :class:`Forest` row per group of items: prompts after the root, option tries at their slots.

    Parameters
    ----------
    items : list of judge.engine.Item
        Items with the same ``group`` share a row (and their common prompt tokens).
    root_ids : sequence of int
        The cached root: each prompt's longest common prefix with it (all but its last
        token at most) is taken from the cache, not fed.

    Returns
    -------
    list of Forest
        Each row's ``slots`` say where every item's options are read (``Slot.query`` is the
        item's index in ``items``).

    Examples
    --------
    >>> from types import SimpleNamespace as Item
    >>> rows = build_rows([Item(ids=[1, 2, 3], options=[[7], [8, 9]], first_only=False, group=0)], [1, 2])
    >>> rows[0].tokens, rows[0].fed_nodes().tolist()
    ([3, 7, 8, 9], [0, 2])
    """
    rows: dict[int, Forest] = {}
    for qi, it in enumerate(items):
        f = rows.setdefault(it.group, Forest())
        x = it.ids
        if len(x) < 1:
            raise ValueError("A prompt needs at least one token.")
        lcp = common_prefix(x, root_ids, len(x) - 1)  # the last prompt token is always fed: it reads
        end = f.add_path(x[lcp:], -1, lcp)
        paths = []
        for seq in it.options:
            node, path = end, []
            for j, t in enumerate(seq):
                if it.first_only and j > 0:
                    break
                node = f.add(t, node, lcp, fed=False)
                f.fed[f.parent[node]] = True
                path.append(node)
            paths.append(path)
        f.slots.append(Slot(qi, end, paths))
    return list(rows.values())
