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


def _allowed_rows(logits):
    return [set(np.flatnonzero(np.isfinite(row.numpy())).tolist()) for row in logits]


def test_processor_masks_equal_xgrammar_on_sampled_prefixes():
    """The processor's allowed tokens equal xgrammar's (a choice grammar of the same labels, a matcher per row).

    Rows hold prefixes of random tokenizations of random labels (pieces of a label encoded apart),
    complete labels (a label's end and a longer label's continuation both allowed) and finished
    ones (after the end token: xgrammar's matcher has terminated, ours allows only the end tokens).
    Two label sets share the batch, one row is left unconstrained; the bitmask path (other devices)
    gives the same masks as the in-place one.
    """
    import random
    from types import SimpleNamespace

    import torch
    from transformers import AutoTokenizer
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    xgr = pytest.importorskip("xgrammar")
    from bench._common import ebnf_choice
    from judge.backends.vllm import logits_processor_class
    from judge.models import packaged_model_dir
    from judge.testing import tool_names

    path = str(packaged_model_dir())
    tok = AutoTokenizer.from_pretrained(path)
    cfg = SimpleNamespace(speculative_config=None, model_config=SimpleNamespace(model=path, tokenizer=path))
    proc = logits_processor_class()(cfg, torch.device("cpu"), False)
    ends = list(proc.vocab_.end_token_ids)
    V = proc.vocab_.size
    labels = [" " + x for x in tool_names(300, seed=5)] + [" get", " get_user", " get_user_id", " café au lait",
                                                            " naïve 😀", "Top up"]
    other = [" yes", " no", " not sure"]
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V, stop_token_ids=ends)
    compiler = xgr.GrammarCompiler(info)
    grammars = {id(labels): compiler.compile_grammar(ebnf_choice(labels)),
                id(other): compiler.compile_grammar(ebnf_choice(other))}
    rng = random.Random(0)
    rows = []  # (label set, generated tokens)
    for i in range(96):
        labs = other if i % 11 == 5 else labels
        lab = rng.choice(labs[-6:] if i % 4 == 0 else labs)
        cuts = sorted(rng.sample(range(1, len(lab)), min(rng.randint(0, 3), len(lab) - 1)))
        ids = [t for a, b in zip([0, *cuts], [*cuts, len(lab)]) for t in tok.encode(lab[a:b], add_special_tokens=False)]
        ids.append(rng.choice(ends))
        cut = len(ids) - 1 if i % 5 == 0 else len(ids) if i % 7 == 0 else rng.randint(0, len(ids))
        rows.append((labs, ids[:cut]))
    B = len(rows) + 1  # the last row is not constrained
    proc.update_state(BatchUpdate(batch_size=B, removed=[], moved=[], added=[
        (i, SamplingParams(extra_args={LABELS_KEY: labs}), None, list(ids)) for i, (labs, ids) in enumerate(rows)]))
    logits = torch.randn(B, V, generator=torch.Generator().manual_seed(0))
    ours = proc.apply(logits.clone())
    got = _allowed_rows(ours)
    bm = xgr.allocate_token_bitmask(1, V)
    finished = 0
    for i, (labs, ids) in enumerate(rows):
        m = xgr.GrammarMatcher(grammars[id(labs)])
        assert all(m.accept_token(t) for t in ids), (i, ids)
        if m.is_terminated():  # after the end token: nothing more for xgrammar, only end tokens for ours
            finished += 1
            assert got[i] == set(ends), i
            continue
        m.fill_next_token_bitmask(bm, 0)
        want = set(np.flatnonzero(np.unpackbits(bm.numpy().view(np.uint8), bitorder="little")[:V]).tolist())
        assert got[i] == want, (i, tok.decode(ids), sorted(got[i] ^ want)[:10])
        if ids and tok.decode(ids) in labs:  # a complete label: its end, and longer labels' continuations
            assert set(ends) <= got[i]
    assert torch.equal(ours[-1], logits[-1])  # the unconstrained row is left alone
    assert 5 <= finished < len(rows) and any(len(g) > 100 for g in got)  # shallow, deep and finished rows
    assert torch.equal(ours[torch.isfinite(ours)], logits[torch.isfinite(ours)])  # allowed logits unchanged
    proc._direct_dtypes = ()  # the bitmask path (a GPU's): the same masks
    assert _allowed_rows(proc.apply(logits.clone())) == got
    proc.update_state(BatchUpdate(batch_size=B, removed=[0], moved=[], added=[]))
    again = proc.apply(logits.clone())
    assert torch.equal(again[0], logits[0]) and _allowed_rows(again)[1:-1] == got[1:-1]


def test_processor_sends_an_off_automaton_row_to_its_end_tokens():
    """A token the automaton does not allow (vLLM never samples one; a caller could append it) leaves only the end tokens."""
    from types import SimpleNamespace

    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    from judge.backends.vllm import logits_processor_class
    from judge.models import packaged_model_dir

    path = str(packaged_model_dir())
    cfg = SimpleNamespace(speculative_config=None, model_config=SimpleNamespace(model=path, tokenizer=path))
    proc = logits_processor_class()(cfg, torch.device("cpu"), False)
    out = []
    proc.update_state(BatchUpdate(batch_size=1, removed=[], moved=[],
                                  added=[(0, SamplingParams(extra_args={LABELS_KEY: [" yes", " no"]}), None, out)]))
    V = proc.vocab_.size
    assert len(_allowed_rows(proc.apply(torch.zeros(1, V)))[0]) >= 2
    out.append(proc.vocab_.token_bytes.index(b"zzz") if b"zzz" in proc.vocab_.token_bytes else 0)
    for dt in (torch.float32, torch.bfloat16):
        assert _allowed_rows(proc.apply(torch.zeros(1, V, dtype=dt)).float())[0] == set(proc.vocab_.end_token_ids)
