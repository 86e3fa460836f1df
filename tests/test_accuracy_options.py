"""The accuracy options chosen on validation (issue 13): rotation averaging, fitted bias, the default prompt.

Rotation averaging is checked against a reference that shares no engine code: each rotated
prompt is rendered by a classifier with ``PromptTemplate(rotate=...)`` and scored by
``judge.testing.classifier_reference`` (it tokenizes ``prompt + label`` itself).
"""

from __future__ import annotations

import numpy as np
import pytest

from judge import Classifier
from judge.calibration import fit_bias_temperature
from judge.labels import label_names_for, natural_label
from judge.prompts import DEFAULT_PROMPT, PromptTemplate
from judge.testing import classifier_reference

LABELS = ["card arrival", "card linking", "exchange rate", "refund not showing up", "top up failed"]
TEXTS = ["Where is my new card?", "The refund is still missing."]


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    return tiny_llama


def test_prompt_template_rotate_starts_the_list_later():
    p = PromptTemplate(chat=False, rotate=2)
    prefix, _ = p.split(None, ["c", "a", "b", "d"])
    listed = [line[2:] for line in prefix.splitlines() if line.startswith("- ")]
    assert listed == ["c", "d", "a", "b"]  # sorted a b c d, started 2 places later
    assert PromptTemplate(chat=False, rotate=4).split(None, list("abcd")) == PromptTemplate(chat=False).split(None, list("abcd"))


@pytest.mark.parametrize("rotations", [2, 3])
def test_rotations_average_the_rotated_prompts_exactly(tiny, rotations):
    model, tok = tiny
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", prompt=PromptTemplate(chat=False),
                     rotations=rotations)
    got = clf.decision_function(TEXTS)
    K = len(LABELS)
    refs = []
    for r in range(rotations):
        one = Classifier(LABELS, model, tokenizer=tok, method="exact",
                         prompt=PromptTemplate(chat=False, rotate=(r * K) // rotations))
        one.setup()
        refs.append(np.stack([classifier_reference(one, t) for t in TEXTS]))
    np.testing.assert_allclose(got, np.mean(refs, axis=0), atol=2e-4)
    assert len({tuple(x.ravel().round(6)) for x in refs}) == rotations  # the orders really differ
    # predict is the argmax of the averaged scores (bounded scoring does not apply to averages)
    assert list(clf.predict(TEXTS)) == list(clf.classes_[got.argmax(1)])


def test_rotations_refuse_bad_values_and_the_decode_path(tiny):
    model, tok = tiny
    for bad in (0, 9, 1.5, True):
        with pytest.raises(ValueError, match="rotations"):
            Classifier(LABELS, model, tokenizer=tok, rotations=bad)
    clf = Classifier(LABELS, model, tokenizer=tok, method="decode", rotations=2)
    with pytest.raises(ValueError, match="decode"):
        clf.decision_function(TEXTS)


def test_rotations_survive_save_and_load(tiny, tmp_path):
    model, tok = tiny
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", rotations=2)
    clf.save(tmp_path / "c", model_ref="unused-in-this-test")
    import json

    assert json.loads((tmp_path / "c" / "classifier.json").read_text())["rotations"] == 2


def test_calibrate_with_a_fitted_bias(tiny):
    model, tok = tiny
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact")
    texts = [f"text number {i} about cards" for i in range(20)]
    y = [LABELS[i % len(LABELS)] for i in range(20)]
    scores = clf.decision_function(texts)
    clf.calibrate(texts, y, bias="batch+fit", scores=scores, bias_l2=10.0)
    assert clf.calibration_.bias_method == "batch+fit"
    # the same numbers by hand: batch prior, then a residual fitted jointly with the temperature
    from judge.calibration import batch_bias

    b0 = batch_bias(scores)
    yi = np.array([LABELS.index(v) for v in y])
    d, T = fit_bias_temperature(scores - b0, yi, l2=10.0)
    np.testing.assert_allclose(clf.bias_, b0 + d, atol=1e-6)
    assert clf.temperature_ == pytest.approx(T)
    before = clf.calibration_
    with pytest.raises(ValueError, match="temperature"):
        clf.calibrate(texts, y, bias="contextual+fit", temperature=False, scores=scores)
    with pytest.raises(ValueError, match="bias_l2"):
        clf.calibrate(texts, y, bias="batch+fit", bias_l2=-1, scores=scores)
    with pytest.raises(ValueError, match="Unknown bias"):
        clf.calibrate(texts, y, bias="fitted", scores=scores)
    assert clf.calibration_ is before


def test_default_prompt_and_names_are_what_validation_chose():
    # bench/results/accuracy_select.json: the completion prompt and lower-cased names won on all four
    assert DEFAULT_PROMPT.chat is False and DEFAULT_PROMPT.max_listed_labels == 0
    assert natural_label("Refund_not_showing_up") == "refund not showing up"  # no capital sorts it first
    assert natural_label("NUM:date") == "NUM:date" and natural_label("PIN") == "PIN"  # acronyms kept
    assert label_names_for(["Refund_not_showing_up", "card_arrival"]) == ["refund not showing up", "card arrival"]
    from judge.calibration.state import AUTO_BIAS

    assert AUTO_BIAS == "batch+fit" and Classifier.calibrate.__kwdefaults__["bias_l2"] == 1.0


def test_rotations_warn_when_the_labels_are_not_listed(tiny):
    model, tok = tiny
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", rotations=2)  # DEFAULT_PROMPT lists none
    with pytest.warns(UserWarning, match="rotations=2 has no effect"):
        got = clf.decision_function(TEXTS)
    one = Classifier(LABELS, model, tokenizer=tok, method="exact").decision_function(TEXTS)
    np.testing.assert_array_equal(got, one)
