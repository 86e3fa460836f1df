"""Certified search: the same argmax as full exact scoring, probabilities within tolerance, honest flags.

Full exact scoring (the engine, itself checked against judge.testing.Reference on every
architecture) is the reference here; labels up to a few thousand, biases of both signs,
temperatures below and above 1.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge import Classifier
from judge._math import softmax
from judge.calibration.state import Calibration
from judge.engine import Engine, Item, OptionTrie
from judge.testing import icd_codes, phrases, tiny_model, tool_names

TEXTS = ["I am still waiting on my card?", "top up failed again", "what rate do you use", "pin blocked",
         "Where is the money I sent yesterday?"]
_MODELS = {}


def _model(arch, tok, seed):
    key = (arch, seed)
    if key not in _MODELS:
        window = 16 if arch in ("mistral", "gemma3") else None
        _MODELS[key] = tiny_model(arch, tok, seed=seed, sliding_window=window)
    return _MODELS[key]


def _labels(family, k, seed):
    return {"tools": tool_names, "phrases": phrases, "icd": icd_codes}[family](k, seed)


def _full_scores(eng, items, chunk=400):
    """Full exact scores, label chunks scored as separate items (bounded memory)."""
    out = []
    for it in items:
        parts = [Item(it.ids, it.options[s:s + chunk], group=j)
                 for j, s in enumerate(range(0, len(it.options), chunk))]
        out.append(np.concatenate(eng.score_items(parts, batch_size=4)))
    return np.stack(out)


def _check_search_equals_full_exact(smollm2, arch, seed, k, family, T, bias_scale, eps):
    """The certified argmax is full exact scoring's argmax after bias and temperature, every label it
    completed is exact, its reported score and gap are the true ones; the tolerance mode's distribution
    is within ``eps`` of the full one."""
    tok = smollm2[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(_model(arch, tok, seed), tok).setup()
    labels = _labels(family, k, seed)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    items = [Item(eng.encode([("Classify the text.\nText: ", False), (t, True), ("\nLabel:", False)]), seqs)
             for t in TEXTS[: 2 if k > 1000 else 4]]
    full = _full_scores(eng, items)
    rng = np.random.default_rng(seed)
    bias = rng.normal(0, bias_scale, k) if bias_scale else None  # both signs
    cal = (full - (0.0 if bias is None else bias)) / T
    trie = OptionTrie(seqs)
    res = eng.search(items, trie, bias=bias, temperature=T)
    assert res.certified.all() and (res.gap == 0).all()
    np.testing.assert_array_equal(res.best, cal.argmax(1))
    np.testing.assert_allclose(res.best_score, cal.max(1), atol=1e-4 / T, rtol=0)
    np.testing.assert_array_equal(res.argmax(bias, T), res.best)  # the completed labels' own argmax agrees
    got = res.dense(k)
    seen = np.isfinite(got)
    np.testing.assert_allclose(got[seen], full[seen], atol=1e-4, rtol=0)  # every label it completed is exact
    assert ((res.fed > 0) & (res.rounds >= 1)).all()
    assert res.best.dtype == res.fed.dtype == res.rounds.dtype == np.int64 and res.certified.dtype == bool  # as documented
    tol = eng.search(items, trie, bias=bias, temperature=T, mode="tolerance", eps=eps)
    p = softmax(np.nan_to_num((tol.dense(k) - (0.0 if bias is None else bias)) / T, nan=-np.inf))
    tv = 0.5 * np.abs(p - softmax(cal)).sum(1)
    assert tol.certified.all() and (tv <= eps + 1e-9).all(), tv
    assert (tol.gap <= eps + 1e-12).all()  # the reported open-mass ratio is the one the stopping rule met
    mass = np.exp(cal - cal.max(1, keepdims=True))
    done = np.isfinite(tol.dense(k))
    unfound = np.where(done, 0.0, mass).sum(1) / np.where(done, mass, 0.0).sum(1)
    assert (unfound <= tol.gap * (1 + 1e-9) + 1e-12).all(), (unfound, tol.gap)  # and it bounds what is left out
    return res


#: Fixed hard cases for CI (arch, seed, K, family, T, bias scale, eps): biases at and beyond the scale where a
#: wrong prefix bound changes the answer (a bound with the bias sign flipped answers every text of the first
#: two cases wrongly and flags them certified), temperatures on both sides of 1, K from 2 to 3,000, no bias.
HARD_CASES = [
    ("llama", 0, 300, "tools", 0.3, 8.0, 1e-3),
    ("llama", 0, 40, "tools", 1.0, 4.0, 1e-2),
    ("mistral", 1, 30, "phrases", 2.5, 16.0, 0.1),
    ("llama", 1, 100, "tools", 4.0, 4.0, 1e-2),  # a bound scaled by T instead of divided answers all four wrongly
    ("llama", 2, 3000, "icd", 0.6, 2.0, 1e-2),
    ("llama", 2, 7, "phrases", 1.7, 0.0, 1e-3),
    ("mistral", 0, 2, "tools", 0.3, 0.5, 1e-2),
]


@pytest.mark.parametrize("arch, seed, k, family, T, bias_scale, eps", HARD_CASES)
def test_certified_search_equals_full_exact(smollm2, arch, seed, k, family, T, bias_scale, eps):
    _check_search_equals_full_exact(smollm2, arch, seed, k, family, T, bias_scale, eps)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(arch=st.sampled_from(["llama", "mistral", "gemma3"]), seed=st.integers(0, 2),
       k=st.sampled_from([2, 7, 30, 300, 1000, 3000]), family=st.sampled_from(["tools", "phrases", "icd"]),
       T=st.sampled_from([0.2, 0.3, 0.7, 1.0, 1.6, 2.5, 4.0]), bias_scale=st.sampled_from([0.0, 0.5, 2.0, 8.0, 16.0]),
       eps=st.sampled_from([1e-3, 1e-2, 0.1]))
def test_certified_search_equals_full_exact_drawn(smollm2, arch, seed, k, family, T, bias_scale, eps):
    """The same property over drawn cases (the mutation script runs it; CI runs the fixed ones above)."""
    _check_search_equals_full_exact(smollm2, arch, seed, k, family, T, bias_scale, eps)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(arch=st.sampled_from(["llama", "mistral", "gemma3"]), seed=st.integers(0, 2),
       k=st.integers(2, 30), family=st.sampled_from(["tools", "phrases"]),
       T=st.sampled_from([0.3, 1.0, 2.5]), bias_scale=st.sampled_from([0.0, 0.5, 2.0]),
       eps=st.sampled_from([1e-3, 1e-2, 0.1]))
def test_classifier_predict_is_the_full_argmax(smollm2, arch, seed, k, family, T, bias_scale, eps):
    tok = smollm2[1]
    model = _model(arch, tok, seed)
    labels = _labels(family, k, seed)
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
        assert clf.search_report_.certified.all()
        approx = clf.predict_proba(TEXTS, tolerance=eps)
    tv = 0.5 * np.abs(approx - want).sum(axis=1)
    assert (tv <= eps + 1e-9).all(), tv
    np.testing.assert_allclose(approx.sum(axis=1), 1.0)


def test_a_spent_budget_is_flagged_with_its_gap(tiny_llama):
    model, tok = tiny_llama
    eng = Engine(model, tok)
    labels = tool_names(500, 1)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    items = [Item(eng.encode([("Text: ", False), (t, True), ("\nLabel:", False)]), seqs) for t in TEXTS[:3]]
    trie = OptionTrie(seqs)
    full = eng.search(items, trie)
    assert full.certified.all() and (full.fed > 40).all()
    cut = eng.search(items, trie, budget=40, per_round=8)
    assert not cut.certified.any()
    assert (cut.gap > 0).all() and np.isfinite(cut.gap).all()  # by how much an open label could still win
    assert ((cut.best >= 0) & (cut.best < len(labels))).all()  # an answer, flagged, never nothing
    assert (cut.fed <= 40 + trie.depth.max()).all()  # over budget only to complete one label
    # the gap is honest: the certified best beats the cut answer by at most the gap
    assert (full.best_score - cut.best_score <= cut.gap + 1e-9).all()
    clf = Classifier(labels, model, tokenizer=tok, method="exact", search_budget=40)
    with pytest.warns(UserWarning, match=r"not certified: the search for the argmax spent its budget of 40"):
        pred = clf.predict(TEXTS[:3])
    assert set(pred) <= set(labels) and not clf.search_report_.certified.any()


def test_search_feeds_fewer_tokens_and_zero_tolerance_is_full(tiny_llama):
    model, tok = tiny_llama
    labels = tool_names(40, 0)
    clf = Classifier(labels, model, tokenizer=tok, method="exact", prior=None)  # raw scores (the prior: test_prior)
    full = clf.decision_function(TEXTS)
    fed_full = clf.engine_.last_usage_["input_tokens"]
    pred = clf.predict(TEXTS)
    assert list(pred) == [labels[i] for i in full.argmax(1)]
    assert clf.search_report_.fed.sum() <= 0.8 * fed_full  # the bound prunes (54% measured; expanding all: 100%)
    np.testing.assert_array_equal(clf.predict_proba(TEXTS, tolerance=0.0), softmax(full))
    with pytest.raises(ValueError, match=r"tolerance must be a number in \[0, 1\), got 1.5"):
        clf.predict_proba(TEXTS, tolerance=1.5)


def test_auto_searches_above_decode_above_and_keeps_beam_search_on_request(tiny_llama):
    model, tok = tiny_llama
    labels = icd_codes(60, 3)
    clf = Classifier(labels, model, tokenizer=tok, decode_above=50)
    assert clf.setup().method_ == "search"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = clf.predict(TEXTS[:2])
        exact = Classifier(labels, model, tokenizer=tok, method="exact")
        want = exact.predict_proba(TEXTS[:2])  # the default prior applied, as on the search path
    assert list(pred) == [labels[i] for i in want.argmax(1)]
    p = clf.predict_proba(TEXTS[:2])  # the search path's default tolerance
    assert (0.5 * np.abs(p - want).sum(1) <= clf.search_tolerance + 1e-9).all()
    s = clf.decision_function(TEXTS[:2])
    assert np.isfinite(s).any(axis=1).all() and np.isneginf(s).any()  # unexpanded labels: -inf
    assert Classifier(labels, model, tokenizer=tok, method="decode").setup().method_ == "decode"


def _one_token_words(tok, k, seed):
    """``k`` words the tokenizer writes after a space as one token each: a label set auto scores by first token."""
    import random

    vocab = sorted(w[1:] for w in tok.get_vocab() if w.startswith("\u0120") and w[1:].isalpha() and w[1:].islower()
                   and 4 <= len(w) <= 9)
    words = [w for w in random.Random(seed).sample(vocab, 4 * k) if len(tok(" " + w)["input_ids"]) == 1]
    return words[:k]


@pytest.mark.parametrize("family,k,decode_above,path", [("icd", 40, 2000, "exact"), ("icd", 60, 30, "search"),
                                                        ("words", 40, 2000, "first_token"), ("words", 40, 30, "search")])
@pytest.mark.parametrize("prior", ["auto", "contextual", None])
def test_every_path_answers_by_one_definition_above_and_below_decode_above(tiny_llama, family, k, decode_above, path,
                                                                           prior):
    """The default answer is the argmax of full exact scoring after the classifier's own prior, whichever path
    ``auto`` takes (exact or first token below ``decode_above``, the certified search above): the search's bound
    carries the prior's per-label bias. (Issue 43: above decode_above the search used to ignore the default prior
    while reporting its answers certified.)"""
    model, tok = tiny_llama
    labels = icd_codes(k, 7) if family == "icd" else _one_token_words(tok, k, 7)
    texts = TEXTS + ["a cough that will not go away", "broken left wrist after a fall"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = Classifier(labels, model, tokenizer=tok, decode_above=decode_above, prior=prior)
        exact = Classifier(labels, model, tokenizer=tok, method="exact", prior=prior)
        assert clf.setup().method_ == path
        assert clf.prior_for(len(texts)) == exact.prior_for(len(texts)) == (None if prior is None else "contextual")
        want = exact.predict_proba(texts)
        raw = exact.decision_function(texts)
        pred = clf.predict(texts)
        proba = clf.predict_proba(texts)
    assert list(pred) == [labels[i] for i in want.argmax(1)]
    if k > decode_above:
        assert clf.search_report_ is not None and bool(clf.search_report_.certified.all())
    assert (0.5 * np.abs(proba - want).sum(1) <= clf.search_tolerance + 1e-9).all()
    if prior is not None:  # the prior really moves answers here, so the check above could fail
        np.testing.assert_allclose(clf.zero_shot_prior(), exact.zero_shot_prior(), atol=1e-9)
        assert (want.argmax(1) != raw.argmax(1)).any()


@pytest.mark.slow
@pytest.mark.parametrize("k", [3000, 1500])
def test_thousands_of_tool_names_answer_by_one_definition_at_the_default_decode_above(tiny_llama, k):
    """The same at the default ``decode_above`` (2000), with the default prior: 3,000 tool-like labels (the search)
    and 1,500 (exact), six texts; every text's answer is full exact scoring's after the prior (the prior moves some
    of them: 3 of 6 at 3,000, 2 of 6 at 1,500). About three minutes on one core."""
    model, tok = tiny_llama
    labels = tool_names(k, 3)
    texts = ["I am still waiting on my card?", "My top-up did not go through.", "card gone",
             "What is the exchange rate today for euros to dollars?", "a cough that will not go away",
             "broken left wrist after a fall"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = Classifier(labels, model, tokenizer=tok)
        exact = Classifier(labels, model, tokenizer=tok, method="exact")
        assert clf.method_ == ("search" if k > 2000 else "exact") and clf.decode_above == 2000
        pred = clf.predict(texts)
        want = exact.predict_proba(texts)
        raw = exact.decision_function(texts)
    assert list(pred) == [labels[i] for i in want.argmax(1)]
    assert (want.argmax(1) != raw.argmax(1)).any()
    if k > 2000:
        assert bool(clf.search_report_.certified.all())


def test_a_prior_the_path_cannot_apply_is_refused_not_ignored(tiny_llama):
    model, tok = tiny_llama
    labels = ["card arrival", "card linking", "exchange rate", "pin blocked", "top up failed", "lost card"]
    auto = Classifier(labels, model, tokenizer=tok, method="exact", shortlist=2, shortlist_encoder="tfidf")
    assert auto.prior_for(3) is None  # the default: no prior where only some labels are scored (documented)
    for kw in ({"shortlist": 2, "shortlist_encoder": "tfidf"}, {"method": "decode"}):
        clf = Classifier(labels, model, tokenizer=tok, prior="contextual", **kw)
        with pytest.raises(ValueError, match=r"prior='contextual' cannot be applied on (a shortlist|the decode "
                                             r"path).*Use prior='auto'"):
            clf.predict(["my card arrival is late"])


def test_shortlist_scores_its_labels_exactly_and_reports_recall(tiny_llama):
    model, tok = tiny_llama
    labels = ["card arrival", "card linking", "exchange rate", "pin blocked", "top up failed", "lost card"]
    texts = ["my card arrival is late", "what exchange rate applies", "top up failed twice"]
    y = ["card arrival", "exchange rate", "top up failed"]
    clf = Classifier(labels, model, tokenizer=tok, method="exact", shortlist=2, shortlist_encoder="tfidf")
    s = clf.decision_function(texts)
    assert (np.isfinite(s).sum(1) == 2).all()
    full = Classifier(labels, model, tokenizer=tok, method="exact").decision_function(texts)
    np.testing.assert_allclose(s[np.isfinite(s)], full[np.isfinite(s)], atol=1e-6)
    keep = clf.compiled_.shortlist().query(texts)
    manual = np.mean([labels.index(g) in row for g, row in zip(y, keep)])
    assert clf.shortlist_recall(texts, y) == manual == 1.0
    outside = [next(lab for j, lab in enumerate(labels) if j not in row) for row in keep]
    assert clf.shortlist_recall(texts, outside) == 0.0
    half = [outside[0]] + y[1:]
    assert clf.shortlist_recall(texts, half) == pytest.approx(2 / 3)
    assert set(clf.predict(texts)) <= set(labels)
    with pytest.raises(ValueError, match="shortlist must be None or a positive int"):
        Classifier(labels, model, tokenizer=tok, shortlist=0)
    with pytest.raises(ValueError, match="shortlist_recall needs a shortlist"):
        Classifier(labels, model, tokenizer=tok).shortlist_recall(texts, y)


def test_option_trie():
    t = OptionTrie([[1, 2], [1, 3], [4]])
    assert t.prefix_free and t.n_under[0] == 3 and t.children(1).tolist() == [3, 4]
    assert not OptionTrie([[1], [1, 2]]).prefix_free
    with pytest.raises(ValueError, match="Option 1 has no tokens"):
        OptionTrie([[1], []])
    # node 0 is the answer slot: no parent, no token, depth 0
    assert (t.parent[0], t.token[0], t.depth[0]) == (-1, -1, 0)
    assert t.token.tolist() == [-1, 1, 4, 2, 3] and t.depth.tolist() == [0, 1, 1, 2, 2]


class _UnstableDefaultSort:
    """numpy, but its default argsort reverses each run of equal keys: a valid unstable sort. numpy's own
    introsort, used where no SIMD argsort is dispatched, permutes equal keys even in a sorted array; the
    SIMD sorts of an AVX2/AVX-512 machine happen to keep a sorted array in order, so there the trie alone
    cannot tell a stable sort from the default."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def argsort(a, axis=-1, kind=None, order=None):
        idx = np.argsort(a, axis=axis, kind="stable", order=order)
        if kind in ("stable", "mergesort"):
            return idx
        keys = np.asarray(a)[idx]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        return np.concatenate([idx[s:e][::-1] for s, e in zip(starts, np.r_[starts[1:], len(idx)])])


