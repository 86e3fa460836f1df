"""Issue 32: the whole walk on the user's own CSV from the shell, on a tiny model saved to a folder.

calibrate -> predict -> fit -> calibrate -> predict -> serve (a real ``judge serve`` process on
loopback, started and stopped here) -> predict --server; and the flags that cannot apply are errors
that name them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from judge.cli import main

REPO = Path(__file__).resolve().parents[1]
LABELS = ["billing", "cards", "login", "shipping", "refund"]
WORDS = {"billing": "I was charged twice on my invoice", "cards": "my card is blocked at the shop",
         "login": "I cannot sign in to my account", "shipping": "where is my parcel, it is late",
         "refund": "I want my money back for this order"}


def _csv(path: Path, n: int, offset: int) -> Path:
    rows = ["text,label"] + [f"\"{WORDS[LABELS[i % 5]]} (case {offset + i})\",{LABELS[i % 5]}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def walk(tiny_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("walk")
    return {"dir": d, "model": tiny_dir, "val": _csv(d / "val.csv", 40, 0), "train": _csv(d / "train.csv", 30, 100),
            "small": _csv(d / "small.csv", 10, 200),
            "texts": (d / "texts.txt"), "zs": d / "zero-shot", "fitted": d / "fitted"}


def test_calibrate_predict_fit_predict_serve(walk, capsys):
    w = walk
    w["texts"].write_text("I was charged twice\nmy card does not work\nwhere is my parcel?\n")
    # 1. calibrate zero-shot on the user's CSV (labels: the label column's values)
    assert main(["calibrate", str(w["val"]), "--model", w["model"], "--coverage", "0.8", "--out", str(w["zs"])]) == 0
    out = capsys.readouterr()
    assert f"judge calibrate: wrote {w['zs']}" in out.out and "in-sample: fitted on them" in out.out
    assert "cross-fitted" in out.out and f"judge predict --classifier {w['zs']}" in out.out
    saved = json.loads((w["zs"] / "classifier.json").read_text())
    assert saved["labels"] == sorted(LABELS) and saved["calibration"]["report"]["coverage_target"] == 0.8
    # 2. predict with the saved folder: every label's probability, abstentions with their reason
    assert main(["predict", "--classifier", str(w["zs"]), "--input", str(w["texts"]), "--abstain",
                 "--output", str(w["dir"] / "zs.jsonl")]) == 0
    recs = _records(w["dir"] / "zs.jsonl")
    assert len(recs) == 3 and all(len(r["probabilities"]) == 5 for r in recs)           # --top-k: all labels
    for r in recs:
        assert (r["label"] is None) == r["abstained"] == (r["abstain_reason"] is not None)
        if r["abstained"]:
            assert "is below the threshold" in r["abstain_reason"] and "keeps about 80%" in r["abstain_reason"]
    # 3. fit on the training CSV, then 4. calibrate the fitted folder on the held-out CSV, in place
    assert main(["fit", str(w["train"]), "--model", w["model"], "--out", str(w["fitted"])]) == 0
    out = capsys.readouterr().out
    assert "fitted" in out and "LinearHead(K=5" in out and "30 texts, 5 of 5 labels (6-6 per label)" in out
    assert f"judge calibrate HELD_OUT --classifier {w['fitted']} --out {w['fitted']}" in out
    assert main(["calibrate", str(w["val"]), "--classifier", str(w["fitted"]), "--coverage", "0.8",
                 "--out", str(w["fitted"])]) == 0
    saved = json.loads((w["fitted"] / "classifier.json").read_text())
    assert saved["adaptation"]["kind"] == "head" and saved["calibration"] is not None
    capsys.readouterr()
    # 5. predict with the fitted, calibrated folder
    assert main(["predict", "--classifier", str(w["fitted"]), "--input", str(w["texts"]), "--abstain",
                 "--output", str(w["dir"] / "fitted.jsonl")]) == 0
    local = _records(w["dir"] / "fitted.jsonl")
    # 6. serve the folder (a real `judge serve` process on loopback) and predict against it: same answers
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "judge.cli", "serve", "--classifier", str(w["fitted"]),
                             "--port", str(port), "--torch-threads", "1", "--log-level", "warning"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"judge serve did not start: {proc.communicate(timeout=10)[1][-2000:]}") from None
                time.sleep(0.5)
        assert main(["predict", "--server", url, "--input", str(w["texts"]), "--abstain",
                     "--output", str(w["dir"] / "served.jsonl")]) == 0
        served = _records(w["dir"] / "served.jsonl")
        assert [r["label"] for r in served] == [r["label"] for r in local]
        for a, b in zip(served, local):
            assert a["abstain_reason"] == b["abstain_reason"] and list(a["probabilities"]) == list(b["probabilities"])
            assert all(abs(a["probabilities"][k] - b["probabilities"][k]) < 1e-4 for k in a["probabilities"])
        # the decisions contract is still served beside it
        req = urllib.request.Request(url + "/v1/systemone", method="POST", headers={"content-type": "application/json"},
                                     data=json.dumps({"model": "jev-latest", "state": "I was charged twice",
                                                      "questions": {"q": {"type": "noul", "instructions": "Refund?"}}
                                                      }).encode())
        assert json.loads(urllib.request.urlopen(req, timeout=60).read())["answers"]["q"]["type"] == "noul"
        with pytest.raises(SystemExit, match=r"--labels and --method cannot apply with --server URL"):
            main(["predict", "--server", url, "--labels", "a,b", "--method", "exact"])
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    assert proc.returncode is not None


def test_flags_that_cannot_apply_are_errors_naming_them(walk, tmp_path):
    w = walk
    if not (w["zs"] / "classifier.json").exists():
        main(["calibrate", str(w["val"]), "--model", w["model"], "--out", str(w["zs"])])
    with pytest.raises(SystemExit, match=r"^judge predict: --labels cannot apply with --classifier DIR: the saved "
                                         r"classifier holds its labels, prompt and method"):
        main(["predict", "--classifier", str(w["zs"]), "--labels", "a,b"])
    with pytest.raises(SystemExit, match=r"^judge predict: --method cannot apply with --classifier DIR"), \
            pytest.warns(DeprecationWarning, match="--calibration is the older name of --classifier"):
        main(["predict", "--calibration", str(w["zs"]), "--method", "exact"])           # the older name too
    with pytest.raises(SystemExit, match=r"--api-key-env cannot apply without --server URL"):
        main(["predict", "--labels", "a,b", "--api-key-env", "K"])
    with pytest.raises(SystemExit, match=r"--top-k must be at least 1, got 0; leave it out to write all labels"):
        main(["predict", "--labels", "a,b", "--top-k", "0"])
    with pytest.raises(SystemExit, match=r"--abstain needs a classifier calibrated with a threshold: run `judge "
                                         r"calibrate DATA --target-accuracy T --out DIR`"):
        main(["predict", "--labels", "a,b", "--model", w["model"], "--abstain", "--input", str(w["texts"])])
    with pytest.raises(SystemExit, match=r"--target-accuracy cannot apply without --calibrate-on HELD_OUT"):
        main(["fit", str(w["train"]), "--model", w["model"], "--out", str(tmp_path / "x"), "--target-accuracy", "0.9"])
    with pytest.raises(SystemExit, match=r"^judge calibrate: calibrate\(target_accuracy=0\.9\) needs at least 29 "
                                         r"labelled texts"):
        main(["calibrate", str(w["small"]), "--model", w["model"], "--target-accuracy", "0.9",
              "--out", str(tmp_path / "y")])
    with pytest.raises(SystemExit, match=r"the CSV has no column 'intent' .* pass --label-column NAME"):
        main(["calibrate", str(w["val"]), "--model", w["model"], "--label-column", "intent", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"judge predict: --server 'http://127\.0\.0\.1:9' did not answer"):
        main(["predict", "--server", "http://127.0.0.1:9", "--input", str(w["texts"])])


def test_small_calibration_sets_warn_on_stderr(walk, tmp_path, capsys):
    w = walk
    assert main(["calibrate", str(w["small"]), "--model", w["model"], "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err
    assert "judge calibrate: warning: too few calibration texts: 10 labelled texts for 5 labels" in err


def test_every_option_of_every_command_has_help():
    from judge.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        for action in parser._actions:
            if action.dest != "help":
                assert action.help, f"judge {name} {action.option_strings or action.dest} has no help"
    from judge.classifier import METHODS
    from judge.cli._common import METHODS as CLI_METHODS

    assert CLI_METHODS == METHODS and "search" in CLI_METHODS


def test_classify_route_refuses_bad_requests_in_the_servers_shape(tiny_llama):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from judge import Classifier, Decider
    from judge.server.app import ServerConfig, create_app

    model, tok = tiny_llama
    clf = Classifier(LABELS, model, tokenizer=tok).setup()
    app = create_app(Decider(model, tok), ServerConfig(max_wait_ms=0, max_questions=4), classifier=clf,
                     classifier_name="tickets")
    with TestClient(app) as client:
        ok = client.post("/v1/classify", json={"texts": ["I was charged twice"], "top_k": 2}).json()
        assert ok["classifier"] == "tickets" and ok["labels"] == LABELS and ok["fitted"] is None
        assert len(ok["predictions"][0]["probabilities"]) == 2 and ok["usage"] == {"texts": 1}
        for body, msg in [({"text": "hi"}, r"texts: missing"), ({"texts": ["a"] * 5}, r"1 to 4 strings, got 5"),
                          ({"texts": ["ok", ""]}, r"texts\[1\]: expected a non-empty string"),
                          ({"texts": ["ok"], "top_k": 0}, r"top_k: expected null"),
                          ({"texts": ["ok"], "abstain": True}, r"the classifier 'tickets' has no abstention "
                                                               r"threshold; calibrate it with `judge calibrate")]:
            r = client.post("/v1/classify", json=body)
            assert r.status_code == 422, r.text
            assert re.search(msg, r.json()["detail"][0]["msg"]), r.json()
        # the decisions contract is unchanged beside it
        r = client.post("/v1/systemone", json={"state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}})
        assert r.status_code == 422 and "model" in json.dumps(r.json())
