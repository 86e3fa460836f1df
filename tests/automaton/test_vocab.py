"""Vocabulary: every token's bytes agree with the tokenizer's own decode."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from judge.automaton.vocab import Vocabulary, bytes_to_unicode
from tests.conftest import TOKENIZERS, load_tokenizer


def fresh_vocab(name: str, **kw) -> Vocabulary:
    """The vocabulary built now, from a copy of the tokenizer: a new object, so nothing comes from the cache.

    (``load_vocab`` is cached per process, and so is :meth:`Vocabulary.from_tokenizer` per tokenizer object:
    a test that reads them checks whichever build ran first, not the build itself.)
    """
    return Vocabulary.from_tokenizer(copy.copy(load_tokenizer(name)), **kw)


class FakeTokenizer:
    """The parts of a Hugging Face tokenizer that :meth:`Vocabulary.from_tokenizer` reads, for vocabularies
    no shipped tokenizer has (holes, odd special ids, mixed markers)."""

    def __init__(self, pieces, *, eos=None, added=(), special_ids=()):
        self.pieces = list(pieces)
        self.eos_token_id = eos
        self.added_tokens_decoder = {i: self.pieces[i] for i in added}
        self.all_special_ids = list(special_ids)
        self.name_or_path = "fake"

    def __len__(self):
        return len(self.pieces)

    def convert_ids_to_tokens(self, ids):
        return [self.pieces[i] for i in ids]


def test_byte_table_is_a_bijection():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256


@pytest.mark.parametrize("name", TOKENIZERS)
def test_every_token_matches_decode(name):
    tok, vocab = load_tokenizer(name), fresh_vocab(name)
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
    tok, vocab = load_tokenizer(name), fresh_vocab(name)
    assert vocab.size == len(tok) and vocab.special.shape == (len(tok),)
    for i in tok.all_special_ids:
        assert vocab.special[i] and vocab.token_bytes[i] == b""
    # added tokens that are not "special" to the tokenizer (Qwen's <tool_call>, Llama-3's reserved tokens,
    # Gemma's <unused0>) are kept out of the label alphabet too
    for i in tok.added_tokens_decoder:
        assert vocab.special[i] and vocab.token_bytes[i] == b"", (i, str(tok.added_tokens_decoder[i]))
    assert vocab.end_token_ids, "every tokenizer here has an end token"
    for i in vocab.end_token_ids:
        assert vocab.special[i]
    if tok.eos_token_id is not None:
        assert tok.eos_token_id in vocab.end_token_ids


def test_known_tokens():
    gpt2 = load_tokenizer("gpt2")
    v = fresh_vocab("gpt2")
    assert v.kind == "byte_level" and v.name == gpt2.name_or_path
    assert v.token_bytes[gpt2.convert_tokens_to_ids("Ġthe")] == b" the"
    assert v.token_bytes[gpt2.convert_tokens_to_ids("Ċ")] == b"\n"
    assert v.end_token_ids == (gpt2.convert_tokens_to_ids("<|endoftext|>"),)
    mistral = load_tokenizer("mistral7b")
    v = fresh_vocab("mistral7b")
    assert v.kind == "sentencepiece"
    assert v.token_bytes[mistral.convert_tokens_to_ids("<0x0A>")] == b"\n"
    assert v.token_bytes[mistral.convert_tokens_to_ids("<0xE2>")] == b"\xe2"
    assert v.token_bytes[mistral.convert_tokens_to_ids("▁the")] == b" the"
    assert v.end_token_ids == (mistral.convert_tokens_to_ids("</s>"),)
    # Qwen3 has <|endoftext|> too: a plain EOS is an end token only when there is no end-of-turn token
    qwen = load_tokenizer("qwen3")
    assert fresh_vocab("qwen3").end_token_ids == (qwen.convert_tokens_to_ids("<|im_end|>"),)
    llama = load_tokenizer("llama3")
    assert fresh_vocab("llama3").end_token_ids == (llama.convert_tokens_to_ids("<|eot_id|>"),)


def test_end_token_ids_override_the_detected_ones():
    gpt2 = load_tokenizer("gpt2")
    dot = gpt2.convert_tokens_to_ids(".")
    v = fresh_vocab("gpt2", end_token_ids=[dot])
    assert v.end_token_ids == (dot,)
    # an end token ends the answer, so it spells no label
    assert v.special[dot] and v.token_bytes[dot] == b""
    comma = gpt2.convert_tokens_to_ids(",")
    assert not v.special[comma] and v.token_bytes[comma] == b","
    assert v.token_bytes[gpt2.convert_tokens_to_ids("Ġthe")] == b" the"


def test_end_tokens_of_a_tokenizer_without_eos():
    # no eos_token_id: the chat end-of-turn token, and the plain EOS only when there is none
    v = Vocabulary.from_tokenizer(FakeTokenizer(["Ġa", "<|endoftext|>", "<|im_end|>"], added=[1, 2]))
    assert v.end_token_ids == (2,)
    v = Vocabulary.from_tokenizer(FakeTokenizer(["Ġa", "<|endoftext|>", "b"], added=[1]))
    assert v.end_token_ids == (1,)
    with pytest.raises(ValueError, match="has no EOS or end-of-turn token"):
        Vocabulary.from_tokenizer(FakeTokenizer(["Ġa", "b"]))


def test_kind_is_the_marker_most_tokens_carry():
    # more tokens start with 'Ġ' than with '▁': byte-level, and '▁' is then an ordinary character
    v = Vocabulary.from_tokenizer(FakeTokenizer(["Ġa", "Ġb", "Ġc", "▁x", "▁y", "z", "<|endoftext|>"], eos=6))
    assert v.kind == "byte_level"
    assert v.token_bytes[:3] == (b" a", b" b", b" c")
    assert v.token_bytes[3] == "▁x".encode()
    # and the other way round: SentencePiece, where '▁' is the space
    v = Vocabulary.from_tokenizer(FakeTokenizer(["▁a", "▁b", "▁c", "Ġx", "Ġy", "z", "</s>"], eos=6))
    assert v.kind == "sentencepiece"
    assert v.token_bytes[:3] == (b" a", b" b", b" c")
    assert v.token_bytes[3] == "Ġx".encode()
    with pytest.raises(ValueError, match="Cannot tell the tokenizer's kind"):
        Vocabulary.from_tokenizer(FakeTokenizer(["a", "b", "</s>"], eos=2))


@pytest.mark.parametrize("kind", ["byte_level", "sentencepiece"])
def test_ids_without_a_token_emit_nothing(kind):
    # a tokenizer whose ids have holes (convert_ids_to_tokens gives None) and reports special ids it does not
    # have (None, or past its end): the holes spell nothing, the odd ids are ignored
    space = "Ġ" if kind == "byte_level" else "▁"
    tok = FakeTokenizer([space + "a", None, "<0x0A>", "b", "</s>"], eos=4, special_ids=[4, None, 5, 6])
    v = Vocabulary.from_tokenizer(tok)
    assert v.kind == kind and v.size == 5
    newline = b"\n" if kind == "sentencepiece" else b"<0x0A>"  # byte-fallback tokens are SentencePiece's
    assert v.token_bytes == (b" a", b"", newline, b"b", b"")
    assert v.special[[0, 2, 3, 4]].tolist() == [False, False, False, True]
    assert v.end_token_ids == (4,)


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


@pytest.mark.parametrize("token_bytes, special", [([b"a", b"", b"b"], None), ([b"a", b"b"], [False, True]),
                                                   ([], None), ([], [])])
def test_special_is_a_read_only_bool_per_token(token_bytes, special):
    v = Vocabulary.from_token_bytes(token_bytes, special=special)
    assert v.special.dtype == np.bool_ and v.special.shape == (len(token_bytes),)
    assert not v.special.flags.writeable
    want = [len(b) == 0 or bool(special and special[i]) for i, b in enumerate(token_bytes)]
    assert v.special.tolist() == want
    assert v.token_bytes == tuple(b"" if w else b for b, w in zip(token_bytes, want))


def test_pickle_roundtrip():
    v = Vocabulary.from_token_bytes([b"a", b"b", b""], end_token_ids=[2])
    w = pickle.loads(pickle.dumps(v))
    assert w.token_bytes == v.token_bytes and w.end_token_ids == v.end_token_ids