def test_option_trie_children_in_token_order_whatever_the_default_sort(monkeypatch):
    """Every node's children in ascending node id, which is ascending token: the same trie on every
    platform, even where numpy's default argsort is not stable."""
    import judge.engine.options as options

    monkeypatch.setattr(options, "np", _UnstableDefaultSort())
    t = options.OptionTrie([[7, 9], [7, 3], [7, 5], [2], [7, 5, 1]])
    monkeypatch.undo()
    assert t.children(0).tolist() == [1, 2] and t.token[[1, 2]].tolist() == [2, 7]
    assert t.children(2).tolist() == [3, 4, 5] and t.token[[3, 4, 5]].tolist() == [3, 5, 9]
    for n in range(len(t)):
        kids = t.children(n)
        assert (np.diff(kids) > 0).all() and (t.parent[kids] == n).all()


def test_search_settings_change_the_work_not_the_answer(tiny_llama):
    """Whole small subtrees fed at once, few or many nodes per round, small batches: the same certified argmax
    and exact scores; fewer nodes per round take more rounds; subtrees fed whole feed more tokens."""
    model, tok = tiny_llama
    eng = Engine(model, tok)
    labels = tool_names(120, 4)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    items = [Item(eng.encode([("Text: ", False), (t, True), ("\nLabel:", False)]), seqs) for t in TEXTS[:3]]
    trie = OptionTrie(seqs)
    bias = np.random.default_rng(4).normal(0, 3.0, len(labels))
    full = (_full_scores(eng, items) - bias) / 0.5
    base = eng.search(items, trie, bias=bias, temperature=0.5)
    np.testing.assert_array_equal(base.best, full.argmax(1))
    for kw in ({"subtree": 4}, {"per_round": 2}, {"per_round": 64}, {"batch_size": 1}):
        r = eng.search(items, trie, bias=bias, temperature=0.5, **kw)
        assert r.certified.all(), kw
        np.testing.assert_array_equal(r.best, base.best)
        np.testing.assert_allclose(r.best_score, base.best_score, atol=1e-5)
        if kw == {"per_round": 2}:
            assert (r.rounds > base.rounds).all() and (r.fed - r.fed.min() >= 0).all()
        if kw == {"subtree": 4}:
            assert r.fed.sum() >= base.fed.sum()
        if kw == {"batch_size": 1}:
            np.testing.assert_array_equal(r.fed, base.fed)
            np.testing.assert_array_equal(r.rounds, base.rounds)


