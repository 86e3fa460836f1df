"""The options of a label set as a token trie: the one option-trie builder.

:class:`OptionTrie` holds the options' canonical token sequences as a trie
(node 0 is the answer slot); bounded scoring expands it subtree by subtree.

What it deliberately does not do: tokenize (the scorer's ``option_ids`` does)
or score (:mod:`judge.engine.bounded` does).
"""

from __future__ import annotations

import numpy as np

__all__ = ["OptionTrie"]


class OptionTrie:
    """The option token sequences as a trie: node 0 is the answer slot.

    Attributes
    ----------
    parent, token, depth : ndarray of int64, shape (n_nodes,)
    children : list of list of int
    end_node : ndarray of int64, shape (K,)
        The node of each option's last token.
    labels_under : list of ndarray
        Per node, the options whose path passes through it.
    prefix_free : bool

    Examples
    --------
    >>> t = OptionTrie([[5, 6], [5, 7], [8]])
    >>> t.parent.tolist(), t.end_node.tolist(), t.prefix_free
    ([-1, 0, 1, 1, 0], [2, 3, 4], True)
    """

    def __init__(self, seqs):
        parent, token, depth = [-1], [-1], [0]
        kids: list[dict] = [{}]
        ends = []
        for s in seqs:
            n = 0
            for t in s:
                nxt = kids[n].get(int(t))
                if nxt is None:
                    nxt = len(parent)
                    kids[n][int(t)] = nxt
                    parent.append(n)
                    token.append(int(t))
                    depth.append(depth[n] + 1)
                    kids.append({})
                n = nxt
            ends.append(n)
        self.parent = np.asarray(parent, np.int64)
        self.token = np.asarray(token, np.int64)
        self.depth = np.asarray(depth, np.int64)
        self.children = [list(k.values()) for k in kids]
        self.end_node = np.asarray(ends, np.int64)
        under: list[list[int]] = [[] for _ in parent]
        for k, e in enumerate(ends):
            n = e
            while n >= 0:
                under[n].append(k)
                n = int(self.parent[n])
        self.labels_under = [np.asarray(u, np.int64) for u in under]
        self.prefix_free = all(not self.children[e] for e in ends) and len(set(ends)) == len(ends)
