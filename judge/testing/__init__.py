"""Test and benchmark helpers: the one reference scorer, tiny models, label generators.

Not a stable API: it serves this project's tests and benchmarks, and changes with them.

* :mod:`~judge.testing.reference` — :class:`Reference`, the brute force every scorer is
  checked against (same signature as ``Engine.score``, no code shared with the engine),
  and its plain-string / token-id / classifier forms.
* :mod:`~judge.testing.models` — :func:`tiny_model` of 22 architecture families,
  :func:`tiny_pair` (a tiny Llama over the packaged tokenizer, for examples).
* :mod:`~judge.testing.generators` — seeded label families (tool names, ICD-like codes, ...).

What is deliberately not here: anything from the engine. This package imports nothing from
``judge.engine``, ``judge.classifier``, ``judge.compiled`` or ``judge.prompts``, so a bug there
cannot hide in the reference.

Examples
--------
>>> from judge.testing import tool_names
>>> tool_names(2, seed=0)[0].count("_") >= 1
True
"""

from judge.testing.generators import icd_codes, phrases, prefix_labels, tool_names, unicode_labels
from judge.testing.models import (
    ARCHITECTURES,
    SLIDING_ARCHITECTURES,
    tiny_model,
    tiny_model_dir,
    tiny_pair,
)
from judge.testing.reference import (
    Reference,
    classifier_reference,
    reference_logprobs,
    reference_logprobs_ids,
)

__all__ = [
    "ARCHITECTURES",
    "SLIDING_ARCHITECTURES",
    "Reference",
    "classifier_reference",
    "icd_codes",
    "phrases",
    "prefix_labels",
    "reference_logprobs",
    "reference_logprobs_ids",
    "tiny_model",
    "tiny_model_dir",
    "tiny_pair",
    "tool_names",
    "unicode_labels",
]