def test_texts_are_batched_by_prompt_length_and_answered_in_their_own_order(tiny_llama, monkeypatch):
    """Two short and two long prompts given interleaved, two texts per batch: each batch's first pass is as
    wide as its own prompts (short with short, long with long: no padding up to a long one), and every
    text gets its own answer, in the order given, whatever the order of the input."""
    import judge.engine.search as search_mod

    model, tok = tiny_llama
    eng = Engine(model, tok)
    labels = tool_names(40, 6)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    texts = ["pin", "Where is the money I sent to my sister yesterday, it never arrived at all?", "rate",
             "I am still waiting on my new card, it has been more than two weeks since I ordered it?"]
    items = [Item(eng.encode([("Text: ", False), (t, True), ("\nLabel:", False)]), seqs) for t in texts]
    trie = OptionTrie(seqs)
    widths, real = [], search_mod.read_logits

    def recording(model, keep, **inputs):
        if int(inputs["position_ids"][:, 0].max()) == 0:  # a batch's first pass: its prompts from position 0
            widths.append(int(inputs["input_ids"].shape[1]))
        return real(model, keep, **inputs)

    monkeypatch.setattr(search_mod, "read_logits", recording)
    r = eng.search(items, trie, batch_size=2)
    lengths = sorted(len(it.ids) for it in items)
    assert sorted(widths) == [lengths[1], lengths[3]], (widths, lengths)
    monkeypatch.setattr(search_mod, "read_logits", real)
    for order in ([3, 2, 1, 0], [1, 3, 0, 2]):
        again = eng.search([items[i] for i in order], trie, batch_size=2)
        np.testing.assert_array_equal(again.best, r.best[order])
        np.testing.assert_allclose(again.best_score, r.best_score[order], atol=1e-5)
        np.testing.assert_array_equal(again.fed, r.fed[order])
    for i, it in enumerate(items):  # and each as its own search
        alone = eng.search([it], trie)
        assert alone.best[0] == r.best[i] and alone.fed[0] == r.fed[i]


