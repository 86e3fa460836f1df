"""Issue 20, saved files and arguments: fitted arrays stay bound to their labels; every calibrate() argument is checked.

A saved classifier whose ``classifier.json`` label list is edited *consistently* (every
``labels`` entry reordered or renamed) used to load and apply the fitted bias to the wrong
labels; the label list now lives in the safetensors metadata beside the arrays and a
mismatch is refused, naming both lists. ``calibrate(content_free=...)`` is validated even
when the chosen bias does not use it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from judge import Classifier

LABELS = ["card_arrival", "exchange_rate", "pin_blocked", "top_up_failed"]
TRAIN = [("Where is my card?", "card_arrival"), ("When will my card come?", "card_arrival"),
         ("What exchange rate do you use?", "exchange_rate"), ("euro to dollar rate", "exchange_rate"),
         ("My PIN is blocked", "pin_blocked"), ("wrong PIN three times", "pin_blocked"),
         ("My top up failed", "top_up_failed"), ("Top-up did not work", "top_up_failed")]


def _saved(tiny, tmp_path, bias="batch"):
    clf = Classifier(LABELS, tiny[0], tokenizer=tiny[1], batch_size=4)
    texts, y = zip(*TRAIN)
    clf.calibrate(texts, y, bias=bias)
    d = tmp_path / "c"
    clf.save(d, model_ref="tiny")
    return clf, d


@pytest.mark.parametrize("edit", [
    lambda labels: list(reversed(labels)),                      # every entry reordered
    lambda labels: [f"{x}_renamed" for x in labels],            # every entry renamed
], ids=["reordered", "renamed"])
def test_a_consistently_edited_label_list_is_refused(tiny_llama, tmp_path, edit):
    clf, d = _saved(tiny_llama, tmp_path)
    assert clf.calibration_.bias is not None
    cfg = json.loads((d / "classifier.json").read_text())
    new = edit(cfg["labels"])
    cfg["labels"] = new
    cfg["calibration"]["labels"] = new
    (d / "classifier.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"fitted for the labels \['card_arrival', 'exchange_rate', 'pin_blocked', "
                                         r"'top_up_failed'\], but classifier.json lists \['.*'\]; the bias would be "
                                         r"applied to the wrong labels"):
        Classifier.load(d, model=tiny_llama[0], tokenizer=tiny_llama[1])


def test_an_unedited_save_loads_with_the_same_calibration(tiny_llama, tmp_path):
    clf, d = _saved(tiny_llama, tmp_path)
    again = Classifier.load(d, model=tiny_llama[0], tokenizer=tiny_llama[1])
    np.testing.assert_array_equal(again.calibration_.bias, clf.calibration_.bias)
    texts = [t for t, _ in TRAIN]
    np.testing.assert_allclose(again.predict_proba(texts), clf.predict_proba(texts), atol=1e-9)


def test_arrays_saved_before_the_binding_load_with_a_warning(tiny_llama, tmp_path):
    from safetensors.numpy import load_file, save_file

    _, d = _saved(tiny_llama, tmp_path)
    f = d / "calibration.safetensors"
    save_file(load_file(str(f)), str(f))  # the same arrays, no label metadata (an older save)
    with pytest.warns(UserWarning, match=r"written before the fitted arrays were bound to their labels"):
        Classifier.load(d, model=tiny_llama[0], tokenizer=tiny_llama[1])


@pytest.mark.parametrize("bias", ["batch", None, "contextual"])
@pytest.mark.parametrize("content_free, message", [
    (("N/A", None), r"content_free\[1\] is NoneType None, not a string"),
    ("N/A", r"content_free must be a list or tuple of strings, e.g. \('N/A', '', '\[MASK\]'\); got str"),
    ((), r"needs at least one content-free input"),
])
def test_calibrate_checks_content_free_whatever_the_bias(tiny_llama, bias, content_free, message):
    clf = Classifier(LABELS, tiny_llama[0], tokenizer=tiny_llama[1], batch_size=4)
    texts, y = zip(*TRAIN)
    with pytest.raises(ValueError, match=message):
        clf.calibrate(texts, y, bias=bias, content_free=content_free)
    assert clf.calibration_ is None


def test_content_free_scores_refuse_non_strings(tiny_llama):
    clf = Classifier(LABELS, tiny_llama[0], tokenizer=tiny_llama[1])
    with pytest.raises(ValueError, match=r"content_free\[0\] is int 3, not a string"):
        clf.content_free_scores([3])
