"""A label set per text in one call (judge.label_sets): equal to one classifier per set, one model pass, bad sets refused."""

from __future__ import annotations

import numpy as np
import pytest

from judge import Classifier, classify
from judge.engine import Engine
from judge.testing import tiny_pair

TEXTS = ["Where is my card?", "what rate for euros", "Is it going to rain?", "My pin is blocked", "snow tomorrow?"]
BANK = ["card_arrival", "exchange_rate", "pin_blocked"]
WEATHER = {"rain": "water falling", "sun": "clear skies", "snow": None}
SETS = [BANK, BANK[:2], WEATHER, list(reversed(BANK)), WEATHER]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def _count_calls(monkeypatch):
    calls = []
    real = Engine.score_items

    def counted(self, items, **kw):
        calls.append(len(list(items)))
        return real(self, items, **kw)

    monkeypatch.setattr(Engine, "score_items", counted)
    return calls


@pytest.mark.parametrize("method", ["exact", "auto"])
def test_each_text_gets_what_one_classifier_per_set_gives_in_one_model_call(pair, monkeypatch, method):
    model, tok = pair
    calls = _count_calls(monkeypatch)
    out = classify(TEXTS, SETS, model=model, tokenizer=tok, method=method, embedder=None)
    assert len(calls) == 1  # one scoring call: every text's prompt and each set's content-free inputs
    from judge.calibration.bias import CONTENT_FREE
    from judge.label_paths import prompt_items

    prompts = set()  # each distinct prompt once per path (sets whose prompts are the same share it, options merged)
    for i, labels in enumerate(SETS):
        c = Classifier(labels, model, tokenizer=tok, method=method, embedder=None).compiled_
        prompts |= {(tuple(it.ids), it.first_only) for it in prompt_items(c, [TEXTS[i], *CONTENT_FREE])}
    assert calls[0] == len(prompts) < len(TEXTS) + 3 * 4
    for i, labels in enumerate(SETS):
        rows = [j for j, s in enumerate(SETS) if s == labels]  # the texts that share the set, as one call
        want = Classifier(labels, model, tokenizer=tok, method=method, embedder=None).predict_proba(
            [TEXTS[j] for j in rows])[rows.index(i)]
        assert out[i].labels == tuple(labels)
        assert np.allclose(out[i].proba, want, atol=1e-6), (i, out[i].proba, want)
        assert out[i].label == out[i].labels[int(np.argmax(want))]
        assert abs(sum(out[i].probabilities.values()) - 1) < 1e-9


def test_the_exact_scores_equal_one_classifier_per_set(pair, monkeypatch):
    """With no prior and no embedder the answer is the softmax of the exact scores: those are compared."""
    model, tok = pair
    out = classify(TEXTS, SETS, model=model, tokenizer=tok, method="exact", embedder=None, prior=None)
    for i, labels in enumerate(SETS):
        raw = Classifier(labels, model, tokenizer=tok, method="exact", embedder=None).decision_function([TEXTS[i]])[0]
        assert np.allclose(np.log(out[i].proba), raw - np.logaddexp.reduce(raw), atol=1e-6)


def test_a_fused_classifier_is_answered_per_set_with_its_embedder(pair):
    model, tok = pair
    clf = Classifier(BANK, model, tokenizer=tok, method="exact", embedder="minilm")
    out = classify(TEXTS[:3], SETS[:3], classifier=clf)
    for i in range(3):
        want = Classifier(SETS[i], model, tokenizer=tok, method="exact", embedder="minilm").predict_proba([TEXTS[i]])[0]
        assert np.allclose(out[i].proba, want, atol=1e-6)


def test_sets_on_paths_that_are_not_prefetched_are_scored_by_their_own_calls(pair, monkeypatch):
    model, tok = pair
    calls = _count_calls(monkeypatch)
    opts = dict(method="exact", embedder=None, think=True, think_tokens=2)
    out = classify(TEXTS[:2], [BANK, BANK], model=model, tokenizer=tok, **opts)
    assert len(calls) == 2  # think-then-answer: the set's own calls (its prior's, its texts')
    want = Classifier(BANK, model, tokenizer=tok, **opts).predict_proba(TEXTS[:2])
    assert np.allclose(np.stack([a.proba for a in out]), want, atol=1e-6)


@pytest.mark.parametrize("sets, match", [
    ([BANK, []], r"label_sets\[1\] \(for text 1: 'what rate for euros'\).*empty"),
    ([BANK, ["only"]], r"label_sets\[1\].*at least two labels"),
    ([BANK, ["a", "a"]], r"label_sets\[1\].*"),
    ([BANK, "rain,sun"], r"label_sets\[1\].*a list of labels"),
    ([BANK], r"1 sets for 2 texts"),
])
def test_malformed_sets_are_refused_naming_the_text(pair, sets, match):
    model, tok = pair
    with pytest.raises((ValueError, TypeError), match=match):
        classify(TEXTS[:2], sets, model=model, tokenizer=tok)


def test_a_fitted_or_calibrated_classifier_is_refused(pair):
    model, tok = pair
    clf = Classifier(BANK, model, tokenizer=tok, embedder=None)
    clf.calibrate(TEXTS[:3] * 8, ["card_arrival", "exchange_rate", "pin_blocked"] * 8)
    with pytest.raises(ValueError, match="calibrated or fitted"):
        classify(TEXTS[:1], [BANK], classifier=clf)
    with pytest.raises(TypeError, match="not both"):
        classify(TEXTS[:1], [BANK], classifier=Classifier(BANK, model, tokenizer=tok), prior=None)
    assert classify([], [], classifier=Classifier(BANK, model, tokenizer=tok)) == []