def test_the_default_feeds_4_then_8_then_16_nodes_per_round(tiny_llama, monkeypatch):
    """per_round=None: a text's first pass after its prompt feeds at most 4 trie nodes, then 8, then 16 at
    most from there on; the answer is the one a fixed 16 per round finds."""
    import judge.engine.search as search_mod

    model, tok = tiny_llama
    eng = Engine(model, tok)
    labels = tool_names(300, 8)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    item = Item(eng.encode([("Text: ", False), (TEXTS[4], True), ("\nLabel:", False)]), seqs)
    trie = OptionTrie(seqs)
    bias = np.random.default_rng(8).normal(0, 4.0, len(labels))  # a spread bias: many rounds
    widths, real = [], search_mod.read_logits

    def recording(model, keep, **inputs):
        widths.append(int(inputs["input_ids"].shape[1]))
        return real(model, keep, **inputs)

    monkeypatch.setattr(search_mod, "read_logits", recording)
    r = eng.search([item], trie, bias=bias)
    monkeypatch.setattr(search_mod, "read_logits", real)
    trie_passes = widths[1:]  # the first pass feeds the prompt
    assert len(trie_passes) >= 4 and r.certified[0], widths
    assert trie_passes[0] <= 4 and trie_passes[1] <= 8 and max(trie_passes) <= 16, trie_passes
    assert max(trie_passes[:2]) < 16 <= max(trie_passes)  # it did grow
    fixed = eng.search([item], trie, bias=bias, per_round=16)
    assert fixed.best[0] == r.best[0]
    np.testing.assert_allclose(fixed.best_score, r.best_score, atol=1e-5)


