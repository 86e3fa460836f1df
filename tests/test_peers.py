"""Our masks against grammar engines (xgrammar, llguidance, outlines-core) and brute force.

At every step of seeded random walks along label paths on real tokenizers,
our automaton's packed bitmask row must equal the brute-force truth: token
``t`` is allowed after the bytes ``prefix`` iff ``prefix + bytes(t)`` is a
prefix of some label, and the end tokens iff ``prefix`` is a complete label.

* xgrammar, given the same choice grammar (``root ::= "a" | "b" ...``) and the
  same stop tokens, produces exactly our rows on these walks.
* llguidance allows only a subset: where the rest of a label is forced it
  keeps to (near-)canonical tokenizations, so e.g. after ``send_`` (only
  ``send_email_report`` left) the tokens ``e``/``em`` are missing.
* outlines-core drops some tokens that continue past a state where a label is
  complete (labels ``ab``, ``abcd``: after ``ab`` the token ``c`` is missing).
* Added tokens (``<think>``, ``<tool_call>`` in Qwen3) spell nothing for us
  (see ``judge.automaton.vocab``); xgrammar lets them spell labels with the same text.

Peer deviations are recorded (``record_property``) and never fail the test
when a peer version no longer shows them; only our correctness, and that a
peer never allows a token the brute force rejects, are asserted.

Each peer is skipped when not installed (``pip install -e .[bench]``).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from judge.automaton.trie import TrieAutomaton

from .conftest import load_tokenizer, load_vocab

FAMILIES = {
    "tools": ["get_user_profile", "get_user", "get_user_profile_photo", "list_orders",
              "send_email_report", "search"],
    "phrases": ["very positive", "positive", "not positive at all", "neutral",
                "somewhat negative", "negative"],
    "prefixes": ["a", "ab", "abcd", "abc d", "b", "ba"],
    "unicode": ["café au lait", "naïve", "日本語", "日本", "Ωmega"],
}
CASES = [("gpt2", fam) for fam in FAMILIES] + [("qwen3", "tools"), ("qwen3", "prefixes")]
N_WALKS = 6


def _ids(row) -> set[int]:
    bits = np.unpackbits(np.ascontiguousarray(row, dtype=np.int32).view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits).tolist())


def _brute_force(vocab, labels: list[str], prefix: bytes) -> set[int]:
    """Every token checked one by one against the set of label prefixes."""
    encoded = [lab.encode() for lab in labels]
    prefixes = {lab[:i] for lab in encoded for i in range(len(lab) + 1)}
    ok = {t for t, b in enumerate(vocab.token_bytes) if b and prefix + b in prefixes}
    if prefix in encoded:
        ok |= set(vocab.end_token_ids)
    return ok


def _regex(labels) -> str:
    import re

    return "|".join(re.sub(r"([\\.+*?()|\[\]{}^$#&~-])", r"\\\1", lab) for lab in labels)


class _Ours:
    def __init__(self, vocab, labels):
        self.auto = TrieAutomaton.build(labels, vocab)
        self.node = self.auto.root
        self.row = np.zeros((1, (vocab.size + 31) // 32), np.int32)

    def allowed(self) -> set[int]:
        self.auto.fill_bitmask([self.node], self.row)
        return _ids(self.row[0])

    def accept(self, t: int) -> None:
        self.node = self.auto.next(self.node, t)
        assert self.node >= 0


def _walk(vocab, labels, peer, rng):
    """One random walk; at each step check ours == brute force and compare the peer.

    The next token is drawn from the tokens both allow, so the peer can follow.
    Returns the list of (prefix, missing_in_peer, extra_in_peer) deviations.
    """
    ours = _Ours(vocab, labels)
    prefix, deviations = b"", []
    while True:
        mine = ours.allowed()
        truth = _brute_force(vocab, labels, prefix)
        assert mine == truth, f"ours differs from brute force after {prefix!r}"
        theirs = peer.allowed()
        if theirs != mine:
            deviations.append((prefix, sorted(mine - theirs), sorted(theirs - mine)))
        assert theirs <= truth, f"peer allows tokens the brute force rejects after {prefix!r}"
        t = rng.choice(sorted(mine & theirs))
        if t in vocab.end_token_ids:
            return deviations
        ours.accept(t)
        assert peer.accept(t), f"peer rejected token {t} after {prefix!r}"
        prefix += vocab.token_bytes[t]


def _record(record_property, name, deviations, tok):
    shown = [(p.decode(errors="replace"), tok.convert_ids_to_tokens(m[:4]), tok.convert_ids_to_tokens(e[:4]))
             for p, m, e in deviations[:5]]
    record_property(f"{name}_deviating_steps", len(deviations))
    record_property(f"{name}_examples (prefix, missing, extra)", shown)


# --------------------------------------------------------------------------- xgrammar
@pytest.fixture(scope="module")
def xgr():
    return pytest.importorskip("xgrammar")


_XGR_INFO: dict = {}


def _xgr_info(xgr, name):
    if name not in _XGR_INFO:
        vocab = load_vocab(name)
        _XGR_INFO[name] = xgr.TokenizerInfo.from_huggingface(
            load_tokenizer(name), vocab_size=vocab.size, stop_token_ids=list(vocab.end_token_ids))
    return _XGR_INFO[name]


class _Xgrammar:
    def __init__(self, xgr, compiled, size):
        import torch

        self.m = xgr.GrammarMatcher(compiled)
        self.row = torch.zeros((1, (size + 31) // 32), dtype=torch.int32)

    def allowed(self) -> set[int]:
        self.m.fill_next_token_bitmask(self.row)
        return _ids(self.row.numpy()[0])

    def accept(self, t: int) -> bool:
        return self.m.accept_token(t)


def _xgr_compile(xgr, name, labels):
    grammar = "root ::= " + " | ".join(json.dumps(lab, ensure_ascii=False) for lab in labels)
    return xgr.GrammarCompiler(_xgr_info(xgr, name), cache_enabled=False).compile_grammar(grammar)


@pytest.mark.parametrize(("name", "family"), CASES)
def test_xgrammar_masks_equal_ours_at_every_step(xgr, name, family, record_property):
    vocab, labels = load_vocab(name), FAMILIES[family]
    compiled = _xgr_compile(xgr, name, labels)
    rng = random.Random(f"{name}-{family}")
    deviations = []
    for _ in range(N_WALKS):
        deviations += _walk(vocab, labels, _Xgrammar(xgr, compiled, vocab.size), rng)
    _record(record_property, "xgrammar", deviations, load_tokenizer(name))
    assert deviations == [], f"xgrammar's mask differs from ours (which equals brute force): {deviations[:3]}"


def test_xgrammar_token_bytes_equal_ours(xgr):
    for name in ("gpt2", "qwen3"):
        vocab = load_vocab(name)
        decoded = _xgr_info(xgr, name).decoded_vocab
        bad = [i for i, b in enumerate(vocab.token_bytes) if b and decoded[i] != b]
        assert bad == [], f"{name}: token bytes differ from xgrammar's for ids {bad[:10]}"


def test_added_tokens_spell_nothing_for_us_but_do_for_xgrammar(xgr, record_property):
    """Qwen3's ``<think>``/``<tool_call>`` are added tokens: never part of a label for us."""
    name, labels = "qwen3", ["<think>", "<tool_call>", "plain"]
    tok, vocab = load_tokenizer(name), load_vocab(name)
    added = [tok.convert_tokens_to_ids(t) for t in ("<think>", "<tool_call>")]
    ours = _Ours(vocab, labels)
    assert ours.allowed() == _brute_force(vocab, labels, b"")
    assert not set(added) & ours.allowed()
    theirs = _Xgrammar(xgr, _xgr_compile(xgr, name, labels), vocab.size).allowed()
    record_property("xgrammar_allows_added_tokens", sorted(set(added) & theirs))


