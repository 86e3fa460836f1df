"""The vLLM backend behind the package's fronts, unchanged: Classifier, Decider, the server, ``judge batch``.

Each answers as with the transformers engine, to float32 rounding. The classifier and decider
share the session's SmolLM2 engine (same settings); ``judge batch --backend vllm`` runs the real
command in a subprocess: a local Ray cluster, one actor holding one vLLM engine (``slow``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("vllm")

from judge import Classifier, Decider  # noqa: E402
from judge.decisions import Choice, YesNo  # noqa: E402

LABELS = ["card_arrival", "card_linking", "exchange_rate", "pin_blocked", "refund_not_showing_up"]
TEXTS = ["my card has not arrived yet", "what rate do you use for euros?", "I typed my PIN wrong three times",
         "where is the refund I was promised?"]


def test_classifier_backend_vllm_end_to_end(smol, smol_hf):
    clf = Classifier(LABELS, backend="vllm", method="exact")
    ref = Classifier(LABELS, method="exact")
    np.testing.assert_allclose(clf.decision_function(TEXTS), ref.decision_function(TEXTS), atol=1e-4, rtol=0)
    assert clf.engine_.llm_ is smol.llm_  # one engine per setting in a process
    assert list(clf.predict(TEXTS)) == list(ref.predict(TEXTS))
    p = clf.predict_proba(TEXTS)
    assert p.shape == (len(TEXTS), len(LABELS)) and np.allclose(p.sum(1), 1)
    clf.calibrate(TEXTS * 2, ["card_arrival", "exchange_rate", "pin_blocked", "refund_not_showing_up"] * 2)
    assert clf.predict(TEXTS).shape == (len(TEXTS),)
    with pytest.raises(ValueError, match="think=True needs the transformers model"):
        Classifier(LABELS, backend="vllm", think=True).setup()


def test_classifier_search_scores_every_label(smol):
    clf = Classifier(LABELS, backend="vllm", decode_above=3)  # auto -> search; vLLM scores all labels
    assert clf.method_ == "search"
    s = clf.decision_function(TEXTS[:2])
    assert np.isfinite(s).all()
    assert list(clf.predict(TEXTS[:2])) == [LABELS[i] for i in s.argmax(1)]


def test_decider_backend_vllm(smol):
    qs = {"team": Choice(["Billing", "Cards", "Technical"], instructions="Which team?"), "angry": YesNo("Angry?")}
    state = {"ticket": "My card was charged twice and nobody answers!"}
    a = Decider(backend="vllm", bias=None).ask(state, qs)
    b = Decider(bias=None).ask(state, qs)
    for k in qs:
        np.testing.assert_allclose(list(a[k].probabilities.values()), list(b[k].probabilities.values()), atol=1e-4)
    assert Decider(backend="vllm").scorer_.setup().llm_ is smol.llm_


def test_server_backend_vllm(smol):
    import argparse

    from fastapi.testclient import TestClient

    from judge.cli import main  # noqa: F401  (the parser knows --backend)
    from judge.cli.serve import add_parsers
    from judge.server.app import ServerConfig, create_app

    p = argparse.ArgumentParser()
    add_parsers(p.add_subparsers(dest="command"))
    assert p.parse_args(["serve", "--backend", "vllm"]).backend == "vllm"
    body = {"model": "jev-latest", "state": "I was charged twice and want my money back.",
            "questions": {"q": {"type": "noul", "instructions": "Is the customer asking for money back?"}}}
    with TestClient(create_app(Decider(backend="vllm"), ServerConfig())) as c:
        r = c.post("/v1/systemone", json=body)
    assert r.status_code == 200, r.text
    assert 0.0 <= r.json()["answers"]["q"]["noul"] <= 1.0


@pytest.mark.slow  # a Ray cluster and a second engine: about 3 minutes on two cores (run with -m slow)
def test_batch_cli_backend_vllm(tmp_path, smol):
    pytest.importorskip("ray")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    cmd = [sys.executable, "-m", "judge.cli", "batch", str(src), "--labels", ",".join(LABELS), "--backend", "vllm",
           "--actors", "1", "--num-cpus-per-actor", "1", "--output", str(tmp_path / "out")]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    import pyarrow.parquet as pq

    rows = sorted(pq.read_table(str(tmp_path / "out")).to_pylist(), key=lambda r: r["id"])
    want = Classifier(LABELS, backend="vllm").predict_proba(TEXTS)
    np.testing.assert_allclose(np.array([r["probabilities"] for r in rows]), want, atol=1e-4)
