"""judge.distributed on a local 2-CPU Ray cluster, checked against the single-process Classifier.

A random-weight 2-layer Llama over the real SmolLM2 tokenizer is saved to a
temporary folder, which every actor (and the reference) loads by path. The
reference is `judge.Classifier.predict_proba` on the same rows in this process;
it shares the model loader with the actors but not the batching, the Ray
plumbing or the output columns, which are what is under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from judge import distributed as dist  # noqa: E402
from judge.classifier import Classifier  # noqa: E402

LABELS = ["card_arrival", "exchange_rate", "refund_not_showing_up", "lost_or_stolen_card", "top_up_failed"]
N_ROWS = 240
BASE = ["Where is my new card?", "What rate do you use for euros?", "My refund never arrived",
        "Someone stole my wallet", "The top up did not go through", "hi", "Can I pay in yen, and how much?",
        "I was charged twice for one coffee, please help me get my money back"]


def _rows(n=N_ROWS):
    return [{"id": i, "text": f"{BASE[i % len(BASE)]} (ticket {i})", "source": f"s{i % 3}"} for i in range(n)]


@pytest.fixture(scope="module")
def cluster():
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}})
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import tests/
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield ctx
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, smollm2):
    """The tiny random Llama (lm_head x20) and the SmolLM2 tokenizer, saved with save_pretrained."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = smollm2[1]
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    d = tmp_path_factory.mktemp("tiny_llama")
    model.save_pretrained(d)
    tok.save_pretrained(d)
    return str(d)


@contextlib.contextmanager
def _one_thread():
    """Ray runs each 1-CPU actor with one torch thread; CPU kernels round differently with more
    threads, so the single-process reference runs with one thread too (bit-identity is per thread count)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


@pytest.fixture(scope="module")
def reference(tiny_dir):
    """Single-process probabilities of every row, batch-invariant (bit-exact) and batched."""
    texts = [r["text"] for r in _rows()]
    with _one_thread():
        exact = Classifier(LABELS, tiny_dir, batch_invariant=True, progress=False).predict_proba(texts)
        batched = Classifier(LABELS, tiny_dir, batch_size=16, progress=False).predict_proba(texts)
    return exact, batched


def _dataset(blocks=8):
    return ray.data.from_items(_rows(), override_num_blocks=blocks)


def _by_id(rows):
    ids = [r["id"] for r in rows]
    return ids, {r["id"]: r for r in rows}


def _check_complete(rows, n=N_ROWS):
    ids, by = _by_id(rows)
    assert sorted(ids) == list(range(n)), "rows lost or duplicated"
    return by


# ----------------------------------------------------------------------------- classify_dataset

def test_two_actors_bit_identical_to_single_process(cluster, tiny_dir, reference):
    exact, _ = reference
    out = dist.classify_dataset(_dataset(), labels=LABELS, model=tiny_dir, actors=2, batch_size=16,
                                batch_invariant=True)
    by = _check_complete(out.take_all())
    got = np.array([by[i]["probabilities"] for i in range(N_ROWS)])
    assert got.shape == (N_ROWS, len(LABELS))
    assert np.array_equal(got, exact)  # bit for bit
    want_labels = np.array(LABELS, dtype=object)[exact.argmax(1)]
    assert [by[i]["label"] for i in range(N_ROWS)] == list(want_labels)
    assert [by[i]["confidence"] for i in range(N_ROWS)] == list(exact.max(1))
    assert not any(by[i]["abstained"] for i in range(N_ROWS))
    rows = _rows()  # input columns kept, unchanged
    assert all(by[i]["text"] == rows[i]["text"] and by[i]["source"] == rows[i]["source"] for i in range(N_ROWS))
    assert np.ptp(exact, axis=0).max() > 1e-3  # rows get different distributions: a mix-up would show


def test_batched_close_to_single_process(cluster, tiny_dir, reference):
    _, batched = reference
    out = dist.classify_dataset(_dataset(blocks=6), labels=LABELS, model=tiny_dir, actors=2, batch_size=16)
    by = _check_complete(out.take_all())
    got = np.array([by[i]["probabilities"] for i in range(N_ROWS)])
    np.testing.assert_allclose(got, batched, rtol=0, atol=1e-5)


class _CrashOnce(dist.data._ClassifyBatch):
    """Kills its actor's process (os._exit) on the batch holding row 100, the first time only."""

    marker: str = ""

    def __call__(self, table):
        ids = table.column("id").to_pylist()
        marker = Path(table.column("marker")[0].as_py())
        if 100 in ids and not marker.exists():
            marker.write_text(f"killed pid {os.getpid()}")
            os._exit(1)
        return super().__call__(table.drop_columns(["marker"]))


