"""The label-free bias correction's state: each question shape's prior, content-free then running.

A small model answers a question with a prior of its own: some options are likelier
whatever the content (shorter, more frequent, listed first). `QuestionPriors` keeps,
per question *shape* (everything but the state: the question, its options, the prompt
style; `judge.decisions.Plan.shape`), an estimate of that prior to divide out, with no
labels:

- ``"contextual"``: the mean answer distribution over content-free states
  (`judge.decisions.CONTENT_FREE`), computed once the first time the shape is seen
  (the `Decider` adds those queries to that same scoring call) and cached;
- ``"running"``: the mean answer distribution over the distinct states this shape has
  been asked about so far (`judge.calibration.batch_bias` over the traffic), used once
  ``warm_up`` distinct states have been seen; before that, the content-free prior. An
  answer uses the prior as it stood before its micro-batch, so the requests of one batch
  never move each other's answers; a state asked again does not count twice. After
  ``max_count`` states the prior is frozen (bounded memory, stable answers).

What it deliberately does not do: score (the `Decider` does) or fit anything with labels
(`judge.decisions.calibration` does, on top).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

__all__ = ["BIAS_METHODS", "QuestionPriors"]

#: The label-free corrections a `Decider` can apply (None: none).
BIAS_METHODS = ("contextual", "running")


class QuestionPriors:
    """Per question shape: the content-free log prior and a running mean of answered distributions.

    Parameters
    ----------
    method : {"contextual", "running"}
    warm_up : int
        Distinct states a shape must have been asked about before the running prior
        replaces the content-free one.
    max_shapes : int
        Shapes kept (least recently used dropped first).
    max_count : int
        States after which a shape's running prior stops changing.

    Examples
    --------
    >>> pr = QuestionPriors("running", warm_up=2)
    >>> pr.set_content_free("q", np.log([0.5, 0.5]))
    >>> pr.prior("q").round(3)                                   # before warm-up: content-free
    array([-0.693, -0.693])
    >>> pr.observe([("q", "state one", np.log([0.9, 0.1])), ("q", "state two", np.log([0.7, 0.3]))])
    >>> np.exp(pr.prior("q")).round(3)                           # the mean of what was answered
    array([0.8, 0.2])
    """

    def __init__(self, method: str = "contextual", *, warm_up: int = 8, max_shapes: int = 4096,
                 max_count: int = 10_000):
        if method not in BIAS_METHODS:
            raise ValueError(f"QuestionPriors method must be one of {list(BIAS_METHODS)}, got {method!r}.")
        if not isinstance(warm_up, int) or warm_up < 1:
            raise ValueError(f"warm_up must be a positive int, got {warm_up!r}.")
        self.method, self.warm_up, self.max_shapes, self.max_count = method, warm_up, max_shapes, max_count
        self._content_free: OrderedDict = OrderedDict()
        self._running: dict = {}  # shape -> [sum of probabilities, count, hashes of the states seen]
        self._lock = threading.Lock()

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def needs_content_free(self, shape) -> bool:
        """Whether this shape's content-free prior has yet to be computed.

        Examples
        --------
        >>> QuestionPriors().needs_content_free("new")
        True
        """
        with self._lock:
            return shape not in self._content_free

    def set_content_free(self, shape, log_prior: np.ndarray) -> None:
        """Store a shape's content-free log prior, shape (K,).

        Examples
        --------
        >>> pr = QuestionPriors()
        >>> pr.set_content_free("q", np.log([0.3, 0.7])); pr.needs_content_free("q")
        False
        """
        with self._lock:
            self._content_free[shape] = np.asarray(log_prior, dtype=np.float64)
            self._content_free.move_to_end(shape)
            while len(self._content_free) > self.max_shapes:
                old, _ = self._content_free.popitem(last=False)
                self._running.pop(old, None)

    def prior(self, shape) -> np.ndarray | None:
        """The log prior to divide out of an answer to this shape, shape (K,); None if unknown.

        Examples
        --------
        >>> QuestionPriors().prior("never seen") is None
        True
        """
        with self._lock:
            cf = self._content_free.get(shape)
            if cf is not None:
                self._content_free.move_to_end(shape)
            run = self._running.get(shape)
            if self.method == "running" and run is not None and run[1] >= self.warm_up:
                return np.log(run[0] / run[1])
            return cf

    def source(self, shape) -> str | None:
        """Which prior `prior` gives for this shape now: ``"running"``, ``"contextual"`` or None.

        Examples
        --------
        >>> pr = QuestionPriors("running", warm_up=1)
        >>> pr.set_content_free("q", np.log([0.5, 0.5])); pr.source("q")
        'contextual'
        >>> pr.observe([("q", "s", np.log([0.9, 0.1]))]); pr.source("q")
        'running'
        """
        with self._lock:
            run = self._running.get(shape)
            if self.method == "running" and run is not None and run[1] >= self.warm_up:
                return "running"
            return "contextual" if shape in self._content_free else None

    def observe(self, answered) -> None:
        """Count answered distributions: ``[(shape, state text, per-option log-probs (K,))]``, normalised here.

        Examples
        --------
        >>> pr = QuestionPriors("running", warm_up=1)
        >>> pr.observe([("q", "s", np.log([2.0, 2.0]))]); np.exp(pr.prior("q"))
        array([0.5, 0.5])
        """
        if self.method != "running":
            return
        with self._lock:
            for shape, state, log_p in answered:
                z = np.asarray(log_p, dtype=np.float64)
                p = np.exp(z - np.logaddexp.reduce(z))
                run = self._running.setdefault(shape, [np.zeros_like(p), 0, set()])
                if run[1] >= self.max_count or len(run[0]) != len(p):
                    continue
                key = hashlib.blake2b(state.encode("utf-8"), digest_size=12).digest()
                if key in run[2]:
                    continue
                run[2].add(key)
                run[0] += p
                run[1] += 1
                if run[1] >= self.max_count:
                    run[2] = set()

    def describe(self) -> dict:
        """What it does, and counts (``/v1/models``): shapes seen, how many are past their warm-up.

        Examples
        --------
        >>> d = QuestionPriors("running").describe()
        >>> d["method"], d["warm_up"], d["shapes"]
        ('running', 8, 0)
        """
        running = self.method == "running"
        what = (f"the mean answer distribution over the distinct states each question shape has been asked about "
                f"is divided out once {self.warm_up} have been seen (frozen after {self.max_count}); before that, its "
                f"mean over content-free states (asked once per shape, cached); no labels; an answer depends on the "
                f"earlier requests of its question shape, never on those of its own micro-batch") if running else \
            ("each question shape is also asked about content-free states once; their mean answer, cached per shape, "
             "is divided out; no labels; an answer never depends on other requests")
        with self._lock:
            warm = sum(1 for r in self._running.values() if r[1] >= self.warm_up) if running else 0
            return {"method": self.method, "warm_up": self.warm_up if running else None, "what": what,
                    "shapes": len(self._content_free), "shapes_past_warm_up": warm}
