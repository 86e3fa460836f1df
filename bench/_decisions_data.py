"""What bench/decisions_quality.py scores and how it keeps the scores: sys1bench items, a cached scorer.

* `task_items`: sys1bench's generated items (its generators, its framings, its option
  permutations), the Suite-B decomposition questions (``sub_*``) left out, as sys1bench's
  own report leaves them out of its headline tables.
* `wire`: a sys1bench question in the ``/v1/systemone`` form, exactly as sys1bench's
  ``jev_typesafe`` adapter sends it.
* `labelled_jsonl`: items as ``judge calibrate-decisions`` reads them (a profile fitted on
  other seeds).
* `CachedScorer`: a `judge.engine.Scorer` that wraps another and keeps every query's
  log-probabilities in SQLite, keyed by the query itself (prompt pieces and option strings)
  and the model. A query scored once is never scored again, whichever code asked for it;
  two codes that build the same prompt get the same numbers. Caching is a wrapper around
  the interface, not code in the benchmark.

What it deliberately does not do: compute metrics (sys1bench's scorecard does, in
decisions_quality.py) or decide anything about prompts.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path

import numpy as np

from judge.engine import Closing

#: The five generators with framings in sys1bench 0.3.2 (one choice, one yes/no, one score question each).
GENERATORS = ("support_tickets", "guardrail_intent", "policy_compliance", "phishing_email", "log_triage")
#: Seeds kept apart: prompts, defaults and calibration profiles are chosen/fitted on VALIDATION_SEED only.
VALIDATION_SEED = 7001
TEST_SEED = 9001


def task_items(generators, n: int, seed: int, *, framings: bool = False, permutations: int = 0,
               framings_per_item: int | None = None) -> list:
    """sys1bench TaskItems: ``n`` per generator, expanded by its framings and ``permutations`` option shuffles.

    ``framings_per_item``: keep that many of an item's framings (sys1bench's canonical one among them, the
    rest drawn at random with ``seed``) instead of all of them (5-12 per item: every framing is a new prompt
    to score, so all of them cost hours on CPU).
    """
    from sys1bench.data import framings_path
    from sys1bench.framing import expand_framings, permute_options
    from sys1bench.framing.expand import load_framings
    from sys1bench.generators import get_generator

    out = []
    for g in generators:
        items = get_generator(g, n=n, seed=seed).generate()
        for it in items:
            it.questions = {k: q for k, q in it.questions.items() if not k.startswith("sub_")}
            it.metadata["generator"] = g
        if framings:
            items = expand_framings(items, load_framings(framings_path(g)))
            if framings_per_item:
                items = _sample_framings(items, framings_per_item, seed)
        if permutations:
            items = permute_options(items, permutations)
        out += items
    return out


def _sample_framings(items, k: int, seed: int) -> list:
    """Per task, its first (canonical) framing and ``k - 1`` of the others drawn at random, in their order."""
    import random

    by_task: dict = {}
    for it in items:
        by_task.setdefault(it.task_id, []).append(it)
    rng, out = random.Random(seed), []
    for group in by_task.values():
        keep = [0] + sorted(rng.sample(range(1, len(group)), min(k - 1, len(group) - 1)))
        out += [group[i] for i in keep]
    return out


def wire(q) -> dict:
    """A sys1bench question in the /v1/systemone form, as its jev_typesafe adapter writes it."""
    from sys1bench.adapters.jev_typesafe import to_vendor_question

    return to_vendor_question(q)


def truth_label(q):
    """The label calibrate_decisions reads: the option key, a bool, or the level."""
    if q.type == "noul":
        return str(q.ground_truth).lower() in ("true", "1", "yes")
    return str(q.ground_truth) if q.type == "choice" else int(q.ground_truth)


def truth_index(q) -> int:
    """The index of a sys1bench question's gold option in its own order (yes/no: 0 = yes)."""
    if q.type == "choice":
        return [c.key for c in q.criteria].index(str(q.ground_truth))
    if q.type == "noul":
        return 0 if str(q.ground_truth).lower() in ("true", "1", "yes") else 1
    return int(q.ground_truth)


def judge_questions(item) -> dict:
    """An item's questions as trie-judge questions, through the wire form and the server's one parser."""
    from judge.server.contract import question_from_wire

    return {k: question_from_wire(wire(q), where=k) for k, q in item.questions.items()}