def test_search_refuses_bad_settings_with_the_value_given(tiny_llama):
    model, tok = tiny_llama
    eng = Engine(model, tok)
    seqs = eng.option_ids("Label:", [" yes", " no", " maybe"])
    items = [Item(eng.encode([("Text: hi\nLabel:", False)]), seqs)]
    trie = OptionTrie(seqs)
    for kw, msg in (({"mode": "best"}, r"^mode must be 'argmax' or 'tolerance', got 'best'\.$"),
                    ({"mode": "tolerance", "eps": 1.0}, r"^eps must be in \[0, 1\) for mode='tolerance', got 1\.0\.$"),
                    ({"mode": "tolerance", "eps": -0.1}, r"got -0\.1\.$"),
                    ({"budget": 0}, r"^budget must be a positive number of tokens or None, got 0\.$"),
                    ({"budget": 2.5}, r"got 2\.5\.$"),
                    ({"per_round": 0}, r"^per_round must be >= 1 or None \(the doubling schedule\), got 0\.$"),
                    ({"bias": np.zeros(2)}, r"^bias must have one value per option \(3,\) or per text and option "
                                             r"\(1, 3\), got shape \(2,\)\.$"),
                    ({"temperature": 0.0}, r"^temperature must be a positive finite number, got 0\.0\.$"),
                    ({"temperature": np.inf}, r"got inf\.$")):
        with pytest.raises(ValueError, match=msg):
            eng.search(items, trie, **kw)
    with pytest.raises(ValueError, match=r"^search needs a prefix-free option set"):
        eng.search(items, OptionTrie([[1], [1, 2]]))
    with pytest.raises(ValueError, match=r"^A prompt needs at least one token\.$"):
        eng.search([Item([], seqs)], trie)
    r = eng.search(items, trie, mode="tolerance", eps=0.0)  # eps = 0: every label completed, exact
    assert r.certified.all() and np.isfinite(r.dense(3)).all() and (r.gap == 0).all()
    one = eng.search(items, trie, per_round=1)  # the smallest setting is taken: one node per round
    assert one.certified.all() and one.best[0] == eng.search(items, trie).best[0]


