"""Token automaton: equal to brute-force references on real and hand-built vocabularies."""

from __future__ import annotations

import pickle
import random
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge._errors import LabelError
from judge.automaton import _kernels as K
from judge.automaton import trie as trie_mod
from judge.automaton.trie import ByteTrie, TrieAutomaton
from judge.automaton.vocab import Vocabulary
from tests.conftest import TOKENIZERS, load_vocab

rng = random.Random(1234)
_WORDS = "get set list user profile account order payment invoice search send email file report".split()


def _tool_names(k, seed=0):
    r = random.Random(seed)
    out = set()
    while len(out) < k:
        out.add("_".join(r.choice(_WORDS) for _ in range(r.randint(2, 4))))
    return sorted(out)


def _icd_codes(k, seed=0):
    r = random.Random(seed)
    out = set()
    while len(out) < k:
        code = f"{r.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ')}{r.randint(0, 99):02d}"
        if r.random() < 0.7:
            code += f".{r.randint(0, 99)}"
        out.add(code)
    return sorted(out)


FAMILIES = {
    "tools": _tool_names(40),
    "icd": _icd_codes(40),
    "phrases": ["card arrival", "card linking", "exchange rate", "exchange via app", "top up failed",
                "Top up reverted", "pin blocked", "lost or stolen card"],
    "prefixes": ["a", "ab", "abc", "book", "booking", "booking_fee", "b", "bo"],
    "unicode": ["café", "naïve", "日本語", "日本", "中文标签", "😀 happy", "emoji 🎉🎉", "Ελληνικά", "a\u0301"],
    "single": ["only"],
}


def _naive_allowed(vocab, labels_b, prefix):
    """Every token whose bytes extend ``prefix`` to a prefix of some label (+ end tokens)."""
    prefixes = {lab[:i] for lab in labels_b for i in range(1, len(lab) + 1)}
    out = [t for t, b in enumerate(vocab.token_bytes) if b and prefix + b in prefixes]
    if prefix in set(labels_b):
        out += list(vocab.end_token_ids)
    return sorted(out)


def _random_walk_checks(auto, vocab, labels, walks, seed):
    r = random.Random(seed)
    labels_b = [lab.encode() for lab in labels]
    checked = 0
    seen = set()
    for _ in range(walks):
        node, prefix = auto.root, b""
        while not auto.is_accepting(node):
            allowed = auto.allowed(node).tolist()
            if node not in seen:
                seen.add(node)
                assert allowed == _naive_allowed(vocab, labels_b, prefix), (labels, prefix)
                checked += 1
            tok = r.choice(allowed)
            nxt = auto.next(node, tok)
            assert nxt >= 0
            if tok in vocab.end_token_ids:
                assert auto.label_at(nxt) == labels_b.index(prefix)
            else:
                prefix += vocab.token_bytes[tok]
            node = nxt
    return checked


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_allowed_equals_naive_walk(name, family):
    vocab = load_vocab(name)
    labels = FAMILIES[family]
    auto = TrieAutomaton.build(labels, vocab)
    checked = _random_walk_checks(auto, vocab, labels, walks=6, seed=hash((name, family)) % 1000)
    assert checked >= 3


def test_canonical_tokenization_is_admitted():
    from tests.conftest import load_tokenizer

    for name in TOKENIZERS:
        tok, vocab = load_tokenizer(name), load_vocab(name)
        labels = FAMILIES["phrases"] + FAMILIES["unicode"]
        auto = TrieAutomaton.build(labels, vocab)
        for i, lab in enumerate(labels):
            ids = tok.encode("x" + lab, add_special_tokens=False)
            # take the tokens after "x" when the boundary does not merge
            head = tok.encode("x", add_special_tokens=False)
            if ids[: len(head)] != head:
                continue
            ids = ids[len(head):]
            if b"".join(vocab.token_bytes[t] for t in ids) != lab.encode():
                # the tokenizer normalizes (Qwen: NFC turns "a" + U+0301 into "á")
                assert unicodedata.normalize("NFC", lab) != lab, (name, lab)
                continue
            node = auto.root
            for t in ids:
                node = auto.next(node, t)
                assert node >= 0, (name, lab)
            assert auto.label_at(auto.next(node, vocab.end_token_ids[0])) == i


