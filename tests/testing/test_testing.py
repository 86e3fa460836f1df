"""The test helpers in judge.testing: tiny models build and run, the reference is right.

Every architecture is built over the real gpt2 tokenizer and runs one forward pass;
one over the SmolLM2 tokenizer; ``reference_logprobs`` is checked against a hand
computation (token by token, with a cache-free forward per prefix); the label
generators are deterministic. About 10 s on one CPU thread.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from judge.testing import (
    ARCHITECTURES,
    SLIDING_ARCHITECTURES,
    icd_codes,
    phrases,
    prefix_labels,
    reference_logprobs,
    reference_logprobs_ids,
    tiny_model,
    tool_names,
    unicode_labels,
)
from tests.conftest import load_tokenizer

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_engine_not_imported():
    import subprocess
    import sys

    code = (
        "import sys, judge.testing; "
        "print(sorted(m for m in ('judge.scoring', 'judge.classifier', 'judge.prompts') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_required_architectures_listed():
    required = {
        "llama",
        "qwen2",
        "qwen3",
        "mistral",
        "gemma",
        "gemma2",
        "gemma3",
        "phi3",
        "gpt2",
        "gpt_neox",
        "olmo2",
        "starcoder2",
        "falcon",
        "falcon_alibi",
        "bloom",
        "gpt_neo",
        "cohere",
        "granite",
        "stablelm",
        "opt",
        "smollm3",
    }
    assert required <= set(ARCHITECTURES)
    assert set(SLIDING_ARCHITECTURES) <= set(ARCHITECTURES)
    assert {"mistral", "qwen2", "gemma2", "gemma3", "starcoder2", "phi3"} <= set(
        SLIDING_ARCHITECTURES
    )


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_arch_builds_and_runs(arch):
    tok = load_tokenizer("gpt2")
    model = tiny_model(arch, tok)
    cfg = model.config
    assert not model.training
    assert next(model.parameters()).dtype == torch.float32
    assert cfg.vocab_size == len(tok)
    assert cfg.eos_token_id == tok.eos_token_id
    x = torch.tensor([tok("Hello there, world")["input_ids"]])
    with torch.no_grad():
        logits = model(input_ids=x).logits
    assert logits.shape == (1, x.shape[1], len(tok))
    assert torch.isfinite(logits).all()
    lp = torch.log_softmax(logits[0, -1].double(), -1)
    assert float(lp.max() - lp.min()) > 2.0  # scaled head: visibly different token scores
    # seeded: same weights twice
    again = tiny_model(arch, tok)
    with torch.no_grad():
        assert torch.equal(again(input_ids=x).logits, logits)


def test_unknown_arch():
    with pytest.raises(ValueError, match="unknown arch"):
        tiny_model("nope", load_tokenizer("gpt2"))
    with pytest.raises(ValueError, match="no sliding window"):
        tiny_model("llama", load_tokenizer("gpt2"), sliding_window=8)


@pytest.mark.parametrize("arch", SLIDING_ARCHITECTURES)
def test_sliding_window_applies(arch):
    """The config carries the 16-token window; where every layer slides, the window bites.

    There, changing only token 0 leaves the last logits of a 40-token sequence unchanged
    (two layers of a 16-token window reach back about 30 tokens). Hybrid models
    (gemma2/3, gpt_neo) have a full layer, so only the config is checked.
    """
    tok = load_tokenizer("gpt2")
    model = tiny_model(arch, tok, sliding_window=16)
    cfg = model.config
    window = getattr(cfg, "sliding_window", None) or getattr(cfg, "window_size", None)
    assert window == 16
    if arch in ("mistral", "qwen2", "qwen3", "starcoder2", "phi3"):
        g = torch.Generator().manual_seed(0)
        a = torch.randint(10, 1000, (1, 40), generator=g)
        b = a.clone()
        b[0, 0] += 1
        with torch.no_grad():
            la, lb = model(input_ids=a).logits[0, -1], model(input_ids=b).logits[0, -1]
        # two layers of a 16-token window reach back at most ~32 tokens: position 0 is out of reach
        assert torch.allclose(la, lb, atol=1e-5)


def test_smollm2_tokenizer(smollm2):
    _, tok = smollm2
    model = tiny_model("qwen3", tok)
    assert model.config.vocab_size == len(tok) == 49152
    got = reference_logprobs(model, tok, "Label:", [" yes", " no"])
    assert got.shape == (2,) and got.dtype == np.float64 and np.all(got < 0)


def _lse(row):
    m = float(row.max())
    return m + math.log(float(torch.exp(row - m).sum()))


def _hand(model, ids, start):
    """One forward over ``ids``; log p(ids[i] | ids[:i]) by hand (float64 logsumexp), summed."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].double()
    return sum(float(logits[i - 1, ids[i]]) - _lse(logits[i - 1]) for i in range(start, len(ids)))


