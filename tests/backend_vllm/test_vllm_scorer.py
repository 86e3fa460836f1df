"""VLLMScorer == the transformers engine == the reference, to float32 rounding (<= 1e-4).

On a random-weight tiny Llama (32-token KV blocks) and on the packaged SmolLM2 (128-token blocks
on CPU), with multi-token labels, labels that are prefixes of others (end token), first-token
scoring, and prompts whose length is an exact multiple of the block size: there vLLM reads the
first option token's log-probability from a cached block it never computed, and the scorer's
block-boundary guard must recompute it (``test_block_boundary_guard`` fails without the guard).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vllm")

from judge.engine import Engine, Item, Query  # noqa: E402
from judge.testing import Reference  # noqa: E402

from .conftest import TINY_BLOCK  # noqa: E402

LABELS = (" card arrival", " card", " exchange rate", " pin blocked", " top up failed by bank transfer")
TEXTS = ("my card has not arrived yet", "what rate do you use for euros?", "I typed my PIN wrong three times")


def _queries(texts=TEXTS, labels=LABELS):
    return [Query((("Classify the banking query.\nText: ", False), (t, True), ("\nLabel:", False)), labels)
            for t in texts]


def _aligned(scorer, n_tokens, labels=LABELS):
    """A query whose prompt is exactly ``n_tokens`` tokens long (a block boundary)."""
    for pad in range(n_tokens):
        q = Query((("Classify.\nText: ", False), ("my card" + " a" * pad, True), ("\nLabel:", False)), labels)
        n = len(scorer.encode(q.pieces))
        if n == n_tokens:
            return q
        if n > n_tokens:
            break
    raise AssertionError(f"no padding gives a {n_tokens}-token prompt")


def _close(a, b, atol=1e-4):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def test_tiny_equals_engine_and_reference(tiny, tiny_hf):
    model, tok = tiny_hf
    qs = _queries() + [_aligned(tiny, 2 * TINY_BLOCK)]
    got = tiny.score(qs)
    _close(got, Engine(model, tok).score(qs))
    _close(got, Reference(model, tok, end_id=tiny.end_id_).score(qs))
    first = tiny.score(qs, first_token=True)
    _close(first, Engine(model, tok).score(qs, first_token=True))
    assert tiny.option_ids("Label:", LABELS) == Engine(model, tok).setup().option_ids("Label:", LABELS)
    assert tiny.last_usage_["input_tokens"] > 0


def test_block_boundary_guard(tiny, tiny_hf):
    """A prompt of exactly 2 blocks: its blocks get cached, and the first label token would be read from them."""
    from judge.backends import vllm as vb

    model, tok = tiny_hf
    q = _aligned(tiny, 2 * TINY_BLOCK)
    want = Engine(model, tok).score([q])
    before = tiny.cache_stats_["recomputed"]
    _close(tiny.score([q]), want)
    _close(tiny.score([q]), want)  # the second time every block of the prompt is in the cache
    assert tiny.cache_stats_["recomputed"] > before, "the guard never fired: the test did not reach the boundary"
    # Why the guard exists: asked directly, vLLM 0.32 serves such a request from its cache (checked
    # below), and on some CPUs it then reads the first label token from a block it never computed
    # (seen on the development machine: off by more than 1e-3 nats; on CI's machine the raw answer
    # was right). Whether it is wrong depends on the machine, so the raw value is not asserted
    # either way: the guard recomputes in both cases, and the scores above are checked exactly.
    ids = tiny.encode(q.pieces)
    seq = tuple(ids + tiny.option_ids("\nLabel:", LABELS)[0])
    out = tiny._run([seq], skip_cache=False)[0]
    assert out.num_cached_tokens >= len(ids), "the boundary case was not reached: the prompt's blocks were not cached"
    raw = vb._token_logprobs(out, seq, len(ids))
    assert raw is None or len(raw) == len(seq) - len(ids)


def test_prefix_cache_is_used(tiny):
    long = [Query((("Classify the banking query below into one label.\n" * 6 + "Text: ", False), (t, True),
                   ("\nLabel:", False)), LABELS) for t in TEXTS]
    before = tiny.cache_stats_["cached_tokens"]
    tiny.score(long)
    # every option of every text reads at least one full block of its prompt from the cache (on CPU
    # vLLM's default block is 128 tokens: prompts shorter than that, Banking77's, have none to read)
    assert tiny.cache_stats_["cached_tokens"] - before >= TINY_BLOCK * len(LABELS) * len(TEXTS)


def test_token_items_and_shared_sequences(tiny, tiny_hf):
    model, tok = tiny_hf
    items = [Item([1, 2, 3], [[7], [8, 9]]), Item([1, 2], [[3, 7], [3]]), Item([5] * TINY_BLOCK, [[6, 6], [6]]),
             Item([4, 4], [[4, 4], [9]], first_only=True)]
    _close(tiny.score_items(items), Reference(model, tok).score_items(items))
    with pytest.raises(ValueError, match="at least one prompt token"):
        tiny.score_items([Item([], [[1]])])


def test_smollm2_equals_engine(smol, smol_hf):
    qs = _queries() + [_aligned(smol, smol.block_size_)]
    got = smol.score(qs)
    _close(got, smol_hf.score(qs))
    _close(smol.score(qs), got, atol=1e-5)  # again, now from the prefix cache (the aligned prompt: recomputed)
    ref = Reference(smol_hf.model_, smol_hf.tokenizer_, end_id=smol.end_id_).score(qs[-1:])
    _close(got[-1:], ref)


def test_the_transformers_engine_takes_the_tree_path_under_vllms_transformers():
    """vLLM pins transformers < 5.20, whose forward indexes every row by a (B, P) ``logits_to_keep``; the engine
    once failed its self-check here (18.3 nats on CI's job) and scored every call on the slow exact fallback.
    It now reads each row's positions from a 1-D set (judge.engine.passes.keep_mode) and passes the check."""
    import warnings

    from judge.engine.engine import EngineCheckWarning
    from judge.engine.passes import keep_mode
    from judge.testing import tiny_model, tiny_pair

    tok = tiny_pair()[1]
    model = tiny_model("llama", tok)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EngineCheckWarning)
        eng = Engine(model, tok).setup()
    assert eng.path_ == "tree", eng.check_
    assert keep_mode(model) in ("rows", "union")
    q = _queries()
    ref = Reference(model, tok).score(q)
    for got, want in zip(eng.score(q), ref):
        np.testing.assert_allclose(got, want, atol=1e-4)