def test_tolerance_gap_is_a_probability_bound_at_temperature_one(tiny_llama):
    """At T = 1 without bias an open subtree's bound is its prefix's probability, so the open bounds and the
    labels found never hold more than all of it: the reported gap (open bound / mass found) is at most
    (1 - found) / found, also when the budget cuts the search short."""
    model, tok = tiny_llama
    eng = Engine(model, tok)
    labels = tool_names(300, 2)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    items = [Item(eng.encode([("Text: ", False), (t, True), ("\nLabel:", False)]), seqs) for t in TEXTS[:3]]
    trie = OptionTrie(seqs)
    for kw in ({"budget": 40, "per_round": 8}, {"budget": 60, "per_round": 4}, {"eps": 0.3}):
        r = eng.search(items, trie, mode="tolerance", **{"eps": 1e-3, **kw})
        found = np.nansum(np.exp(r.dense(len(labels))), axis=1)
        assert (found > 0).all() and (r.gap <= (1 - found) / found + 1e-9).all(), (kw, r.gap, (1 - found) / found)


def test_a_cached_root_feeds_only_what_follows_it(tiny_llama):
    """With a root cache (the prompt's shared head), the search feeds the prompt's tokens after it only, down
    to the last one (which reads the first label token), and answers the same."""
    model, tok = tiny_llama
    eng = Engine(model, tok)
    labels = tool_names(60, 5)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    ids = eng.encode([("Text: ", False), (TEXTS[1], True), ("\nLabel:", False)])
    trie = OptionTrie(seqs)
    alone = eng.search([Item(ids, seqs)], trie)
    for cut in (len(ids) - 1, len(ids) - 3, 2):  # the root covers all but the last token, or less
        r = eng.search([Item(ids, seqs)], trie, root=ids[:cut])
        assert r.best[0] == alone.best[0] and r.certified[0]
        np.testing.assert_allclose(r.best_score, alone.best_score, atol=1e-5)
        assert r.fed[0] == alone.fed[0] - cut, (cut, r.fed, alone.fed)
    whole = eng.search([Item(ids, seqs)], trie, root=ids)  # a root as long as the prompt: its last token is fed
    assert whole.fed[0] == alone.fed[0] - (len(ids) - 1) and whole.best[0] == alone.best[0]


