"""Reliability: bad input, long texts, determinism, fuzzing on five real tokenizers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge import Classifier, LabelError
from judge.prompts import PromptTemplate

from .conftest import TOKENIZERS, load_tokenizer

LABELS = ["card_arrival", "exchange_rate", "pin_blocked"]


def test_long_text_is_truncated_with_warning(tiny_llama):
    model, tok = tiny_llama
    clf = Classifier(LABELS, model, tokenizer=tok)
    long_text = "my card " * 3000  # 6000+ tokens, context is 4096
    with pytest.warns(UserWarning, match=r"1 text\(s\) were longer than the model's context \(4096 tokens\) allows and were truncated, \d+ text tokens cut"):
        proba = clf.predict_proba([long_text, "short"])
    assert np.isfinite(proba).all()
    # the instructions, label list and answer slot are intact: the cut prompt starts and ends
    # like the short one, and fits with room for the longest label
    short = clf.prompt_ids("short")
    with pytest.warns(UserWarning, match=r"1 text\(s\) were longer than the model's context"):
        cut = clf.prompt_ids(long_text)
    tail = tok(clf.render_prompt("short").split("short", 1)[1], add_special_tokens=False)["input_ids"]
    assert cut[-len(tail):] == short[-len(tail):] == tail
    head = tok(clf.render_prompt("short").split("short", 1)[0], add_special_tokens=False)["input_ids"]
    assert cut[:len(head) - 1] == head[:-1]
    assert len(cut) + max(len(s) for s in clf.scored_token_ids_) < 4096


def test_chat_required_but_missing(tiny_llama):
    model, tok = tiny_llama
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(str(load_tokenizer("gpt2").name_or_path))
    assert not plain.chat_template
    clf = Classifier(LABELS, model, tokenizer=plain, prompt=PromptTemplate(chat=True))
    with pytest.raises(ValueError, match=r"PromptTemplate\(chat=True\) but the tokenizer .* has no chat template"):
        clf.predict(["hi"])


def test_prompt_without_text_placeholder():
    with pytest.raises(ValueError, match=r"has no \{text\} placeholder"):
        PromptTemplate.from_string("Classify this")


def test_control_byte_label_on_decode_path(tiny_llama):
    """Byte-level BPE spells every byte: a label with a NUL byte is reachable and scored exactly."""
    model, tok = tiny_llama
    clf = Classifier(["ok", "bad\x00label"], model, tokenizer=tok, method="decode", top_k=2)
    scores = clf.decision_function(["hi"])
    assert np.isfinite(scores).all()  # both labels found by the beam search and rescored
    exact = Classifier(["ok", "bad\x00label"], model, tokenizer=tok, method="exact",
                       end_token=True).decision_function(["hi"])
    np.testing.assert_allclose(scores, exact, atol=1e-4)


def test_unspellable_label_is_refused_by_the_automaton():
    from judge.automaton.trie import TrieAutomaton
    from judge.automaton.vocab import Vocabulary

    vocab = Vocabulary.from_token_bytes([b"o", b"k", b"a", b"b", b"</s>"], special=[False] * 4 + [True],
                                        end_token_ids=[4])
    with pytest.raises(LabelError, match=r"cannot be spelled"):
        TrieAutomaton.build(["ok", "abc"], vocab)


def test_deterministic_across_runs(tiny_llama):
    model, tok = tiny_llama
    texts = ["my card is late", "what is the rate for dollars", "pin"]
    a = Classifier(LABELS, model, tokenizer=tok, batch_size=2).predict_proba(texts)
    b = Classifier(LABELS, model, tokenizer=tok, batch_size=2).predict_proba(texts)
    np.testing.assert_array_equal(a, b)
    c = Classifier(LABELS, model, tokenizer=tok, batch_size=1).predict_proba(texts)
    np.testing.assert_allclose(a, c, atol=1e-5)  # across batch sizes: float32 rounding only


@pytest.mark.parametrize("method", ["exact", "first_token", "decode"])
def test_batch_invariant_is_bit_identical_across_batch_sizes(smollm2, method):
    model, tok = smollm2
    labels = ["yes", "no", "maybe"] if method == "first_token" else LABELS
    texts = ["my card is late", "what is the rate for dollars today please", "pin", "card?"]
    runs = [Classifier(labels, model, tokenizer=tok, method=method, batch_size=bs, batch_invariant=True,
                       top_k=2).decision_function(texts) for bs in (1, 3, 8)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    alone = Classifier(labels, model, tokenizer=tok, method=method, batch_invariant=True,
                       top_k=2).decision_function(texts[1:2])
    np.testing.assert_array_equal(alone[0], runs[0][1])  # independent of the other texts in the call


_TINY = {}


def _tiny_for(name):
    if name not in _TINY:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        tok = load_tokenizer(name)
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048)
        _TINY[name] = (LlamaForCausalLM(cfg).eval(), tok)
    return _TINY[name]


_label = st.text(min_size=1, max_size=10)
_text = st.text(min_size=1, max_size=40).filter(lambda s: s.strip())


@pytest.mark.parametrize("name", TOKENIZERS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(labels=st.lists(_label, min_size=2, max_size=6, unique=True), texts=st.lists(_text, min_size=1, max_size=3),
       method=st.sampled_from(["auto", "exact", "decode"]))
def test_fuzz_output_is_always_a_label(name, labels, texts, method):
    model, tok = _tiny_for(name)
    try:
        clf = Classifier(labels, model, tokenizer=tok, method=method, top_k=2)
        proba = clf.predict_proba(texts)
    except LabelError as err:  # invalid label sets are refused with a clear message
        assert any(s in str(err) for s in ("empty or only whitespace", "both shown to the model",
                                           "cannot be spelled", "Duplicate")), str(err)
        return
    assert proba.shape == (len(texts), len(labels))
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-9)
    assert set(clf.predict(texts)) <= set(labels)


def test_label_spelled_only_by_a_special_token(tiny_llama):
    model, tok = tiny_llama
    clf = Classifier(["ok", "<|im_end|>"], model, tokenizer=tok, label_names="raw")
    with pytest.raises(LabelError, match=r"Label ' ?<\|im_end\|>' cannot be spelled by this tokenizer's vocabulary"):
        clf.predict(["hi"])


def test_think_then_answer_returns_labels(tiny_llama):
    model, tok = tiny_llama
    clf = Classifier(LABELS, model, tokenizer=tok, think=True, think_tokens=6, batch_size=2)
    texts = ["my card is late", "rate?", "pin"]
    proba = clf.predict_proba(texts)
    assert proba.shape == (3, 3) and np.isfinite(proba).all()
    assert set(clf.predict(texts)) <= set(LABELS)
    # the answer is scored after the reasoning and the cue, not right after the prompt
    plain = Classifier(LABELS, model, tokenizer=tok).predict_proba(texts)
    assert not np.allclose(proba, plain)


def test_label_made_of_underscores_is_shown_as_is(tiny_llama):
    model, tok = tiny_llama
    clf = Classifier(["_", "a_b"], model, tokenizer=tok)
    assert set(clf.predict(["x"])) <= {"_", "a_b"}
    assert [x.strip() for x in clf.surfaces_] == ["_", "a b"]
