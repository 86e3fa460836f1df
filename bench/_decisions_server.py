"""bench/decisions_quality.py's run through the server: sys1bench's adapter against the app on a test client.

What it deliberately does not do: choose variants or compute figures (decisions_quality.py does).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

__all__ = ["parsed", "through_server"]


def parsed(item):
    from bench._decisions_data import wire
    from judge.server.contract import question_from_wire

    return {k: question_from_wire(wire(q)) for k, q in item.questions.items()}


def through_server(decider, items, label: str):
    """PredictionRows for ``items``: each item's questions scored once, then every request through the app."""
    from fastapi.testclient import TestClient
    from sys1bench.adapters.jev_typesafe import JevTypeSafeAdapter
    from sys1bench.runners.benchmark_runner import run_items

    from judge.server import ServerConfig, create_app

    by_task = defaultdict(list)
    for it in items:
        by_task[it.task_id].append(it)
    rows, t0, t_score = [], time.time(), 0.0
    app = create_app(decider, ServerConfig(max_wait_ms=0, served_name=label))
    ad = JevTypeSafeAdapter(model_id="jev-latest", url="http://testserver/v1/systemone", api_key="local",
                            allow_alias=True, deployment="local", max_retries=1, timeout_s=600)
    with TestClient(app) as client:
        ad._client = client
        for i, group in enumerate(by_task.values()):
            t1 = time.time()
            decider.log_probs([(it.state, parsed(it)) for it in group])  # one scoring call per item: fills the cache
            t_score += time.time() - t1
            rows += run_items(group, ad)
            if i % 10 == 0:
                print(f"  {label}: {i + 1}/{len(by_task)} items, {time.time() - t0:.0f} s ({t_score:.0f} s scoring)",
                      file=sys.stderr, flush=True)
    bad = [r for r in rows if r.error]
    if bad:
        raise SystemExit(f"{len(bad)} rows failed; first: {bad[0].error}")
    return rows