# --- exhaustive language equality on hand-built vocabularies ----------------

def _tokenizations(label: bytes, vocab: Vocabulary):
    if not label:
        return [()]
    out = []
    for t, b in enumerate(vocab.token_bytes):
        if b and label.startswith(b):
            out += [(t,) + rest for rest in _tokenizations(label[len(b):], vocab)]
    return out


def _accepted(auto):
    out = []

    def walk(node, seq):
        if auto.is_accepting(node):
            out.append((tuple(seq), auto.label_at(node)))
            return
        for t in auto.allowed(node).tolist():
            walk(auto.next(node, t), seq + [t])

    walk(auto.root, [])
    return sorted(out)


def _expected(labels, vocab):
    out = []
    for i, lab in enumerate(labels):
        for seq in _tokenizations(lab.encode(), vocab):
            for e in vocab.end_token_ids:
                out.append((seq + (e,), i))
    return sorted(out)


def test_language_is_exactly_the_tokenizations():
    vocab = Vocabulary.from_token_bytes(
        [b"a", b"b", b"c", b"ab", b"bc", b"abc", b"ca", b"", b""], end_token_ids=[7, 8])
    labels = ["abc", "ab", "ca", "b", "cab"]
    auto = TrieAutomaton.build(labels, vocab)
    assert _accepted(auto) == _expected(labels, vocab)


def test_dead_ends_are_pruned():
    # "b" alone is not a token, so "a" at the root would strand the walk in "abc".
    vocab = Vocabulary.from_token_bytes([b"a", b"ab", b"c", b"bc", b""], end_token_ids=[4])
    auto = TrieAutomaton.build(["abc"], vocab)
    assert _accepted(auto) == _expected(["abc"], vocab)
    vocab2 = Vocabulary.from_token_bytes([b"a", b"c", b"ab", b""], end_token_ids=[3])
    assert _accepted(TrieAutomaton.build(["abc"], vocab2)) == [((2, 1, 3), 0)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    labels=st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=6, unique=True),
    tokens=st.lists(st.text(alphabet="abc", min_size=1, max_size=3), min_size=1, max_size=10, unique=True),
)
def test_hypothesis_language(labels, tokens):
    vocab = Vocabulary.from_token_bytes([t.encode() for t in tokens] + [b""], end_token_ids=[len(tokens)])
    expected = _expected(labels, vocab)
    spellable = {i for _, i in expected}
    if len(spellable) < len(labels):
        with pytest.raises(LabelError, match="cannot be spelled"):
            TrieAutomaton.build(labels, vocab)
        return
    auto = TrieAutomaton.build(labels, vocab)
    assert _accepted(auto) == expected


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12).filter(lambda s: s.strip()), min_size=1, max_size=12, unique=True))
def test_hypothesis_real_tokenizer(labels):
    vocab = load_vocab("qwen3")
    auto = TrieAutomaton.build(labels, vocab)
    _random_walk_checks(auto, vocab, labels, walks=2, seed=0)


# --- bitmask, kernels, errors, pickling --------------------------------------

def test_fill_bitmask_matches_allowed():
    vocab = load_vocab("llama3")
    auto = TrieAutomaton.build(FAMILIES["tools"], vocab)
    nodes = np.array([0, 1, 5, auto.n_nodes - 1, auto.n_nodes])  # last one: accepting state
    words = (vocab.size + 31) // 32
    bm = np.full((len(nodes), words + 2), -1, np.int32)  # wider than needed, dirty
    auto.fill_bitmask(nodes, bm)
    bits = np.unpackbits(bm.view(np.uint8), bitorder="little").reshape(len(nodes), -1)
    for r, n in enumerate(nodes):
        assert np.flatnonzero(bits[r]).tolist() == auto.allowed(int(n)).tolist()
    torch = pytest.importorskip("torch")
    tm = torch.zeros((1, words), dtype=torch.int32)
    auto.fill_bitmask([0], tm)
    assert (tm.numpy() == bm[:1, :words]).all()


