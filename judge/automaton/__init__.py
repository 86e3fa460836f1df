"""The label automaton: the labels' byte trie intersected with a tokenizer's vocabulary.

Data flows through it in this order:

* :mod:`judge.automaton.vocab` — :class:`Vocabulary`: every token id -> the exact bytes it emits.
* :mod:`judge.automaton.trie` — :class:`TrieAutomaton`: for every node of the labels' byte
  trie, the tokens allowed there and where each leads (CSR arrays, numba kernels in
  ``_kernels``); packed bitmask rows on demand.
* :mod:`judge.automaton.token_classes` — :class:`TokenClasses`: tokens that behave alike at
  every node share one column (exact, smaller masks).
* :mod:`judge.automaton.hf` — :class:`TrieLogitsProcessor`: the automaton as a stateless
  ``transformers`` LogitsProcessor.

What it deliberately does not do: score anything (``judge.engine`` does) or pick a
tokenization (every tokenization of a label is admitted).

Examples
--------
>>> from judge.automaton import TrieAutomaton, Vocabulary
>>> vocab = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b""], end_token_ids=[3])
>>> auto = TrieAutomaton.build(["ab", "b"], vocab)
>>> sorted(auto.allowed(auto.root).tolist())
[0, 1, 2]
"""

from judge.automaton.hf import TrieLogitsProcessor
from judge.automaton.token_classes import TokenClasses
from judge.automaton.trie import ByteTrie, TrieAutomaton, set_token_bits
from judge.automaton.vocab import Vocabulary, bytes_to_unicode

__all__ = ["ByteTrie", "TokenClasses", "TrieAutomaton", "TrieLogitsProcessor", "Vocabulary", "bytes_to_unicode",
           "set_token_bits"]
