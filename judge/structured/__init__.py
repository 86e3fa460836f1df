"""Structured generation for a JSON schema: llguidance for the structure, the trie for big enums.

The schema is compiled into a Lark grammar for llguidance in which every
string enum with at least ``enum_threshold`` values is replaced by one
*virtual token* (an id past the model's vocabulary, ``<[V + i]>``). When the
grammar reaches a virtual token, control passes to a
:class:`~judge.automaton.trie.TrieAutomaton` built over the JSON texts of that field's
values (any tokenization, exact); when the automaton completes a value, the
virtual token is consumed by llguidance and the grammar continues. Small
enums stay in the grammar. Every output therefore parses and validates
against the schema (unless ``max_new_tokens`` cuts it short; the result says so).

For each trie-handled field the result can also carry the **distribution over
that field's values** at the point where the model chose it: ``log P(value |
everything generated before it)`` for every value, each spelled by its
canonical tokens, normalized over the values. The values are scored through the
:class:`~judge.engine.Scorer` protocol (by default a :class:`judge.engine.Engine` on the
generating model), which is exact on every architecture: sliding windows shorter than
the context, ALiBi and local attention included.

In the order data flows:

* :mod:`~judge.structured.grammar` — schema -> Lark grammar + one
  :class:`~judge.structured.grammar.EnumSlot` per big enum.
* :mod:`~judge.structured.decode` — :class:`StructuredSchema` (compiled once per tokenizer),
  :class:`StructuredLogitsProcessor` (a ``LogitsProcessor``; its ``mask_row`` is a state's
  allowed tokens).
* :mod:`~judge.structured.generate` — :func:`generate_structured`, :func:`value_distribution`.

Supported schema subset (``$ref``-free): ``type`` one of ``object``
(``properties``; every property is generated, in the schema's order;
``required`` and ``additionalProperties: false`` are then always satisfied),
``array`` (``items``, ``minItems``, ``maxItems``), ``string`` (``minLength``,
``maxLength``), ``integer``, ``number``, ``boolean``, ``null``; ``enum`` (any
JSON scalars; only string enums go to the trie) and ``const``. ``title``,
``description``, ``default``, ``examples`` and ``$schema`` are ignored; any
other keyword raises ``ValueError``.

Output format: ``{"a": 1, "b": [1, 2]}`` (one space after ``:`` and ``,``).
Tokens never straddle the boundaries of a trie-handled value (its leading
space, quotes and text are spelled by tokens of its own), which llguidance
alone would allow; the language (the set of texts) is the same.

Unbounded strings, numbers and arrays are capped (``max_string_length``,
``max_number_digits``, ``max_items``) so that generation always ends; the
caps only shrink the set of outputs, each still valid.

What it deliberately does not do: ``$ref``, ``anyOf``/``oneOf``/``allOf``,
``pattern``, numeric bounds, optional-property choice; or sample (it uses
``model.generate``, so greedy, sampling and beams all work as usual).

Requires ``llguidance`` (``pip install llguidance``).

Examples
--------
>>> from judge.structured import generate_structured
>>> from judge.testing import tiny_pair
>>> model, tok = tiny_pair()
>>> res = generate_structured(model, tok, {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
...                           "Numbers:", max_new_tokens=30)
>>> res.complete, isinstance(res.value, list)
(True, True)
"""

from judge.structured.decode import DecodeState, StructuredLogitsProcessor, StructuredSchema
from judge.structured.generate import (
           FieldChoice,
           StructuredResult,
           generate_structured,
           value_distribution,
)
from judge.structured.grammar import EnumSlot, build_grammar

__all__ = ["StructuredSchema", "StructuredLogitsProcessor", "StructuredResult", "FieldChoice",
           "generate_structured", "value_distribution", "DecodeState", "EnumSlot", "build_grammar"]
