"""Other backends behind the :class:`~judge.engine.Scorer` protocol, each optional, each at the edge.

* :mod:`judge.backends.vllm` — vLLM: the label automaton as a vLLM v1 logits processor
  (constrained generation over per-request label sets), and :class:`~judge.backends.vllm.VLLMScorer`,
  which answers the Scorer protocol with vLLM's prompt log-probabilities. vLLM is imported only
  inside its functions; it lives in its own environment (``scripts/setup_vllm.sh``).

A backend is chosen by name (``Classifier(..., backend="vllm")``, ``Decider(backend="vllm")``,
``judge serve --backend vllm``, ``judge batch --backend vllm``) and imported lazily; nothing in
the engine imports a backend, and every backend is checked against the transformers engine and
the one reference, :class:`judge.testing.Reference`.

What it deliberately does not do: import any backend's heavy dependency (``import judge.backends``
and ``import judge.backends.vllm`` load no vLLM).

Examples
--------
>>> from judge.backends import BACKENDS, check_backend
>>> BACKENDS, check_backend("vllm")
(('transformers', 'vllm'), 'vllm')
"""

from __future__ import annotations

__all__ = ["BACKENDS", "check_backend", "make_scorer"]

#: Backend names: the transformers engine (``judge.engine.Engine``) and vLLM (``judge.backends.vllm``).
BACKENDS = ("transformers", "vllm")


def check_backend(backend) -> str:
    """``backend`` if it names a backend; else a ValueError listing the valid names.

    Examples
    --------
    >>> check_backend("sglang")
    Traceback (most recent call last):
    ...
    ValueError: Unknown backend 'sglang'; valid backends are ('transformers', 'vllm').
    """
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; valid backends are {BACKENDS}.")
    return backend


def make_scorer(backend, model=None, tokenizer=None, *, device=None, **kwargs):
    """A backend's scorer, not yet loaded: ``Engine(model, tokenizer, device=device, **kwargs)`` or
    ``VLLMScorer(model, tokenizer, **kwargs)`` (vLLM picks its own device).

    Examples
    --------
    >>> type(make_scorer("transformers")).__name__, type(make_scorer("vllm")).__name__
    ('Engine', 'VLLMScorer')
    """
    if check_backend(backend) == "vllm":
        from judge.backends.vllm import VLLMScorer

        return VLLMScorer(model, tokenizer, **kwargs)
    from judge.engine.engine import Engine

    return Engine(model, tokenizer, device=device, **kwargs)