def test_tolerance_masses_stay_in_float_range_under_a_huge_common_bias(tiny_llama):
    """A bias of 800 on every label changes no probability, but exp((log p - 800) / T) underflows: the
    tolerance mode keeps its masses relative to the first pass's best bound, so it answers as without it."""
    model, tok = tiny_llama
    eng = Engine(model, tok)
    labels = tool_names(50, 7)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    items = [Item(eng.encode([("Text: ", False), (t, True), ("\nLabel:", False)]), seqs) for t in TEXTS[:2]]
    trie = OptionTrie(seqs)
    plain = eng.search(items, trie, mode="tolerance", eps=1e-2, temperature=0.5)
    far = eng.search(items, trie, mode="tolerance", eps=1e-2, temperature=0.5, bias=np.full(len(labels), 800.0))
    assert plain.certified.all() and far.certified.all()
    np.testing.assert_array_equal(far.best, plain.best)
    np.testing.assert_allclose(far.gap, plain.gap, rtol=1e-6)
    np.testing.assert_array_equal(far.fed, plain.fed)


@pytest.mark.parametrize("seqs", [[[5, -1]], [[-1], [-1, -1]], [[3], [2**31]]])
def test_option_trie_refuses_ids_outside_the_vocabulary_range(seqs):
    """-1 is also the padding of the option matrix: a -1 token was once taken for padding and built a
    broken trie (or divided by zero) instead of being refused."""
    with pytest.raises(ValueError, match=r"must be in \[0, 2\*\*31\); got"):
        OptionTrie(seqs)