def test_compiled_kernels_equal_python(monkeypatch):
    vocab = load_vocab("gpt2")
    labels = FAMILIES["tools"] + FAMILIES["phrases"]
    auto = TrieAutomaton.build(labels, vocab)
    if not K.HAVE_NUMBA:
        pytest.skip("numba not installed: the kernels already run as Python")
    lt = ByteTrie.from_strings([lab.encode() for lab in labels])
    vt = vocab.byte_trie()
    node_label = np.asarray(auto.node_label)
    args = (lt.child_indptr, lt.child_nodes, lt.byte_in, node_label, vt.child_indptr, vt.child_bytes,
            vt.child_nodes, vt.end_indptr, vt.end_ids, np.asarray(vocab.end_token_ids, np.int32))
    compiled = getattr(K.intersect, "py_func", None)  # the kernels compile on first use: the build above did
    if compiled is None:
        pytest.skip("the kernels run as Python here (NUMBA_DISABLE_JIT=1): nothing compiled to compare")
    for name in ("intersect_nodes", "_edges_from", "_walk_node", "_sort_slice", "_sort_pairs", "_search"):
        monkeypatch.setattr(K, name, getattr(K, name).py_func)  # the whole chain interpreted, not only its top
    py = compiled(*args)
    for a, b in zip(py, (auto.indptr, auto.token_ids, auto.next_nodes)):
        np.testing.assert_array_equal(a, b)


def test_pickle_and_immutability():
    auto = TrieAutomaton.build(FAMILIES["prefixes"], load_vocab("gpt2"))
    again = pickle.loads(pickle.dumps(auto))
    assert again.labels == auto.labels and again.n_nodes == auto.n_nodes
    np.testing.assert_array_equal(again.token_ids, auto.token_ids)
    with pytest.raises(AttributeError, match="TrieAutomaton is immutable"):
        auto.labels = ("x",)
    with pytest.raises(ValueError, match="read-only"):
        auto.token_ids[0] = 1
    assert auto.memory_bytes > 0


def test_label_at_and_errors():
    vocab = load_vocab("gpt2")
    auto = TrieAutomaton.build(["book", "booking"], vocab)
    n = auto.root
    for t in vocab_encode(vocab, b"book"):
        n = auto.next(n, t)
    assert auto.label_at(n) == 0 and not auto.is_accepting(n)
    assert auto.next(auto.root, 0) == -1
    with pytest.raises(IndexError, match=r"Invalid automaton state 999999"):
        auto.allowed(999999)
    with pytest.raises(TypeError, match=r"Invalid bitmask: expected a 2-D int32 array"):
        auto.fill_bitmask([0], np.zeros((1, 10), np.int64))
    with pytest.raises(ValueError, match=r"too small for 1 nodes"):
        auto.fill_bitmask([0], np.zeros((1, 10), np.int32))


def vocab_encode(vocab, text: bytes):
    """Greedy single-byte spelling (every byte-level vocabulary has all 256 bytes)."""
    single = {b: t for t, b in enumerate(vocab.token_bytes) if len(b) == 1}
    return [single[bytes([c])] for c in text]


@pytest.mark.parametrize(
    "labels, message",
    [
        ([], r"The label list is empty"),
        (["a", "a"], r"Duplicate label 'a' at positions 0 and 1"),
        (["a", "  "], r"Label 1 is empty or only whitespace"),
        (["a", "b", ""], r"Label 2 is empty or only whitespace"),
        (["a", "\x1c\t"], r"Label 1 is empty or only whitespace"),  # str.isspace's ASCII separators
        (["\x00", " \u00a0"], r"Label 1 is empty or only whitespace"),  # a NUL label; a non-ASCII blank
        (["a", "\u3000"], r"Label 1 is empty or only whitespace"),
        (["é", ""], r"Label 1 is empty or only whitespace"),  # empty, on the path for non-ASCII labels
        (["a\x00b", "a\x00b"], r"Duplicate label 'a\\x00b' at positions 0 and 1"),
        (["a", 3], r"Label 1 is a int \(3\), not a str"),
        ("abc", r"labels must be a sequence of strings, got a single str"),
    ],
)
def test_bad_labels(labels, message):
    with pytest.raises(LabelError, match=message):
        TrieAutomaton.build(labels, load_vocab("gpt2"))


