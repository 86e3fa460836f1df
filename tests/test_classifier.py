"""Classifier scoring: exact == an independent brute force, invariances, path selection, errors.

The reference (``judge.testing.reference_logprobs``) tokenizes ``render_prompt(text) + label``
itself and runs one plain causal forward per label: it shares no code with the engine.
"""

from __future__ import annotations

import numpy as np
import pytest

from judge import Classifier, LabelError
from judge.testing import classifier_reference, reference_logprobs_ids

BANK = ["card_arrival", "card_linking", "card_not_working", "exchange_rate", "lost_or_stolen_card",
        "pin_blocked", "top_up_failed", "top_up_reverted"]
TEXTS = ["I am still waiting on my card?", "My top-up did not go through.",
         "What is the exchange rate today for euros to dollars?", "card gone"]


def _clf(model_tok, labels, **kw):
    model, tok = model_tok
    return Classifier(labels, model, tokenizer=tok, **kw)


def _brute(clf, text):
    """Reference scores: each label (plus the end token's text where it is scored) after the prompt."""
    return classifier_reference(clf, text)


@pytest.mark.parametrize("labels", [
    BANK,
    ["card", "card_arrival", "card_arrival_late", "c"],  # labels that are prefixes of others: end token added
    ["ABBR:abb", "ABBR:exp", "DESC:def", "DESC:desc", "NUM:date"],
])
def test_exact_equals_brute_force_tiny(tiny_llama, labels):
    clf = _clf(tiny_llama, labels, method="exact", batch_size=3)
    scores = clf.decision_function(TEXTS)
    assert scores.shape == (len(TEXTS), len(labels))
    for i, t in enumerate(TEXTS):
        np.testing.assert_allclose(scores[i], _brute(clf, t), atol=1e-4, rtol=0)
    # the prompt ids are the rendered prompt tokenized whole
    tok = clf.tokenizer_
    assert clf.prompt_ids(TEXTS[0]) == tok(clf.render_prompt(TEXTS[0]), add_special_tokens=False)["input_ids"]


def test_exact_equals_brute_force_smollm2(smollm2):
    clf = _clf(smollm2, BANK[:6], method="exact")
    scores = clf.decision_function(TEXTS[:2])
    for i, t in enumerate(TEXTS[:2]):
        np.testing.assert_allclose(scores[i], _brute(clf, t), atol=1e-4, rtol=0)
    proba = clf.predict_proba(TEXTS[:2])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.engine_.path_ == "tree"


def test_end_token_only_where_needed(tiny_llama):
    clf = _clf(tiny_llama, ["card", "card_arrival", "exchange_rate"])
    end = clf.engine_.end_id_ if clf.method_ else None
    seqs = clf.scored_token_ids_
    label_ids = clf.label_token_ids
    assert seqs[0] == label_ids[0] + [end]  # "card" is a token prefix of "card arrival"
    assert seqs[1] == label_ids[1] and seqs[2] == label_ids[2]


def test_single_pass_equals_fallback_path(tiny_llama):
    """The tree pass (text + trie in one forward) equals the ordinary causal fallback."""
    from judge.engine import Engine

    model, tok = tiny_llama
    tree = _clf(tiny_llama, BANK, method="exact").decision_function(TEXTS)
    clf = _clf(tiny_llama, BANK, method="exact")
    object.__setattr__(clf, "engine_", Engine(model, tok, path="fallback"))
    clf.engine_.setup()
    assert clf.engine_.path_ == "fallback"
    fb = clf.decision_function(TEXTS)
    np.testing.assert_allclose(tree, fb, atol=1e-4)


def test_permuting_labels_permutes_columns(tiny_llama):
    perm = np.random.default_rng(0).permutation(len(BANK))
    a = _clf(tiny_llama, BANK).decision_function(TEXTS)
    b = _clf(tiny_llama, [BANK[i] for i in perm]).decision_function(TEXTS)
    np.testing.assert_allclose(b, a[:, perm], atol=1e-5)


def test_batch_size_invariance(tiny_llama):
    a = _clf(tiny_llama, BANK, batch_size=1).decision_function(TEXTS)
    b = _clf(tiny_llama, BANK, batch_size=3).decision_function(TEXTS)
    c = _clf(tiny_llama, BANK, batch_size=16).decision_function(TEXTS)
    np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_allclose(a, c, atol=1e-5)


