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


# ----------------------------------------------------------------------------- which path method="auto" takes
# The documented rule (judge/compiled.py, Classifier's `method`): "search" above decode_above labels; else
# "first_token" when every label is scored as one token (then it equals exact: no end token added); else
# "exact". Its expected value below comes from the tokenizer alone, not from the compiled set.

def _expected_auto(tok, surfaces, decode_above, end_token="auto"):
    if len(surfaces) > decode_above:
        return "search"
    ids = [tok(s, add_special_tokens=False)["input_ids"] for s in surfaces]
    ends = end_token is True or (end_token == "auto" and any(
        a != b and b[:len(a)] == a for a in ids for b in ids))  # a label's tokens a prefix of another's
    return "first_token" if all(len(x) == 1 for x in ids) and not ends else "exact"


_AUTO_CASES = {  # names (label_names="raw"), what each case is, and its expected path on these tokenizers
    "every label one token": (["yes", "no", "maybe"], {}, "first_token"),
    "one-token labels with an end token": (["yes", "no", "maybe"], {"end_token": True}, "exact"),
    "some one token, some several": (["yes", "no", "card arrival"], {}, "exact"),
    "a one-token label the first token of another": (["card", "card arrival", "exchange rate"], {}, "exact"),
    "several tokens, shared first tokens": (["card arrival", "card linking", "exchange rate"], {}, "exact"),
    "shared first tokens, the other labels one token": (["card arrival", "card linking", "yes", "no"], {}, "exact"),
    "several tokens, distinct first tokens": (["card arrival", "exchange rate", "pin blocked"], {}, "exact"),
    "one token each, K = decode_above": (["yes", "no", "maybe"], {"decode_above": 3}, "first_token"),
    "one token each, K > decode_above": (["yes", "no", "maybe"], {"decode_above": 2}, "search"),
    "several tokens, K > decode_above": (["card arrival", "card linking", "exchange rate"], {"decode_above": 2},
                                         "search"),
}


@pytest.fixture(scope="module", params=["gpt2", "llama3"])
def real_pair(request):
    from judge.testing import tiny_model
    from tests.conftest import load_tokenizer

    tok = load_tokenizer(request.param)
    return tiny_model("llama", tok), tok


@pytest.mark.parametrize("case", list(_AUTO_CASES))
def test_auto_takes_the_documented_path_for_every_mix_of_label_lengths(real_pair, case):
    model, tok = real_pair
    names, kw, want = _AUTO_CASES[case]
    clf = Classifier(names, model, tokenizer=tok, label_names="raw", **kw)
    c = clf.compiled_
    assert c.surfaces == [" " + n for n in names]  # the default prompt writes the label after a space
    assert _expected_auto(tok, c.surfaces, kw.get("decode_above", 2000), kw.get("end_token", "auto")) == want
    assert clf.method_ == want
    r = c.score(["Where is my card?"])
    assert r.path == want and r.scores.shape == (1, len(names))
    if want == "first_token":  # where auto takes it, first-token scores are the exact scores
        exact = Classifier(names, model, tokenizer=tok, label_names="raw", method="exact", **kw)
        np.testing.assert_allclose(r.scores, exact.decision_function(["Where is my card?"]), atol=1e-5)


@pytest.mark.filterwarnings("ignore::judge.engine.EngineCheckWarning")
def test_auto_above_decode_above_beam_searches_where_the_engine_cannot_search(pair):
    """A model the engine scores by its causal fallback (ALiBi) cannot run the certified search: above
    decode_above auto takes the decode path, with a warning; below it, the rule above is unchanged."""
    from judge.testing import tiny_model

    tok = pair[1]
    model = tiny_model("bloom", tok)
    with pytest.warns(UserWarning, match=r"causal fallback.*beam search through the automaton"):
        assert Classifier(["yes", "no", "maybe"], model, tokenizer=tok, decode_above=2).method_ == "decode"
    assert Classifier(["yes", "no", "maybe"], model, tokenizer=tok).method_ == "first_token"
    assert Classifier(["card arrival", "exchange rate"], model, tokenizer=tok).method_ == "exact"


# ----------------------------------------------------------------------------- options the compiled set passes on

def test_rotations_are_refused_on_the_decode_path(pair):
    model, tok = pair
    with pytest.raises(ValueError, match=r"^rotations=2 averages over label lists, which the decode path \(K > "
                                         r"decode_above, or method='decode'\) does not score; use rotations=1\.$"):
        Classifier(["A01", "A02", "B10"], model, tokenizer=tok, method="decode", rotations=2).setup()
    with pytest.raises(ValueError, match=r"^rotations=3 averages over label lists, which the decode path"):
        compile_labels(LabelSpec(("A01", "A02"), ("A01", "A02"), method="decode", rotations=3, model=model,
                                 tokenizer=tok))


