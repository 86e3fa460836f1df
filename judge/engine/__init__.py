"""The scoring stack: prompts and options in, exact log-probabilities out.

In the order data flows:

* :mod:`~judge.engine.protocol` — :class:`Query` (text), :class:`Item` (tokens) and the
  :class:`Scorer` protocol every backend answers (this engine, the independent reference
  :class:`judge.testing.Reference`, other backends); :func:`lower_queries`, the one lowering
  of text to tokens (a :class:`Lowering` scorer scores exactly what it returns).
* :mod:`~judge.engine.options` — :class:`OptionTrie`: a label set's token sequences as a trie.
* :mod:`~judge.engine.forest` — rows of one forward pass over a prompt forest.
* :mod:`~judge.engine.masks` — the attention mask the model really applies, per layer type.
* :mod:`~judge.engine.engine` — :class:`Engine`: the tree pass (or the exact causal
  fallback of :mod:`~judge.engine.fallback`, chosen by a self-check), float64 normalisation.
* :mod:`~judge.engine.search` — certified best-first search: the argmax of full scoring (or a
  distribution within a tolerance), expanding only what a prefix bound requires, at any K.

Examples
--------
>>> from judge.engine import Engine, Query
>>> from judge.testing import tiny_pair
>>> eng = Engine(*tiny_pair())
>>> [s.shape for s in eng.score([Query((("Sky colour:", False),), (" blue", " green"))])]
[(2,)]
"""

from judge._math import left_pad
from judge.engine.engine import Engine, EngineCheckWarning
from judge.engine.forest import Forest, Slot, ancestors, row_mask
from judge.engine.masks import mask_plan, native_gqa
from judge.engine.options import OptionTrie
from judge.engine.protocol import (
    OPTION_CONTEXT_CHARS,
    Closing,
    Item,
    Lowering,
    Query,
    Scorer,
    default_root,
    lower_queries,
    lowers,
    option_context,
    row_key,
)
from judge.engine.search import SearchResult

__all__ = ["OPTION_CONTEXT_CHARS", "Closing", "Engine", "EngineCheckWarning", "Forest", "Item", "Lowering", "OptionTrie",
           "Query", "Scorer", "SearchResult", "Slot", "ancestors", "default_root", "left_pad", "lower_queries",
           "lowers", "mask_plan", "native_gqa", "option_context", "row_key", "row_mask"]