def test_actor_killed_mid_job_is_retried_and_output_complete(cluster, tiny_dir, reference, tmp_path):
    exact, _ = reference
    marker = tmp_path / "crashed"
    rows = [{**r, "marker": str(marker)} for r in _rows()]
    ds = ray.data.from_items(rows, override_num_blocks=8)
    out = dist.classify_dataset(ds, labels=LABELS, model=tiny_dir, actors=2, batch_size=16, batch_invariant=True,
                                max_retries=2, _udf=_CrashOnce)
    by = _check_complete(out.take_all())
    assert marker.exists(), "the crash was never injected; the test checks nothing"
    got = np.array([by[i]["probabilities"] for i in range(N_ROWS)])
    assert np.array_equal(got, exact)


def test_top_k_columns(cluster, tiny_dir, reference):
    exact, _ = reference
    out = dist.classify_dataset(_dataset(blocks=2), labels=LABELS, model=tiny_dir, actors=1, batch_size=32,
                                batch_invariant=True, top_k=2)
    by = _check_complete(out.take_all())
    assert "probabilities" not in by[0]
    for i in (0, 7, 123, 239):
        order = np.argsort(-exact[i], kind="stable")[:2]
        assert by[i]["top_labels"] == [LABELS[j] for j in order]
        assert by[i]["top_probabilities"] == exact[i, order].tolist()


