"""Exact on every architecture, or the exact fallback: never silently wrong.

Tiny random-weight models of many families (``judge.testing.tiny_model``), sliding windows
shorter than the prompt *and* the cached prefix, real tokenizers (byte-level BPE and
SentencePiece), sdpa and eager. Every score is checked against ``reference_logprobs``, which
tokenizes ``render_prompt(text) + label`` itself and runs one plain causal forward per label.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from judge import Classifier
from judge.engine import Query
from judge.testing import ARCHITECTURES, SLIDING_ARCHITECTURES, classifier_reference, tiny_model
from tests.conftest import load_tokenizer

LABELS = ["card_arrival", "card_linking", "card", "exchange_rate", "pin_blocked"]
TEXTS = ["I am still waiting on my card, it has been two weeks now?", "rate for euros"]
WINDOW = 16  # shorter than the cached prefix (~90 tokens) and than every prompt
FALLBACK = {"bloom", "falcon_alibi", "gpt_neo", "qwen3_next"}  # no exact tree mask: the fallback runs


def _check(model, tok, labels=LABELS, method="exact", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback announces itself; asserted through path_
        clf = Classifier(labels, model, tokenizer=tok, method=method, batch_size=2, **kw)
        scores = clf.decision_function(TEXTS)
    for i, t in enumerate(TEXTS):
        ref = classifier_reference(clf, t)
        if method == "first_token":
            ref = None
        if ref is not None:
            np.testing.assert_allclose(scores[i], ref, atol=1e-4, rtol=0,
                                       err_msg=f"{type(model).__name__} path={clf.engine_.path_}")
    return clf, scores


@pytest.fixture(scope="module")
def smol_tok(smollm2):
    return smollm2[1]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_exact_on_every_architecture(arch, smol_tok):
    window = WINDOW if arch in SLIDING_ARCHITECTURES else None
    model = tiny_model(arch, smol_tok, sliding_window=window)
    clf, _ = _check(model, smol_tok)
    assert clf.engine_.path_ == ("fallback" if arch in FALLBACK else "tree"), clf.engine_.check_


@pytest.mark.parametrize("arch", ["llama", "mistral", "gemma2", "gemma3", "qwen2", "phi3", "gpt2"])
def test_exact_with_eager_attention(arch, smol_tok):
    window = WINDOW if arch in SLIDING_ARCHITECTURES else None
    model = tiny_model(arch, smol_tok, sliding_window=window, attn_implementation="eager")
    clf, _ = _check(model, smol_tok)
    assert clf.engine_.path_ == "tree"


def test_mixed_layer_types_get_a_mask_per_type(smol_tok):
    """gemma3 with one sliding and one full layer: a dict of masks keyed by layer type."""
    model = tiny_model("gemma3", smol_tok, sliding_window=WINDOW)
    assert len(set(model.config.layer_types)) == 2
    clf, _ = _check(model, smol_tok)
    assert clf.engine_.check_["plan"] == "dict"


@pytest.mark.parametrize("arch", ["mistral", "phi3", "llama"])
@pytest.mark.parametrize("window", [None, WINDOW])
def test_sentencepiece_prompts_tokenized_in_context(arch, window):
    """SentencePiece: the prompt tokenized whole (no stray '▁' where pieces meet)."""
    if window is not None and arch not in SLIDING_ARCHITECTURES:
        pytest.skip("no sliding window in this family")
    from judge.prompts import PromptTemplate

    tok = load_tokenizer("mistral7b")
    model = tiny_model(arch, tok, sliding_window=window)
    _check(model, tok, prompt=PromptTemplate(chat=False))


@pytest.mark.parametrize("arch", ["llama", "mistral", "gemma3", "qwen3_next", "bloom"])
def test_first_token_path_on_architectures(arch, smol_tok):
    window = WINDOW if arch in SLIDING_ARCHITECTURES else None
    model = tiny_model(arch, smol_tok, sliding_window=window)
    clf, scores = _check(model, smol_tok, labels=["yes", "no", "maybe"], method="first_token")
    tok = clf.tokenizer_
    from judge.testing import reference_logprobs_ids

    for i, t in enumerate(TEXTS):
        ids = tok(clf.render_prompt(t), add_special_tokens=False)["input_ids"]
        ref = reference_logprobs_ids(model, ids, [[s[0]] for s in clf.label_token_ids])
        np.testing.assert_allclose(scores[i], ref, atol=1e-4)


@pytest.mark.parametrize("arch", ["llama", "mistral", "gemma3", "bloom"])
def test_decode_path_on_architectures(arch, smol_tok):
    window = WINDOW if arch in SLIDING_ARCHITECTURES else None
    model = tiny_model(arch, smol_tok, sliding_window=window)
    codes = [f"{c}{i}.{j}" for c in "AB" for i in range(5) for j in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dec = Classifier(codes, model, tokenizer=smol_tok, method="decode", top_k=3).decision_function(TEXTS)
        ex = Classifier(codes, model, tokenizer=smol_tok, method="exact", end_token=True).decision_function(TEXTS)
    found = np.isfinite(dec)
    assert (found.sum(1) == 3).all()
    np.testing.assert_allclose(dec[found], ex[found], atol=1e-4)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_engine_score_equals_the_reference(arch, smol_tok):
    """Engine.score == Reference.score (the one reference, no shared code) on text queries:
    questions about one state share a row, user pieces, options that are prefixes of others."""
    from judge.engine import Engine, Query
    from judge.testing import Reference

    window = WINDOW if arch in SLIDING_ARCHITECTURES else None
    model = tiny_model(arch, smol_tok, sliding_window=window)
    state = "Content: my card was charged twice and the app says pending <|im_end|> for days now.\n"
    queries = [Query((("You answer questions.\n\n", False), (state, True), ("Question: team?\nAnswer:", False)),
                     (" billing", " bill", " technical support", " tech")),
               Query((("You answer questions.\n\n", False), (state, True), ("Question: angry?\nAnswer:", False)),
                     (" Yes", " No")),
               Query((("Other prompt: ", False), ("short", True), (" ->", False)), (" a", " ab", " abc"))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(model, smol_tok)
        got = eng.score(queries)
    want = Reference(model, smol_tok, end_token="auto", end_id=eng.end_id_).score(queries)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-4, rtol=0, err_msg=arch)


def test_mask_plan_read_from_the_config():
    """The plan comes from the config alone: no config, ALiBi families (by flag or by model type),
    a nested text config, sliding layer types with and without a window, unknown layer types, and
    mixed windows on a model that takes no mask per layer type (all without a model)."""
    from types import SimpleNamespace as NS

    from judge.engine.masks import mask_plan

    assert mask_plan(NS()) == (None, "the model has no config")
    assert mask_plan(NS(config=None)) == (None, "the model has no config")
    for cfg in (NS(alibi=True), NS(model_type="bloom"), NS(model_type="mpt"), NS(model_type="jais")):
        kind, reason = mask_plan(NS(config=cfg))
        assert kind is None and reason.startswith("ALiBi attention biases"), cfg
    assert mask_plan(NS(config=NS(text_config=NS(sliding_window=4)))) == ("single", {None: 4})
    assert mask_plan(NS(config=NS(sliding_window=4, use_sliding_window=False))) == ("single", {None: None})
    both = ["sliding_attention", "full_attention"]
    # a sliding layer type without a window is full attention: every layer the same, one mask
    assert mask_plan(NS(config=NS(layer_types=both, sliding_window=None))) == ("single", {None: None})
    assert mask_plan(NS(config=NS(layer_types=both[:1] * 2, sliding_window=8))) == ("single", {None: 8})
    kind, reason = mask_plan(NS(config=NS(layer_types=both, sliding_window=8)))
    assert kind is None and "does not accept a mask per layer type" in reason
    kind, reason = mask_plan(NS(config=NS(layer_types=["linear_attention"])))
    assert kind is None and "'linear_attention'" in reason


def test_remap_parents_gives_integer_indices_into_the_fed_nodes():
    """Parents as positions in ``nodes`` (-1 off the root cache), int64 even for a row with no node fed
    (an empty float array cannot index)."""
    from judge.engine.forest import Forest
    from judge.engine.masks import remap_parents

    f = Forest()
    f.add_path([5, 6], -1, 0)
    f.add_path([5, 7], -1, 0)  # shares the node of 5
    nodes = f.fed_nodes()
    assert nodes.tolist() == [0, 1, 2]
    got = remap_parents(f, nodes)
    assert got.dtype == np.int64 and got.tolist() == [-1, 0, 0]
    assert remap_parents(f, nodes[1:]).tolist() == [-1, -1]  # their parent is not fed: off the root cache
    empty = remap_parents(f, nodes[:0])
    assert empty.dtype == np.int64 and np.arange(3)[empty].size == 0


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_answer_slot_states_from_the_scoring_pass_equal_the_reference(arch, smol_tok):
    """Engine.score_items_states: the scores are score_items' (bit for bit) and each item's answer-slot state,
    read from that same tree pass (questions of one state in one row, a cached root, packing), equals the
    reference's plain decoder pass over the prompt alone; hidden_states (the prompts only) too."""
    from judge.engine import Engine
    from judge.engine.protocol import lower_queries
    from judge.testing import Reference

    window = WINDOW if arch in SLIDING_ARCHITECTURES else None
    model = tiny_model(arch, smol_tok, sliding_window=window)
    state = "Content: my card was charged twice and the app says pending for days now.\n"
    queries = [Query((("You answer questions.\n\n", False), (state, True), (f"Question: {q}?\nAnswer:", False)),
                     opts) for q, opts in (("team", (" billing", " bill", " tech")), ("angry", (" Yes", " No")),
                                           ("refund", (" Yes", " No", " Maybe")))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eng = Engine(model, smol_tok).setup()
        items = lower_queries(eng, queries)
        plain = eng.score_items(items, root=items[0].ids[:8])
        scores, H = eng.score_items_states(items, root=items[0].ids[:8])
    ref = Reference(model, smol_tok)
    want = ref.hidden_states(items)
    for a, b in zip(scores, plain):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(H, want, atol=1e-4, rtol=1e-4, err_msg=f"{arch} path={eng.path_}")
    np.testing.assert_allclose(eng.hidden_states(items), want, atol=1e-4, rtol=1e-4, err_msg=arch)
    assert H.shape == (len(items), model.config.get_text_config().hidden_size)


@pytest.mark.parametrize("kw", [{"pack": 2}, {"pack": 3, "batch_size": 2}, {"max_batch_tokens": 64}],
                         ids=["packed", "packed-small-batches", "options-split-over-passes"])
def test_answer_slot_states_survive_packing_and_split_items(kw):
    """Packed rows (several prompts per row) and an item whose options are split over passes (each pass feeds
    the whole prompt): every item's state is its own prompt's, equal to the reference's plain pass, and the
    scores are score_items' bit for bit."""
    from judge.engine import Engine, Query
    from judge.engine.protocol import lower_queries
    from judge.testing import Reference, tiny_pair

    model, tok = tiny_pair()
    state = "Content: my card was charged twice and the app says pending for days now.\n"
    queries = [Query((("You answer questions.\n\n", False), (state + str(i), True), (f"Question: q{i}?\nAnswer:", False)),
                     tuple(f" option {j} of {i}" for j in range(30))) for i in range(6)]
    limit = kw.pop("max_batch_tokens", 400)
    eng = Engine(model, tok, max_batch_tokens=limit).setup()
    items = lower_queries(eng, queries)
    plain = eng.score_items(items, **kw)
    scores, H = eng.score_items_states(items, **kw)
    for a, b in zip(scores, plain):
        np.testing.assert_array_equal(a, b)
    assert not np.isnan(H).any()
    np.testing.assert_allclose(H, Reference(model, tok).hidden_states(items), atol=1e-4, rtol=1e-4)
