"""The options of a label set as a token trie: the one option-trie builder.

:class:`OptionTrie` holds the options' canonical token sequences as a trie (node 0 is the
answer slot), built with numpy one depth at a time (about a second for 10^5 labels), stored
as flat arrays: parents, tokens, depths, children in CSR form, and per node the aggregates a
prefix bound needs (how many labels end below it, how many internal nodes its subtree holds,
the smallest label bias below it).

:func:`option_token_ids` is the rule that writes options as tokens after a prompt's end (the
engine's ``option_ids`` caches it).

What it deliberately does not do: score (:mod:`judge.engine.search` does).
"""

from __future__ import annotations

import numpy as np

from judge._errors import LabelError

__all__ = ["OptionTrie", "option_token_ids"]


class OptionTrie:
    """The option token sequences as a trie: node 0 is the answer slot.

    Parameters
    ----------
    seqs : sequence of sequences of int, length K
        Each option's token ids (at least one token each).

    Attributes
    ----------
    parent, token, depth : ndarray of int64, shape (n_nodes,)
        Node 0: -1, -1, 0. Nodes are numbered depth by depth (parents before children).
    child_ptr : ndarray of int64, shape (n_nodes + 1,)
    child_ids : ndarray of int64, shape (n_nodes - 1,)
        The children of node ``n`` are ``child_ids[child_ptr[n]:child_ptr[n + 1]]``.
    end_node : ndarray of int64, shape (K,)
        The node of each option's last token.
    label_at : ndarray of int64, shape (n_nodes,)
        The option ending at a node (-1 where none; the first one if several).
    n_under : ndarray of int64, shape (n_nodes,)
        Options ending in each node's subtree (itself included).
    internal_under : ndarray of int64, shape (n_nodes,)
        Nodes with children in each node's subtree (itself included).
    prefix_free : bool
        No option's tokens are a prefix of another's (and no two options are equal).

    Examples
    --------
    >>> t = OptionTrie([[5, 6], [5, 7], [8]])
    >>> t.parent.tolist(), t.end_node.tolist(), t.prefix_free
    ([-1, 0, 0, 1, 1], [3, 4, 2], True)
    >>> t.children(1).tolist(), t.n_under.tolist(), t.internal_under.tolist()
    ([3, 4], [3, 2, 1, 1, 1], [2, 1, 0, 0, 0])
    """

    def __init__(self, seqs):
        seqs = [np.asarray(s, np.int64) for s in seqs]
        if not seqs:
            raise ValueError("An OptionTrie needs at least one option; got none.")
        lens = np.array([len(s) for s in seqs], np.int64)
        if lens.min() < 1:
            k = int(np.argmin(lens))
            raise ValueError(f"Option {k} has no tokens; every option needs at least one token.")
        K, L = len(seqs), int(lens.max())
        mat = np.full((K, L), -1, np.int64)
        for i, s in enumerate(seqs):
            mat[i, : len(s)] = s
        parents, tokens, depths = [np.array([-1], np.int64)], [np.array([-1], np.int64)], [np.array([0], np.int64)]
        real = np.arange(L)[None, :] < lens[:, None]  # the cells that hold tokens (-1 pads the rest)
        if (mat[real] < 0).any() or (mat[real] >= 2**31).any():
            bad = mat[real][(mat[real] < 0) | (mat[real] >= 2**31)][0]
            raise ValueError(f"Option token ids must be in [0, 2**31); got {int(bad)}.")
        span = int(mat.max()) + 1
        node_of = np.zeros(K, np.int64)  # each option's node at the current depth
        end = np.zeros(K, np.int64)
        n_nodes = 1
        for d in range(L):
            alive = np.flatnonzero(lens > d)
            par = node_of[alive]
            tok = mat[alive, d]
            keys = par * span + tok  # one int64 key per (parent, token): a 1-D unique is fast
            uniq, inverse = np.unique(keys, return_inverse=True)
            inverse = inverse.reshape(-1)
            ids = n_nodes + np.arange(len(uniq), dtype=np.int64)
            parents.append(uniq // span)
            tokens.append(uniq % span)
            depths.append(np.full(len(uniq), d + 1, np.int64))
            node_of[alive] = ids[inverse]
            done = alive[lens[alive] == d + 1]
            end[done] = node_of[done]
            n_nodes += len(uniq)
        self.parent = np.concatenate(parents)
        self.token = np.concatenate(tokens)
        self.depth = np.concatenate(depths)
        self.end_node = end
        order = np.argsort(self.parent[1:], kind="stable") + 1
        counts = np.bincount(self.parent[1:], minlength=n_nodes)
        self.child_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.child_ids = order.astype(np.int64)
        self.label_at = np.full(n_nodes, -1, np.int64)
        self.label_at[end[::-1]] = np.arange(K - 1, -1, -1)  # the first option wins where two are equal
        has_children = counts > 0
        self.n_under = self._bottom_up(np.bincount(end, minlength=n_nodes).astype(np.int64))
        self.internal_under = self._bottom_up(has_children.astype(np.int64))
        self.prefix_free = bool(not has_children[end].any() and len(np.unique(end)) == K)

    def _bottom_up(self, values: np.ndarray, op=np.add) -> np.ndarray:
        """Aggregate ``values`` over each node's subtree (itself included), deepest nodes first."""
        out = values.copy()
        for d in range(int(self.depth.max()), 0, -1):
            nodes = np.flatnonzero(self.depth == d)
            op.at(out, self.parent[nodes], out[nodes])
        return out

    def __len__(self) -> int:
        return len(self.parent)

    def children(self, node: int) -> np.ndarray:
        """Child node ids of ``node``: ndarray of int64."""
        return self.child_ids[self.child_ptr[node]: self.child_ptr[node + 1]]

    def min_under(self, per_label: np.ndarray) -> np.ndarray:
        """Per node, the smallest ``per_label`` value among the options ending in its subtree.

        Parameters
        ----------
        per_label : ndarray of float64, shape (K,)

        Returns
        -------
        ndarray of float64, shape (n_nodes,)
            ``+inf`` where no option ends below.

        Examples
        --------
        >>> OptionTrie([[5, 6], [5, 7], [8]]).min_under(np.array([3.0, -1.0, 2.0])).tolist()
        [-1.0, -1.0, 2.0, 3.0, -1.0]
        """
        vals = np.full(len(self.parent), np.inf)
        np.minimum.at(vals, self.end_node, np.asarray(per_label, np.float64))
        return self._bottom_up(vals, np.minimum)

    def subtree_internal(self, node: int) -> np.ndarray:
        """The nodes with children in ``node``'s subtree, parents before children (itself first).

        Examples
        --------
        >>> OptionTrie([[5, 6, 1], [5, 7], [8]]).subtree_internal(1).tolist()
        [1, 3]
        """
        out, frontier = [], [int(node)]
        while frontier:
            out += [n for n in frontier if self.child_ptr[n + 1] > self.child_ptr[n]]
            frontier = [int(c) for n in frontier for c in self.children(n)]
        return np.asarray(out, np.int64)


def option_token_ids(tok, context: str, options, *, special, end_id: int, policy="auto", what="Option") -> list:
    """Canonical token ids of each option written right after ``context``: list of K lists of int.

    An option is tokenized after the prompt's end (``context``) and the context's own tokens cut
    off; where it merges with the context, alone. ``policy``: the end token appended always
    (True), never (False) or where an option's tokens are a prefix of another's (``"auto"``).
    ``special``: per token id, whether it is special (refused in an option).

    Raises
    ------
    LabelError
        An option tokenizes to nothing or to special tokens.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> tok = tiny_pair()[1]
    >>> ids = option_token_ids(tok, "Answer:", [" yes", " yes please"], special=[False] * len(tok), end_id=2)
    >>> ids[0][-1] == 2 and ids[1][-1] != 2    # " yes" is a prefix of " yes please": it ends
    True
    """
    base = tok(context, add_special_tokens=False)["input_ids"]
    fulls = tok([context + o for o in options], add_special_tokens=False)["input_ids"]
    seqs = []
    for opt, full in zip(options, fulls):
        if full[: len(base)] == base and len(full) > len(base):
            ids = full[len(base):]
        else:  # the option merged with the prompt's end: tokenize it alone
            ids = tok(opt, add_special_tokens=False)["input_ids"]
        bad = [i for i in ids if i >= len(special) or special[i]]
        if not ids or bad:
            got = "nothing" if not ids else f"special or unknown token(s) {tok.convert_ids_to_tokens(bad)}"
            raise LabelError(
                f"{what} {opt!r} cannot be spelled by this tokenizer's vocabulary: it tokenizes to "
                f"{got}; give it a name the tokenizer can write.")
        seqs.append(list(ids))
    if policy is True:
        seqs = [x + [end_id] for x in seqs]
    elif policy == "auto":  # the end token where an option's tokens are a prefix of another's:
        order = sorted(range(len(seqs)), key=seqs.__getitem__)  # in sorted order, an option's
        needs = {a for a, b in zip(order, order[1:])  # extensions follow it directly
                 if len(seqs[b]) > len(seqs[a]) and seqs[b][: len(seqs[a])] == seqs[a]}
        seqs = [x + [end_id] if i in needs else x for i, x in enumerate(seqs)]
    return seqs
