"""Token classes: an exact partition, and masks rebuilt from classes equal the automaton's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge.automaton.token_classes import TokenClasses
from judge.automaton.trie import TrieAutomaton
from judge.automaton.vocab import Vocabulary
from tests.automaton.test_trie import FAMILIES, _icd_codes, _tool_names
from tests.conftest import TOKENIZERS, load_vocab


def _naive_partition(auto):
    """Tokens grouped by their column, read one node and one token at a time (no kernels)."""
    cols = {t: [] for t in range(auto.vocab_size)}
    for n in range(auto.n_nodes):
        for t in auto.allowed(n).tolist():
            cols[t].append((n, auto.next(n, t)))
    groups = {}
    for t in range(auto.vocab_size):
        groups.setdefault(tuple(cols[t]), []).append(t)
    return sorted(groups.values())


def _partition(tc):
    return sorted(tc.members[tc.members_indptr[c]:tc.members_indptr[c + 1]].tolist()
                  for c in range(tc.n_classes))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labels=st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=6, unique=True),
       tokens=st.lists(st.text(alphabet="abcd", min_size=1, max_size=3), min_size=1, max_size=12, unique=True))
def test_partition_equals_naive_columns(labels, tokens):
    # the single letters are always tokens, so every label can be spelled and every drawn case builds (a build
    # that raised is a failure here, not a skipped example)
    tokens = list(dict.fromkeys(tokens + ["a", "b", "c"]))
    vocab = Vocabulary.from_token_bytes([t.encode() for t in tokens] + [b"", b""],
                                        end_token_ids=[len(tokens), len(tokens) + 1])
    auto = TrieAutomaton.build(labels, vocab)
    tc = TokenClasses.from_automaton(auto)
    assert _partition(tc) == _naive_partition(auto)
    # classes are numbered by their smallest token
    assert tc.representatives.tolist() == sorted(tc.representatives.tolist())
    assert tc.class_of[len(tokens)] == tc.class_of[len(tokens) + 1]  # the two end tokens


def _rows(fill, nodes, vocab_size):
    bm = np.full((len(nodes), (vocab_size + 31) // 32), -1, np.int32)
    fill(nodes, bm)
    return bm


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("family", ["tools", "icd", "unicode", "prefixes"])
def test_masks_from_classes_equal_the_automaton_on_every_node(name, family):
    vocab = load_vocab(name)
    labels = {"tools": _tool_names(150, seed=3), "icd": _icd_codes(150, seed=3)}.get(family, FAMILIES.get(family))
    auto = TrieAutomaton.build(labels, vocab)
    tc = TokenClasses.from_automaton(auto)
    nodes = np.arange(auto.n_states, dtype=np.int64)
    ref = _rows(auto.fill_bitmask, nodes, vocab.size)
    np.testing.assert_array_equal(_rows(tc.fill_bitmask, nodes, vocab.size), ref)
    # the device-style gather: table[node][class_of[token]]
    table = tc.class_bit_table()
    some = np.linspace(0, auto.n_nodes - 1, min(auto.n_nodes, 40)).astype(np.int64)
    bits = (table[some][:, tc.class_of >> 5] >> (tc.class_of & 31)) & 1
    want = np.unpackbits(ref[some].view(np.uint8), axis=1, bitorder="little")[:, : vocab.size]
    np.testing.assert_array_equal(bits.astype(np.uint8), want)
    # every member of a class leads to the same state: the class edge's
    for n in range(0, auto.n_nodes, max(1, auto.n_nodes // 50)):
        for c, d in zip(tc.class_ids[tc.class_indptr[n]:tc.class_indptr[n + 1]].tolist(),
                        tc.class_next[tc.class_indptr[n]:tc.class_indptr[n + 1]].tolist()):
            for t in tc.members[tc.members_indptr[c]:tc.members_indptr[c + 1]].tolist():
                assert auto.next(n, t) == d
    assert tc.dead_class >= 0 and tc.n_classes < vocab.size / 10
    assert tc.memory_bytes > 0 and "TokenClasses(" in repr(tc)


def test_errors():
    auto = TrieAutomaton.build(["ab"], Vocabulary.from_token_bytes([b"a", b"b", b""], end_token_ids=[2]))
    tc = TokenClasses.from_automaton(auto)
    with pytest.raises(TypeError, match="Invalid bitmask: expected a 2-D int32 ndarray"):
        tc.fill_bitmask([0], np.zeros((1, 1), np.int64))
    with pytest.raises(ValueError, match=r"too small for 2 nodes"):
        tc.fill_bitmask([0, 1], np.zeros((1, 1), np.int32))