@pytest.mark.parametrize("labels", [
    ["ab", "abc", "b"], ["a"], ["x" * 300, "y"],
    ["a\x00b", "a", "\x00"],          # NUL inside labels: the joined split cannot be used
    ["café", "cafe", "日本"],           # not ASCII
    ["a b", " a", "a\x1f", "\x7f"],      # spaces inside labels, separators and DEL that are not blanks
])
def test_label_bytes_and_offsets_equal_each_labels_own_utf8(labels):
    data, offsets = trie_mod._encode_labels(labels)
    assert offsets.tolist() == np.cumsum([0] + [len(lab.encode()) for lab in labels]).tolist()
    assert data.tobytes() == b"".join(lab.encode() for lab in labels)


@pytest.mark.parametrize("labels", [["ab", "abc", "b"], ["ba", "cab"], ["a"]])
def test_one_byte_tokens_skip_the_live_and_reach_passes_with_the_same_edges(labels, monkeypatch):
    vocab = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b"c", b"bc", b""], end_token_ids=[5])
    lt = ByteTrie.from_strings([lab.encode() for lab in labels])
    assert trie_mod._spells_every_byte(lt, vocab.byte_trie())
    fast = TrieAutomaton.build(labels, vocab)
    monkeypatch.setattr(trie_mod, "_spells_every_byte", lambda *a: False)
    full = TrieAutomaton.build(labels, vocab)
    for name in ("indptr", "token_ids", "next_nodes", "node_label"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(full, name))
    assert _accepted(fast) == _expected(labels, vocab)


def test_a_byte_that_is_no_token_keeps_the_passes():
    vocab = Vocabulary.from_token_bytes([b"a", b"ab", b"c", b"bc", b""], end_token_ids=[4])  # no b"b"
    vt = vocab.byte_trie()
    assert not trie_mod._spells_every_byte(ByteTrie.from_strings([b"abc"]), vt)
    assert trie_mod._spells_every_byte(ByteTrie.from_strings([b"ac", b"ca"]), vt)  # "b" unused
    full = Vocabulary.from_token_bytes([bytes([i]) for i in range(256)] + [b""], end_token_ids=[256])
    assert trie_mod._spells_every_byte(ByteTrie.from_strings([b"\x00\xff"]), full.byte_trie())


def test_unspellable_label():
    vocab = Vocabulary.from_token_bytes([b"a", b"b", b""], end_token_ids=[2])
    with pytest.raises(LabelError, match=r"1 label\(s\) cannot be spelled .* e.g. \['ac'\]"):
        TrieAutomaton.build(["ab", "ac"], vocab)


# --- fast compile: radix trie, subtree classes, single-table fill -----------

def _plain_intersect(labels, vocab):
    """The automaton's edges from the plain per-node intersection (no subtree classes)."""
    lt = ByteTrie.from_strings([lab.encode() for lab in labels])
    node_label = np.full(lt.n_nodes, -1, np.int32)
    node_label[lt.node_of] = np.arange(len(labels), dtype=np.int32)
    vt = vocab.byte_trie()
    return K.intersect(lt.child_indptr, lt.child_nodes, lt.byte_in, node_label, vt.child_indptr,
                       vt.child_bytes, vt.child_nodes, vt.end_indptr, vt.end_ids,
                       np.asarray(vocab.end_token_ids, np.int32))


def _sorted_build(data, offsets, order, lengths):
    """The reference: a preorder byte trie of the strings ``order`` (sorted lexicographically), plain Python.

    Returns parent, byte_in, depth (per node), node_of (per string id, -1 for
    strings not in ``order``) and the number of nodes.
    """
    total = 0
    maxlen = 0
    for k in range(order.shape[0]):
        s = order[k]
        total += lengths[s]
        if lengths[s] > maxlen:
            maxlen = lengths[s]
    cap = total + 1
    parent = np.full(cap, -1, np.int32)
    byte_in = np.zeros(cap, np.uint8)
    depth = np.zeros(cap, np.int32)
    node_of = np.full(lengths.shape[0], -1, np.int32)
    path = np.zeros(maxlen + 1, np.int32)
    n_nodes = 1
    prev = -1
    for k in range(order.shape[0]):
        s = order[k]
        ls = lengths[s]
        lcp = 0
        if prev >= 0:
            lp = lengths[prev]
            m = min(ls, lp)
            a = offsets[s]
            b = offsets[prev]
            while lcp < m and data[a + lcp] == data[b + lcp]:
                lcp += 1
        for d in range(lcp + 1, ls + 1):
            n = n_nodes
            n_nodes += 1
            parent[n] = path[d - 1]
            byte_in[n] = data[offsets[s] + d - 1]
            depth[n] = d
            path[d] = n
        node_of[s] = path[ls]
        prev = s
    return parent[:n_nodes].copy(), byte_in[:n_nodes].copy(), depth[:n_nodes].copy(), node_of


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=6).map(lambda b: bytes(x % 4 + 97 if x < 200 else x for x in b)),
                min_size=1, max_size=30))
