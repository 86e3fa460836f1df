"""The label automaton as a vLLM v1 logits processor, on the packaged SmolLM2.

Greedy constrained generation through vLLM equals transformers' ``generate`` with
``TrieLogitsProcessor`` token for token; constrained and unconstrained requests (and two label
sets) share one batch without touching each other; a 10^4-label set is compiled once however
many requests carry it; a structured-output enum field is constrained and its value
distribution scored through vLLM.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("vllm")

from judge import TrieAutomaton, TrieLogitsProcessor  # noqa: E402
from judge.backends.vllm import LABELS_KEY, automaton_cache_info  # noqa: E402

LABELS = [" card arrival", " card linking", " exchange rate", " pin blocked", " top up failed", " refund"]
PROMPTS = ["Classify the banking query.\nText: my card has not arrived yet\nLabel:",
           "Classify the banking query.\nText: I want my money back\nLabel:",
           "Classify the banking query.\nText: which rate for dollars?\nLabel:",
           "Question: what colour is the sky?\nAnswer:"]


def _hf_greedy(model, ids, max_new, ends, proc=None):
    import torch

    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             logits_processor=[proc.bind(len(ids))] if proc else None, max_new_tokens=max_new,
                             do_sample=False, eos_token_id=list(ends), pad_token_id=ends[0])
    return out[0, len(ids):].tolist()


def _strip(ids, ends):
    return ids[:-1] if ids and ids[-1] in ends else ids


def _vllm(smol, ids_list, params):
    from vllm.inputs import TokensPrompt

    outs = smol.llm_.generate([TokensPrompt(prompt_token_ids=x) for x in ids_list], params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def test_greedy_equals_trie_logits_processor(smol, smol_hf):
    ends = list(smol.vocab_.end_token_ids)
    auto = TrieAutomaton.build(LABELS, smol.vocab_)
    proc = TrieLogitsProcessor(auto)
    ids = [smol.encode([(p, False)]) for p in PROMPTS]
    got = _vllm(smol, ids, smol.sampling_params(LABELS))
    for x, g in zip(ids, got):
        want = _hf_greedy(smol_hf.model_, x, 16, ends, proc)
        assert _strip(g, ends) == _strip(want, ends)
        assert g[-1] in ends  # stopped right after the label
    assert smol.generate_labels(PROMPTS, LABELS) == [smol.tokenizer_.decode(_strip(g, ends)) for g in got]
    assert set(smol.generate_labels(PROMPTS, LABELS)) <= set(LABELS)


def test_mixed_batch(smol, smol_hf):
    from vllm import SamplingParams

    ends = list(smol.vocab_.end_token_ids)
    other = [" yes", " no", " not sure"]
    ids = [smol.encode([(p, False)]) for p in PROMPTS]
    plain = SamplingParams(temperature=0.0, max_tokens=6)
    params = [smol.sampling_params(LABELS), plain, smol.sampling_params(other), plain]
    mixed = _vllm(smol, ids, params)
    alone = _vllm(smol, [ids[1], ids[3]], plain)  # the unconstrained rows, without constrained neighbours
    assert [mixed[1], mixed[3]] == alone
    for r, labels in ((0, LABELS), (2, other)):
        proc = TrieLogitsProcessor(TrieAutomaton.build(labels, smol.vocab_))
        assert _strip(mixed[r], ends) == _strip(_hf_greedy(smol_hf.model_, ids[r], 16, ends, proc), ends)
    assert all(t not in ends for t in mixed[1][:1])  # the processor left the plain rows alone


def test_large_label_set_compiled_once(smol):
    from judge.testing import tool_names

    labels = [" " + n for n in tool_names(10_000, seed=3)]
    count = lambda: smol.llm_.collective_rpc(automaton_cache_info)[0]["compiled"]  # noqa: E731
    before = count()
    first = smol.generate_labels(PROMPTS, labels)
    again = smol.generate_labels(PROMPTS[:2] * 3, labels)
    assert count() - before == 1
    assert set(first) | set(again) <= set(labels) and None not in first
    assert again[:2] == first[:2]


def test_enum_field_of_a_structured_schema(smol, smol_hf):
    from judge.structured.generate import value_distribution
    from judge.structured.grammar import build_grammar

    codes = [f"A{i:02d}" for i in range(80)] + ["B20", "B21", "C00"]
    _, slots = build_grammar({"type": "object", "properties": {"code": {"enum": codes}}}, len(smol.tokenizer_),
                             enum_threshold=64)
    labels = slots[0].labels  # ' "A00"', ...: the JSON texts the field may hold
    ctx = 'Diagnosis: cholera.\nJSON: {"code":'
    (value,) = smol.generate_labels([ctx], labels)
    assert value in labels
    ids = smol.encode([(ctx, False)])
    p = value_distribution(None, smol.tokenizer_, ids, labels, scorer=smol)
    q = value_distribution(None, smol.tokenizer_, ids, labels, scorer=smol_hf)
    np.testing.assert_allclose(p, q, atol=1e-4)
    assert abs(p.sum() - 1) < 1e-9


def test_bad_label_lists_are_refused(smol):
    from vllm import SamplingParams

    with pytest.raises(Exception, match="must be a list of label strings"):
        smol.llm_.generate(["x"], SamplingParams(max_tokens=2, extra_args={LABELS_KEY: "abc"}), use_tqdm=False)
    with pytest.raises(Exception, match="[Dd]uplicate"):
        smol.llm_.generate(["x"], SamplingParams(max_tokens=2, extra_args={LABELS_KEY: ["a", "a"]}), use_tqdm=False)
