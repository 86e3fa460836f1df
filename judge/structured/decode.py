"""Decoding inside a schema: the compiled schema, and the logits processor that walks it.

* :class:`StructuredSchema` — a schema compiled once for a tokenizer: the Lark grammar of
  :func:`~judge.structured.grammar.build_grammar` given to llguidance, and one
  :class:`~judge.automaton.trie.TrieAutomaton` per big enum (its virtual token's values).
* :class:`DecodeState` — where one sequence stands: the llguidance matcher, and the
  automaton node while inside an enum value.
* :class:`StructuredLogitsProcessor` — a transformers ``LogitsProcessor``, a pure function
  of ``(input_ids, scores)``: each row's state is rebuilt from its generated tokens
  (memoized), and :meth:`~StructuredLogitsProcessor.mask_row` gives the allowed tokens.

What it deliberately does not do: generate or score (see :mod:`judge.structured.generate`).
"""

from __future__ import annotations

import time

import numpy as np

from judge.automaton.trie import set_token_bits
from judge.structured.grammar import build_grammar

__all__ = ["StructuredSchema", "DecodeState", "StructuredLogitsProcessor"]


class StructuredSchema:
    """A JSON schema compiled for one tokenizer: the grammar, and one automaton per big enum.

    Parameters
    ----------
    schema : dict
        A JSON schema in the supported subset (see :mod:`judge.structured`).
    tokenizer : transformers.PreTrainedTokenizerFast
    enum_threshold : int, default 64
        String enums with at least this many values go to the trie automaton;
        smaller ones stay in the grammar.
    max_string_length, max_number_digits, max_items : int
        Caps for strings without ``maxLength``, numbers, arrays without ``maxItems``.
    eos_token_id : int, optional
        The token that ends the output (default: the tokenizer's EOS).

    Attributes
    ----------
    grammar : str
        The Lark grammar given to llguidance.
    slots : list of judge.structured.grammar.EnumSlot
        One entry per trie-handled enum occurrence (``path``, ``values``, ``labels``).
    automata : list of judge.automaton.trie.TrieAutomaton
    n_words : int
        Width of a packed mask row (:meth:`StructuredLogitsProcessor.mask_row`): 32-bit
        words over the vocabulary and 4096 virtual tokens.
    compile_ms : dict
        ``grammar`` (schema -> Lark + llguidance matcher) and ``automata`` times.

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> _, tok = tiny_pair()
    >>> s = StructuredSchema({"type": "object", "properties": {
    ...     "tool": {"enum": ["get_user", "set_user", "list_orders"]}, "n": {"type": "integer"}}},
    ...     tok, enum_threshold=3)
    >>> len(s.slots), s.slots[0].path
    (1, '/tool')
    """

    def __init__(self, schema, tokenizer, *, enum_threshold: int = 64, max_string_length: int = 64,
                 max_number_digits: int = 12, max_items: int = 8, eos_token_id: int | None = None):
        import llguidance

        from judge.automaton.trie import TrieAutomaton
        from judge.automaton.vocab import Vocabulary

        if enum_threshold < 1:
            raise ValueError(f"enum_threshold must be >= 1, got {enum_threshold}.")
        self.schema = schema
        self.tokenizer = tokenizer
        self.vocab = Vocabulary.from_tokenizer(tokenizer)
        self.vocab_size = self.vocab.size
        eos = tokenizer.eos_token_id if eos_token_id is None else eos_token_id
        if eos is None:
            raise ValueError("The tokenizer has no EOS token; pass eos_token_id=... to StructuredSchema.")
        self.eos_token_id = int(eos)
        self.lltokenizer = _lltokenizer(tokenizer, self.vocab_size + 4096, self.eos_token_id)
        self.vocab.byte_trie()
        t0 = time.perf_counter()  # per-tokenizer setup above is cached and not counted
        self.grammar, self.slots = build_grammar(
            schema, self.vocab_size, enum_threshold=enum_threshold, max_string_length=max_string_length,
            max_number_digits=max_number_digits, max_items=max_items)
        if len(self.slots) > 4096:
            raise ValueError(f"{len(self.slots)} trie-handled enum occurrences; at most 4096 are supported.")
        self._llgrammar = llguidance.LLMatcher.grammar_from_lark(self.grammar)
        m = self.new_matcher()
        if m.is_error():
            raise ValueError(f"llguidance rejected the compiled grammar: {m.get_error()}")
        t1 = time.perf_counter()
        self.automata = [TrieAutomaton.build(s.labels, self.vocab) for s in self.slots]
        t2 = time.perf_counter()
        self.compile_ms = {"grammar": (t1 - t0) * 1e3, "automata": (t2 - t1) * 1e3}
        self.n_words = (self.vocab_size + 4096 + 31) // 32
        self._root_rows = []
        for a in self.automata:
            row = np.zeros((1, self.n_words), np.int32)
            a.fill_bitmask(np.zeros(1, np.int64), row[:, : (self.vocab_size + 31) // 32])
            self._root_rows.append(row[0])

    def new_matcher(self):
        """A fresh llguidance matcher at the start of the output."""
        import llguidance

        return llguidance.LLMatcher(self.lltokenizer, self._llgrammar, log_level=0)


_LLTOK_CACHE: dict = {}


def _lltokenizer(tokenizer, n_vocab, eos):
    import llguidance.hf

    key = (id(tokenizer), n_vocab, eos)
    if key not in _LLTOK_CACHE:
        _LLTOK_CACHE[key] = (tokenizer, llguidance.hf.from_tokenizer(tokenizer, n_vocab=n_vocab, eos_token=eos))
    return _LLTOK_CACHE[key][1]


class DecodeState:
    """Decode state of one sequence: the grammar matcher, and the automaton node when inside a slot.

    Built by :meth:`StructuredLogitsProcessor.state`; read its attributes, do not set them.

    Attributes
    ----------
    matcher : llguidance.LLMatcher
    slot : int
        ``>= 0``: inside the value of slot ``slot`` (at automaton node ``node``); ``-1`` outside.
    node : int
    events : tuple of (slot, start, end, value index)
        One per value entered: token positions (in the generated tokens) where it starts
        and ends; ``end`` and the value index are ``-1`` while it is unfinished.
    dead : bool
        A token left the grammar.
    done : bool
        The grammar ended and the EOS token was produced.
    row : ndarray of int32 or None
        The packed allowed-token row, once :meth:`StructuredLogitsProcessor.mask_row` computed it.
    row_slots : tuple of int
        The slots whose value may start here.

    Examples
    --------
    >>> DecodeState(matcher=None).slot
    -1
    """

    __slots__ = ("matcher", "slot", "node", "events", "dead", "done", "row", "row_slots")

    def __init__(self, matcher):
        self.matcher = matcher
        self.slot = -1
        self.node = 0
        self.events: tuple = ()
        self.dead = False
        self.done = False
        self.row = None
        self.row_slots: tuple = ()

    def copy(self) -> DecodeState:
        """A copy with its own matcher, without the cached row."""
        s = DecodeState(self.matcher.deep_copy())
        s.slot, s.node, s.events, s.dead, s.done = self.slot, self.node, self.events, self.dead, self.done
        return s


class StructuredLogitsProcessor:
    """Keep generation inside a :class:`StructuredSchema` (transformers ``LogitsProcessor``).

    A pure function of ``(input_ids, scores)`` given where the prompt ends:
    each row's state is rebuilt from its generated tokens (memoized one step
    back), so any batch and beam search work.

    Parameters
    ----------
    compiled : StructuredSchema
    prompt_length : int
        Width of the (padded) prompt given to ``generate``.

    Attributes
    ----------
    dispatch_ns : dict of str to list of int
        Time spent switching, per event, for the benchmark: ``"mask"`` (OR-ing
        the automaton's first tokens into llguidance's mask where a slot may
        start), ``"enter"`` (consuming the virtual token), ``"leave"``
        (handing back to the grammar at the closing quote).

    Examples
    --------
    >>> from judge.testing import tiny_pair
    >>> _, tok = tiny_pair()
    >>> c = StructuredSchema({"enum": ["get_user", "set_user"]}, tok, enum_threshold=2)
    >>> proc = StructuredLogitsProcessor(c, prompt_length=0)
    >>> first = proc.allowed([])                          # the value's first tokens
    >>> proc.state([int(first[0])]).slot                  # inside the enum value now
    0
    """

    def __init__(self, compiled: StructuredSchema, prompt_length: int):
        if int(prompt_length) < 0:
            raise ValueError(f"prompt_length must be >= 0, got {prompt_length}.")
        self.c = compiled
        self.prompt_length = int(prompt_length)
        self._memo: dict[tuple, DecodeState] = {(): DecodeState(compiled.new_matcher())}
        self.dispatch_ns: dict[str, list[int]] = {"mask": [], "enter": [], "leave": []}
        self._V = compiled.vocab_size
        self._node = np.zeros(1, np.int64)

    # --- state -----------------------------------------------------------
    def state(self, generated) -> DecodeState:
        """The decode state after ``generated`` tokens (memoized)."""
        key = tuple(int(t) for t in generated)
        st = self._memo.get(key)
        if st is None:
            prev = self.state(key[:-1])
            st = self._advance(prev, key[-1], len(key) - 1)
            self._memo[key] = st
        return st

    def _advance(self, prev: DecodeState, t: int, pos: int) -> DecodeState:
        st = prev.copy()
        if st.dead or st.done:
            st.done = st.done and t == self.c.eos_token_id
            st.dead = not st.done
            return st
        if st.slot >= 0:  # inside a trie slot
            a = self.c.automata[st.slot]
            st.node = a.next(st.node, t)
            if st.node < 0 or t >= self._V:
                st.dead = True
            else:
                self._maybe_leave(st, pos)
            return st
        if prev.row is None:
            self.mask_row(prev)
        for i in prev.row_slots:  # a slot may start here: is ``t`` the start of one of its values?
            a = self.c.automata[i]
            n = a.next(a.root, t)
            if n >= 0:
                t0 = time.perf_counter_ns()
                ok = st.matcher.consume_token(self._V + i)
                st.slot, st.node = i, n
                st.events = st.events + ((i, pos, -1, -1),)
                self.dispatch_ns["enter"].append(time.perf_counter_ns() - t0)
                if not ok:
                    st.dead = True
                else:
                    self._maybe_leave(st, pos)
                return st
        if t == self.c.eos_token_id and st.matcher.is_accepting():
            st.done = True
            return st
        st.dead = not st.matcher.consume_token(t)
        return st

    def _maybe_leave(self, st: DecodeState, pos: int) -> None:
        a = self.c.automata[st.slot]
        lab = a.label_at(st.node)
        if lab is not None:  # a JSON string ends at its closing quote: nothing can follow inside
            t0 = time.perf_counter_ns()
            i, start, _, _ = st.events[-1]
            st.events = st.events[:-1] + ((i, start, pos + 1, lab),)
            st.slot, st.node = -1, 0
            self.dispatch_ns["leave"].append(time.perf_counter_ns() - t0)

    def mask_row(self, state: DecodeState) -> np.ndarray:
        """Allowed tokens at ``state`` as a packed bit row (computed once, cached on the state).

        Parameters
        ----------
        state : DecodeState
            From :meth:`state`.

        Returns
        -------
        ndarray of int32, shape (compiled.n_words,), read-only
            Bit ``t`` (word ``t >> 5``, bit ``t & 31``) is set when token ``t`` may come next;
            ids past the vocabulary are the virtual tokens of the slots that may start here.

        Examples
        --------
        >>> from judge.testing import tiny_pair
        >>> _, tok = tiny_pair()
        >>> c = StructuredSchema({"type": "boolean"}, tok)
        >>> proc = StructuredLogitsProcessor(c, prompt_length=0)
        >>> row = proc.mask_row(proc.state([]))
        >>> row.shape == (c.n_words,), sorted(tok.decode([t]) for t in proc.allowed([]))[:2]
        (True, ['f', 'fa'])
        """
        st = state
        if st.row is not None:
            return st.row
        V = self._V
        if st.slot >= 0 and not (st.dead or st.done):  # inside a value: the automaton's row
            row = np.empty((1, self.c.n_words), np.int32)
            self._node[0] = st.node
            self.c.automata[st.slot].fill_bitmask(self._node, row[:, : (V + 31) // 32])
            row[0, (V + 31) // 32:] = 0
        else:
            row = np.zeros((1, self.c.n_words), np.int32)
            if st.dead:
                pass
            elif st.done:
                set_token_bits(row[0], [self.c.eos_token_id])
            else:
                st.matcher.unsafe_compute_mask_ptr(row.ctypes.data, row.nbytes)
                slots = []
                for i in range(len(self.c.slots)):
                    k = V + i
                    if (row[0, k >> 5] >> (k & 31)) & 1:
                        slots.append(i)
                if slots:
                    t0 = time.perf_counter_ns()
                    for i in slots:
                        row[0] |= self.c._root_rows[i]
                    self.dispatch_ns["mask"].append(time.perf_counter_ns() - t0)
                st.row_slots = tuple(slots)
        row.flags.writeable = False
        st.row = row[0]
        return st.row

    def allowed(self, generated) -> np.ndarray:
        """Token ids (< vocab size) allowed after ``generated``, sorted."""
        row = self.mask_row(self.state(generated))
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: self._V]
        return np.flatnonzero(bits)

    def __call__(self, input_ids, scores):
        import torch

        B, W = scores.shape
        gen = input_ids[:, self.prompt_length:].tolist()
        states = [self.state(g) for g in gen]
        keep = {tuple(g) for g in gen}
        self._memo = {k: v for k, v in self._memo.items() if k in keep or len(k) == 0}
        rows = np.stack([self.mask_row(s) for s in states])
        allowed = np.unpackbits(rows.view(np.uint8), axis=1, bitorder="little")[:, : self._V].astype(bool)
        for r, s in enumerate(states):
            if s.dead or not allowed[r].any():  # off the grammar (or stuck): end the row
                allowed[r] = False
                allowed[r, self.c.eos_token_id] = True
        if W > self._V:
            allowed = np.concatenate([allowed, np.zeros((B, W - self._V), bool)], axis=1)
        elif W < self._V:
            allowed = allowed[:, :W]
        mask = torch.from_numpy(allowed).to(scores.device)
        return scores.masked_fill(~mask, float("-inf"))