def test_radix_trie_equals_sorted_build(strings):
    lens = np.fromiter(map(len, strings), np.int64, len(strings))
    off = np.zeros(len(strings) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    data = np.frombuffer(b"".join(strings), dtype=np.uint8)
    order = np.asarray(sorted(range(len(strings)), key=strings.__getitem__), dtype=np.int64)
    order = order[lens[order] > 0]
    ref = _sorted_build(data, off, order, lens)
    *got, dup = K.build_trie_msd(data, off)
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)
    nonempty = [s for s in strings if s]
    assert (dup >= 0) == (len(set(nonempty)) < len(nonempty))
    if dup >= 0:
        assert strings.count(strings[dup]) > 1


@pytest.mark.parametrize("name", ["qwen3", "gemma3"])
@pytest.mark.parametrize("family", ["tools", "icd", "prefixes", "unicode"])
def test_subtree_classes_give_the_plain_edges(name, family):
    vocab = load_vocab(name)
    labels = _tool_names(3000, seed=5) if family == "tools" else (
        _icd_codes(3000, seed=5) if family == "icd" else FAMILIES[family])
    auto = TrieAutomaton.build(labels, vocab)
    ref = _plain_intersect(labels, vocab)
    for a, b in zip(ref, (auto.indptr, auto.token_ids, auto.next_nodes)):
        np.testing.assert_array_equal(a, b)
    lt = ByteTrie.from_strings([lab.encode() for lab in labels])
    cls, rep = K.subtree_classes(lt.child_indptr, lt.child_nodes, lt.byte_in,
                                 np.asarray(auto.node_label) >= 0)
    if family in ("tools", "icd"):
        assert rep.shape[0] < 0.5 * lt.n_nodes  # the class path is the one taken here
    assert (cls[rep] == np.arange(rep.shape[0])).all()


def test_subtree_classes_python_equals_compiled():
    if not K.HAVE_NUMBA:
        pytest.skip("numba not installed: the kernels already run as Python")
    labels = _tool_names(300, seed=2)
    lt = ByteTrie.from_strings([lab.encode() for lab in labels])
    term = np.zeros(lt.n_nodes, bool)
    term[lt.node_of] = True
    compiled = K.subtree_classes(lt.child_indptr, lt.child_nodes, lt.byte_in, term)  # compiles every kernel
    if getattr(K.subtree_classes, "py_func", None) is None:
        pytest.skip("the kernels run as Python here (NUMBA_DISABLE_JIT=1): nothing compiled to compare")
    with np.errstate(over="ignore"):  # the hash wraps around, as int64 does in the compiled version
        py = K.subtree_classes.py_func(lt.child_indptr, lt.child_nodes, lt.byte_in, term)
    for a, b in zip(py, compiled):
        np.testing.assert_array_equal(a, b)
    data = np.frombuffer(b"".join(lab.encode() for lab in labels), np.uint8)
    off = np.concatenate([[0], np.cumsum([len(lab) for lab in labels])]).astype(np.int64)
    for a, b in zip(K.build_trie_msd.py_func(data, off), K.build_trie_msd(data, off)):
        np.testing.assert_array_equal(a, b)


def _spellable(label: str, tokens: set) -> bool:
    """Whether some sequence of ``tokens`` spells ``label`` exactly (a word-break walk, no automaton)."""
    ok = [True] + [False] * len(label)
    for i in range(1, len(label) + 1):
        ok[i] = any(ok[j] and label[j:i] in tokens for j in range(i))
    return ok[-1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labels=st.lists(st.text(alphabet="abc_", min_size=1, max_size=7), min_size=1, max_size=25, unique=True),
       tokens=st.lists(st.text(alphabet="abc_", min_size=1, max_size=3), min_size=1, max_size=12, unique=True))