def test_the_device_asked_for_reaches_a_new_scorer():
    """A model loaded by name is loaded on ``device``; changing it gives a new scorer with that device, never the
    old one reused (a parameter change recompiles)."""
    from judge.testing import tiny_model_dir

    clf = Classifier(["yes", "no"], tiny_model_dir())
    first = clf.compiled_.engine
    assert first.device is None
    clf.device = "cpu"
    second = clf.compiled_.engine
    assert second is not first and second.device == "cpu" and second.model_.device.type == "cpu"
    c = compile_labels(LabelSpec(("yes", "no"), ("yes", "no"), model=tiny_model_dir(), device="cpu"), engine=first)
    assert c.engine is not first and c.engine.device == "cpu"


@pytest.mark.parametrize("progress, shown", [(True, True), (False, False), (None, False)])
def test_a_progress_bar_is_drawn_only_when_asked_for(pair, capsys, progress, shown):
    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", progress=progress)
    clf.decision_function(TEXTS)  # one batch: the default (None: when there are more than 4) draws nothing
    assert ("scoring" in capsys.readouterr().err) == shown


NORM_LABELS = ["card_arrival", "pin", "café_crème_refund"]  # lengths differ; non-ASCII: bytes are not characters


@pytest.mark.parametrize("norm", ["token", "byte"])
def test_length_normalised_scores_equal_a_brute_force(pair, norm):
    """Each label scored by its own forward pass (the reference), divided by its token count or its UTF-8 bytes."""
    from judge.engine import Item

    model, tok = pair
    clf = Classifier(NORM_LABELS, model, tokenizer=tok, method="exact", length_norm=norm, embedder=None)
    c = clf.compiled_
    got = clf.decision_function(TEXTS)
    ref = Reference(model, tok)
    for i, t in enumerate(TEXTS):
        ids = ref.encode(c.pieces(t))
        for k, seq in enumerate(c.label_seqs):
            lp = float(ref.score_items([Item(ids, [seq])])[0][0])
            d = len(seq) if norm == "token" else len(c.surfaces[k].encode("utf-8"))
            assert got[i, k] == pytest.approx(lp / d, abs=1e-5)
    assert len(c.surfaces[2].encode("utf-8")) > len(c.surfaces[2])  # the byte count is not the character count


def test_length_normalisation_reaches_the_prior_and_predict_and_survives_save(pair, tmp_path):
    model, tok = pair
    plain = Classifier(NORM_LABELS, model, tokenizer=tok, method="exact", embedder=None)
    clf = Classifier(NORM_LABELS, model, tokenizer=tok, method="exact", length_norm="token", embedder=None)
    from judge.compiled import length_divisors

    div = length_divisors(clf.compiled_)
    np.testing.assert_array_equal(length_divisors(plain.compiled_), np.ones(len(NORM_LABELS)))  # None: ones, (K,)
    assert np.allclose(clf.decision_function(TEXTS), plain.decision_function(TEXTS) / div)
    r = clf.compiled_.score(TEXTS, states=True)  # the states' pass: normalised, and it says its path
    assert r.path == "exact" and r.states.shape[0] == len(TEXTS)
    assert np.allclose(r.scores, clf.decision_function(TEXTS))
    assert np.allclose(clf.content_free_scores(), plain.content_free_scores() / div)
    assert not clf.compiled_.searchable()  # the prefix bound holds for sums, not means: predict scores in full
    assert list(clf.predict(TEXTS)) == list(clf.classes_[clf.predict_proba(TEXTS).argmax(1)])
    clf.save(tmp_path / "c", model_ref="tiny")
    back = Classifier.load(tmp_path / "c", model=model, tokenizer=tok)
    assert back.length_norm == "token" and np.allclose(back.decision_function(TEXTS), clf.decision_function(TEXTS))


def test_length_normalisation_is_refused_where_labels_are_not_scored_in_full(pair):
    model, tok = pair
    with pytest.raises(ValueError, match="length_norm='byte'.*method='exact'"):
        Classifier(NORM_LABELS, model, tokenizer=tok, method="search", length_norm="byte").setup()
    with pytest.raises(ValueError, match="first token only"):
        Classifier(NORM_LABELS, model, tokenizer=tok, method="first_token", length_norm="token").setup()
    with pytest.raises(ValueError, match="Unknown length_norm 'char'"):
        Classifier(NORM_LABELS, model, tokenizer=tok, length_norm="char")