def test_auto_takes_the_fast_path_only_for_single_token_labels(tiny_llama):
    single = ["yes", "no", "maybe"]  # one token each: first-token scores are the label scores
    fast = _clf(tiny_llama, single)
    s_fast = fast.decision_function(TEXTS)
    assert fast.method_ == "first_token"
    s_exact = _clf(tiny_llama, single, method="exact").decision_function(TEXTS)
    np.testing.assert_allclose(s_fast, s_exact, atol=1e-5)
    # first_token scores are log P(first token) by an independent reference
    tok = fast.tokenizer_
    ids = tok(fast.render_prompt(TEXTS[0]), add_special_tokens=False)["input_ids"]
    ref = reference_logprobs_ids(fast.model_, ids, [[s[0]] for s in fast.label_token_ids])
    np.testing.assert_allclose(s_fast[0], ref, atol=1e-4)
    shared = _clf(tiny_llama, ["card_arrival", "card_linking"])
    assert shared.method_ == "exact"
    # distinct first tokens but several tokens per label: auto scores the whole labels (chosen on
    # validation, bench/first_token.py); first_token stays available on request
    multi = _clf(tiny_llama, ["card_arrival", "exchange_rate", "pin_blocked"])
    assert len({s[0] for s in multi.label_token_ids}) == 3 and multi.method_ == "exact"
    assert _clf(tiny_llama, ["card_arrival", "exchange_rate"], method="first_token").method_ == "first_token"
    with pytest.raises(ValueError, match=r"method='first_token' needs every label to start with a different token"):
        _clf(tiny_llama, ["card_arrival", "card_linking"], method="first_token").decision_function(TEXTS)


def test_decode_path_returns_distinct_labels_with_exact_scores(tiny_llama):
    codes = [f"{c}{i:02d}.{j}" for c in "ABC" for i in range(10) for j in range(3)]
    clf = _clf(tiny_llama, codes, method="decode", top_k=3, batch_size=2)
    scores = clf.decision_function(TEXTS[:3])
    assert scores.shape == (3, len(codes))
    assert (np.isfinite(scores).sum(axis=1) == 3).all()  # top_k distinct labels, every row
    pred = clf.predict(TEXTS[:3])
    assert set(pred) <= set(codes)
    np.testing.assert_allclose(clf.predict_proba(TEXTS[:3]).sum(axis=1), 1.0)
    # the labels it found carry their exact canonical log P(label + end token)
    exact = _clf(tiny_llama, codes, method="exact", end_token=True).decision_function(TEXTS[:3])
    found = np.isfinite(scores)
    np.testing.assert_allclose(scores[found], exact[found], atol=1e-4)


def test_greedy_decode_finds_the_exact_argmax_when_it_is_clear(tiny_llama):
    labels = ["yes", "no", "maybe"]
    exact = _clf(tiny_llama, labels, method="exact", end_token=True).decision_function(TEXTS)
    greedy = _clf(tiny_llama, labels, method="decode", top_k=1).decision_function(TEXTS)
    assert (np.isfinite(greedy).sum(axis=1) == 1).all()
    # single-token labels followed by the end token: greedy picks the best first token
    assert (np.argmax(greedy, 1) == np.argmax(exact, 1)).all() or \
        (np.argmax(greedy, 1) == np.argmax(_clf(tiny_llama, labels, method="first_token")
                                          .decision_function(TEXTS), 1)).all()
    found = np.isfinite(greedy)
    np.testing.assert_allclose(greedy[found], exact[found], atol=1e-4)


def test_predict_returns_labels_in_order(tiny_llama):
    clf = _clf(tiny_llama, BANK)
    pred = clf.predict(TEXTS)
    proba = clf.predict_proba(TEXTS)
    assert pred.dtype == object and list(pred) == [BANK[i] for i in proba.argmax(1)]
    assert list(clf.classes_) == BANK
    assert clf.predict([]).shape == (0,)


@pytest.mark.parametrize("texts, exc, message", [
    ("just one text", TypeError, r"texts must be a list of strings, got a single str"),
    (["ok", None], TypeError, r"Text 1 is NoneType \(None\), not a str"),
    (["ok", 3], TypeError, r"Text 1 is int"),
    (["ok", "  "], ValueError, r"Text 1 is empty or only whitespace"),
])
def test_bad_texts(tiny_llama, texts, exc, message):
    with pytest.raises(exc, match=message):
        _clf(tiny_llama, BANK).predict(texts)


@pytest.mark.parametrize("kwargs, exc, message", [
    ({"labels": []}, LabelError, r"The label list is empty"),
    ({"labels": ["a", "a"]}, LabelError, r"Duplicate label 'a'"),
    ({"labels": ["a_b", "a b"]}, LabelError, r"both shown to the model as 'a b'"),
    ({"labels": ["x", ""]}, LabelError, r"Label 1 is empty or only whitespace"),
    ({"labels": ["x", 1]}, LabelError, r"Label 1 is a int"),
    ({"labels": ["x", "y"], "method": "fastest"}, ValueError, r"Unknown method 'fastest'; valid methods are"),
    ({"labels": ["x", "y"], "batch_size": 0}, ValueError, r"batch_size must be a positive int, got 0"),
])
def test_bad_arguments(kwargs, exc, message):
    labels = kwargs.pop("labels")
    with pytest.raises(exc, match=message):
        Classifier(labels, **kwargs)


def test_model_object_without_tokenizer(tiny_llama):
    with pytest.raises(ValueError, match=r"A loaded model \(LlamaForCausalLM\) was given without its tokenizer"):
        Classifier(["a", "b"], tiny_llama[0]).predict(["hi"])


def test_single_label_is_refused(tiny_llama):
    """One label answered every text with probability 1 (issue 32): refused, naming what to ask instead."""
    with pytest.raises(LabelError, match=r"needs at least two labels; got one, 'only_label'"):
        _clf(tiny_llama, ["only_label"])