def test_class_path_equals_plain_on_random_vocabularies(labels, tokens):
    vocab = Vocabulary.from_token_bytes([t.encode() for t in tokens] + [b""], end_token_ids=[len(tokens)])
    bad = [lab for lab in labels if not _spellable(lab, set(tokens))]
    if bad:  # the build refuses exactly the label sets with a label no token sequence spells, and counts them
        with pytest.raises(LabelError, match=rf"^{len(bad)} label\(s\) cannot be spelled"):
            TrieAutomaton.build(labels, vocab)
        return
    auto = TrieAutomaton.build(labels, vocab)
    ref = _plain_intersect(labels, vocab)
    live = K.live_nodes(ref[0], ref[2], auto.n_nodes, np.asarray(auto.node_label) >= 0)
    if not live.all():
        ref = K.prune(*ref, live, auto.n_nodes)
    for a, b in zip(ref, (auto.indptr, auto.token_ids, auto.next_nodes)):
        np.testing.assert_array_equal(a, b)


def test_fill_bitmask_fast_and_checked_paths_agree():
    vocab = load_vocab("qwen3")
    auto = TrieAutomaton.build(FAMILIES["tools"], vocab)
    words = (vocab.size + 31) // 32
    nodes = np.arange(0, auto.n_states, 7, dtype=np.int64)
    fast = np.full((len(nodes), words), -1, np.int32)
    auto.fill_bitmask(nodes, fast)
    for r, n in enumerate(nodes.tolist()):
        assert np.flatnonzero(np.unpackbits(fast[r].view(np.uint8), bitorder="little")).tolist() == \
            auto.allowed(n).tolist()
    slow = np.zeros((len(nodes), 2 * words), np.int32)[:, ::2]  # strided: the 'A' layout kernel
    auto.fill_bitmask(nodes.tolist(), slow)
    np.testing.assert_array_equal(fast, slow)
    as32 = np.zeros_like(fast)
    auto.fill_bitmask(nodes.astype(np.int32), as32)  # converted, then the fast kernel
    np.testing.assert_array_equal(fast, as32)
    with pytest.raises(IndexError, match=r"Invalid automaton state -1 in row 1"):
        auto.fill_bitmask(np.array([0, -1], np.int64), as32)
    with pytest.raises(TypeError, match=r"Invalid bitmask: expected a 2-D int32 array"):
        auto.fill_bitmask(nodes, fast.astype(np.float32))


def test_an_accepting_state_allows_nothing(monkeypatch):
    """After a label's end token the answer is over: no token is allowed, by any of the ways to ask."""
    v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b"c", b""], end_token_ids=[4])
    auto = TrieAutomaton.build(["ab", "ac"], v)
    # next() must answer an accepting state itself: the edge table has rows for trie nodes only. The kernel's
    # Python twin checks its bounds, so a lookup past the table is an IndexError here, not a read of stray memory.
    monkeypatch.setattr(K, "next_state", getattr(K.next_state, "py_func", K.next_state))
    done = auto.next(auto.next(auto.root, 2), 4)  # "ab", then the end token
    assert auto.is_accepting(done) and auto.label_at(done) == 0
    for s in range(auto.n_nodes, auto.n_states):  # every accepting state, the first one included
        allowed = auto.allowed(s)
        assert allowed.dtype == np.int32 and allowed.size == 0
        assert auto.allowed_mask(s).tolist() == [False] * v.size
        assert [auto.next(s, t) for t in range(v.size)] == [-1] * v.size
        m = np.full((1, 1), -1, np.int32)
        auto.fill_bitmask([s], m)
        assert m.tolist() == [[0]]


def test_fill_bitmask_reads_any_shape_of_states_and_refuses_an_invalid_first_row():
    v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b"c", b""], end_token_ids=[4])
    auto = TrieAutomaton.build(["ab", "ac"], v)
    a = auto.next(auto.root, 0)
    want = np.zeros((3, 1), np.int32)
    auto.fill_bitmask(np.array([auto.root, a, auto.n_nodes], np.int64), want)
    assert want[:, 0].tolist() == [0b101, 0b1010, 0]  # root: a, ab; after "a": b, c; accepting: nothing
    for nodes in ([[auto.root], [a], [auto.n_nodes]], np.array([[auto.root], [a], [auto.n_nodes]], np.int64)):
        m = np.full((3, 1), -1, np.int32)
        auto.fill_bitmask(nodes, m)  # a column of states: read in order, as a flat list
        np.testing.assert_array_equal(m, want)
    for nodes in (np.array([auto.n_states, 0], np.int64), [auto.n_states], np.array([-1], np.int32)):
        with pytest.raises(IndexError, match=r"Invalid automaton state -?\d+ in row 0"):
            auto.fill_bitmask(nodes, np.zeros((2, 1), np.int32))


