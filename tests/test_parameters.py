"""The one parameter table (judge.parameters): the constructor, get/set_params, the compiled spec and persistence read it."""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import pytest

from judge import Classifier
from judge.compiled import LabelSpec, ScoreOptions
from judge.parameters import PARAM_NAMES, PARAMS, REQUIRED, UNSAVED, names_with, param, plan_change
from judge.persistence import CODECS
from judge.prompts import PromptTemplate
from judge.testing import tiny_pair


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def test_the_constructor_is_the_table():
    """Every parameter of the signature is a row, in order, with the row's default (and no other)."""
    sig = inspect.signature(Classifier.__init__)
    got = [(n, p.default if p.default is not inspect.Parameter.empty else REQUIRED)
           for n, p in sig.parameters.items() if n != "self"]
    assert got == [(p.name, p.default) for p in PARAMS]


def test_the_compiled_spec_and_the_call_options_are_read_from_the_table():
    spec = {f.name for f in dataclasses.fields(LabelSpec)} - {"labels", "names"}
    assert spec == set(names_with(role="spec"))
    options = {f.name for f in dataclasses.fields(ScoreOptions)} | {"batch_invariant"}  # folded into batch_size
    assert options == set(names_with(role="options"))


def test_every_parameter_is_saved_by_a_codec_or_says_why_not():
    for p in PARAMS:
        assert (p.saved in CODECS) if p.saved is not None else (p.name in UNSAVED), p.name
    assert set(UNSAVED) == {p.name for p in PARAMS if p.saved is None}


def _non_defaults(model, tok):
    """A value other than the default for every saved parameter (the tiny model can hold them all)."""
    return dict(labels={"yes": "agrees", "no": None}, model=model, tokenizer=tok, method="exact",
                prompt=PromptTemplate(completion="Q: {text}\nA:"), label_names={"yes": "Yes", "no": "No"},
                batch_size=3, think=True, think_tokens=4, top_k=2, decode_above=50, end_token=True,
                progress=False, batch_invariant=True, pack=2, rotations=2, search_budget=100,
                search_tolerance=0.01, shortlist=1, shortlist_encoder="tfidf", prior="contextual",
                describe="both", embedder="minilm", length_norm="byte")


def test_every_saved_parameter_survives_save_and_load(pair, tmp_path):
    model, tok = pair
    given = _non_defaults(model, tok)
    # backend below, on its own; multi_label excludes think and a shortlist: tests/test_multilabel.py saves it
    assert {p.name for p in PARAMS if p.saved is not None} - set(given) == {"backend", "multi_label"}
    for name, value in given.items():
        assert value != param(name).default, name
    clf = Classifier(**given)
    clf.save(tmp_path, model_ref="my-org/my-model")
    back = Classifier.load(tmp_path, model=model, tokenizer=tok).get_params()
    for name, value in given.items():
        assert back[name] == value, name


def test_backend_is_saved(tmp_path):
    Classifier(["yes", "no"], "my-org/my-model", backend="vllm").save(tmp_path)  # nothing loads
    back = Classifier.load(tmp_path)
    assert (back.backend, back.model) == ("vllm", "my-org/my-model")


def test_a_folder_saved_before_a_parameter_existed_reads_its_legacy_value(pair, tmp_path):
    import json

    model, tok = pair
    Classifier(["yes", "no"], model, tokenizer=tok).save(tmp_path, model_ref="x/y")
    cfg = json.loads((tmp_path / "classifier.json").read_text())
    for k in ("embedder", "progress", "pack", "backend"):
        del cfg[k]
    (tmp_path / "classifier.json").write_text(json.dumps(cfg))
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)
    assert back.embedder is None  # saved before the embedder: the LM alone, as it answered then
    assert (back.progress, back.pack, back.backend) == (None, 1, "transformers")


