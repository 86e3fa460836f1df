"""The scoring paths' steps (judge/label_paths.py): texts cut to the context at its limit, the first-token path
scoring first tokens only, warnings that name the caller's line, capabilities refused by name.

A tiny random Llama over the packaged tokenizer; its context is set small (64 positions) where truncation is
checked, so a text one token over the limit is easy to build.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np
import pytest

from judge import Classifier
from judge.label_paths import prompt_items, score_decode, score_exact
from judge.testing import Reference, reference_logprobs_ids, tiny_model, tiny_pair

LIMIT = 64


@pytest.fixture(scope="module")
def short_context():
    tok = tiny_pair()[1]
    return tiny_model("llama", tok, max_position_embeddings=LIMIT), tok


def _text_of(c, n_prompt_tokens):
    """A text whose whole prompt is exactly ``n_prompt_tokens`` tokens (found by growing it word by word)."""
    for n in range(1, 200):
        t = " ".join(["card"] * n)
        size = len(c.engine.encode(c.pieces(t)))
        if size == n_prompt_tokens:
            return t
        if size > n_prompt_tokens:
            break
    raise AssertionError(f"no text gives a {n_prompt_tokens}-token prompt")


def test_a_prompt_that_fits_exactly_is_kept_and_one_token_more_is_cut(short_context):
    model, tok = short_context
    c = Classifier(["card_arrival", "exchange_rate"], model, tokenizer=tok).compiled_
    reserve = c.max_label_tokens + 1  # the answer slot: the longest label and its end token
    fits = _text_of(c, LIMIT - reserve)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no truncation warning at the limit
        kept = prompt_items(c, [fits])[0]
    assert kept.ids == c.engine.encode(c.pieces(fits)) and len(kept.ids) + reserve == LIMIT
    over = _text_of(c, LIMIT - reserve + 1)
    with pytest.warns(UserWarning, match=r"1 text\(s\) were longer than the model's context \(64 tokens\) allows "
                                         r"and were truncated, 1 text tokens cut in all"):
        cut = prompt_items(c, [over])[0]
    assert len(cut.ids) + reserve <= LIMIT and len(cut.ids) < len(c.engine.encode(c.pieces(over)))
    assert cut.ids[-3:] == kept.ids[-3:]  # the answer cue is kept whole


def _outside_the_package(records) -> bool:
    """Every warning names a file outside judge/: the line that called the classifier (this file, or a wrapper
    between this file and the package, such as a mutation tool's trampoline)."""
    import judge

    package = os.path.dirname(os.path.abspath(judge.__file__)) + os.sep
    return bool(records) and all(not os.path.abspath(w.filename).startswith(package) for w in records)


def test_warnings_name_the_line_that_called_the_classifier(short_context):
    model, tok = short_context
    clf = Classifier(["card_arrival", "exchange_rate"], model, tokenizer=tok)
    long = "my card " * 100
    for call in (lambda: clf.predict_proba([long]), lambda: clf.decision_function([long]),
                 lambda: clf.predict([long]), lambda: clf.prompt_ids(long)):
        with pytest.warns(UserWarning, match="were truncated") as rec:
            call()
        assert _outside_the_package(rec)
    model, tok = tiny_pair()
    from judge.testing import icd_codes

    search = Classifier(icd_codes(60, 3), model, tokenizer=tok, decode_above=30, search_budget=5)
    for call in (lambda: search.predict(["Cholera"]), lambda: search.decision_function(["Cholera"])):
        with pytest.warns(UserWarning, match="not certified") as rec:
            call()
        assert _outside_the_package([w for w in rec if "not certified" in str(w.message)])


def test_first_token_on_request_scores_only_each_labels_first_token():
    """method='first_token' with labels of several tokens: log P(first token), by the independent reference,
    not the labels' sequence log-probabilities."""
    model, tok = tiny_pair()
    clf = Classifier(["card_arrival", "exchange_rate", "pin_blocked"], model, tokenizer=tok, method="first_token")
    c = clf.compiled_
    assert all(len(s) > 1 for s in c.label_seqs)
    texts = ["Where is my card?", "what rate for euros"]
    got = score_exact(c, texts)
    for i, t in enumerate(texts):
        ids = tok(clf.render_prompt(t), add_special_tokens=False)["input_ids"]
        np.testing.assert_allclose(got[i], reference_logprobs_ids(model, ids, [s[:1] for s in c.label_seqs]),
                                   atol=1e-4, rtol=0)
    exact = Classifier(["card_arrival", "exchange_rate", "pin_blocked"], model, tokenizer=tok, method="exact")
    assert not np.allclose(got, exact.decision_function(texts), atol=1e-3)


def test_decode_without_a_vocabulary_is_refused_naming_the_decode_path():
    model, tok = tiny_pair()
    c = Classifier(["A01", "A02", "B10"], model, tokenizer=tok, method="decode").compiled_
    ref = dataclasses.replace(c, engine=Reference(model, tok).setup())  # the model here, but no vocabulary
    with pytest.raises(TypeError, match=r"^method='decode' needs the tokenizer's vocabulary .*which a Reference "
                                        r"does not declare"):
        score_decode(c=ref, texts=["Cholera"])


def test_prefetched_keeps_apart_items_that_differ_only_in_first_only():
    """The same prompt and options scored in full and by first token are two results, never one read for the other."""
    from judge.engine import Engine, Item
    from judge.label_paths import item_key, prefetched

    eng = Engine(*tiny_pair())
    full, first = Item([1, 2, 3], [[7, 8], [9]]), Item([1, 2, 3], [[7, 8], [9]], first_only=True)
    assert item_key(full) != item_key(first)
    with prefetched(eng, [full, first]) as memo:
        assert len(memo) == 2
        np.testing.assert_allclose(memo[item_key(full)], eng.score_items([full])[0], atol=1e-6)
        np.testing.assert_allclose(memo[item_key(first)], eng.score_items([first])[0], atol=1e-6)
        assert not np.allclose(memo[item_key(full)], memo[item_key(first)])
