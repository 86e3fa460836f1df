"""judge.evaluation: checkpointed scoring resumes, is keyed on the fingerprint and the texts, and is atomic.

The classifier here is a stand-in (labels, fingerprint(), decision_function()) whose scores are a
pure function of the text, so what was reused and what was rescored is visible; the real
classifier's fingerprint is checked in tests/test_hostile.py, ``judge evaluate`` in tests/cli/test_cli.py.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from judge.evaluation import evaluate, read_checkpoint, score_with_checkpoint

TEXTS = [f"text number {i}" for i in range(10)]


class Fake:
    """Scores = a hash of the text (and of ``version``); counts the texts it scored; can crash once."""

    labels = ["a", "b", "c"]

    def __init__(self, version="v1", crash_after=None):
        self.version, self.crash_after, self.scored = version, crash_after, []

    def fingerprint(self):
        return f"fake-{self.version}"

    def decision_function(self, texts):
        if self.crash_after is not None and len(self.scored) >= self.crash_after:
            raise KeyboardInterrupt("interrupted")
        self.scored += list(texts)
        seed = [zlib.crc32(f"{self.version}|{t}".encode("utf-8", "surrogatepass")) for t in texts]
        return np.array([np.random.default_rng(s).normal(size=3) for s in seed])


def _want(texts, version="v1"):
    return Fake(version).decision_function(texts)


def test_scores_equal_a_direct_call_and_are_saved(tmp_path):
    clf = Fake()
    out = score_with_checkpoint(clf, TEXTS, tmp_path / "scores_test.npy", chunk=3)
    np.testing.assert_array_equal(out, _want(TEXTS))
    ck = read_checkpoint(tmp_path / "scores_test.npy")
    assert (tmp_path / "scores_test.npz").exists() and not list(tmp_path.glob("*.tmp"))
    np.testing.assert_array_equal(ck.scores, out)
    assert ck.fingerprint == "fake-v1" and ck.seconds.shape == (10,) and (ck.seconds >= 0).all()
    assert len(set(ck.texts)) == 10


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path, capsys):
    path = tmp_path / "s.npy"
    with pytest.raises(KeyboardInterrupt):
        score_with_checkpoint(Fake(crash_after=6), TEXTS, path, chunk=3)  # chunks 0 and 1 saved
    assert np.isnan(read_checkpoint(path).scores).any(axis=1).tolist() == [False] * 6 + [True] * 4
    clf = Fake()
    out = score_with_checkpoint(clf, TEXTS, path, chunk=3)
    assert clf.scored == TEXTS[6:]  # only what was missing
    np.testing.assert_array_equal(out, _want(TEXTS))
    assert "resuming: 2 of 4 chunks already scored in" in capsys.readouterr().err


def test_other_fingerprint_rescores_everything(tmp_path):
    path = tmp_path / "s.npy"
    score_with_checkpoint(Fake("v1"), TEXTS, path)
    clf = Fake("v2")  # e.g. other label names, prompt or weights
    out = score_with_checkpoint(clf, TEXTS, path)
    assert clf.scored == TEXTS
    np.testing.assert_array_equal(out, _want(TEXTS, "v2"))
    assert read_checkpoint(path).fingerprint == "fake-v2"


def test_rows_are_reused_by_text_not_by_position(tmp_path):
    path = tmp_path / "s.npy"
    score_with_checkpoint(Fake(), TEXTS[:4], path, chunk=2)
    clf = Fake()
    texts = ["new one", TEXTS[2], TEXTS[0], "new two", TEXTS[3]]
    out = score_with_checkpoint(clf, texts, path, chunk=2)
    assert clf.scored == ["new one", "new two"]
    np.testing.assert_array_equal(out, _want(texts))
    assert read_checkpoint(path).scores.shape == (5, 3)  # the file now holds exactly these rows


def test_unreadable_or_foreign_checkpoint_is_scored_again(tmp_path):
    path = tmp_path / "s.npz"
    path.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match=r"is not a score checkpoint .*; delete it to score again"):
        read_checkpoint(path)
    clf = Fake()
    np.testing.assert_array_equal(score_with_checkpoint(clf, TEXTS[:2], path), _want(TEXTS[:2]))
    assert clf.scored == TEXTS[:2]
    np.savez(path, scores=np.zeros((2, 3)), key=np.array("an older format"))
    clf = Fake()
    score_with_checkpoint(clf, TEXTS[:2], path)
    assert clf.scored == TEXTS[:2]


def test_bad_arguments():
    with pytest.raises(FileNotFoundError, match=r"no score checkpoint at '.*nowhere.npz'"):
        read_checkpoint("/nonexistent/nowhere.npy")
    with pytest.raises(ValueError, match=r"chunk must be a positive int, got 0"):
        score_with_checkpoint(Fake(), TEXTS, "/nonexistent/s.npy", chunk=0)
    with pytest.raises(ValueError, match=r"baseline must be None or 'generate', got 'greedy'"):
        evaluate("trec", "/nonexistent/out", baseline="greedy")


def test_surrogates_and_duplicates_are_keyed(tmp_path):
    texts = ["a\udc80", "a\udc80", "b"]
    out = score_with_checkpoint(Fake(), texts, tmp_path / "s.npy")
    np.testing.assert_array_equal(out[0], out[1])
    clf = Fake()
    np.testing.assert_array_equal(score_with_checkpoint(clf, texts, tmp_path / "s.npy"), out)
    assert clf.scored == []