def test_get_params_returns_the_objects_given(pair):
    model, tok = pair
    labels = {"yes": "agrees", "no": None}
    clf = Classifier(labels, model, tokenizer=tok, describe="name")
    p = clf.get_params()
    assert list(p) == list(PARAM_NAMES)
    assert p["labels"] is labels and p["model"] is model and clf.labels == ["yes", "no"]


def test_a_refused_set_params_changes_nothing(pair):
    model, tok = pair
    clf = Classifier(["yes", "no"], model, tokenizer=tok, embedder=None)
    before = clf.get_params()
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        clf.set_params(top_k=2, batch_size=0)
    with pytest.raises(ValueError, match="no parameter 'labelz'"):
        clf.set_params(top_k=2, labelz=["a"])
    with pytest.raises(ValueError, match="shown to the model as 'same'"):  # across parameters
        clf.set_params(top_k=2, label_names=["same", "same"])
    assert clf.get_params() == before


def test_labels_and_their_names_change_together(pair):
    """Checked on the result, not one by one: new labels with names for them is one valid change."""
    model, tok = pair
    clf = Classifier(["yes", "no"], model, tokenizer=tok, label_names={"yes": "Yes", "no": "No"}, embedder=None)
    clf.set_params(labels=["a", "b"], label_names={"a": "A", "b": "B"})
    assert list(clf.classes_) == ["a", "b"] and clf.predict(["x"])[0] in ("a", "b")


@pytest.mark.parametrize("name, value, drops", [("top_k", 2, True), ("prompt", "Q: {text}\nA:", True),
                                                ("batch_size", 2, False), ("device", "cpu", False),
                                                ("search_budget", 50, False)])
def test_what_a_change_after_calibrate_drops_is_the_tables_on_change(pair, name, value, drops):
    model, tok = pair
    clf = Classifier(["yes", "no"], model, tokenizer=tok, embedder=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.calibrate(["a", "b", "c", "d"] * 5, ["yes", "no"] * 10)
    assert (param(name).on_change == "refit") == drops
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        setattr(clf, name, value)
    assert (clf.calibration_ is None) == drops
    assert any("drops the calibration" in str(x.message) for x in w) == drops
    assert clf.get_params()[name] == value


def test_setting_the_same_object_again_is_no_change():
    given = {p.name: p.default for p in PARAMS} | {"labels": ["a", "b"]}
    c = plan_change(given, {"labels": given["labels"], "top_k": 5})
    assert c.values == {} and not c.recompile and c.refit == () and not c.fusion
    c = plan_change(given, {"embedder": None})
    assert c.fusion and c.refit == ("embedder",)


@pytest.mark.parametrize("name, bad, message", [
    ("method", "fast", "Unknown method 'fast'"), ("batch_size", 1.5, "batch_size must be a positive int"),
    ("think", "yes", "think must be True or False"), ("rotations", 9, r"rotations must be an int in \[1, 8\]"),
    ("search_tolerance", 0, r"search_tolerance must be a number in \(0, 1\)"), ("prior", "uniform", "Unknown prior"),
    ("progress", "always", "Unknown progress"), ("describe", "all", "Unknown describe"),
    ("end_token", "yes", "Unknown end_token"), ("device", 1.0, "device must be None"),
    ("embedder", "tfidff", "is not an encoder name"), ("shortlist", 0, "shortlist must be None or a positive int"),
    ("backend", "sglang", "Unknown backend"), ("model", 5, "model must be None"),
])
def test_each_row_refuses_a_bad_value_in_the_constructor_and_in_set_params(pair, name, bad, message):
    model, tok = pair
    with pytest.raises((ValueError, TypeError), match=message):
        Classifier(**({"labels": ["yes", "no"], "model": model, "tokenizer": tok} | {name: bad}))
    clf = Classifier(["yes", "no"], model, tokenizer=tok, embedder=None)
    with pytest.raises((ValueError, TypeError), match=message):
        clf.set_params(**{name: bad})
    with pytest.raises((ValueError, TypeError), match=message):
        setattr(clf, name, bad)
