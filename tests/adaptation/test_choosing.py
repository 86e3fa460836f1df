"""How the head picks its features (judge.adaptation.choosing): by held-out NLL, and with a tuned embedder only
where each fold's own tuning wins; Classifier.fit(tune_embedder=...) end to end, saved and loaded offline."""

from __future__ import annotations

import numpy as np
import pytest

from judge import Classifier
from judge.adaptation import fit_head_tuned
from judge.adaptation.choosing import candidate_parts, choose_features
from judge.testing import tiny_pair

TEXTS = ["my card has not arrived yet", "the card I ordered is still not here", "when will my new card come",
         "waiting for the card for two weeks", "what exchange rate do you use", "the rate for euros was bad",
         "how is the currency rate set", "which rate applies to dollars"]
Y = np.array([0, 0, 0, 0, 1, 1, 1, 1])
LABELS = ["card arrival", "exchange rate"]


def test_candidate_parts_stack_the_dense_blocks_and_keep_tfidf_apart():
    from scipy import sparse

    blocks = {"hidden": np.ones((2, 3)), "embed": np.zeros((2, 4)), "tfidf": sparse.eye(2, format="csr")}
    (dense, tf), S, R = candidate_parts((("hidden", "embed", "tfidf"), ("similarity",)), blocks, None, np.ones((2, 2)))
    assert dense.shape == (2, 7) and tf.shape == (2, 2) and S is None and R.shape == (2, 2)


def test_choose_features_passes_each_candidates_offsets_and_fit_head_tuned_its_l2_and_folds(capsys):
    from judge.adaptation import choose_l2

    rng = np.random.default_rng(1)
    y = np.repeat([0, 1], 6)
    H, R = rng.normal(size=(12, 2)), np.eye(2)[y] + 0.1 * rng.normal(size=(12, 2))
    got = choose_features({"sim": (H, None, R)}, y, 2, cv=3)
    want = choose_l2(H, y, 2, similarity=R, cv=3)
    np.testing.assert_allclose(got["tables"]["sim"]["nll"], want["nll"], rtol=0, atol=1e-12)
    pytest.importorskip("sentence_transformers")
    head = fit_head_tuned({"embed": (("embed",), ())}, {"embed": rng.normal(size=(8, 4))}, Y, 2, TEXTS, LABELS,
                          cv=4, embedder="minilm", l2=3.0)
    assert head.report["cv"]["grid"] == [3.0] and head.report["cv"]["folds"] == 4
    assert "tuning the embedder" not in capsys.readouterr().err  # no bar unless asked


def test_choose_features_keeps_the_earlier_candidate_on_a_tie():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(12, 3))
    y = np.repeat([0, 1], 6)
    got = choose_features({"a": (H, None, None), "b": (H.copy(), None, None)}, y, 2, cv=3)
    assert got["features"] == "a" and got["nll"]["a"] == got["nll"]["b"]


@pytest.mark.parametrize("planted", ["tuned helps",
                                     pytest.param("tuning cannot help", marks=pytest.mark.slow)])  # 3 tunings each
def test_auto_keeps_the_tuned_embedder_only_where_each_folds_tuning_wins(planted):
    pytest.importorskip("sentence_transformers")
    rng = np.random.default_rng(0)
    if planted == "tuned helps":  # the frozen block is noise; the texts themselves say the class
        y, frozen = Y, rng.normal(size=(8, 16))
    else:  # the classes are unrelated to the texts; the frozen block carries them
        y = np.array([0, 1, 1, 0, 0, 1, 0, 1])
        frozen = np.eye(2)[y] * 3 + 0.1 * rng.normal(size=(8, 2))
    head = fit_head_tuned({"embed": (("embed",), ())}, {"embed": frozen}, y, 2, TEXTS, LABELS, mode="auto", cv=2,
                          embedder="minilm", l2=1.0)
    nll = head.report["features_cv"]["nll"]
    assert set(nll) == {"embed", "embed (tuned)"}
    assert head.report["tuned"] is (planted == "tuned helps"), nll
    assert (nll["embed (tuned)"] < nll["embed"]) is (planted == "tuned helps")


def test_fit_with_a_tuned_embedder_saves_and_loads_offline_with_identical_answers(tmp_path):
    pytest.importorskip("sentence_transformers")
    from judge.adaptation import TunedEncoder

    model, tok = tiny_pair()
    described = {"card arrival": None, "exchange rate": "how currencies are converted"}  # labels with descriptions
    clf = Classifier(described, model, tokenizer=tok, method="exact", embedder="minilm", progress=False)
    clf.fit(TEXTS, [LABELS[i] for i in Y], tune_embedder=True, cv=2, features="embed+similarity")
    head = clf.adaptation_
    assert head.report["tuned"] is True and isinstance(head.embedder, TunedEncoder)
    # the similarity offset is the tuned embedder's: its label vectors (of the labels' descriptions), a fitted scale
    assert head.uses_similarity and head.similarity_scale is not None
    texts = ["card arrival", "exchange rate: how currencies are converted"]
    np.testing.assert_allclose(head.label_vectors, head.embedder(texts), rtol=0, atol=1e-6)
    assert head.report["tuning"]["texts"] == len(TEXTS)
    clf.save(tmp_path, model_ref="my-org/my-model")
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)
    np.testing.assert_array_equal(back.predict_proba(TEXTS), clf.predict_proba(TEXTS))
    assert back.fingerprint() == clf.fingerprint()


def test_fit_refuses_bad_tuning_options_before_any_work():
    model, tok = tiny_pair()
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", embedder=None, progress=False)
    with pytest.raises(ValueError, match="tune_embedder must be False, True or 'auto'"):
        clf.fit(TEXTS, [LABELS[i] for i in Y], tune_embedder="yes")
    with pytest.raises(ValueError, match="max_seconds must be None or a number of seconds > 0"):
        clf.fit(TEXTS, [LABELS[i] for i in Y], tune_embedder=True, max_seconds=0)
    assert clf.adaptation_ is None


def test_auto_features_add_the_tuned_embedding_alone_only_where_the_embedder_is_tuned():
    pytest.importorskip("sentence_transformers")
    from judge.adaptation import auto_candidates

    model, tok = tiny_pair()
    names = [LABELS[i] for i in Y]
    few = auto_candidates(len(TEXTS), 2, "exact")
    assert "embed" not in few and auto_candidates(len(TEXTS), 2, "exact", tuned=True) == few + ["embed"]
    # below 4 per class the CV cannot judge a set without offsets: a held-out class is missing from its fold
    assert auto_candidates(7, 2, "exact", tuned=True) == auto_candidates(7, 2, "exact")
    frozen = Classifier(LABELS, model, tokenizer=tok, method="exact", embedder="minilm", progress=False)
    frozen.fit(TEXTS, names, cv=2)
    assert set(frozen.adaptation_.report["features_cv"]["nll"]) == set(few)
    tuned = Classifier(LABELS, model, tokenizer=tok, method="exact", embedder="minilm", progress=False)
    tuned.fit(TEXTS, names, cv=2, tune_embedder="auto")
    nll = tuned.adaptation_.report["features_cv"]["nll"]
    assert set(nll) == {n for c in few + ["embed"] for n in (c, c + " (tuned)")}, sorted(nll)
    assert tuned.adaptation_.report["features_cv"]["chosen"] == min(nll, key=lambda k: round(nll[k], 10))
