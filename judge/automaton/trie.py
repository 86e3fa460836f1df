"""Label trie x vocabulary -> token automaton ("trie automaton").

The labels' surface strings become a byte-level trie (preorder node ids, the
root is 0). Intersecting it with the vocabulary's own byte trie gives, for
every trie node, the tokens allowed there and the node each one leads to: a
token is allowed at node ``n`` if its bytes spell a path down the label trie
from ``n``; the end-of-answer tokens are allowed exactly where a label is
complete and lead to that label's accepting state. Nodes from which no label
can be completed (possible only with vocabularies that cannot spell every
byte) are pruned, so every admitted prefix can be finished.

Nodes whose subtrees are identical (same bytes and the same label ends
below them) have the same edges, shifted by their distance in preorder, so
the intersection is computed once per class of identical subtrees (the
minimized trie, found by hashing bottom-up with exact comparison) and copied
to the other members; label sets built from a small vocabulary of parts
(tool names, codes) have several times fewer classes than nodes.

The result is stored as CSR arrays (``indptr``, ``token_ids``, ``next_nodes``)
grouped by node and sorted by token id, never as dense per-node masks; a
packed bitmask row (xgrammar's layout) is made from a slice on demand.

The set of token sequences the automaton admits is exactly the set of
tokenizations of the label strings (any segmentation into vocabulary tokens,
not only the canonical one) followed by one end token.

What it deliberately does not do: pick a tokenization (scoring does), or hold
a reference to the tokenizer (it is small, immutable and picklable).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from judge._errors import LabelError
from judge.automaton import _kernels as K
from judge.labels import as_label_list, validate_labels

__all__ = ["ByteTrie", "TrieAutomaton", "set_token_bits"]


_BITS = (np.uint32(1) << np.arange(32, dtype=np.uint32)).view(np.int32)


def set_token_bits(row: np.ndarray, token_ids) -> None:
    """Set the bits of ``token_ids`` in a packed int32 bitmask row (xgrammar's layout), in place.

    Parameters
    ----------
    row : ndarray of int32, shape (ceil(V / 32),)
    token_ids : iterable of int

    Examples
    --------
    >>> row = np.zeros(2, np.int32)
    >>> set_token_bits(row, [0, 33])
    >>> row.tolist()
    [1, 2]
    """
    for t in token_ids:
        t = int(t)
        row[t >> 5] |= _BITS[t & 31]
# Below this ratio of subtree classes to nodes, edges are computed once per class.
_CLASS_RATIO = 0.9


def _readonly(*arrays):
    for a in arrays:
        a.flags.writeable = False
    return arrays


class ByteTrie:
    """A byte trie over many strings, in preorder, with children CSR arrays.

    Used for both the vocabulary (built once per tokenizer) and the labels.

    Attributes
    ----------
    parent, byte_in, depth : ndarray of shape (n_nodes,)
        Parent node (-1 for the root 0), the byte on the edge into the node,
        and its depth.
    child_indptr : ndarray of int64, shape (n_nodes + 1,)
    child_nodes, child_bytes : ndarray of shape (n_nodes - 1,)
        Children of node ``n`` are ``child_nodes[child_indptr[n]:child_indptr[n+1]]``,
        sorted by byte.
    end_indptr, end_ids : ndarray
        String ids ending at each node (CSR).
    node_of : ndarray of int32, shape (n_strings,)
        The node where each string ends (-1 for empty strings).

    Examples
    --------
    >>> t = ByteTrie.from_strings([b"ab", b"a", b"b"])
    >>> t.n_nodes, t.node_of.tolist()
    (4, [2, 1, 3])
    """

    def __init__(self, parent, byte_in, depth, node_of):
        self.parent, self.byte_in, self.depth, self.node_of = parent, byte_in, depth, node_of
        n = parent.shape[0]
        self.child_indptr, order = K.group_by(parent, n)
        self.child_nodes = (order).astype(np.int32)
        self.child_bytes = byte_in[self.child_nodes]
        self.end_indptr, self.end_ids = K.group_by(node_of, n)
        _readonly(self.parent, self.byte_in, self.depth, self.node_of, self.child_indptr,
                  self.child_nodes, self.child_bytes, self.end_indptr, self.end_ids)

    @property
    def n_nodes(self) -> int:
        """Number of nodes, root included."""
        return int(self.parent.shape[0])

    @classmethod
    def build(cls, data: np.ndarray, offsets: np.ndarray) -> ByteTrie:
        """Trie of the strings ``data[offsets[i]:offsets[i+1]]`` (empty ones left out)."""
        return cls._from_flat(data, offsets)[0]

    @classmethod
    def from_strings(cls, strings: Sequence[bytes]) -> ByteTrie:
        """Trie of a list of byte strings (empty ones left out)."""
        lens = np.fromiter(map(len, strings), np.int64, len(strings))
        off = np.zeros(len(strings) + 1, np.int64)
        np.cumsum(lens, out=off[1:])
        return cls._from_flat(np.frombuffer(b"".join(strings), dtype=np.uint8), off)[0]

    @classmethod
    def _from_flat(cls, data, offsets) -> tuple[ByteTrie, int]:
        """The trie and -1, or the id of a string equal to an earlier one."""
        *arrays, dup = K.build_trie_msd(np.ascontiguousarray(data, dtype=np.uint8),
                                        np.ascontiguousarray(offsets, dtype=np.int64))
        return cls(*arrays), int(dup)

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the arrays."""
        return sum(a.nbytes for a in (self.parent, self.byte_in, self.depth, self.node_of,
                                      self.child_indptr, self.child_nodes, self.child_bytes,
                                      self.end_indptr, self.end_ids))


class TrieAutomaton:
    """For every node of a label trie, the tokens allowed there and where each leads.

    Build with :meth:`build`. Immutable and picklable; the decode state of a
    sequence is just a node id.

    States ``0 .. n_nodes - 1`` are trie nodes (``root == 0``); states
    ``n_nodes + i`` are the accepting states reached by an end token after
    label ``i``. Nothing is allowed at an accepting state.

    Attributes
    ----------
    labels : tuple of str
        The surface strings, in the caller's order (label index = position).
    vocab_size : int
        Width of the token space (``len(tokenizer)``).
    end_token_ids : tuple of int
    indptr : ndarray of int64, shape (n_nodes + 1,)
    token_ids, next_nodes : ndarray of int32, shape (n_edges,)
        Allowed tokens of node ``n`` are ``token_ids[indptr[n]:indptr[n+1]]``
        (sorted), leading to ``next_nodes[...]``.

    Examples
    --------
    >>> from judge.automaton.vocab import Vocabulary
    >>> v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b"c", b""], end_token_ids=[4])
    >>> a = TrieAutomaton.build(["ab", "ac"], v)
    >>> a.allowed(a.root).tolist()
    [0, 2]
    >>> n = a.next(a.root, 2)                    # "ab" in one token
    >>> a.label_at(n), a.allowed(n).tolist()     # complete: only the end token
    (0, [4])
    >>> a.label_at(a.next(n, 4))                 # accepting state of label 0
    0
    """

    def __init__(self, labels, vocab_size, end_token_ids, indptr, token_ids, next_nodes,
                 node_label, n_nodes):
        self.labels = tuple(labels)
        self.vocab_size = int(vocab_size)
        self.end_token_ids = tuple(int(i) for i in end_token_ids)
        self.n_nodes = int(n_nodes)
        self._n_states = self.n_nodes + len(self.labels)
        self._words = (self.vocab_size + 31) // 32
        # One int32 table [n_nodes, n_states, words, indptr, token ids] for the fill kernel
        # (one array argument instead of seven); ``token_ids`` is a view into it.
        n_edges = int(np.shape(token_ids)[0])
        if n_edges >= 2**31:
            raise ValueError(f"The automaton has {n_edges} edges; at most 2**31 - 1 are supported, "
                             f"split the label set into smaller ones.")
        base = 3 + self.n_nodes + 1
        tab = np.empty(base + n_edges, np.int32)
        tab[:3] = (self.n_nodes, self._n_states, self._words)
        tab[3:base] = indptr
        tab[base:] = token_ids
        # ``_tab`` itself stays writeable (it is private; its public view ``token_ids`` is not): numba's
        # dispatcher types a read-only array on its slow path, which cost ~100 ns of every fill_bitmask.
        self._tab = tab
        self._ends = np.unique(np.asarray(self.end_token_ids, np.int32))  # sorted, for K.mask_rows
        self.indptr, self.token_ids, self.next_nodes, self.node_label = _readonly(
            np.asarray(indptr, dtype=np.int64), tab[base:], next_nodes, node_label)

    # --- construction -------------------------------------------------
    @classmethod
    def build(cls, labels: Sequence[str], vocab) -> TrieAutomaton:
        """Compile the automaton of ``labels`` over ``vocab``.

        Parameters
        ----------
        labels : sequence of str, length K
            The surface strings the model writes (non-empty, distinct).
        vocab : judge.automaton.vocab.Vocabulary
            Token bytes and end tokens of the tokenizer.

        Returns
        -------
        TrieAutomaton

        Raises
        ------
        LabelError
            Empty label list, a non-string/empty/duplicate label, or a label
            the vocabulary cannot spell.

        Examples
        --------
        >>> from judge.automaton.vocab import Vocabulary
        >>> v = Vocabulary.from_token_bytes([b"x", b"y", b""], end_token_ids=[2])
        >>> TrieAutomaton.build(["xy", "x"], v).n_nodes
        3
        """
        data, offsets = _encode_labels(labels)
        ltrie, dup = ByteTrie._from_flat(data, offsets)
        if dup >= 0:  # two labels end at one node
            validate_labels(list(labels))  # raises with the positions of the duplicate
        vtrie = vocab.byte_trie()
        n = ltrie.n_nodes
        node_label = np.full(n, -1, np.int32)
        node_label[ltrie.node_of] = np.arange(ltrie.node_of.shape[0], dtype=np.int32)
        ends = np.asarray(vocab.end_token_ids, dtype=np.int32)
        indptr, toks, dest = _intersect(ltrie, node_label, vtrie, ends)
        if ends.shape[0] == 0:
            raise LabelError(
                "The vocabulary has no end token, so no label can be completed; "
                "pass end_token_ids=[...] when building the Vocabulary.")
        if _spells_every_byte(ltrie, vtrie):
            # every node reaches each child by that byte's one-token edge, and every leaf ends a
            # label: all nodes are live and reachable, so the two passes below would change nothing
            # (they cost 2 x n_edges reads: 7 ms of 190 at 10^5 tool names over Qwen3's vocabulary)
            return cls(labels, vocab.size, vocab.end_token_ids, indptr, toks, dest, node_label, n)
        live = K.live_nodes(indptr, dest, n, node_label >= 0)
        if not live.all():
            indptr, toks, dest = K.prune(indptr, toks, dest, live, n)
        reach = K.reachable_nodes(indptr, dest, n)
        bad = np.flatnonzero(~reach[ltrie.node_of]).tolist()
        if bad or not live[0]:
            labels = as_label_list(labels)
            shown = [labels[i] for i in bad[:5]]
            raise LabelError(
                f"{len(bad)} label(s) cannot be spelled with this tokenizer's vocabulary "
                f"({vocab.name or 'custom'}), e.g. {shown!r}; remove those characters or "
                f"pass label_names that the vocabulary can write.")
        return cls(labels, vocab.size, vocab.end_token_ids, indptr, toks, dest, node_label, n)

    # --- queries ------------------------------------------------------
    root = 0

    @property
    def n_states(self) -> int:
        """Trie nodes plus one accepting state per label."""
        return self.n_nodes + len(self.labels)

    def _check(self, node) -> int:
        node = int(node)
        if not 0 <= node < self.n_states:
            raise IndexError(
                f"Invalid automaton state {node}: valid states are 0..{self.n_states - 1} "
                f"(trie nodes 0..{self.n_nodes - 1}, then one accepting state per label).")
        return node

    def allowed(self, node: int) -> np.ndarray:
        """Sorted token ids allowed at ``node``.

        Returns
        -------
        ndarray of int32, shape (n_allowed,)
            Empty at an accepting state.
        """
        node = self._check(node)
        if node >= self.n_nodes:
            return np.empty(0, np.int32)
        return self.token_ids[self.indptr[node]:self.indptr[node + 1]]

    def next(self, node: int, token_id: int) -> int:
        """The state reached from ``node`` by ``token_id``; -1 if not allowed."""
        node = self._check(node)
        if node >= self.n_nodes:
            return -1
        return int(K.next_state(self.indptr, self.token_ids, self.next_nodes, node, int(token_id)))

    def label_at(self, node: int) -> int | None:
        """Index of the label complete at ``node`` (or whose accepting state it is), else None."""
        node = self._check(node)
        if node >= self.n_nodes:
            return node - self.n_nodes
        lab = int(self.node_label[node])
        return None if lab < 0 else lab

    def is_accepting(self, node: int) -> bool:
        """True for the accepting states reached by an end token."""
        return self._check(node) >= self.n_nodes

    def fill_bitmask(self, nodes, bitmask) -> None:
        """Write the allowed tokens of each node as packed bits (xgrammar's layout).

        Parameters
        ----------
        nodes : array-like of int, shape (n,)
            A 1-D int64 ndarray with an int32 ndarray ``bitmask`` takes the
            fast path (under 1 µs a row on Qwen3's 151k vocabulary here);
            other sequences and CPU tensors are converted first.
        bitmask : ndarray or CPU torch.Tensor of int32, shape (n, ceil(V / 32))
            Row ``r``: bit ``t % 32`` of word ``t // 32`` is set iff token ``t``
            is allowed at ``nodes[r]``. Overwritten in place; may be wider than
            needed (a model whose logits are padded past ``len(tokenizer)``).

        Examples
        --------
        >>> from judge.automaton.vocab import Vocabulary
        >>> v = Vocabulary.from_token_bytes([b"a", b"b", b""], end_token_ids=[2])
        >>> a = TrieAutomaton.build(["a"], v)
        >>> m = np.zeros((1, 1), np.int32)
        >>> a.fill_bitmask([a.root], m); int(m[0, 0])
        1
        """
        try:  # fast path: the kernel accepts only int64 nodes and an int32 2-D ndarray
            if K.fill_rows(self._tab, nodes, bitmask) == -1:
                return
        except TypeError:
            pass
        arr = bitmask
        if type(arr) is not np.ndarray:
            arr = bitmask.numpy() if hasattr(bitmask, "numpy") else bitmask
        if type(arr) is not np.ndarray or arr.dtype != np.int32 or arr.ndim != 2:
            raise TypeError(
                f"Invalid bitmask: expected a 2-D int32 array or CPU tensor, got "
                f"{type(bitmask).__name__} with dtype {getattr(bitmask, 'dtype', None)} and "
                f"{getattr(arr, 'ndim', '?')} dimensions; allocate np.zeros((n, ceil(V/32)), np.int32).")
        if type(nodes) is not np.ndarray or nodes.dtype != np.int64 or nodes.ndim != 1:
            nodes = np.asarray(nodes, dtype=np.int64).reshape(-1)
        if arr.shape[0] < nodes.shape[0] or arr.shape[1] < self._words:
            raise ValueError(
                f"Bitmask of shape {arr.shape} is too small for {nodes.shape[0]} nodes and a "
                f"vocabulary of {self.vocab_size} tokens; it needs at least ({nodes.shape[0]}, {self._words}).")
        bad = K.fill_rows(self._tab, nodes, arr)
        if bad >= 0:
            raise IndexError(f"Invalid automaton state {int(nodes[bad])} in row {bad}: valid states are 0..{self._n_states - 1}.")

    def mask_logits(self, logits, rows, nodes) -> None:
        """Set to -inf, in place, every logit of row ``rows[i]`` whose token ``nodes[i]`` does not allow.

        What :meth:`fill_bitmask` followed by a bitmask kernel does, in one pass and one kernel call
        for the whole batch, without a bitmask: each row is filled with -inf between its allowed
        tokens. A state that is no trie node, an accepting state or ``-1`` (off the automaton),
        keeps only the end tokens (a finished answer may only end), as the logits processors do.
        Columns past the vocabulary (padded logits) become -inf; other rows are left alone.

        Parameters
        ----------
        logits : CPU torch.Tensor (float32, float16 or bfloat16) or ndarray (float32 or float16), shape (B, V)
        rows : ndarray of int64, shape (n,)
            Rows of ``logits`` to mask, each in ``0 .. B - 1``.
        nodes : ndarray of int64, shape (n,)
            The state of each of those rows.

        Examples
        --------
        >>> from judge.automaton.vocab import Vocabulary
        >>> v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b""], end_token_ids=[3])
        >>> a = TrieAutomaton.build(["ab"], v)
        >>> x = np.zeros((2, 5), np.float32)
        >>> a.mask_logits(x, np.array([1]), np.array([a.root]))
        >>> x.tolist()                     # row 0 untouched; at the root "a" and "ab" may follow
        [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, -inf, 0.0, -inf, -inf]]
        """
        bits, neg = _raw_bits(logits)
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        nodes = np.asarray(nodes, dtype=np.int64).reshape(-1)
        if rows.shape != nodes.shape:
            raise ValueError(f"rows and nodes must have the same length, got {rows.shape[0]} rows and "
                             f"{nodes.shape[0]} nodes.")
        if nodes.shape[0] and int(nodes.max()) >= self._n_states:
            bad = int(np.argmax(nodes >= self._n_states))
            raise IndexError(f"Invalid automaton state {int(nodes[bad])} for row {int(rows[bad])}: valid states are "
                             f"0..{self._n_states - 1}, or -1 (off the automaton).")
        bad = K.mask_rows(self._tab, self._ends, bits, rows, nodes, neg)
        if bad >= 0:
            raise IndexError(f"Row {int(rows[bad])} is outside logits of shape {tuple(logits.shape)}; rows must be "
                             f"in 0..{logits.shape[0] - 1}.")

    def allowed_mask(self, node: int) -> np.ndarray:
        """Dense boolean mask of shape (vocab_size,) for one node."""
        mask = np.zeros(self.vocab_size, dtype=bool)
        mask[self.allowed(node)] = True
        return mask

    @property
    def n_edges(self) -> int:
        """Number of (node, token) pairs stored."""
        return int(self.token_ids.shape[0])

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the automaton's arrays."""
        return int(self.indptr.nbytes + self._tab.nbytes + self.next_nodes.nbytes
                   + self.node_label.nbytes)

    def __repr__(self) -> str:
        return (f"TrieAutomaton(K={len(self.labels)}, nodes={self.n_nodes}, edges={self.n_edges}, "
                f"vocab_size={self.vocab_size}, memory={self.memory_bytes / 2**20:.1f} MiB)")

    def __reduce__(self):
        return (TrieAutomaton, (self.labels, self.vocab_size, self.end_token_ids,
                                np.array(self.indptr), np.array(self.token_ids),
                                np.array(self.next_nodes), np.array(self.node_label), self.n_nodes))

    def __setattr__(self, name, value):
        if name in self.__dict__:
            raise AttributeError(f"TrieAutomaton is immutable; cannot set {name!r}. Build a new one instead.")
        object.__setattr__(self, name, value)


_NEG_INF_BITS = {"float32": np.float32(-np.inf).view(np.int32), "float16": np.float16(-np.inf).view(np.int16),
                  "bfloat16": np.int16(-128)}  # bfloat16 -inf is 0xff80


def _raw_bits(logits):
    """``logits`` (2-D, writable, on the CPU) as an integer view of its bits, and -inf's bit pattern in it."""
    if type(logits) is np.ndarray:
        name = logits.dtype.name
        if name in ("float32", "float16") and logits.ndim == 2 and logits.flags.writeable:
            return logits.view(np.int32 if name == "float32" else np.int16), _NEG_INF_BITS[name]
    elif hasattr(logits, "is_floating_point") and getattr(logits, "device", None) is not None:
        name = str(logits.dtype).removeprefix("torch.")
        if name in _NEG_INF_BITS and logits.device.type == "cpu" and logits.dim() == 2:
            import torch

            raw = logits.detach().view(torch.int32 if name == "float32" else torch.int16)
            return raw.numpy(), _NEG_INF_BITS[name]
    raise TypeError(f"Invalid logits: expected a 2-D writable float32, float16 or bfloat16 array or CPU tensor, got "
                    f"{type(logits).__name__} of dtype {getattr(logits, 'dtype', None)} with shape "
                    f"{tuple(getattr(logits, 'shape', ()))}; on another device use fill_bitmask and a bitmask kernel.")


def _encode_labels(labels) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of all labels concatenated, and offsets (raises on invalid labels)."""
    labels = as_label_list(labels)
    try:  # fast path; duplicates are caught by the trie (two labels ending at one node)
        joined = "\x00".join(labels)
    except TypeError:
        validate_labels(labels)  # raises the precise error
        raise
    raw = joined.encode("utf-8")
    lens = np.empty(0, np.int64)
    if labels and len(raw) == len(joined):  # ASCII: the lengths and blanks in one compiled pass
        data = np.frombuffer(raw, dtype=np.uint8)
        lens, blank = K.split_joined(data, len(labels))
        if lens.shape[0]:
            data = data[data != 0] if len(labels) > 1 else data
    if not lens.shape[0]:  # some label is not ASCII or holds a NUL character
        enc = [lab.encode("utf-8") for lab in labels]
        data = np.frombuffer(b"".join(enc), dtype=np.uint8)
        lens = np.fromiter(map(len, enc), np.int64, len(enc))
        blank = any(map(str.isspace, labels)) or (bool(labels) and lens.min() == 0)
    if blank or not labels:
        validate_labels(labels)  # raises the precise error
    offsets = np.zeros(len(labels) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    return data, offsets


def _spells_every_byte(ltrie, vtrie) -> bool:
    """True when every byte on the label trie's edges is a one-byte token of the vocabulary."""
    a, b = vtrie.child_indptr[0], vtrie.child_indptr[1]
    single = np.zeros(256, bool)
    kids = vtrie.child_nodes[a:b]
    single[vtrie.child_bytes[a:b]] = vtrie.end_indptr[kids + 1] > vtrie.end_indptr[kids]
    if single.all():  # byte-level BPE and byte-fallback vocabularies: no need to look at the labels
        return True
    used = np.bincount(ltrie.byte_in[1:], minlength=256) > 0
    return bool(single[used].all())


def _intersect(ltrie, node_label, vtrie, ends):
    """Edges of every label-trie node, computed once per class of identical subtrees."""
    cls, rep = K.subtree_classes(ltrie.child_indptr, ltrie.child_nodes, ltrie.byte_in, node_label >= 0)
    lt = (ltrie.child_indptr, ltrie.child_nodes, ltrie.byte_in, node_label)
    vt = (vtrie.child_indptr, vtrie.child_bytes, vtrie.child_nodes, vtrie.end_indptr, vtrie.end_ids)
    if rep.shape[0] >= _CLASS_RATIO * ltrie.n_nodes:
        return K.intersect(*lt, *vt, ends)
    r_indptr, r_toks, r_dest = K.intersect_nodes(*lt, *vt, ends, rep.astype(np.int64))
    return K.expand_classes(cls, rep, r_indptr, r_toks, r_dest, node_label, ltrie.n_nodes)