def _hand_stepwise(model, ids, start):
    """Token by token: a fresh forward over each prefix (float32 noise of ~1e-6 vs one pass)."""
    total = 0.0
    for i in range(start, len(ids)):
        with torch.no_grad():
            row = model(input_ids=torch.tensor([ids[:i]]), use_cache=False).logits[0, -1].double()
        total += float(row[ids[i]]) - _lse(row)
    return total


def test_reference_matches_hand_computation():
    tok = load_tokenizer("gpt2")
    model = tiny_model("llama", tok, seed=3)
    prompt, conts = "The answer is", [" yes", " no way", " maybe not at all", ""]
    got = reference_logprobs(model, tok, prompt, conts)
    p = tok(prompt)["input_ids"]
    joint = [tok(prompt + c)["input_ids"] for c in conts]
    assert all(j[: len(p)] == p for j in joint)
    np.testing.assert_allclose(got, [_hand(model, j, len(p)) for j in joint], rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        got, [_hand_stepwise(model, j, len(p)) for j in joint], rtol=0, atol=1e-4
    )
    assert got[-1] == 0.0 and np.all(got[:-1] < 0)
    ids = reference_logprobs_ids(model, p, [j[len(p) :] for j in joint])
    np.testing.assert_array_equal(ids, got)


def test_reference_seam_merge_uses_common_prefix():
    """'ab' + 'c' may tokenize differently from 'ab' then 'c': the boundary is the common prefix."""
    tok = load_tokenizer("gpt2")
    model = tiny_model("gpt2", tok)
    prompt, cont = "Answer: hel", "lo"
    p, joint = tok(prompt)["input_ids"], tok(prompt + cont)["input_ids"]
    n = next((i for i, (a, b) in enumerate(zip(p, joint)) if a != b), min(len(p), len(joint)))
    assert n < len(p)  # the seam merges " hel" + "lo" -> " hello"
    got = reference_logprobs(model, tok, prompt, [cont])
    np.testing.assert_allclose(got, [_hand(model, joint, n)], rtol=0, atol=1e-9)


def test_generators_deterministic():
    for gen in (tool_names, icd_codes, phrases, unicode_labels):
        a, b, c = gen(30, seed=1), gen(30, seed=1), gen(30, seed=2)
        assert a == b and len(a) == len(set(a)) == 30 and all(isinstance(s, str) and s for s in a)
        assert a != c or gen is phrases  # phrases starts with its fixed list
    assert prefix_labels() == prefix_labels()
    labs = prefix_labels()
    assert any(x != y and y.startswith(x) for x in labs for y in labs)
    assert all(any(ord(ch) > 127 for ch in s) for s in unicode_labels(40, seed=5))
    assert phrases(3) == ["very positive", "positive", "not positive at all"]


def test_generators_keep_the_benchmarks_label_families():
    """bench/_common.py re-exports these; the first labels are pinned so published benchmark inputs stay the same."""
    assert tool_names(5, 0) == ["reset_item_plan", "download_campaign_card_service", "approve_policy_event",
                                "find_episode", "track_meeting_budget_task"]
    assert icd_codes(5, 0) == ["M97.8", "P51", "J61.382", "J17.48", "W77"]
