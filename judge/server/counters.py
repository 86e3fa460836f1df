"""What the server counts, in one object: requests in flight and under admission, failures, scoring work.

Every count the app keeps lives in one :class:`Counters` (``GET /healthz`` reports them; the body
gate, the routes and the scoring worker add to it from their own threads, under its lock), instead
of a dict and loose cells shared by closures.

Examples
--------
>>> c = Counters()
>>> c.add("scoring_calls"); c.add("scored_tokens", 40); c.add("decoded_gzip")
>>> c.snapshot()["scored_tokens"], c.snapshot()["decoded_gzip"]
(40, 1)
"""

from __future__ import annotations

import threading
from collections import Counter

__all__ = ["Counters", "REPORTED"]

#: The counts ``/healthz`` always reports (0 until they happen); others (``too_large``, ``decoded_gzip``) appear
#: once counted.
REPORTED = ("in_flight", "disconnected", "server_errors", "scoring_calls", "scored_tokens", "scoring_s")


class Counters:
    """Thread-safe named counts (ints or seconds); :meth:`snapshot` for ``/healthz``.

    ``admitting`` (requests between their body and the queue: the company a batch may wait for) and
    ``in_flight`` (admitted, queued or being scored: what a shutdown must answer or refuse) go up and
    down; the rest only up.

    Examples
    --------
    >>> c = Counters()
    >>> with c.during("admitting"):
    ...     c.get("admitting")
    1
    >>> c.get("admitting")
    0
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._counts: Counter = Counter({name: 0 for name in REPORTED})
        self._counts["scoring_s"] = 0.0
        self._counts["admitting"] = 0

    def add(self, name: str, n: float = 1) -> None:
        """Add ``n`` to the count ``name`` (a new name starts at 0)."""
        with self._lock:
            self._counts[name] += n

    def get(self, name: str) -> float:
        """The count ``name`` now (0 if never counted)."""
        with self._lock:
            return self._counts[name]

    def during(self, name: str):
        """A context manager: ``name`` is one higher while it runs."""
        return _During(self, name)

    def snapshot(self) -> dict:
        """Every count as a plain dict (``admitting`` left out: a detail of batching)."""
        with self._lock:
            return {k: v for k, v in self._counts.items() if k != "admitting"}


class _During:
    def __init__(self, counters: Counters, name: str):
        self.counters, self.name = counters, name

    def __enter__(self):
        self.counters.add(self.name, 1)

    def __exit__(self, *exc):
        self.counters.add(self.name, -1)
