"""Every benchmark script answers ``--help`` quickly, and runs for real on a tiny model.

``--help`` runs each ``python -m bench.NAME`` in a subprocess from the repository root, as a
user would. The real runs are each script's smallest: the random-weight model of
``--model tiny`` (`bench._common.load_bench_model`), a handful of texts, outputs
in a temporary folder. Most run in this process through the script's ``main(argv)``
(a second or two each once the tiny model is built; the torch thread count a script
sets is restored). Runs that need a subprocess or a Ray cluster take longer and are
marked ``slow``. The numbers the runs print mean nothing: they show that the
scripts still work against the library's public names.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import shared_path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (REPO / "bench").glob("*.py") if not p.name.startswith("_"))


def _subprocess(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def _main(name: str, *argv: str):
    """``bench/NAME.py ARGV`` in this process; the torch thread count it sets is put back."""
    import torch

    mod = importlib.import_module(f"bench.{name}")
    threads = torch.get_num_threads()
    try:
        return mod.main([str(a) for a in argv])
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny(smollm2):
    """The ``--model tiny`` pair, built once (its tokenizer is the packaged model's)."""
    from bench._common import load_bench_model

    return load_bench_model("tiny")


# ----------------------------------------------------------------------------- --help, every script
def test_every_script_is_listed():
    assert {"accuracy.py", "engine.py", "masks.py", "throughput.py", "serve.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    out = _subprocess("-m", f"bench.{script[:-3]}", "--help", timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage:" in out.stdout


# ----------------------------------------------------------------------------- no model
def test_report_renders_the_committed_results(capsys):
    _main("report")
    out = capsys.readouterr().out
    assert "### Masks" in out and "### Throughput" in out


def test_calibration_variants_skips_folders_without_a_calibrated_run(tmp_path, capsys):
    (tmp_path / "not_a_run").mkdir()
    _main("calibration_variants", "--results", tmp_path, "--json", tmp_path / "v.json")
    assert capsys.readouterr().out.split() == "dataset bias T acc ECE ECE(q) NLL".split()
    assert json.loads((tmp_path / "v.json").read_text()) == []  # tests/cli/test_cli.py runs it on a real run


def test_gpu_fails_clearly_without_a_device(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here: bench/gpu.py would run in full")
    assert _main("gpu", "--all") == 2
    assert "no CUDA device here" in capsys.readouterr().err


def test_gpu_dry_run_writes_every_section(tmp_path):
    """The GPU command's CPU dry run (``--cpu --quick``): every section runs on the real code paths."""
    import time

    t0 = time.perf_counter()
    out = _subprocess("-m", "bench.gpu", "--all", "--cpu", "--quick", "--data-dir", str(shared_path("datasets")),
                      "--json", str(tmp_path / "g.json"), timeout=300)
    took = time.perf_counter() - t0
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rec = json.loads((tmp_path / "g.json").read_text())
    sections = ("env", "exactness", "throughput", "huge_k", "dtype", "vllm")
    assert set(rec) >= set(sections)
    assert not any("error" in rec[s] for s in sections)
    assert rec["huge_k"]["same_answers"] == 1.0 and rec["huge_k"]["certified"] == 1.0
    assert rec["exactness"]["float32"]["max_abs_diff"] < 1e-4  # the engine against the brute force
    rows = rec["throughput"]["rows"]
    assert {k.split("@")[0] for k in rows} == {"exact", "predict", "certified", "certified_no_prior", "first_token",
                                               "exact_bf16"}
    assert all(r["texts_per_s"] > 0 for r in rows.values())
    assert rows["certified@1"]["certified"] == 1.0 and rows["certified@1"]["tokens_fed_per_text"] > 0
    # the vLLM section runs only where .venv-vllm exists (a developer's machine; CI's main job runs before it is
    # built): its own subprocess's seconds are not the dry run's budget
    vllm_s = 0.0 if "skipped" in rec["vllm"] else rec["seconds"]["vllm"]
    assert took - vllm_s < 180, (f"the dry run took {took:.0f} s, {vllm_s:.0f} s of it in the vLLM section (CI's "
                                 f"budget for the rest: about a minute on a quiet machine)")


def test_token_classes(tmp_path):
    _main("token_classes", "--tokenizers", "gpt2", "--root", shared_path("tokenizers"), "--k", "10",
          "--repeats", "1", "--json", tmp_path / "tc.json")
    (rec,) = json.loads((tmp_path / "tc.json").read_text())
    assert rec["tokenizer"] == "gpt2" and rec["K"] == 10 and 1 < rec["classes"] < rec["vocab"]


@pytest.mark.slow
def test_masks_ours(tmp_path):
    out = _subprocess("-m", "bench.masks", "--tokenizer", str(shared_path("tokenizers", "gpt2")), "--k", "10",
                      "--peers", "", "--families", "tools,icd", "--repeats", "1", "--walk-steps", "20",
                      "--json", str(tmp_path / "m.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    recs = json.loads((tmp_path / "m.json").read_text())
    assert [(r["family"], r["status"]) for r in recs] == [("tools", "ok"), ("icd", "ok")]
    assert all(r["fill_kernel_us"] > 0 for r in recs)


def test_vllm_processor_beside_xgrammar(tmp_path, capsys):
    pytest.importorskip("xgrammar")
    _main("vllm_processor", "--tokenizer", shared_path("tokenizers", "gpt2"), "--k", "20", "--batches", "1,3",
          "--repeats", "1", "--steps", "6", "--json", tmp_path / "p.json")
    rec = json.loads((tmp_path / "p.json").read_text())
    assert [(p["K"], p["B"]) for p in rec["points"]] == [(20, 1), (20, 3)]
    assert all(p["mask_agree"] == 1.0 and p["ours_ms"] > 0 and p["xgrammar_ms"] > 0 for p in rec["points"])
    assert rec["compile"]["20"]["xgrammar_s"] > 0
    assert "| 20 | 3 |" in capsys.readouterr().out


# ----------------------------------------------------------------------------- --model tiny
def test_accuracy_score_is_cached_and_resumes(tiny, datasets_dir, tmp_path):
    from bench._accuracy_cache import load_scores, variant_scores

    args = ["score", "--dataset", "trec", "--chunk", "2", "--model", "tiny", "--cache", tmp_path,
            "--data-dir", datasets_dir]
    _main("accuracy", *args, "--n", "4")
    s4, meta = load_scores(tmp_path, "tiny", "trec", "default", "validation")
    assert s4.shape == (4, 6) and meta["labels"] and len(meta["columns"]) == 6
    _main("accuracy", *args, "--n", "6")  # two more rows; the first four are read back
    s6, cf, meta = variant_scores(tmp_path, "tiny", "trec", "default", "validation")
    assert s6.shape == (6, 6) and cf.shape == (3, 6) and meta["seconds_per_text"] > 0
    assert (s6[:4] == s4).all()


def test_throughput(tiny, datasets_dir, tmp_path):
    peers = "generate" if importlib.util.find_spec("xgrammar") else "none"
    assert _main("throughput", "--model", "tiny", "--data-dir", datasets_dir, "--n", "2", "--repeats-ours", "1",
                 "--peers", peers, "--n-generate", "1", "--json", tmp_path / "t.json") == 0
    recs = {r["engine"]: r for r in json.loads((tmp_path / "t.json").read_text())}
    assert recs["ours"]["status"] == "ok" and recs["ours"]["texts_per_s"] > 0
    assert all(r["status"] == "ok" for r in recs.values()), recs


@pytest.mark.slow
def test_throughput_against_per_label_and_cappr(smollm2, datasets_dir, tmp_path):
    if importlib.util.find_spec("cappr") is None:  # not importorskip: cappr imports only after the script's shims
        pytest.skip("cappr is not installed (the [bench] extra)")
    out = _subprocess("-m", "bench.throughput", "--model", "tiny", "--data-dir", str(datasets_dir), "--n", "2",
                      "--repeats-ours", "1", "--peers", "per-label,cappr", "--n-per-label", "1", "--n-cappr", "2",
                      "--json", str(tmp_path / "t.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    recs = {r["engine"]: r for r in json.loads((tmp_path / "t.json").read_text())}
    assert [recs[e]["status"] for e in ("ours", "per-label", "cappr")] == ["ok"] * 3
    assert recs["ours"]["agreement_with_per_label"] == 1.0 and recs["ours"]["max_abs_logprob_diff"] < 1e-4


def test_engine_exactness_and_throughput(tiny, datasets_dir, tmp_path):
    _main("engine", "exactness", "--archs", "llama", "--skip-real", "--skip-gemma", "--json", tmp_path / "e.json")
    rep = json.loads((tmp_path / "e.json").read_text())
    assert rep["silent_mismatches"] == 0 and [r["arch"] for r in rep["records"]] == ["llama"]
    _main("engine", "throughput", "--model", "tiny", "--data-dir", datasets_dir, "--n", "4", "--before", "",
          "--json", tmp_path / "t.json")
    variants = json.loads((tmp_path / "t.json").read_text())["variants"]
    assert variants["predict (bounded)"]["argmax_identical"] == 4 and "bare forward" in variants


def test_huge_k(tiny, tmp_path):
    _main("huge_k", "--model", "tiny", "--k", "20", "--n", "1", "--json", tmp_path / "h.json")
    rec = json.loads((tmp_path / "h.json").read_text())
    assert rec["K"] == 20 and rec["valid"] and len(rec["predictions"]) == 1


def test_injection(tiny, datasets_dir, tmp_path):
    assert _main("injection", "--model", "tiny", "--data-dir", datasets_dir, "--labels", "2", "--per-label", "1",
                 "--check-per-label", "0", "--out", tmp_path / "i.json") == 0
    res = json.loads((tmp_path / "i.json").read_text())
    assert res["n_texts"] == 2 and res["special_tokens"]["forged_text_adds_no_special_ids"]


def test_serve(tiny, tmp_path):
    for mod in ("fastapi", "uvicorn", "httpx"):
        pytest.importorskip(mod)
    assert _main("serve", "--model", "tiny", "--requests", "2", "--concurrency", "1", "--questions", "2",
                 "--repeats", "1", "--json", tmp_path / "s.json") == 0
    rec = json.loads((tmp_path / "s.json").read_text())
    assert rec["levels"][0]["requests"] == 2 and rec["q_vs_separate"]["questions"] == 2


def test_serve_peers(tiny, tmp_path):
    pytest.importorskip("sys1bench")
    assert _main("serve_peers", "--model", "tiny", "--n", "1", "--generators", "support_tickets",
                 "--calibration-n", "0", "--json", tmp_path / "p.json") == 0
    assert "trie-judge" in json.loads((tmp_path / "p.json").read_text())["results"]


def test_serve_suites(tiny, tmp_path):
    pytest.importorskip("sys1bench")
    for mod in ("fastapi", "uvicorn", "httpx"):
        pytest.importorskip(mod)
    assert _main("serve_suites", "--model", "tiny", "--n", "1", "--generators", "support_tickets", "--framings",
                 "f0", "--perms", "0", "--json", tmp_path / "s.json") == 0
    assert "support_tickets" in json.loads((tmp_path / "s.json").read_text())["sys1bench"]


@pytest.mark.slow
def test_ray_batch(smollm2, datasets_dir, tmp_path):
    pytest.importorskip("ray")
    out = _subprocess("-m", "bench.ray_batch", "--model", "tiny", "--data-dir", str(datasets_dir), "--n", "4",
                      "--actors", "1", "--json", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    recs = json.loads((tmp_path / "r.json").read_text())["records"]
    assert [r["engine"] for r in recs] == ["single-process", "ray-1"] and recs[1]["agree_with_single"] == 1.0


def test_first_token(tiny, datasets_dir, tmp_path):
    assert _main("first_token", "--model", "tiny", "--data-dir", datasets_dir, "--n", "2", "--subsets", "1",
                 "--trec-n", "4", "--json", tmp_path / "f.json") == 0
    rows = json.loads((tmp_path / "f.json").read_text())["rows"]
    assert [r["task"] for r in rows][0] == "trec" and len(rows) == 4


def test_search_small_and_scaling(tiny, datasets_dir, tmp_path):
    assert _main("search", "small", "--model", "tiny", "--data-dir", datasets_dir, "--n", "3",
                 "--datasets", "banking77", "--json", tmp_path / "s.json") == 0
    row = json.loads((tmp_path / "s.json").read_text())["rows"][0]
    assert row["argmax_identical"] == 3 and row["certified"] == 3
    pytest.importorskip("simple_icd_10_cm")
    assert _main("search", "scaling", "--model", "tiny", "--n", "1", "--ks", "50", "--families", "tools,icd",
                 "--full-up-to", "50", "--json", tmp_path / "k.json") == 0
    rows = json.loads((tmp_path / "k.json").read_text())["rows"]
    assert [r["K"] for r in rows] == [50, 50] and all(r["certified"] == 1.0 for r in rows)


def test_fit_predict_cost(tiny, datasets_dir, tmp_path):
    _main("fit_predict_cost", "--model", "tiny", "--datasets", "trec", "--per-class", "2", "--n-test", "4",
          "--repeats", "1", "--data-dir", datasets_dir, "--json", tmp_path / "c.json")
    (row,) = json.loads((tmp_path / "c.json").read_text())
    assert row["dataset"] == "trec" and row["n_train"] == 2 * row["K"] and row["fitted_cpu_s"] > 0
    assert "answer_states" in row["fitted_parts_cpu_s"]


def test_fit_curve_rows_with_the_tuned_embedder_and_the_setfit_peer(capsys):
    """bench.fit_curve's rows on a toy point: the head, the tuned embedder + LR and the baselines each give a
    metrics row with its cost; SetFit runs where it is installed and is said 'not run' where it is not."""
    import numpy as np

    from bench import fit_curve
    from judge.encoders import SentenceEncoder

    enc, words = SentenceEncoder(), [["card", "lost", "stolen"], ["rate", "exchange", "euro"], ["refund", "back"]]

    def split(n, seed, name):
        r = np.random.default_rng(seed)
        y = np.arange(n) % 3
        texts = [" ".join([*r.choice(words[c], 1), *r.choice(sum(words, []), 3)]) + f" {i}" for i, c in enumerate(y)]
        return {"texts": texts, "y": y, "labels": ["card", "rate", "refund"], "idx": np.arange(n), "name": name,
                "minilm": enc(texts).astype(float), "states": r.normal(size=(n, 8)), "scores": np.full((n, 3), -1.1)}

    src, ev, val = split(12, 0, "pool4"), split(30, 1, "test"), split(30, 2, "validation")
    L = np.asarray(enc(["card", "rate", "refund"]), float)
    out = fit_curve.point("toy", 4, ev, val, src, L, 3, calibrate=True,
                          methods=["default", "tuned-lr", "minilm", "tfidf", "setfit"], label_txt=["card", "rate", "refund"],
                          setfit_iterations=1)
    assert list(out) == ["head (fit default)", "tuned MiniLM + LR", "MiniLM + LR", "TF-IDF + LR", "SetFit"]
    for name in ("head (fit default)", "tuned MiniLM + LR", "MiniLM + LR", "TF-IDF + LR"):
        row = out[name]
        assert row["n_train"] == 12 and row["draws"] == 1 and row["fit_seconds"] > 0 and 0 <= row["accuracy"] <= 1
    assert out["head (fit default)"]["predict_texts_per_s"] > 0 and out["tuned MiniLM + LR"]["tuning_steps"] == [8]  # 4 batches (one text per class) x 2 epochs
    if importlib.util.find_spec("setfit") is None:
        assert out["SetFit"].startswith("not run: setfit is not installed")
    else:
        assert out["SetFit"]["num_iterations"] == [1]
    with pytest.raises(SystemExit, match="unknown --methods"):
        fit_curve.main(["report", "--dkeys", "trec", "--methods", "default,nope"])


@pytest.mark.slow
def test_fit_curve_tuned_head_reads_the_test_texts_through_its_tuned_embedder():
    """The tuned row's head (six tunings: five folds and the final one) scores new texts through its own tuned
    embedder, not the cached frozen embeddings: its scores differ from those the frozen features give."""
    import numpy as np

    from bench import fit_curve
    from judge.encoders import SentenceEncoder

    enc, words = SentenceEncoder(), [["card", "lost", "stolen"], ["rate", "exchange", "euro"], ["refund", "back"]]
    r = np.random.default_rng(0)
    y = np.arange(42) % 3
    texts = [" ".join([*r.choice(words[c], 1), *r.choice(sum(words, []), 3)]) + f" {i}" for i, c in enumerate(y)]
    d = {"texts": texts, "y": y, "minilm": enc(texts).astype(float), "states": r.normal(size=(42, 8)),
         "scores": np.full((42, 3), -1.1)}
    ev = {k: v[30:] for k, v in d.items()}
    L = np.asarray(enc(["card", "rate", "refund"]), float)
    head, why = fit_curve.head_of(d, np.arange(30), L, 3, tune=True, label_txt=["card", "rate", "refund"])
    assert why is None and head.report["tuned"]
    s = fit_curve.head_scores(head, ev, L)
    assert s.shape == (12, 3) and np.allclose(np.exp(s).sum(1), 1)
    frozen = fit_curve.frozen_head_scores(head, ev, L)  # the same head reading the frozen embeddings
    assert not np.allclose(s, frozen)


def test_fit_curve_reads_a_pool_from_a_larger_pools_cache(monkeypatch):
    """pool4's rows are a prefix of pool16's, so with no training-split cache its features come from pool16's."""
    import numpy as np

    from bench import fit_curve

    idx16 = np.array([3, 5, 8, 10, 11, 20])
    monkeypatch.setattr(fit_curve, "rows", lambda d, sel, data: (None, None, None, idx16))
    feats = {"pool16": np.arange(6, dtype=float)[:, None] * np.ones((1, 2))}
    monkeypatch.setattr(fit_curve, "_ck", lambda d, sel, kind: feats.get(sel))
    got = fit_curve._pool_rows("x", "pool4", np.array([5, 10, 20]), "states")
    assert got[:, 0].tolist() == [1.0, 3.0, 5.0]
    assert fit_curve._pool_rows("x", "pool4", np.array([5, 7]), "states") is None  # row 7 is in no cached pool
