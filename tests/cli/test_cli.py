"""The `judge` command on a tiny model saved to a folder (no network)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judge.cli import build_parser, main

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ["predict", "calibrate", "fit", "evaluate", "bench", "serve", "calibrate-decisions", "batch"]


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
    # what evaluate wrote (score checkpoints, the saved classifier) is what bench/calibration_variants.py reads
    from bench.calibration_variants import main as bias_variants

    bias_variants(["--results", str(tmp_path), "--data-dir", str(datasets_dir), "--json", str(tmp_path / "v.json")])
    rows = json.loads((tmp_path / "v.json").read_text())
    assert {r["bias"] for r in rows} >= {"none", "batch"} and {r["dataset"] for r in rows} == {"trec"}
    # a second run resumes from the saved scores and gives the same report
    main([a for a in args if a not in ("--baseline", "generate")])
    again = json.loads((out / "metrics.json").read_text())
    assert again["accuracy"] == m["accuracy"]


def test_bench_runs(capsys):
    from tests.conftest import shared_path

    main(["bench", "--tokenizer", str(shared_path("tokenizers", "gpt2")), "--k", "10,100", "--repeats", "1"])
    assert "K=100" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the parser, no model
@pytest.mark.parametrize("command", COMMANDS)
def test_every_subcommand_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    assert f"usage: judge {command}" in capsys.readouterr().out


def test_python_m_runs_and_the_parser_imports_no_model_library():
    code = ("import sys, judge.cli, judge.io, judge.evaluation; judge.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers', 'pandas', 'sklearn', 'matplotlib', 'ray', "
            "'fastapi', 'uvicorn') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
    out = subprocess.run([sys.executable, "-m", "judge.cli", "--help"], capture_output=True, text=True, cwd=REPO,
                         env=env, timeout=120)
    assert out.returncode == 0 and all(c in out.stdout for c in COMMANDS), out.stderr


def test_input_errors_exit_with_the_prefix_before_any_model_loads():
    with pytest.raises(SystemExit, match=r"^judge: --labels 'only' gave a single label 'only'"):
        main(["predict", "--labels", "only", "--model", "/nonexistent/model"])
    with pytest.raises(SystemExit, match=r"^judge predict: pass --labels FILE\|a,b,c"):
        main(["predict", "--model", "/nonexistent/model"])


def test_serve_and_calibrate_decisions_parsers(capsys):
    p = build_parser()
    a = p.parse_args(["serve", "--port", "9000", "--api-key-env", "K", "--calibration", "p.json"])
    assert (a.port, a.host, a.api_key_env, a.calibration, a.func.__name__) == (9000, "127.0.0.1", "K", "p.json",
                                                                               "run_serve")
    c = p.parse_args(["calibrate-decisions", "f.jsonl", "--out", "p.json"])
    assert c.func.__name__ == "run_calibrate_decisions" and c.out == "p.json" and not c.no_bias
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    os.environ.pop("JUDGE_TEST_UNSET_KEY", None)
    assert main(["serve", "--api-key-env", "JUDGE_TEST_UNSET_KEY"]) == 2
    assert "JUDGE_TEST_UNSET_KEY: that environment variable is unset" in capsys.readouterr().err


@pytest.fixture
def no_bind(monkeypatch):
    """``judge serve`` up to the point of listening: the hosts it would have bound, nothing bound.

    `judge.server.shutdown.DrainingServer` is a `uvicorn.Server`: its ``run`` records the host and
    returns as a server that started and was stopped; ``uvicorn.run`` fails the test if reached."""
    uvicorn = pytest.importorskip("uvicorn")
    pytest.importorskip("fastapi")
    hosts = []

    def run(self, sockets=None):
        hosts.append(self.config.host)
        self.started = True

    def never(*args, **kwargs):
        raise AssertionError("judge serve called uvicorn.run, which binds a socket")

    monkeypatch.setattr(uvicorn.Server, "run", run)
    monkeypatch.setattr(uvicorn, "run", never)
    return hosts


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "192.168.0.7", "example.org", "localhost.example.org"])
def test_serve_beyond_loopback_without_a_key_is_refused_before_anything_loads(host, no_bind, monkeypatch, capsys):
    import judge.engine

    def no_engine(*args, **kwargs):
        raise AssertionError("the refusal must come before the model is set up")

    monkeypatch.setattr(judge.engine, "Engine", no_engine)
    assert main(["serve", "--host", host, "--port", "8123", "--model", "/nonexistent/model"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"judge serve --host {host!r}: that is not a loopback address (127.0.0.0/8, ::1, "
                          f"localhost), so anyone who can reach port 8123 could use the model, and no key is required;")
    assert "pass --api-key-env VAR" in err and "or --allow-unauthenticated" in err and "--host 127.0.0.1" in err
    assert no_bind == []


def test_allow_unauthenticated_or_a_key_serves_beyond_loopback(tiny_dir, no_bind, monkeypatch, capsys):
    assert main(["serve", "--host", "0.0.0.0", "--allow-unauthenticated", "--model", tiny_dir]) == 0
    monkeypatch.setenv("JUDGE_TEST_SERVE_KEY", "s3cret")
    assert main(["serve", "--host", "10.1.2.3", "--api-key-env", "JUDGE_TEST_SERVE_KEY", "--model", tiny_dir]) == 0
    assert no_bind == ["0.0.0.0", "10.1.2.3"]
    assert "not a loopback address" not in capsys.readouterr().err


def test_serve_fuses_choices_as_the_decider_does_on_the_packaged_model_only(tiny_dir, no_bind, monkeypatch):
    """judge serve hands its engine to the Decider as a scorer; the packaged model's choice fusion must survive that
    (it did not: the served answers were the LM alone while Decider() fused, bench/results/decisions_guard_audit_fused.md)."""
    pytest.importorskip("sentence_transformers")
    import judge.server.app
    from judge.decisions import Decider

    seen = []
    real = judge.server.app.create_app
    monkeypatch.setattr(judge.server.app, "create_app", lambda decider, *a, **kw: seen.append(decider) or real(decider, *a, **kw))
    assert main(["serve"]) == 0 and main(["serve", "--model", tiny_dir]) == 0
    packaged, other = seen
    assert packaged.fuser_.fusion == Decider().fuser_.fusion is not None
    assert other.fuser_.fusion is None  # beside another model: the LM alone, as Decider(model) answers


def test_loopback_serves_without_a_key_as_before(tiny_dir, no_bind):
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        assert main(["serve", "--host", host, "--model", tiny_dir]) == 0, host
    assert main(["serve", "--model", tiny_dir]) == 0  # the default host
    assert no_bind == ["127.0.0.1", "127.0.0.2", "localhost", "::1", "127.0.0.1"]


def test_serve_help_names_the_flags_that_guard_a_public_host(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--allow-unauthenticated" in out and "needs --api-key-env, or --allow-unauthenticated" in out


def test_batch_parser_needs_labels_or_a_classifier():
    a = build_parser().parse_args(["batch", "in.csv", "more/", "--labels", "a,b", "--output", "out"])
    assert (a.inputs, a.labels, a.actors, a.func.__module__) == (["in.csv", "more/"], "a,b", 1, "judge.cli.batch")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["batch", "in.csv", "--output", "out"])


@pytest.mark.parametrize("command", ["calibrate-decisions", "fit-decisions"])
def test_labelled_file_commands_name_the_extra_when_pydantic_is_missing(command, tmp_path):
    """The wire parser is pydantic's: without it the command says which extra to install (exit 2), not a traceback.

    Run in a fresh interpreter: blocking pydantic here would leave this process's ``judge.server``
    package half re-imported (its submodules no longer its attributes) for the tests after it.
    """
    import subprocess
    import sys

    path = tmp_path / "l.jsonl"
    path.write_text('{"state": "x", "question": {"type": "noul"}, "label": true}\n')
    code = ("import sys; sys.modules['pydantic'] = None\n"  # import pydantic -> ModuleNotFoundError
            "from judge.cli import main\n"
            f"sys.exit(main([{command!r}, {str(path)!r}, '--out', {str(tmp_path / 'p.json')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "pydantic" in done.stderr and "trie-judge[serve]" in done.stderr
    assert "Traceback" not in done.stderr