# --------------------------------------------------------------------------- llguidance
class _Llguidance:
    def __init__(self, llg, lltok, labels, size):
        import llguidance.numpy

        self.fill = llguidance.numpy.fill_next_token_bitmask
        self.m = llg.LLMatcher(lltok, llg.LLMatcher.grammar_from_regex(_regex(labels)), log_level=0)
        assert not self.m.is_error(), self.m.get_error()
        self.row = np.zeros((1, (size + 31) // 32), np.int32)

    def allowed(self) -> set[int]:
        self.fill(self.m, self.row, 0)
        return _ids(self.row[0])

    def accept(self, t: int) -> bool:
        return self.m.consume_token(t)


@pytest.mark.parametrize("family", ["tools", "phrases", "prefixes"])
def test_llguidance_allows_a_subset_of_ours(family, record_property):
    llg = pytest.importorskip("llguidance")
    import llguidance.hf

    name, labels = "gpt2", FAMILIES[family]
    tok, vocab = load_tokenizer(name), load_vocab(name)
    lltok = llguidance.hf.from_tokenizer(tok, n_vocab=vocab.size, eos_token=list(vocab.end_token_ids))
    rng = random.Random(f"llg-{family}")
    deviations = []
    for _ in range(N_WALKS):
        deviations += _walk(vocab, labels, _Llguidance(llg, lltok, labels, vocab.size), rng)
    _record(record_property, "llguidance", deviations, tok)
    assert all(extra == [] for _, _, extra in deviations)  # a subset, never more


# --------------------------------------------------------------------------- outlines-core
class _OutlinesCore:
    def __init__(self, oc, index, size, ends):
        self.g = oc.Guide(index)
        self.row = np.zeros((1, (size + 31) // 32), np.int32)
        self.ends = ends

    def allowed(self) -> set[int]:
        self.g.write_mask_into(self.row.ctypes.data, self.row.shape[1], 4)
        return _ids(self.row[0])

    def accept(self, t: int) -> bool:
        if t in self.ends:  # a final state has no transition to advance along
            return True
        self.g.advance(t, return_tokens=False)
        return True


def _oc_vocabulary(oc, vocab):
    by_bytes: dict[bytes, list[int]] = {}
    for i, b in enumerate(vocab.token_bytes):
        if b:
            by_bytes.setdefault(b, []).append(i)
    return oc.Vocabulary(vocab.end_token_ids[0], by_bytes)


def test_outlines_core_drops_tokens_after_a_complete_label(record_property):
    oc = pytest.importorskip("outlines_core")
    name, labels = "gpt2", ["ab", "abcd"]
    tok, vocab = load_tokenizer(name), load_vocab(name)
    ab, c = tok.convert_tokens_to_ids("ab"), tok.convert_tokens_to_ids("c")
    ours = _Ours(vocab, labels)
    ours.accept(ab)
    mine = ours.allowed()
    assert mine == _brute_force(vocab, labels, b"ab")
    assert c in mine and set(vocab.end_token_ids) <= mine
    peer = _OutlinesCore(oc, oc.Index(_regex(labels), _oc_vocabulary(oc, vocab)), vocab.size,
                         set(vocab.end_token_ids))
    peer.accept(ab)
    theirs = peer.allowed()
    assert theirs <= mine
    record_property("outlines_core_missing_after_ab", tok.convert_ids_to_tokens(sorted(mine - theirs)))
    record_property("outlines_core_reproduced", c not in theirs)


@pytest.mark.parametrize("family", ["tools", "prefixes"])
def test_outlines_core_allows_a_subset_of_ours(family, record_property):
    oc = pytest.importorskip("outlines_core")
    name, labels = "gpt2", FAMILIES[family]
    tok, vocab = load_tokenizer(name), load_vocab(name)
    index = oc.Index(_regex(labels), _oc_vocabulary(oc, vocab))
    rng = random.Random(f"oc-{family}")
    deviations = []
    for _ in range(N_WALKS):
        peer = _OutlinesCore(oc, index, vocab.size, set(vocab.end_token_ids))
        deviations += _walk(vocab, labels, peer, rng)
    _record(record_property, "outlines_core", deviations, tok)
    assert all(extra == [] for _, _, extra in deviations)
