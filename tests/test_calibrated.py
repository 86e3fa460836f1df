"""Classifier.calibrate / abstention / conformal sets / persistence / Cascade."""

from __future__ import annotations

import json

import numpy as np
import pytest

from judge import Cascade, Classifier, NotCalibratedError

LABELS = ["card_arrival", "exchange_rate", "pin_blocked", "top_up_failed"]
TRAIN = [("Where is my card? It has not arrived.", "card_arrival"),
         ("When will my card be delivered?", "card_arrival"),
         ("What exchange rate do you use?", "exchange_rate"),
         ("How much is one euro in dollars?", "exchange_rate"),
         ("My PIN is blocked, help", "pin_blocked"),
         ("I entered the wrong PIN three times", "pin_blocked"),
         ("My top up failed", "top_up_failed"),
         ("Top-up did not work", "top_up_failed")]
TEST = ["card not here yet", "rate for GBP?", "pin locked", "top up error"]


@pytest.fixture
def clf(tiny_llama):
    model, tok = tiny_llama
    return Classifier(LABELS, model, tokenizer=tok, batch_size=4)


def test_method_order_errors(clf):
    with pytest.raises(NotCalibratedError, match=r"call calibrate\(texts, y, target_accuracy=...\) .* before predict\(abstain=True\)"):
        clf.predict(TEST, abstain=True)
    with pytest.raises(NotCalibratedError, match=r"call calibrate\(texts, y\) before predict_set\(\)"):
        clf.predict_set(TEST)
    with pytest.raises(NotCalibratedError, match=r"Cascade\(\.\.\., threshold=0\.7\)"):
        Cascade(clf, lambda t: ["card_arrival"] * len(t)).predict(TEST)


def test_calibrate_fits_and_changes_probabilities(clf):
    texts, y = zip(*TRAIN)
    raw = clf.predict_proba(TEST)
    clf.calibrate(texts, y, coverage=0.5)
    assert clf.bias_.shape == (len(LABELS),) and np.isfinite(clf.bias_).all()
    assert clf.temperature_ > 0
    assert 0 <= clf.threshold_ <= 1
    cal = clf.predict_proba(TEST)
    np.testing.assert_allclose(cal.sum(1), 1.0)
    assert not np.allclose(cal, raw)
    rep = clf.calibration_report_
    assert rep["n"] == len(TRAIN) and {"ece", "ece_raw", "nll", "accuracy"} <= set(rep)
    pred = clf.predict(TEST, abstain=True)
    conf = cal.max(1)
    assert [p is None for p in pred] == list(conf < clf.threshold_)
    sets = clf.predict_set(TEST, alpha=0.2)
    assert len(sets) == len(TEST) and all(s and set(s) <= set(LABELS) for s in sets)


def test_temperature_never_changes_argmax(clf):
    texts, y = zip(*TRAIN)
    clf.calibrate(texts, y, bias=None)
    assert clf.bias_ is None
    np.testing.assert_array_equal(clf.predict_proba(TEST).argmax(1), clf.decision_function(TEST).argmax(1))


@pytest.mark.parametrize("kwargs, exc, message", [
    ({"y": ["card_arrival"] * 7}, ValueError, r"texts and y differ in length \(8 vs 7\)"),
    ({"y": ["nope"] * 8}, ValueError, r"1 value\(s\) in y are not labels of this classifier, e.g. \['nope'\]"),
    ({"bias": "prior"}, ValueError, r"Unknown bias 'prior'; valid values are"),
    ({"target_accuracy": 0.9, "coverage": 0.5}, ValueError, r"Pass at most one of target_accuracy and coverage"),
])
def test_calibrate_bad_arguments(clf, kwargs, exc, message):
    texts, y = zip(*TRAIN)
    kwargs.setdefault("y", y)
    with pytest.raises(exc, match=message):
        clf.calibrate(texts, **kwargs)


