"""What the Ray Data and Ray Serve halves of `judge.distributed` both check: Ray itself, model references, sizes."""

from __future__ import annotations

import os
from typing import Any


def ray_module():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ImportError("judge.distributed needs Ray Data: pip install 'trie-judge[ray]' "
                          "(or pip install 'ray[data,serve]').") from None
    return ray


def check_model_ref(model: Any) -> None:
    if model is not None and not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be None (the packaged model), a hub id or a local folder, got "
                        f"{type(model).__name__}; actors load the model themselves, so pass where it is, "
                        f"not a loaded object.")


def check_positive(name: str, value: Any, *, zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (value >= 0 if zero else value > 0)
    if not ok:
        kind = "a number >= 0" if zero else "a positive number"
        raise ValueError(f"{name} must be {kind}, got {value!r}.")
