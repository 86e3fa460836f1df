"""The System One (``/v1/systemone``) and Decisions (``/v1/decisions``) HTTP API.

An integration at the edge (FastAPI + uvicorn, the ``[serve]`` extra): it
imports `judge.decisions` and never the other way round (tests/test_layout.py checks it).

- `app.create_app` builds the ASGI app around a `judge.decisions.Decider`;
- `contract` holds the pydantic models of both wire contracts and the one mapping
  onto `judge.decisions` questions;
- `routes` pairs each decision route with its contract: how a parsed body becomes questions
  (``options``, ``read``) and how answers become its response body (``render``);
- `wire` writes answers and whole response bodies in the wire form (`wire.answer_to_wire`,
  `wire.systemone_body`, `wire.decisions_body`, `wire.guard_to_wire`) and reads labelled
  decisions in files (`wire.read_labelled`: ``judge calibrate-decisions``, ``judge fit-decisions``);
- `counters.Counters` holds every count ``/healthz`` reports, in one object;
- `admission.Admission` parses, validates, limits, plans and prices each request in threads
  apart from the scoring thread (413/422 before anything is queued) and cuts its plan into
  jobs (`judge.decisions.Decider.plan_request`: each question planned and tokenized once);
- `batching.MicroBatcher` merges concurrent jobs into scoring calls sized by tokens
  (`judge.decisions.Decider.answer` of their plans),
  serving requests in turn, with a bounded wait and a bounded queue (429 when full);
- `errors` writes the contract's error bodies;
- `shutdown.serve` runs the app with uvicorn and, on SIGTERM, answers every request in flight or
  refuses it with a 503 once ``--drain-seconds`` are up (`shutdown.DrainingServer`).

``judge serve`` and ``judge calibrate-decisions`` live in `judge.cli.serve`.

What it deliberately does not do: images (assets), streaming, generation.

Examples
--------
>>> import judge.server
>>> judge.server.ServerConfig().max_queue        # FastAPI is imported on first use
64
"""

from __future__ import annotations

__all__ = ["create_app", "ServerConfig"]


def __getattr__(name):  # keep `import judge.server` light: FastAPI is imported on use
    if name in __all__:
        from judge.server import app

        return getattr(app, name)
    raise AttributeError(f"module 'judge.server' has no attribute {name!r}")
