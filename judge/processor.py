"""Deprecated location: use :mod:`judge.automaton.hf` (kept as a re-export for one release).

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     import judge.processor
>>> judge.processor.__all__ == __import__("judge.automaton.hf", fromlist=["x"]).__all__
True
"""

import warnings

from judge.automaton.hf import *  # noqa: F403
from judge.automaton.hf import __all__  # noqa: F401

warnings.warn("judge.processor moved to judge.automaton.hf; the old name goes in the next release.",
              DeprecationWarning, stacklevel=2)