def labelled_jsonl(items, path: Path) -> Path:
    """Items as ``judge calibrate-decisions`` JSON lines (one line per item, every question labelled)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps({"state": it.state, "questions": {k: wire(q) for k, q in it.questions.items()},
                                 "labels": {k: truth_label(q) for k, q in it.questions.items()}}) + "\n")
    return path


class CachedScorer(Closing):
    """A Scorer that keeps every query's log-probabilities in SQLite (see the module docstring).

    Parameters
    ----------
    inner : judge.engine.Scorer
        What scores the queries not in the cache.
    path : path
        The SQLite file (created; safe to share between processes).
    model_key : str
        Part of every key: scores of different models never mix.
    offline : bool
        Never score: a query not in the cache raises LookupError (figures derived from the cache).
    """

    def __init__(self, inner, path, model_key: str, *, offline: bool = False):
        self.inner, self.model_key, self.offline = inner, model_key, offline
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=120, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value BLOB)")
        self._db.commit()
        self._lock = threading.Lock()
        self.last_usage_ = {"input_tokens": 0}
        self.hits = self.misses = 0
        self.fed_tokens = 0

    # the protocol, delegated
    def setup(self):
        self.inner.setup()
        return self

    def close(self) -> None:
        """Close the SQLite file and the inner scorer."""
        with self._lock:
            self._db.close()
        self.inner.close()

    @property
    def tokenizer_(self):
        return self.inner.tokenizer_

    @property
    def end_id_(self):
        return self.inner.end_id_

    @property
    def model(self):
        return getattr(self.inner, "model", None)

    @property
    def model_(self):
        """The inner scorer's loaded model (fitted decision profiles read its hidden states)."""
        return getattr(self.inner, "model_", None)

    def memory_bound(self) -> dict:
        """The inner scorer's bound (`judge.engine.protocol.MemoryBounded`: the server sizes itself on it)."""
        return self.inner.memory_bound()

    def encode(self, pieces, *, add_special_tokens=False):
        return self.inner.encode(pieces, add_special_tokens=add_special_tokens)

    def option_ids(self, context, options, *, end_token=None, what="Option"):
        return self.inner.option_ids(context, options, end_token=end_token, what=what)

    def score_items(self, items, *, root=(), batch_size=8, progress=None, pack=1):
        return self.inner.score_items(items, root=root, batch_size=batch_size, progress=progress, pack=pack)

    def _key(self, q, first_token: bool) -> str:
        blob = json.dumps([self.model_key, [[t, bool(u)] for t, u in q.pieces], list(q.options), bool(first_token)],
                          ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def score(self, queries, *, root=None, first_token=False, batch_size=8):
        """Cached scores; the misses scored by ``inner`` in one call (``inner=None``: a miss is an error)."""
        queries = list(queries)
        keys = [self._key(q, first_token) for q in queries]
        with self._lock:
            found = {}
            for i in range(0, len(keys), 500):
                part = keys[i:i + 500]
                rows = self._db.execute(f"SELECT key, value FROM scores WHERE key IN ({','.join('?' * len(part))})",
                                        part).fetchall()
                found.update({k: np.frombuffer(v, dtype=np.float64).copy() for k, v in rows})
        todo = sorted({k: i for i, k in enumerate(keys) if k not in found}.values())
        fed = 0
        if todo and self.offline:
            raise LookupError(f"{len(todo)} of {len(queries)} queries are not in the cache; score them first "
                              f"(bench/decisions_quality.py run or datasets).")
        if todo:
            got = self.inner.score([queries[i] for i in todo], root=root if len(todo) == len(queries) else None,
                                   first_token=first_token, batch_size=batch_size)
            fed = int((self.inner.last_usage_ or {}).get("input_tokens", 0))
            with self._lock:
                for i, s in zip(todo, got):
                    s = np.asarray(s, dtype=np.float64)
                    found[keys[i]] = s
                    self._db.execute("INSERT OR REPLACE INTO scores VALUES (?, ?)", (keys[i], s.tobytes()))
                self._db.commit()
        self.misses += len(todo)
        self.hits += len(queries) - len(todo)
        self.fed_tokens += fed
        self.last_usage_ = {"input_tokens": fed}
        return [found[k].copy() for k in keys]