def test_classify_files_round_trips_parquet_csv_jsonl(cluster, tiny_dir, reference, tmp_path):
    exact, _ = reference
    rows = _rows()
    inp = tmp_path / "in"
    inp.mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:100]), inp / "a.parquet")
    with open(inp / "b.jsonl", "w") as f:
        for r in rows[100:180]:
            f.write(json.dumps(r) + "\n")
    import csv

    with open(tmp_path / "c.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["id", "text", "source"])
        w.writeheader()
        w.writerows(rows[180:])
    out = dist.classify_files([str(inp), str(tmp_path / "c.csv")], tmp_path / "out", labels=LABELS, model=tiny_dir,
                              actors=2, num_cpus_per_actor=0.5, batch_size=16, batch_invariant=True)
    table = pq.read_table(out)
    assert table.schema.field("probabilities").type == pa.list_(pa.float64())
    assert table.schema.field("label").type == pa.string()
    assert table.schema.field("abstained").type == pa.bool_()
    by = _check_complete(table.to_pylist())
    got = np.array([by[i]["probabilities"] for i in range(N_ROWS)])
    assert np.array_equal(got, exact)
    with pytest.raises(FileExistsError, match="exists and is not an empty folder"):
        dist.classify_files([str(inp)], out, labels=LABELS, model=tiny_dir)


def test_abstain_with_a_calibrated_saved_classifier(cluster, tiny_dir, tmp_path):
    rows = _rows(64)
    texts = [r["text"] for r in rows]
    clf = Classifier(LABELS, tiny_dir, batch_invariant=True, progress=False)
    y = [LABELS[i % len(LABELS)] for i in range(len(texts))]
    with _one_thread():
        clf.calibrate(texts, y, coverage=0.5)
    clf.save(tmp_path / "clf", model_ref=tiny_dir)
    with _one_thread():
        want = clf.predict_proba(texts)
    keep = want.max(1) >= clf.threshold_
    assert 0 < keep.sum() < len(texts)  # some rows abstain and some do not
    out = dist.classify_dataset(ray.data.from_items(rows, override_num_blocks=4), classifier_dir=tmp_path / "clf",
                                actors=2, batch_size=16, batch_invariant=True, abstain=True)
    by = _check_complete(out.take_all(), n=64)
    np.testing.assert_array_equal(np.array([by[i]["probabilities"] for i in range(64)]), want)
    assert [by[i]["abstained"] for i in range(64)] == list(~keep)
    assert all((by[i]["abstain_reason"] is None) == bool(keep[i]) for i in range(64))   # each abstention says why
    assert all("is below the threshold" in by[i]["abstain_reason"] for i in range(64) if not keep[i])
    assert [by[i]["label"] for i in range(64)] == [LABELS[int(np.argmax(want[i]))] if keep[i] else None
                                                    for i in range(64)]


# ----------------------------------------------------------------------------- errors (no Ray work)

def test_errors_name_the_problem_and_the_fix(cluster, tiny_dir, tmp_path):
    ds = ray.data.from_items([{"text": "a", "label": "x"}])
    with pytest.raises(ValueError, match="exactly one of labels"):
        dist.classify_dataset(ds, model=tiny_dir)
    with pytest.raises(ValueError, match=r"already has column\(s\) \['label'\]"):
        dist.classify_dataset(ds, labels=LABELS, model=tiny_dir)
    ds = ray.data.from_items([{"text": "a"}])
    with pytest.raises(ValueError, match="abstain=True needs a calibrated classifier"):
        dist.classify_dataset(ds, labels=LABELS, abstain=True)
    with pytest.raises(ValueError, match="actors must be a positive int, got 0"):
        dist.classify_dataset(ds, labels=LABELS, actors=0)
    with pytest.raises(TypeError, match="not a loaded object"):
        dist.classify_dataset(ds, labels=LABELS, model=object())
    with pytest.raises(FileNotFoundError, match="has no classifier.json"):
        dist.classify_dataset(ds, classifier_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        dist.classify_files([tmp_path / "nope.csv"], tmp_path / "o", labels=LABELS)
    with pytest.warns(RuntimeWarning, match="leaving none for the file read and write tasks"):
        dist.data._warn_if_no_cpu_left(2, 1)  # the cluster has 2 CPUs
    (tmp_path / "x.txt").write_text("a")
    with pytest.raises(ValueError, match="has suffix '.txt'"):
        dist.classify_files([tmp_path / "x.txt"], tmp_path / "o", labels=LABELS)


def test_missing_text_column_fails_with_its_name(cluster, tiny_dir):
    ds = ray.data.from_items([{"body": "a"}])
    with pytest.raises(Exception, match="no text column 'text'"):
        dist.classify_dataset(ds, labels=LABELS, model=tiny_dir).take_all()


# ----------------------------------------------------------------------------- judge batch

def _parser():
    import argparse

    from judge.cli import batch

    p = argparse.ArgumentParser(prog="judge")
    batch.add_parser(p.add_subparsers(dest="command", required=True))
    return p


def test_cli_batch_writes_parquet(cluster, tiny_dir, reference, tmp_path):
    exact, _ = reference
    rows = _rows()
    with open(tmp_path / "in.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (tmp_path / "labels.txt").write_text("\n".join(LABELS) + "\n")
    args = _parser().parse_args(["batch", str(tmp_path / "in.jsonl"), "--labels", str(tmp_path / "labels.txt"),
                                 "--model", tiny_dir, "--actors", "2", "--num-cpus-per-actor", "0.5", "--batch-size", "16",
                                 "--batch-invariant",
                                 "--output", str(tmp_path / "out")])
    assert args.func(args) == 0
    by = _check_complete(pq.read_table(tmp_path / "out").to_pylist())
    assert np.array_equal(np.array([by[i]["probabilities"] for i in range(N_ROWS)]), exact)


def test_cli_batch_errors(tmp_path):
    p = _parser()
    with pytest.raises(SystemExit, match="does not exist"):
        a = p.parse_args(["batch", str(tmp_path / "missing.csv"), "--labels", "a,b", "--output", str(tmp_path / "o")])
        a.func(a)
    (tmp_path / "in.csv").write_text("text\nhello\n")
    with pytest.raises(SystemExit, match="single label"):
        a = p.parse_args(["batch", str(tmp_path / "in.csv"), "--labels", "a", "--output", str(tmp_path / "o")])
        a.func(a)
    with pytest.raises(SystemExit, match="has no classifier.json"):
        a = p.parse_args(["batch", str(tmp_path / "in.csv"), "--classifier", str(tmp_path), "--output",
                          str(tmp_path / "o")])
        a.func(a)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "old.parquet").write_text("x")
    with pytest.raises(SystemExit, match="is not an empty folder"):
        a = p.parse_args(["batch", str(tmp_path / "in.csv"), "--labels", "a,b", "--output", str(tmp_path / "o")])
        a.func(a)
    with pytest.raises(SystemExit):  # --labels and --classifier are exclusive, one is required
        p.parse_args(["batch", "x.csv", "--output", "o"])


# ----------------------------------------------------------------------------- typed decisions

def test_decide_dataset_matches_decider(cluster, tiny_dir):
    from judge.decisions import Choice, Decider, Score, YesNo

    qs = {"refund": YesNo("Does the customer want a refund?"),
          "team": Choice({"Billing": "payments", "Cards": None, "Other": None}, instructions="Which team?"),
          "anger": Score(["calm", "annoyed", "furious"], instructions="How angry?")}
    rows = [{"id": i, "state": r["text"]} for i, r in enumerate(_rows(24))]
    out = dist.decide_dataset(ray.data.from_items(rows, override_num_blocks=3), qs, model=tiny_dir, actors=2,
                              batch_size=8)
    by = _check_complete(out.take_all(), n=24)
    d = Decider(tiny_dir)
    for i in (0, 5, 23):
        want = d.ask(rows[i]["state"], qs)
        np.testing.assert_allclose(by[i]["refund"], want["refund"].noul, atol=1e-5)
        assert by[i]["team"] == want["team"].choice
        np.testing.assert_allclose(by[i]["team_probabilities"], list(want["team"].probabilities.values()), atol=1e-5)
        np.testing.assert_allclose(by[i]["anger"], want["anger"].score, atol=1e-5)
        np.testing.assert_allclose(by[i]["anger_confidence"], want["anger"].confidence, atol=1e-5)
        assert by[i]["refund_confidence"] is None


# ----------------------------------------------------------------------------- Ray Serve

#: Seconds the Ray Serve test may wait for Serve, its proxy and both replicas to come up. Generous:
#: on a loaded machine they take minutes, and the test checks answers, not start-up speed.
SERVE_TIMEOUT_S = float(os.environ.get("JUDGE_TEST_SERVE_TIMEOUT_S", "900"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_serve(port, deadline):
    """``serve.start``, retried until ``deadline``: Serve waits a fixed 60 s for its HTTP proxy.

    A start that times out leaves the controller and the proxy starting; the next call connects
    to them, so the loop ends once the controller answers, and the HTTP polling waits for the rest.
    """
    from ray import serve

    while True:
        try:
            return serve.start(http_options={"host": "127.0.0.1", "port": port})
        except TimeoutError:
            if time.monotonic() > deadline:
                raise


def _poll(fn, deadline, what):
    """Call ``fn() -> (done, value)`` every second until done or ``deadline`` (time.monotonic); the value."""
    value = None
    while time.monotonic() < deadline:
        done, value = fn()
        if done:
            return value
        time.sleep(1)
    pytest.fail(f"{what} within {SERVE_TIMEOUT_S:.0f} s (set JUDGE_TEST_SERVE_TIMEOUT_S to wait longer); "
                f"last: {value!r:.300}")


def test_serve_two_replicas_answer_systemone(cluster, tiny_dir):
    pytest.importorskip("ray.serve")
    httpx = pytest.importorskip("httpx")
    from ray import serve

    from judge.decisions import Decider, YesNo

    port = _free_port()
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    try:
        _start_serve(port, deadline)
        try:
            dist.serve_app(tiny_dir, replicas=2, port=port, num_cpus_per_replica=0.5)
        except TimeoutError:
            pass  # the app is deployed; Serve's own 60 s wait for its proxy ran out: the polling below waits on
        url = f"http://127.0.0.1:{port}"
        body = {"model": "jev-latest", "state": "I was charged twice",
                "questions": {"refund": {"type": "noul", "instructions": "Refund?"}}}

        def answer():
            try:
                r = httpx.post(url + "/v1/systemone", json=body, timeout=60)
            except httpx.HTTPError as e:
                return False, f"{type(e).__name__}: {e}"
            return r.status_code == 200, r

        r = _poll(answer, deadline, "no 200 answer from /v1/systemone")
        assert r.status_code == 200, r.text
        want = Decider(tiny_dir).ask("I was charged twice", {"refund": YesNo("Refund?")})["refund"].noul
        np.testing.assert_allclose(r.json()["answers"]["refund"]["noul"], want, atol=1e-5)
        assert httpx.get(url + "/v1/models", timeout=30).status_code == 200
        import importlib.util

        if importlib.util.find_spec("typesafe_sdk") is not None:  # the official client, when installed
            import typesafe_sdk as ts

            with ts.TypeSafeClient(base_url=url, api_key="any-key-is-fine") as client:
                res = client.system_one(state="I was charged twice", questions={"refund": ts.Noul(instructions="Refund?")},
                                        model="jev-latest")
            # another request, perhaps another replica and micro-batch: equal to float32 rounding (the
            # first answer of a question shape is scored beside its content-free prior, later ones not)
            np.testing.assert_allclose(res.nouls["refund"].noul, r.json()["answers"]["refund"]["noul"], atol=1e-5)

        def running():
            return serve.status().applications["judge"].deployments["judge_decisions"].replica_states.get("RUNNING", 0)

        assert _poll(lambda: (running() == 2, running()), deadline, "fewer than 2 replicas RUNNING") == 2
    finally:
        serve.shutdown()


def test_an_output_column_in_a_schema_not_known_up_front_is_refused_per_batch():
    """A dataset read from files has no schema before it runs; the clash is caught where the outputs are appended
    (it was an Arrow KeyError, 'Field "label" exists 2 times', from inside Ray)."""
    from judge.distributed.data import _append_outputs

    table = pa.table({"text": ["a"], "label": ["x"]})
    with pytest.raises(ValueError, match=r"already has column\(s\) \['label'\].*rename them first"):
        _append_outputs(table, np.array([[0.4, 0.6]]), np.array(["a", "b"]), None, None, pa)
    out = _append_outputs(pa.table({"text": ["a"]}), np.array([[0.4, 0.6]]), np.array(["a", "b"]), None, None, pa)
    assert out.column("label").to_pylist() == ["b"]
