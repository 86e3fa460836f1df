"""The pass planner and the pass itself (:mod:`judge.engine.passes`, :mod:`judge.engine.forest`) at their edges.

What a caller of ``plan_passes`` / ``Engine.score_items`` relies on beyond the random plans of
tests/server/test_limits.py: bad budgets are refused by name; an option that does not fit is
refused exactly at the limit, the message naming the setting to raise and what it counts; a
split item whose prompt the call's root already holds stays on that root; ``pack`` merges the
longest prompts together and scores as the brute force; an item whose only option is empty
(score 0) may share a row with others. The float64 log-sum-exp keeps its precision and its
device; ``model_context`` reads any positive context; the forest's slots name their node and
``common_prefix`` honours a limit past both lengths.

Every test builds its own objects (no engine or plan cached from an unmutated run), so the
mutation run (bench/mutation.py) sees each mutant.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from judge.engine import Engine, Item
from judge.engine.forest import build_rows, common_prefix
from judge.engine.passes import _lse, model_context, plan_passes
from judge.testing import tiny_pair
from judge.testing.reference import reference_logprobs_ids


def _covered(passes, items):
    seen = {}
    for p in passes:
        for row in p.rows:
            for i, o in row:
                for j in (range(len(items[i].options)) if o is None else o):
                    seen[(i, j)] = seen.get((i, j), 0) + 1
    return seen == {(i, j): 1 for i, it in enumerate(items) for j in range(len(it.options))}


# ----------------------------------------------------------------------------- plan_passes

@pytest.mark.parametrize("T, P, B", [(1, 8, 4), (64, 0, 4), (64, 8, 0)])
def test_plan_refuses_budgets_below_the_minimum(T, P, B):
    with pytest.raises(ValueError, match="plan_passes needs max_tokens >= 2, max_logits >= 1 and max_rows >= 1"):
        plan_passes([Item([1], [[7]])], max_tokens=T, max_logits=P, max_rows=B)


def test_an_option_too_long_is_refused_exactly_at_the_token_limit_naming_key_columns():
    items = [Item([1, 2, 3], [[7, 8, 9, 10, 11]])]  # its prompt cached whole (R=2), 1 + 4 prefix nodes fed
    root = (1, 2)
    ok = plan_passes(items, root, max_tokens=7, max_logits=64)
    assert _covered(ok, items) and all(p.tokens <= 7 for p in ok)
    with pytest.raises(ValueError, match=r"needs 7 key columns in one forward pass, over the engine's "
                                         r"max_batch_tokens=6; raise max_batch_tokens"):
        plan_passes(items, root, max_tokens=6, max_logits=64)


def test_an_option_too_long_is_refused_exactly_at_the_logit_limit_naming_logit_rows():
    items = [Item([1, 2, 3], [[7, 8, 9, 10, 11]])]  # 5 read positions: the prompt's last token and 4 prefixes
    ok = plan_passes(items, (), max_tokens=64, max_logits=5)
    assert _covered(ok, items) and all(p.logits <= 5 for p in ok)
    with pytest.raises(ValueError, match=r"needs 5 logit rows in one forward pass, over the engine's "
                                         r"max_batch_logits=4; raise max_batch_logits"):
        plan_passes(items, (), max_tokens=64, max_logits=4)


def test_a_split_item_whose_prompt_lies_in_the_root_stays_on_the_calls_root():
    # the root holds the whole prompt (as Engine.score's common prefix does when one prompt is a
    # prefix of the others): the options are chunked on that root, no second root is computed
    root = tuple(range(1, 9))
    items = [Item(list(range(1, 7)), [[10 + j, 30 + j] for j in range(8)])]
    passes = plan_passes(items, root, max_tokens=12, max_logits=64)
    assert len(passes) > 1 and _covered(passes, items)
    assert {p.root for p in passes} == {root}
    assert all(p.tokens <= 12 for p in passes)


def test_pack_merges_the_longest_prompts_into_one_row_and_covers_every_option_once():
    lens = [3, 12, 4, 11]  # groups 0..3: packing by length puts 1 with 3 and 0 with 2
    items = [Item(list(range(100 * g + 1, 100 * g + 1 + n)), [[7], [8, 9]], False, g) for g, n in enumerate(lens)]
    passes = plan_passes(items, (), max_tokens=256, max_logits=64, max_rows=8, pack=2)
    assert _covered(passes, items)
    rows = {frozenset(i for i, _ in row) for p in passes for row in p.rows}
    assert rows == {frozenset({1, 3}), frozenset({0, 2})}


def test_packed_rows_score_as_the_brute_force():
    model, tok = tiny_pair()
    eng = Engine(model, tok).setup()
    rng = np.random.default_rng(3)
    items = [Item([int(t) for t in rng.integers(5, 400, n)], [[int(t) for t in rng.integers(5, 400, k)] for k in (1, 2, 3)],
                  False, g) for g, n in enumerate([3, 9, 5, 7, 4])]
    got = eng.score_items(items, pack=2)
    for it, g in zip(items, got):
        np.testing.assert_allclose(g, reference_logprobs_ids(model, it.ids, it.options), atol=2e-4)


def test_an_item_whose_only_option_is_empty_scores_zero_in_a_shared_row():
    model, tok = tiny_pair()
    eng = Engine(model, tok).setup()
    items = [Item([11, 12, 13], [[7], [8, 9]], False, 0), Item([11, 12, 14], [[]], False, 0)]
    got = eng.score_items(items)
    np.testing.assert_allclose(got[0], reference_logprobs_ids(model, items[0].ids, items[0].options), atol=2e-4)
    assert got[1].tolist() == [0.0]


# ----------------------------------------------------------------------------- the pass's pieces

def test_lse_is_float64_within_2e8_nats_of_a_float64_logsumexp():
    import torch

    x = (torch.randn(5, 50000, generator=torch.Generator().manual_seed(0)) * 10 + 25).float()
    out = _lse(x)
    assert out.dtype == torch.float64 and out.shape == (5,)
    assert float((out - torch.logsumexp(x.double(), -1)).abs().max()) < 2e-8


def test_lse_stays_on_the_logits_device():
    import torch

    x = torch.empty((3, 11), device="meta")  # no data: only where the result lives is checked
    out = _lse(x)
    assert out.device == x.device and out.dtype == torch.float64


@pytest.mark.parametrize("n, want", [(1, 1), (8192, 8192), (0, None), (-4, None), (None, None), (2.5, None)])
def test_model_context_reads_any_positive_context(n, want):
    assert model_context(SimpleNamespace(config=SimpleNamespace(max_position_embeddings=n))) == want


# ----------------------------------------------------------------------------- the forest

def test_common_prefix_with_a_limit_past_both_lengths():
    assert common_prefix([1, 2], [1, 2, 3], limit=5) == 2
    assert common_prefix([1, 2, 3], [1, 2], limit=5) == 2
    assert common_prefix([1, 2, 3], [1, 2, 3], limit=2) == 2


def test_each_slot_names_the_node_of_its_prompts_last_token():
    items = [Item([1, 2, 3], [[7], [8, 9]], False, 0), Item([1, 2, 4], [[7]], False, 0),
             Item([5, 6], [[9, 9]], False, 1)]
    rows = build_rows(items, [1, 2])
    slots = {s.query: (row, s) for row in rows for s in row.slots}
    assert sorted(slots) == [0, 1, 2]
    for q, (row, s) in slots.items():
        assert isinstance(s.node, int) and row.tokens[s.node] == items[q].ids[-1] and row.fed[s.node]
        assert all(row.parent[p[0]] == s.node for p in s.option_paths)


@pytest.mark.parametrize("path", ["auto", "fallback"])
def test_empty_options_score_zero_beside_others_on_every_path(path):
    """An empty option adds nothing to the prompt: log P = 0, as the brute force says. The tree pass
    once gave it the next option's first token (np.add.reduceat on a zero-length segment) or raised
    on a row with nothing to read; the fallback raised."""
    model, tok = tiny_pair()
    eng = Engine(model, tok, path=path).setup()
    for opts in ([[]], [[], [7]], [[7], [], [8, 9]]):
        for first_only in (False, True):
            got = eng.score_items([Item([1, 2, 3], opts, first_only=first_only), Item([4, 5, 6, 7], [[9], [10, 11]])])
            want = reference_logprobs_ids(model, [1, 2, 3], [o[:1] if first_only else o for o in opts])
            np.testing.assert_allclose(got[0], want, atol=1e-4)
            assert got[0][[len(o) == 0 for o in opts]].tolist() == [0.0] * sum(len(o) == 0 for o in opts)


def test_the_training_pass_gives_float64_tensors_equal_to_the_scores():
    """logprob_tensors (the pass LoRA trains through, autograd on) sums the same log-probabilities in
    float64 as score_items, empty options included."""
    import torch

    model, tok = tiny_pair()
    eng = Engine(model, tok).setup()
    items = [Item([1, 2, 3], [[7], [8, 9], []]), Item([4, 5], [[6, 7, 8], [9]])]
    tensors = eng.logprob_tensors(items)
    for t, want in zip(tensors, eng.score_items(items)):
        assert t.dtype == torch.float64 and t.requires_grad
        np.testing.assert_allclose(t.detach().numpy(), want, rtol=0, atol=1e-5)


# ----------------------------------------------------------------------------- logits_to_keep, any transformers

def _emulate_keep(model, how):
    """Make ``model``'s forward take ``logits_to_keep`` as an older transformers did: ``"union"`` indexes every
    row by the whole tensor (``hidden[:, keep]``, transformers 5.19), ``"all"`` ignores it (full logits). The
    forward keeps its signature, so the engine passes its cache under the same keyword."""
    import inspect

    inner = model.forward

    def forward(*args, logits_to_keep=0, **kw):
        out = inner(*args, logits_to_keep=0, **kw)
        if how == "union":
            if isinstance(logits_to_keep, int):
                out.logits = out.logits[:, -logits_to_keep:] if logits_to_keep else out.logits
            else:
                out.logits = out.logits[:, logits_to_keep]
        return out

    forward.__signature__ = inspect.signature(inner)
    model.forward = forward
    return model


def _keeps_per_row() -> bool:
    """Whether the installed transformers keeps logits per row (5.20 and later: ``slice_logits_to_keep``), decided
    from its version, not from the probe under test."""
    import transformers
    from packaging.version import Version

    return Version(transformers.__version__).release[:2] >= (5, 20)


def _random_items(seed, n_items=5):
    rng = np.random.default_rng(seed)
    return [Item([int(t) for t in rng.integers(5, 400, n)], [[int(t) for t in rng.integers(5, 400, k)] for k in (1, 2, 3)],
                 False, g) for g, n in enumerate([3, 9, 5, 7, 4][:n_items])]


@pytest.mark.parametrize("how", ["rows", "union", "all"])
def test_every_way_a_transformers_takes_logits_to_keep_scores_as_the_brute_force(how):
    """transformers 5.19 (vLLM's pin) indexed hidden[:, keep] with a (B, P) keep, a (B, B, P) result that the
    pass once reshaped into wrong scores; the self-check caught it and every call took the slow fallback
    (18.3 nats off on CI's vLLM job). keep_mode finds how this model takes it; each way scores exactly, on the
    tree path, with several rows per pass, on the certified search too, and with the answer-slot states."""
    from judge.engine import OptionTrie
    from judge.engine.passes import keep_mode, tree_pass
    from judge.testing import tiny_model

    tok = tiny_pair()[1]
    model = tiny_model("llama", tok)  # its own: the cached tiny_pair model is never patched
    if how != "rows":
        _emulate_keep(model, how)
    elif not _keeps_per_row():
        pytest.skip("this transformers keeps no logits per row (before 5.20): the other two cases are its")
    assert keep_mode(model) == how
    eng = Engine(model, tok).setup()
    assert eng.path_ == "tree", eng.check_
    items = _random_items(3)
    got = eng.score_items(items)
    for it, g in zip(items, got):
        np.testing.assert_allclose(g, reference_logprobs_ids(model, it.ids, it.options), atol=2e-4)
    res, _, hidden = tree_pass(model, eng.mask_plan_, eng.dtype_, ((), None), items, states=True)
    for it, g in zip(items, res):
        np.testing.assert_allclose(g, reference_logprobs_ids(model, it.ids, it.options), atol=2e-4)
    assert hidden.shape[0] == len(items) and np.isfinite(hidden).all()
    options = [[7, 8], [7, 9, 10], [11], [12, 13]]
    trie = OptionTrie(options)
    prompts = [Item(it.ids, options, False, g) for g, it in enumerate(items[:3])]
    found = eng.search(prompts, trie)
    assert found.certified.all()
    for it, b in zip(prompts, found.best):
        assert b == int(np.argmax(reference_logprobs_ids(model, it.ids, options)))


def test_without_per_row_keep_each_row_gets_its_own_pass_so_the_memory_bound_holds():
    """Where the model cannot keep logits per row, a batch would compute B times the logit rows memory_bound
    counts; the pass then runs one row at a time (batch 1, its own positions only): as many forwards as rows."""
    from judge.engine.passes import keep_mode, tree_pass
    from judge.testing import tiny_model

    tok = tiny_pair()[1]
    items = _random_items(5, n_items=3)
    for how, batches_wanted in (("union", [1, 1, 1]), ("rows", [3])):
        model = tiny_model("llama", tok)
        if how == "union":
            _emulate_keep(model, how)
        elif not _keeps_per_row():
            continue
        assert keep_mode(model) == how  # probed before counting
        eng = Engine(model, tok).setup()
        batches: list = []

        def count(module, args, kw, batches=batches):
            batches.append(kw["input_ids"].shape[0])

        hook = model.register_forward_pre_hook(count, with_kwargs=True)
        try:
            tree_pass(model, eng.mask_plan_, eng.dtype_, ((), None), items)
        finally:
            hook.remove()
        assert batches == batches_wanted, (how, batches)
