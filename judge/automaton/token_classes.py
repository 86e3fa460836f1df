"""Token classes of a label automaton: tokens that behave identically at every node.

Two tokens are in one class iff, at every node of a
:class:`~judge.automaton.trie.TrieAutomaton`, both are allowed and lead to the same
state, or neither is allowed (the "column" of the token in the transition
table is identical). All tokens that no label can use form one class, as do
the end tokens. This is the CFGZIP idea (run the engine on one token per
class and gather the mask back), exact by construction: the class of a token
is computed from the automaton's own edges and columns are compared exactly,
not only by hash.

What it gives:

* ``n_classes`` and the compression ratio ``vocab_size / n_classes``;
* a class-level automaton (``class_indptr``, ``class_ids``, ``class_next``):
  per node, one edge per allowed class;
* :meth:`TokenClasses.fill_bitmask` (masks rebuilt from classes, identical to
  the automaton's) and :meth:`TokenClasses.class_bit_table`, a per-node bit
  table over classes from which a device gathers a token mask with one
  ``table[node][class_of]`` lookup.

What it deliberately does not do: replace the automaton's CSR. Classes are
derived from the built automaton, so they cannot make the build faster, and
on CPU the CSR fill is faster than expanding classes (see
``bench/token_classes.py`` for the measured numbers).
"""

from __future__ import annotations

import numpy as np

from judge.automaton import _kernels as K

__all__ = ["TokenClasses"]


class TokenClasses:
    """The partition of a vocabulary into tokens with identical transitions.

    Build with :meth:`from_automaton`.

    Attributes
    ----------
    class_of : ndarray of int32, shape (vocab_size,)
        Class of every token; classes are numbered by their smallest token.
    n_classes : int
    members_indptr : ndarray of int64, shape (n_classes + 1,)
    members : ndarray of int32, shape (vocab_size,)
        Tokens of class ``c`` are ``members[members_indptr[c]:members_indptr[c+1]]`` (sorted).
    representatives : ndarray of int32, shape (n_classes,)
        Smallest token of each class.
    class_indptr : ndarray of int64, shape (n_nodes + 1,)
    class_ids, class_next : ndarray of int32, shape (n_class_edges,)
        Classes allowed at node ``n`` and the state each leads to (every
        member of a class leads to the same state).
    dead_class : int
        Class of the tokens allowed at no node, -1 if every token is used somewhere.

    Examples
    --------
    >>> from judge.automaton.vocab import Vocabulary
    >>> from judge.automaton.trie import TrieAutomaton
    >>> v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b"c", b"z", b""], end_token_ids=[5])
    >>> tc = TokenClasses.from_automaton(TrieAutomaton.build(["ab", "cb"], v))
    >>> tc.n_classes, tc.class_of.tolist()   # "z" is used nowhere; "a" and "c" differ (next state)
    (6, [0, 1, 2, 3, 4, 5])
    >>> v2 = Vocabulary.from_token_bytes([b"a", b"b", b"x", b"y", b""], end_token_ids=[4])
    >>> TokenClasses.from_automaton(TrieAutomaton.build(["ab"], v2)).class_of.tolist()
    [0, 1, 2, 2, 3]
    """

    def __init__(self, automaton, class_of, n_classes):
        self.vocab_size = automaton.vocab_size
        self.n_nodes = automaton.n_nodes
        self.class_of = class_of
        self.n_classes = int(n_classes)
        self.members_indptr, members = K.group_by(class_of, self.n_classes)
        self.members = members.astype(np.int32)
        self.representatives = self.members[self.members_indptr[:-1]]
        self.class_indptr, self.class_ids, self.class_next = K.class_edges(
            automaton.indptr, automaton.token_ids, automaton.next_nodes, class_of, self.representatives)
        used = np.zeros(self.n_classes, bool)
        used[self.class_ids] = True
        dead = np.flatnonzero(~used)
        self.dead_class = int(dead[0]) if dead.shape[0] else -1
        for a in (self.class_of, self.members_indptr, self.members, self.representatives,
                  self.class_indptr, self.class_ids, self.class_next):
            a.flags.writeable = False

    @classmethod
    def from_automaton(cls, automaton) -> TokenClasses:
        """Compute the classes of ``automaton`` (a :class:`~judge.automaton.trie.TrieAutomaton`).

        Parameters
        ----------
        automaton : judge.automaton.trie.TrieAutomaton

        Returns
        -------
        TokenClasses
        """
        class_of, n = K.token_classes(automaton.indptr, automaton.token_ids, automaton.next_nodes,
                                      automaton.vocab_size)
        return cls(automaton, class_of, n)

    @property
    def compression_ratio(self) -> float:
        """``vocab_size / n_classes``."""
        return self.vocab_size / self.n_classes

    def fill_bitmask(self, nodes, bitmask) -> None:
        """Packed allowed-token rows rebuilt from the classes (same layout and result as
        :meth:`judge.automaton.trie.TrieAutomaton.fill_bitmask`).

        Parameters
        ----------
        nodes : array-like of int, shape (n,)
            States of the automaton (accepting states give empty rows).
        bitmask : ndarray of int32, shape (n, ceil(vocab_size / 32))
        """
        nodes = np.asarray(nodes, dtype=np.int64).reshape(-1)
        if type(bitmask) is not np.ndarray or bitmask.dtype != np.int32 or bitmask.ndim != 2:
            raise TypeError(
                f"Invalid bitmask: expected a 2-D int32 ndarray, got {type(bitmask).__name__} with "
                f"dtype {getattr(bitmask, 'dtype', None)}; allocate np.zeros((n, ceil(V/32)), np.int32).")
        words = (self.vocab_size + 31) // 32
        if bitmask.shape[0] < nodes.shape[0] or bitmask.shape[1] < words:
            raise ValueError(
                f"Bitmask of shape {bitmask.shape} is too small for {nodes.shape[0]} nodes and a "
                f"vocabulary of {self.vocab_size} tokens; it needs at least ({nodes.shape[0]}, {words}).")
        if nodes.shape[0] and (nodes.min() < 0):
            raise IndexError(f"Invalid automaton state {int(nodes.min())}: states are >= 0.")
        K.fill_from_classes(self.class_indptr, self.class_ids, self.members_indptr, self.members,
                            nodes, self.n_nodes, bitmask)

    def class_bit_table(self) -> np.ndarray:
        """Allowed classes of every trie node as packed bits.

        Returns
        -------
        ndarray of int32, shape (n_nodes, ceil(n_classes / 32))
            Token ``t`` is allowed at node ``n`` iff bit ``c % 32`` of word
            ``c // 32`` of row ``n`` is set, with ``c = class_of[t]``: a device
            gathers a whole token mask from one row and ``class_of``.
        """
        return K.class_bit_table(self.class_indptr, self.class_ids, self.n_classes)

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the class arrays (class-level automaton and membership)."""
        return int(sum(a.nbytes for a in (self.class_of, self.members_indptr, self.members,
                                          self.representatives, self.class_indptr, self.class_ids,
                                          self.class_next)))

    def __repr__(self) -> str:
        return (f"TokenClasses(n_classes={self.n_classes}, vocab_size={self.vocab_size}, "
                f"ratio={self.compression_ratio:.1f}x, class_edges={self.class_ids.shape[0]})")
