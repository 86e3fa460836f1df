"""trie-judge: any causal language model as a fast, calibrated zero-shot classifier.

>>> from judge import Classifier
>>> clf = Classifier(["positive", "negative"])      # the packaged SmolLM2-135M beside MiniLM, offline
>>> clf.predict(["I loved it, a wonderful film"])
array(['positive'], dtype=object)

Importing ``judge`` is light: torch and transformers load only when a model
is first used; matplotlib only when plotting; ``datasets`` only online.
"""

from __future__ import annotations

import importlib

from judge._errors import LabelError, NotCalibratedError

__version__ = "0.1.0"

__all__ = [
    "Cascade",
    "Classifier",
    "classify",
    "SetAnswer",
    "Engine",
    "Query",
    "Decider",
    "Choice",
    "YesNo",
    "Score",
    "PromptTemplate",
    "DEFAULT_PROMPT",
    "LabelError",
    "NotCalibratedError",
    "TrieAutomaton",
    "Vocabulary",
    "TrieLogitsProcessor",
    "calibration",
    "datasets",
    "structured",
    "__version__",
]

_LAZY = {
    "Classifier": "judge.classifier",
    "Cascade": "judge.cascade",
    "classify": "judge.label_sets",
    "SetAnswer": "judge.label_sets",
    "TrieAutomaton": "judge.automaton.trie",
    "Vocabulary": "judge.automaton.vocab",
    "TrieLogitsProcessor": "judge.automaton.hf",
    "Engine": "judge.engine",
    "Query": "judge.engine",
    "Decider": "judge.decisions",
    "Choice": "judge.decisions",
    "YesNo": "judge.decisions",
    "Score": "judge.decisions",
    "PromptTemplate": "judge.prompts",
    "DEFAULT_PROMPT": "judge.prompts",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in ("calibration", "datasets", "structured"):
        return importlib.import_module(f"judge.{name}")
    raise AttributeError(f"module 'judge' has no attribute {name!r}; public names are {__all__}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
