"""Deprecated location: use :mod:`judge.automaton.vocab` (kept as a re-export for one release).

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     import judge.vocab
>>> judge.vocab.__all__ == __import__("judge.automaton.vocab", fromlist=["x"]).__all__
True
"""

import warnings

from judge.automaton.vocab import *  # noqa: F403
from judge.automaton.vocab import __all__  # noqa: F401

warnings.warn("judge.vocab moved to judge.automaton.vocab; the old name goes in the next release.",
              DeprecationWarning, stacklevel=2)