def test_the_automaton_arrays_keep_their_integer_dtypes():
    """What the kernels return is read as integer indices and token ids (and saved, pickled, sent to
    vLLM's workers): a float array would index nothing, or silently round."""
    vocab = load_vocab("gpt2")
    labels = FAMILIES["tools"] + FAMILIES["phrases"]
    auto = TrieAutomaton.build(labels, vocab)
    lt = ByteTrie.from_strings([lab.encode() for lab in labels])
    for name in ("parent", "depth", "node_of"):
        assert np.issubdtype(np.asarray(getattr(lt, name)).dtype, np.integer), name
    for arr in (auto.indptr, auto.token_ids, auto.next_nodes):
        assert np.issubdtype(np.asarray(arr).dtype, np.integer)


@pytest.mark.parametrize("labels", [["a" * 24], ["a" * 24, "b" + "a" * 23, "ab" * 12]])
def test_nodes_with_many_allowed_tokens_grow_the_edge_tables(labels):
    """Runs of a letter with every run length a token: each node allows many tokens, more edges than
    the kernels first allocate (4 per node + 16), so their tables grow (both intersection paths)."""
    from judge.automaton.vocab import Vocabulary

    pieces = [b"a" * n for n in range(1, 13)] + [b"b", b"ab", b""]
    v = Vocabulary.from_token_bytes(pieces, end_token_ids=[len(pieces) - 1])
    auto = TrieAutomaton.build(labels, v)
    assert auto.token_ids.shape[0] > 4 * auto.n_nodes + 16  # the tables did grow
    root = set(auto.allowed(auto.root).tolist())
    assert set(range(12)) <= root  # every run of a up to 12 starts the first label
    for lab in labels:  # greedy longest-token spelling of each label walks to its accepting state
        node, rest = auto.root, lab.encode()
        while rest:
            tok = max((i for i, p in enumerate(pieces) if p and rest.startswith(p)), key=lambda i: len(pieces[i]))
            node = auto.next(node, tok)
            assert node >= 0, (lab, rest)
            rest = rest[len(pieces[tok]):]
        assert len(pieces) - 1 in auto.allowed(node).tolist()


def test_a_walk_deeper_than_the_first_stack_grows_it():
    """Sixty siblings at each of 20 levels, every prefix a token: the walk from the root keeps ~59 pending
    nodes per level (~1,180, over the 1,024 the kernel starts with), so its stack grows and the node is
    redone; the edges equal the plain intersection's, and labels are spelled one byte at a time."""
    from judge.automaton.vocab import Vocabulary

    others = [chr(c) for c in range(0x21, 0x7F) if chr(c) not in "az"][:60]
    labels = ["a" * d + x + "z" for d in range(20) for x in others]
    prefixes = sorted({lab[:i].encode() for lab in labels for i in range(1, len(lab) + 1)} | {b"z"})
    v = Vocabulary.from_token_bytes(prefixes + [b""], end_token_ids=[len(prefixes)])
    auto = TrieAutomaton.build(labels, v)
    for a, b in zip(_plain_intersect(labels, v), (auto.indptr, auto.token_ids, auto.next_nodes)):
        np.testing.assert_array_equal(a, b)
    assert len(auto.allowed(auto.root)) == len(prefixes) - 1  # at the root: every token but "z"
    one = {p: i for i, p in enumerate(prefixes)}
    for lab in labels[::97]:
        node = auto.root
        for ch in lab.encode():
            node = auto.next(node, one[bytes([ch])])
            assert node >= 0, lab
        assert auto.label_at(auto.next(node, len(prefixes))) == labels.index(lab)


# --- mask_logits: the bitmask and its kernel in one pass ---------------------

