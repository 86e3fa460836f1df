"""The `judge` command on a tiny model saved to a folder (no network)."""

from __future__ import annotations

import io
import json

import pytest

from judge.cli import main


def test_predict_from_stdin_lines(tiny_dir, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("my card is late\nwhat is the rate\n"))
    assert main(["predict", "--labels", "card_arrival,exchange_rate,pin_blocked", "--model", tiny_dir]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["text"] for r in rows] == ["my card is late", "what is the rate"]
    for r in rows:
        assert r["label"] in {"card_arrival", "exchange_rate", "pin_blocked"} and r["abstained"] is False
        assert len(r["probabilities"]) == 3 and abs(sum(r["probabilities"].values()) - 1) < 1e-4


def test_predict_csv_and_jsonl_files(tiny_dir, tmp_path):
    (tmp_path / "in.csv").write_text("id,body\n1,card late\n2,\"rate, please\"\n")
    (tmp_path / "labels.txt").write_text("card_arrival\nexchange_rate\n")
    out = tmp_path / "out.jsonl"
    main(["predict", "--labels", str(tmp_path / "labels.txt"), "--model", tiny_dir, "--input",
          str(tmp_path / "in.csv"), "--column", "body", "--output", str(out), "--top-k", "1"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in rows] == ["card late", "rate, please"] and len(rows[0]["probabilities"]) == 1
    (tmp_path / "in.jsonl").write_text('{"text": "card late"}\n"rate?"\n')
    main(["predict", "--labels", "a,b", "--model", tiny_dir, "--input", str(tmp_path / "in.jsonl"),
          "--output", str(out)])
    assert len(out.read_text().splitlines()) == 2
    with pytest.raises(SystemExit, match=r"the CSV has no column 'text'"):
        main(["predict", "--labels", "a,b", "--model", tiny_dir, "--input", str(tmp_path / "in.csv")])


def test_evaluate_writes_report(tiny_dir, datasets_dir, tmp_path, capsys):
    out = tmp_path / "ev"
    args = ["evaluate", "trec", "--model", tiny_dir, "--data-dir", str(datasets_dir), "--limit", "12",
            "--calibrate-on", "validation", "--calibration-limit", "12", "--target-accuracy", "0.5",
            "--baseline", "generate", "--out", str(out)]
    with pytest.warns(UserWarning):
        assert main(args) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["n"] == 12 and m["validity"] == 1.0 and len(m["sample"]["indices"]) == 12
    for block in ("uncalibrated", "calibrated"):
        assert {"accuracy", "ece", "mce", "brier", "nll", "aurc", "selective_accuracy_at_50"} <= set(m[block])
    assert 0 <= m["baseline_generate"]["validity"] <= 1
    for f in ("predictions.csv", "reliability.png", "risk_coverage.png", "classifier/classifier.json"):
        assert (out / f).exists(), f
    assert "judge evaluate" in capsys.readouterr().out
    # a second run resumes from the saved scores and gives the same report
    main([a for a in args if a not in ("--baseline", "generate")])
    again = json.loads((out / "metrics.json").read_text())
    assert again["accuracy"] == m["accuracy"]


def test_bench_runs(capsys):
    from .conftest import shared_path

    main(["bench", "--tokenizer", str(shared_path("tokenizers", "gpt2")), "--k", "10,100", "--repeats", "1"])
    assert "K=100" in capsys.readouterr().out
