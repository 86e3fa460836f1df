"""``judge serve``: the System One (``/v1/systemone``) and Decisions (``/v1/decisions``) HTTP API.

An integration at the edge (FastAPI + uvicorn, the ``[serve]`` extra): it
imports `judge.decisions` and never the other way round.

- `create_app` builds the ASGI app around a `judge.decisions.Decider`;
- `contract` holds the pydantic models of both wire contracts;
- `batching.MicroBatcher` merges concurrent requests into one scoring call,
  with a bounded wait and a bounded queue (429 when full);
- `cli` holds ``judge serve`` and ``judge calibrate-decisions``.

What it deliberately does not do: images (assets), streaming, generation.
"""

from __future__ import annotations

__all__ = ["create_app", "ServerConfig"]


def __getattr__(name):  # keep `import judge.server` light: FastAPI is imported on use
    if name in __all__:
        from judge.server import app

        return getattr(app, name)
    raise AttributeError(f"module 'judge.server' has no attribute {name!r}")