def _reference_mask(auto, V, node):
    """Columns of a ``V``-wide row that stay finite at ``node``: its allowed tokens from ``allowed()`` (a trie
    node), else (accepting, -1) the end tokens; nothing at or past the vocabulary."""
    toks = auto.allowed(node).tolist() if 0 <= node < auto.n_nodes else list(auto.end_token_ids)
    keep = np.zeros(V, bool)
    keep[[t for t in toks if t < min(V, auto.vocab_size)]] = True
    return keep


def _check_mask_logits(auto, rows, nodes, B, V, seed):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(seed).standard_normal((B, V)).astype(np.float32)
    want = x.copy()
    for r, n in zip(rows, nodes):
        want[r][~_reference_mask(auto, V, int(n))] = -np.inf
    got = x.copy()
    auto.mask_logits(got, np.array(rows, np.int64), np.array(nodes, np.int64))
    np.testing.assert_array_equal(got, want)
    for dt in (torch.float32, torch.float16, torch.bfloat16):  # torch tensors: the same columns, in place
        t = torch.from_numpy(x).to(dt)
        before = t.clone()
        auto.mask_logits(t, rows, nodes)
        assert torch.equal(torch.isneginf(t), torch.from_numpy(np.isneginf(want))), dt
        assert torch.equal(t[torch.isfinite(t)], before[torch.isfinite(t)]), dt  # what stays is not changed


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    labels=st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=6, unique=True),
    extra=st.integers(-3, 40),
    data=st.data(),
)
def test_mask_logits_equals_the_allowed_tokens(labels, extra, data):
    """Every row, every state (trie nodes, accepting states, -1) and logits narrower or wider than the vocabulary."""
    tokens = ["a", "b", "c", "ab", "bc", "abc", "ca"]
    vocab = Vocabulary.from_token_bytes([t.encode() for t in tokens] + [b"", b"x", b""], end_token_ids=[9, 7])
    auto = TrieAutomaton.build(labels, vocab)
    V = max(1, vocab.size + extra)
    B = data.draw(st.integers(1, 6))
    rows = data.draw(st.lists(st.integers(0, B - 1), max_size=B, unique=True))
    nodes = data.draw(st.lists(st.integers(-1, auto.n_states - 1), min_size=len(rows), max_size=len(rows)))
    _check_mask_logits(auto, rows, nodes, B, V, seed=len(rows))


def test_mask_logits_on_a_real_vocabulary():
    vocab = load_vocab("qwen3")
    auto = TrieAutomaton.build([" " + t for t in FAMILIES["tools"]] + FAMILIES["unicode"], vocab)
    nodes = [auto.root, 1, 7, auto.n_nodes - 1, auto.n_nodes, -1, auto.n_states - 1] + list(range(20, 400, 37))
    rows = list(range(len(nodes)))[::-1]
    _check_mask_logits(auto, rows, nodes, len(nodes) + 2, vocab.size + 64, seed=0)  # two rows untouched, padded


def test_mask_logits_refuses_bad_input():
    v = Vocabulary.from_token_bytes([b"a", b"b", b""], end_token_ids=[2])
    auto = TrieAutomaton.build(["ab"], v)
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(IndexError, match=r"Row 2 is outside logits of shape \(2, 3\); rows must be in 0..1"):
        auto.mask_logits(x, [0, 2], [0, 0])
    with pytest.raises(IndexError, match=r"Row -1 is outside"):
        auto.mask_logits(x, [-1], [0])
    with pytest.raises(IndexError, match=r"Invalid automaton state 4 for row 1: valid states are 0..3"):
        auto.mask_logits(x, [1], [4])
    with pytest.raises(ValueError, match="same length, got 2 rows and 1 nodes"):
        auto.mask_logits(x, [0, 1], [0])
    with pytest.raises(TypeError, match="Invalid logits: expected a 2-D writable float32"):
        auto.mask_logits(x.astype(np.float64), [0], [0])
    x.flags.writeable = False
    with pytest.raises(TypeError, match="Invalid logits"):
        auto.mask_logits(x, [0], [0])

    class OnADevice:  # another library's array: a device and a dtype, but not a torch tensor
        device, dtype, shape = "cpu", "float32", (2, 3)

    with pytest.raises(TypeError, match="Invalid logits: expected .* got OnADevice of dtype float32"):
        auto.mask_logits(OnADevice(), [0], [0])
