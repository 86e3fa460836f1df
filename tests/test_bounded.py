"""Bounded scoring: the same argmax as full exact scoring, and probabilities within tolerance."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge import Classifier
from judge._math import softmax
from judge.calibration.state import Calibration
from judge.engine import OptionTrie
from judge.testing import phrases, tiny_model, tool_names

TEXTS = ["I am still waiting on my card?", "top up failed again", "what rate do you use", "pin blocked",
         "Where is the money I sent yesterday?"]
_MODELS = {}


def _model(arch, tok, seed):
    key = (arch, seed)
    if key not in _MODELS:
        window = 16 if arch in ("mistral", "gemma3") else None
        _MODELS[key] = tiny_model(arch, tok, seed=seed, sliding_window=window)
    return _MODELS[key]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(arch=st.sampled_from(["llama", "mistral", "gemma3"]), seed=st.integers(0, 2),
       k=st.integers(2, 30), family=st.sampled_from(["tools", "phrases"]),
       T=st.sampled_from([0.3, 1.0, 2.5]), bias_scale=st.sampled_from([0.0, 0.5, 2.0]), eps=st.sampled_from([1e-3, 1e-2, 0.1]))
def test_bounded_equals_full_exact(smollm2, arch, seed, k, family, T, bias_scale, eps):
    tok = smollm2[1]
    model = _model(arch, tok, seed)
    labels = (tool_names if family == "tools" else phrases)(k, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = Classifier(labels, model, tokenizer=tok, method="exact", batch_size=2)
        full = clf.decision_function(TEXTS)
        rng = np.random.default_rng(seed)
        bias = rng.normal(0, bias_scale, k) if bias_scale else None
        cal = Calibration(tuple(labels), bias, float(T), None, np.full((2, k), 1 / k), np.array([0, 1]))
        object.__setattr__(clf, "calibration_", cal)
        want = cal.transform(full)
        got = clf.predict(TEXTS)
        assert list(got) == [labels[i] for i in want.argmax(1)]
        approx = clf.predict_proba(TEXTS, tolerance=eps)
    tv = 0.5 * np.abs(approx - want).sum(axis=1)
    assert (tv <= eps + 1e-9).all(), tv
    np.testing.assert_allclose(approx.sum(axis=1), 1.0)


def test_bounded_feeds_fewer_tokens_and_zero_tolerance_is_full(tiny_llama):
    model, tok = tiny_llama
    labels = tool_names(40, 0)
    clf = Classifier(labels, model, tokenizer=tok, method="exact")
    full = clf.decision_function(TEXTS)
    fed_full = clf.engine_.last_usage_["input_tokens"]
    pred = clf.predict(TEXTS)
    fed_bounded = clf.engine_.last_usage_["input_tokens"]
    assert list(pred) == [labels[i] for i in full.argmax(1)]
    assert fed_bounded < fed_full
    np.testing.assert_array_equal(clf.predict_proba(TEXTS, tolerance=0.0), softmax(full))
    with pytest.raises(ValueError, match=r"tolerance must be a number in \[0, 1\), got 1.5"):
        clf.predict_proba(TEXTS, tolerance=1.5)


def test_option_trie_prefix_free():
    assert OptionTrie([[1, 2], [1, 3]]).prefix_free
    assert not OptionTrie([[1], [1, 3]]).prefix_free
