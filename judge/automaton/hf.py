"""A ``transformers`` LogitsProcessor that keeps generation inside the label automaton.

The state of each sequence is recomputed from its generated tokens (a walk
through the :class:`~judge.automaton.trie.TrieAutomaton` from the root), so the
processor is a pure function of ``(input_ids, scores)`` given where the prompt
ends: one processor serves any batch, beam search included, and any number of
``generate()`` calls. Give the prompt length once (``prompt_length=``) or per
call with :meth:`TrieLogitsProcessor.bind`, a cheap view that shares the
memoized walks (which only save time).

Any tokenization of a label is allowed, not only the canonical one; after a
label is complete only the end tokens are allowed, and they stay allowed so
finished beams can pad.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TrieLogitsProcessor"]


class TrieLogitsProcessor:
    """Mask every token the label automaton does not allow (sets its score to -inf).

    Parameters
    ----------
    automaton : judge.automaton.trie.TrieAutomaton
    prompt_length : int, optional
        Number of input tokens before generation starts (the padded prompt
        width passed to ``generate``). Without it, use :meth:`bind` per call.

    Examples
    --------
    >>> import torch
    >>> from judge.automaton import TrieAutomaton, Vocabulary
    >>> from judge.testing import tiny_pair
    >>> model, tok = tiny_pair()
    >>> auto = TrieAutomaton.build([" card arrival", " exchange rate"], Vocabulary.from_tokenizer(tok))
    >>> ids = torch.tensor([tok("Label:")["input_ids"]])
    >>> proc = TrieLogitsProcessor(auto)
    >>> out = model.generate(ids, logits_processor=[proc.bind(ids.shape[1])], max_new_tokens=8,
    ...                      do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    >>> tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True) in (" card arrival", " exchange rate")
    True
    """

    def __init__(self, automaton, prompt_length: int | None = None):
        if prompt_length is not None and int(prompt_length) < 0:
            raise ValueError(f"prompt_length must be >= 0, got {prompt_length}.")
        self.automaton = automaton
        self.prompt_length = None if prompt_length is None else int(prompt_length)
        self._memo: dict[tuple, int] = {(): automaton.root}
        self._ends = np.asarray(automaton.end_token_ids, np.int64)

    def bind(self, prompt_length: int) -> TrieLogitsProcessor:
        """A processor for prompts of ``prompt_length`` tokens sharing this one's automaton and memo."""
        if int(prompt_length) < 0:
            raise ValueError(f"prompt_length must be >= 0, got {prompt_length}.")
        view = object.__new__(TrieLogitsProcessor)
        view.automaton, view._memo, view._ends = self.automaton, self._memo, self._ends
        view.prompt_length = int(prompt_length)
        return view

    def state(self, generated) -> int:
        """Automaton state after ``generated`` tokens; -1 if they left the automaton."""
        key = tuple(int(t) for t in generated)
        node = self._memo.get(key)
        if node is None:
            prev = self.state(key[:-1])
            if prev < 0:
                node = -1
            elif self.automaton.is_accepting(prev):
                node = prev if key[-1] in self.automaton.end_token_ids else -1
            else:
                node = self.automaton.next(prev, key[-1])
            self._memo[key] = node
        return node

    def __call__(self, input_ids, scores):
        import torch

        if self.prompt_length is None:
            raise ValueError(
                "This TrieLogitsProcessor has no prompt length: pass prompt_length= or use "
                "proc.bind(input_ids.shape[1]) for each generate() call.")
        B, V = scores.shape
        gen = input_ids[:, self.prompt_length:].tolist()
        states = [self.state(g) for g in gen]
        words = (max(V, self.automaton.vocab_size) + 31) // 32
        bm = np.zeros((B, words), np.int32)
        live = np.array([max(s, 0) for s in states])
        self.automaton.fill_bitmask(live, bm)
        allowed = np.unpackbits(bm.view(np.uint8), axis=1, bitorder="little")[:, :V].astype(bool)
        for r, s in enumerate(states):
            if s < 0 or self.automaton.is_accepting(s):  # finished (or off-path): only end tokens
                allowed[r] = False
                allowed[r, self._ends[self._ends < V]] = True
        mask = torch.from_numpy(allowed).to(scores.device)
        return scores.masked_fill(~mask, float("-inf"))
