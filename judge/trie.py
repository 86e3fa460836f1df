"""Deprecated location: use :mod:`judge.automaton.trie` (kept as a re-export for one release).

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     import judge.trie
>>> judge.trie.__all__ == __import__("judge.automaton.trie", fromlist=["x"]).__all__
True
"""

import warnings

from judge.automaton.trie import *  # noqa: F403
from judge.automaton.trie import __all__  # noqa: F401

warnings.warn("judge.trie moved to judge.automaton.trie; the old name goes in the next release.",
              DeprecationWarning, stacklevel=2)
