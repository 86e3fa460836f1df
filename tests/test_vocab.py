"""Vocabulary: every token's bytes agree with the tokenizer's own decode."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from judge.automaton.vocab import Vocabulary, bytes_to_unicode

from .conftest import TOKENIZERS, load_tokenizer, load_vocab


def test_byte_table_is_a_bijection():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256


@pytest.mark.parametrize("name", TOKENIZERS)
def test_every_token_matches_decode(name):
    tok, vocab = load_tokenizer(name), load_vocab(name)
    assert vocab.size == len(tok)
    # An anchor token in front, so SentencePiece's "strip the leading space" and
    # byte-level "add prefix space" rules apply to the anchor, not to the token.
    anchor = tok.convert_tokens_to_ids("a" if vocab.kind == "byte_level" else "▁a")
    a_bytes = vocab.token_bytes[anchor]
    base = tok.decode([anchor], clean_up_tokenization_spaces=False)
    cut = len(a_bytes.decode()) - len(base)  # what the decoder strips from the start
    ids = np.flatnonzero(~vocab.special)
    assert len(ids) > 0.9 * vocab.size - 10000
    decoded = tok.batch_decode([[anchor, int(i)] for i in ids], clean_up_tokenization_spaces=False)
    bad = []
    for i, got in zip(ids, decoded):
        want = (a_bytes + vocab.token_bytes[i]).decode("utf-8", "replace")[cut:]
        if got != want:
            bad.append((int(i), tok.convert_ids_to_tokens(int(i)), got, want))
    assert not bad, f"{len(bad)} tokens differ, e.g. {bad[:5]}"


@pytest.mark.parametrize("name", TOKENIZERS)
def test_special_and_end_tokens(name):
    tok, vocab = load_tokenizer(name), load_vocab(name)
    for i in tok.all_special_ids:
        assert vocab.special[i] and vocab.token_bytes[i] == b""
    assert vocab.end_token_ids, "every tokenizer here has an end token"
    for i in vocab.end_token_ids:
        assert vocab.special[i]
    if tok.eos_token_id is not None:
        assert tok.eos_token_id in vocab.end_token_ids


def test_known_tokens():
    assert load_vocab("gpt2").token_bytes[load_tokenizer("gpt2").convert_tokens_to_ids("Ġthe")] == b" the"
    mistral = load_tokenizer("mistral7b")
    v = load_vocab("mistral7b")
    assert v.token_bytes[mistral.convert_tokens_to_ids("<0x0A>")] == b"\n"
    assert v.token_bytes[mistral.convert_tokens_to_ids("▁the")] == b" the"
    qwen = load_tokenizer("qwen3")
    assert load_vocab("qwen3").end_token_ids == (qwen.convert_tokens_to_ids("<|im_end|>"),)


def test_cached_per_tokenizer():
    tok = load_tokenizer("gpt2")
    assert Vocabulary.from_tokenizer(tok) is Vocabulary.from_tokenizer(tok)
    assert Vocabulary.from_tokenizer(tok, end_token_ids=[0]).end_token_ids == (0,)


def test_from_token_bytes_and_errors():
    v = Vocabulary.from_token_bytes([b"a", b"", b"b"], end_token_ids=[1])
    assert v.special.tolist() == [False, True, False]
    data, off = v.flat()
    assert bytes(data) == b"ab" and off.tolist() == [0, 1, 1, 2]
    with pytest.raises(ValueError, match=r"end token id 7 is out of range for a vocabulary of 3 tokens"):
        Vocabulary.from_token_bytes([b"a", b"b", b"c"], end_token_ids=[7])
    with pytest.raises(ValueError, match=r"Unknown tokenizer kind 'wordpiece'; valid kinds are"):
        Vocabulary.from_tokenizer(load_tokenizer("gpt2"), kind="wordpiece")


def test_pickle_roundtrip():
    v = Vocabulary.from_token_bytes([b"a", b"b", b""], end_token_ids=[2])
    w = pickle.loads(pickle.dumps(v))
    assert w.token_bytes == v.token_bytes and w.end_token_ids == v.end_token_ids