def test_a_bias_per_text_is_each_texts_own_search(smollm2):
    """bias (n, K): each text's search runs under its own row, as a search of that text alone with it would."""
    tok = smollm2[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(_model("llama", tok, 0), tok).setup()
    labels = _labels("tools", 40, 0)
    seqs = eng.option_ids("Label:", [" " + x for x in labels])
    items = [Item(eng.encode([("Text: ", False), (t, True), ("\nLabel:", False)]), seqs) for t in TEXTS[:4]]
    trie = OptionTrie(seqs)
    rows = np.random.default_rng(3).normal(0, 6.0, (len(items), len(labels)))  # a different order per text
    res = eng.search(items, trie, bias=rows)
    full = _full_scores(eng, items)
    np.testing.assert_array_equal(res.best, (full - rows).argmax(1))
    np.testing.assert_array_equal(res.argmax(rows), res.best)
    for i, it in enumerate(items):
        one = eng.search([it], trie, bias=rows[i])
        assert one.best[0] == res.best[i] and one.fed[0] == res.fed[i]
    assert res.certified.all()
    with pytest.raises(ValueError, match=r"per text and option \(4, 40\), got shape \(3, 40\)"):
        eng.search(items, trie, bias=rows[:3])
    with pytest.raises(ValueError, match="bias holds NaN"):
        eng.search(items, trie, bias=np.where(rows > 5, np.nan, rows))


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_the_fused_default_predicts_by_the_certified_search(smollm2, arch):
    """With an embedder beside the LM, predict proves the fused argmax by the search (per-text bias), not by
    scoring every label: the same answers as predict_proba's argmax, before and after a calibration's bias."""
    from judge.fusion import Fusion

    tok = smollm2[1]
    labels = _labels("phrases", 25, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = Classifier(labels, _model(arch, tok, 1), tokenizer=tok, method="exact", embedder="minilm", batch_size=2)
        assert clf.fusion_ == Fusion(0.6, 0.02)
        want = clf.predict_proba(TEXTS).argmax(1)
        got = clf.predict(TEXTS)
        assert list(got) == [labels[i] for i in want]
        rep = clf.search_report_
        assert rep is not None and rep.certified.all() and len(rep.fed) == len(TEXTS)
        bias = np.random.default_rng(1).normal(0, 3.0, len(labels))
        object.__setattr__(clf, "calibration_", Calibration(tuple(labels), bias, 0.7, None,
                                                            np.full((2, len(labels)), 1 / len(labels)),
                                                            np.array([0, 1])))
        want = clf.predict_proba(TEXTS).argmax(1)
        assert list(clf.predict(TEXTS)) == [labels[i] for i in want]
        assert clf.search_report_ is not rep