def test_save_load_roundtrip_identical(clf, tiny_llama, tmp_path):
    texts, y = zip(*TRAIN)
    clf.calibrate(texts, y, coverage=0.5)
    before = clf.predict_proba(TEST)
    with pytest.raises(ValueError, match=r"holds a model object \(LlamaForCausalLM\), which cannot be saved by reference"):
        clf.save(tmp_path / "c")
    clf.save(tmp_path / "c", model_ref="tiny-llama")
    cfg = json.loads((tmp_path / "c" / "classifier.json").read_text())
    assert cfg["labels"] == LABELS and cfg["calibration"]["temperature"] == clf.temperature_
    again = Classifier.load(tmp_path / "c", model=tiny_llama[0], tokenizer=tiny_llama[1])
    np.testing.assert_array_equal(again.predict_proba(TEST), before)
    assert again.threshold_ == clf.threshold_
    np.testing.assert_array_equal(again.predict(TEST, abstain=True), clf.predict(TEST, abstain=True))


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"classifier.json does not exist"):
        Classifier.load(tmp_path)
    (tmp_path / "classifier.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"is not valid JSON"):
        Classifier.load(tmp_path)
    (tmp_path / "classifier.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match=r"is not a trie-judge classifier of format version 2"):
        Classifier.load(tmp_path)


def test_cascade_routes_low_confidence_rows(clf):
    proba = clf.predict_proba(TEST)
    threshold = float(np.median(proba.max(1)))
    calls = []

    def big(texts):
        calls.append(list(texts))
        return ["pin_blocked"] * len(texts)

    cas = Cascade(clf, big, threshold=threshold)
    pred = cas.predict(TEST)
    low = proba.max(1) < threshold
    assert calls == [[t for t, lo in zip(TEST, low) if lo]]
    first = clf.classes_[proba.argmax(1)]
    assert list(pred) == [("pin_blocked" if lo else f) for f, lo in zip(first, low)]
    assert cas.route_stats_["fallback"] == int(low.sum()) and cas.route_stats_["n"] == len(TEST)
    report = cas.evaluate(TEST, ["card_arrival", "exchange_rate", "pin_blocked", "top_up_failed"])
    assert set(report) == {"n", "first", "fallback", "cascade", "fallback_fraction"}
    assert report["fallback"]["accuracy"] == 0.25


def test_cascade_curve_routes_least_confident_first(clf):
    gold = ["card_arrival", "exchange_rate", "pin_blocked", "top_up_failed"]
    proba = clf.predict_proba(TEST)
    first = clf.classes_[proba.argmax(1)]
    cas = Cascade(clf, lambda t: [gold[TEST.index(x)] for x in t])  # an oracle fallback
    pts = cas.curve(TEST, gold, fractions=[0.0, 0.5, 1.0])
    assert [p["routed"] for p in pts] == [0.0, 0.5, 1.0]
    assert pts[0]["accuracy"] == float(np.mean(first == np.array(gold, dtype=object)))
    assert pts[-1]["accuracy"] == 1.0  # everything routed to the oracle
    low = np.argsort(proba.max(1), kind="stable")[:2]
    want = first.astype(object).copy()
    want[low] = np.array(gold, dtype=object)[low]
    assert pts[1]["accuracy"] == float(np.mean(want == np.array(gold, dtype=object)))
    # routing below the reported threshold reproduces the point
    cas.threshold = pts[1]["threshold"]
    assert float(np.mean(cas.predict(TEST) == np.array(gold, dtype=object))) == pts[1]["accuracy"]
    assert pts[0]["seconds"] <= pts[1]["seconds"] <= pts[2]["seconds"]
    with pytest.raises(ValueError, match="fractions"):
        cas.curve(TEST, gold, fractions=[1.5])


def test_cascade_rejects_bad_fallback(clf, tiny_llama):
    with pytest.raises(ValueError, match=r"returned 1 answer\(s\) that are not labels, e.g. \['maybe'\]"):
        Cascade(clf, lambda t: ["maybe"] + ["pin_blocked"] * (len(t) - 1), threshold=1.0).predict(TEST[:2])
    other = Classifier(["a", "b"], tiny_llama[0], tokenizer=tiny_llama[1])
    with pytest.raises(ValueError, match=r"different label sets"):
        Cascade(clf, other)
    with pytest.raises(ValueError, match=r"threshold must be a probability in \[0, 1\], got 3"):
        Cascade(clf, other.predict, threshold=3)
