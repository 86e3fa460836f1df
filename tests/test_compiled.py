"""The compiled label set: frozen, built from explicit parameters, one dispatch that says what it did."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from judge import Classifier
from judge.compiled import CompiledLabels, LabelSpec, ScoreOptions, compile_labels
from judge.engine.protocol import CAPABILITIES, LocalModel, RootCaching, TreeSearch
from judge.testing import Reference, tiny_pair

LABELS = ["card_arrival", "exchange_rate", "pin_blocked"]
TEXTS = ["Where is my card?", "what rate for euros"]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def test_compiled_set_is_frozen_and_swapped_whole_when_a_parameter_changes(pair):
    clf = Classifier(LABELS, pair[0], tokenizer=pair[1], method="exact")
    c = clf.compiled_
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.method = "decode"
    assert clf.compiled_ is c  # kept while nothing changes
    clf.top_k = 2
    c2 = clf.compiled_
    assert c2 is not c and c2.spec.top_k == 2 and c.spec.top_k == 5
    assert c2.engine is c.engine  # the scorer is reused when the model settings are unchanged


def test_compile_labels_needs_no_classifier_and_matches_what_the_classifier_scores(pair):
    model, tok = pair
    names = ("card arrival", "exchange rate", "pin blocked")
    c = compile_labels(LabelSpec(tuple(LABELS), names, method="exact", model=model, tokenizer=tok))
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact")
    np.testing.assert_array_equal(c.score(TEXTS).scores, clf.decision_function(TEXTS))


def test_one_dispatch_reports_the_path_it_took(pair):
    model, tok = pair
    exact = Classifier(LABELS, model, tokenizer=tok, method="exact").compiled_
    r = exact.score(TEXTS)
    assert r.path == "exact" and r.report is None and r.scores.shape == (2, 3)
    s = exact.score(TEXTS, search=("argmax", 0.0))
    assert s.path == "search" and s.report.certified.all()
    assert (s.scores.argmax(1) == r.scores.argmax(1)).all()  # the certified argmax is full scoring's
    first = Classifier(["yes", "no"], model, tokenizer=tok).compiled_
    assert first.score(["Is it?"]).path == "first_token"
    assert first.score(["Is it?"], search=("argmax", 0.0)) is None  # the bound does not apply there
    short = Classifier(LABELS, model, tokenizer=tok, method="exact", shortlist=2, shortlist_encoder="tfidf").compiled_
    rs = short.score(TEXTS)
    assert rs.path == "shortlist" and (np.isfinite(rs.scores).sum(1) == 2).all()
    assert short.score(TEXTS, search=("argmax", 0.0)) is None  # a shortlist is never searched past
    codes = ["A01", "A02", "B10", "B11"]
    dec = Classifier(codes, model, tokenizer=tok, method="decode", top_k=2).compiled_
    rd = dec.score(["Cholera"], ScoreOptions(batch_size=1))
    assert rd.path == "decode" and int(np.isfinite(rd.scores).sum()) == 2
    search = Classifier(LABELS, model, tokenizer=tok, method="search").compiled_
    rt = search.score(TEXTS)
    assert rt.path == "search" and rt.report is not None
    assert exact.score([]).scores.shape == (0, 3)


def test_derived_values_are_built_once_per_compiled_set(pair):
    clf = Classifier(LABELS, pair[0], tokenizer=pair[1], method="exact")
    c = clf.compiled_
    calls = []
    assert c.derived("x", lambda: calls.append(1) or 7) == 7 and c.derived("x", lambda: calls.append(1) or 8) == 7
    assert calls == [1]
    p = clf.zero_shot_prior()
    assert clf.zero_shot_prior() is p  # the label-free prior: scored once, kept with the set
    assert c.label_automaton() is c.label_automaton()


def test_classifier_keeps_the_search_report_of_its_own_texts_only(pair):
    clf = Classifier(LABELS, pair[0], tokenizer=pair[1], method="exact")
    clf.predict(TEXTS)
    rep = clf.search_report_
    assert rep is not None and len(rep.certified) == len(TEXTS)
    clf.predict_proba(TEXTS)  # the label-free prior's content-free texts are scored here: not reported
    assert clf.search_report_ is rep


def test_capabilities_are_checked_and_refused_clearly(pair):
    model, tok = pair
    ref = Reference(model, tok)
    assert not isinstance(ref, TreeSearch) and not isinstance(ref, RootCaching)
    eng = Classifier(LABELS, model, tokenizer=tok).compiled_.engine
    assert all(isinstance(eng, cap) for cap in CAPABILITIES)
    # a set on a scorer without the model in this process: what needs the model is refused clearly
    c = Classifier(["A01", "A02"], model, tokenizer=tok, method="exact").compiled_
    assert isinstance(c, CompiledLabels) and not isinstance(object(), LocalModel)
    with pytest.raises(TypeError, match="TokenVocabulary"):
        dataclasses.replace(c, engine=object()).label_automaton()
    from judge.label_paths import local_model

    with pytest.raises(TypeError, match="LocalModel"):
        local_model(object(), "think=True")
    assert isinstance(ref, LocalModel)  # the reference runs the model here: the server sizes its memory on it
    assert not dataclasses.replace(c, engine=ref).searchable()  # the reference cannot search


def test_predict_searches_on_cpu_and_scores_in_full_where_the_model_is_on_a_gpu(pair, monkeypatch):
    """search_pays: the exact path proves its argmax by the search on the CPU only; the answer is the same."""
    model, tok = pair
    labels = [f"label {w}" for w in ("alpha beta", "alpha gamma", "delta", "epsilon zeta", "eta", "theta iota")]
    texts = ["Where is my card?", "what rate for euros", "my pin is blocked", "top up failed"]
    clf = Classifier(labels, model, tokenizer=tok, method="exact")
    c = clf.compiled_
    assert c.search_pays()  # the tiny model computes on the CPU
    on_cpu = clf.predict(texts)
    assert clf.search_report_ is not None and clf.search_report_.certified.all()

    class OnGPU:  # what search_pays reads of a LocalModel scorer: where its weights are
        model_ = torch.nn.Linear(1, 1, device="meta")
        dtype_ = torch.float32

    gpu = dataclasses.replace(c, engine=OnGPU())
    assert isinstance(gpu.engine, LocalModel) and not gpu.search_pays()
    assert dataclasses.replace(c, method="search", engine=OnGPU()).search_pays()  # huge K: always
    clf2 = Classifier(labels, model, tokenizer=tok, method="exact")
    monkeypatch.setattr(CompiledLabels, "search_pays", lambda self: False)
    assert list(clf2.predict(texts)) == list(on_cpu)
    assert clf2.search_report_ is None  # scored in full: no search ran
    assert list(clf2.predict(texts)) == list(clf2.classes_[clf2.predict_proba(texts).argmax(1)])
