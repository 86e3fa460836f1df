"""Structured JSON generation: validity, trie dispatch vs llguidance, per-field distributions.

The distributions are checked against the one reference, :class:`judge.testing.Reference`
(brute force, no code shared with the engine), on sliding-window and ALiBi models too.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

pytest.importorskip("llguidance")
jsonschema = pytest.importorskip("jsonschema")
torch = pytest.importorskip("torch")

import judge.structured as S  # noqa: E402
from judge.structured import StructuredLogitsProcessor, StructuredSchema, generate_structured  # noqa: E402
from tests.conftest import load_tokenizer, load_vocab  # noqa: E402

_WORDS = "get set list user profile account order payment invoice search send email file report".split()
_FUZZ = ["café", "naïve", "日本語", "日本", "😀", "a\"b", "back\\slash", "tab\there", "x", "xy", "xyz",
         "Ωmega", "a\u0301", " lead", "trail ", "new\nline", "ab", "abc", "abcd"]


def _enum_values(r: random.Random, k: int) -> list[str]:
    """Fuzzed values: unicode, escapes, and many values that are prefixes of others."""
    out = dict.fromkeys(r.sample(_FUZZ, min(len(_FUZZ), k // 3)))
    while len(out) < k:
        v = "_".join(r.choice(_WORDS) for _ in range(r.randint(1, 3)))
        out.setdefault(v, None)
        if r.random() < 0.3:
            out.setdefault(v[: r.randint(1, len(v))], None)  # a prefix of another value
    return list(out)[:k]


def _random_schema(r: random.Random, depth: int = 0, big: int = 80):
    kinds = ["string", "integer", "number", "boolean", "null", "small_enum", "big_enum", "const"]
    if depth < 2:
        kinds += ["object", "array"]
    kind = r.choice(kinds)
    if kind == "object":
        props = {f"k{i}_{r.choice(_WORDS)}": _random_schema(r, depth + 1, big) for i in range(r.randint(1, 3))}
        return {"type": "object", "properties": props, "required": sorted(props)[:1]}
    if kind == "array":
        lo = r.randint(0, 1)
        return {"type": "array", "items": _random_schema(r, depth + 1, big), "minItems": lo,
                "maxItems": lo + r.randint(0, 2)}
    if kind == "string":
        return {"type": "string", "maxLength": r.randint(0, 6)}
    if kind == "small_enum":
        return {"enum": [1, "two", None, True][: r.randint(1, 4)]}
    if kind == "big_enum":
        return {"enum": _enum_values(r, r.randint(big, 2 * big))}
    if kind == "const":
        return {"const": r.choice(["c", 3, False])}
    return {"type": kind}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only contend
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tiny_qwen():
    """A random-weight 2-layer Llama over the real Qwen3 tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = load_tokenizer("qwen3")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model, tok


def test_random_schemas_always_validate(tiny_qwen):
    model, tok = tiny_qwen
    r = random.Random(7)
    n_fields = 0
    for i in range(8):
        schema = {"type": "object", "properties": {"pick": {"enum": _enum_values(r, 70)},
                                                   "rest": _random_schema(r)}}
        c = StructuredSchema(schema, tok, enum_threshold=64, max_string_length=6, max_items=3)
        assert len(c.slots) >= 1
        torch.manual_seed(i)
        res = generate_structured(model, tok, schema, "JSON:", compiled=c, max_new_tokens=300,
                                  do_sample=True, temperature=1.5)
        assert res.complete, res.text
        jsonschema.validate(res.value, schema)
        assert json.loads(res.text) == res.value
        for f in res.fields:
            assert f.value in f.values
        n_fields += len(res.fields)
        assert res.value["pick"] == res.fields[0].value
    assert n_fields >= 8


def test_prefix_values_and_escapes_round_trip(tiny_qwen):
    model, tok = tiny_qwen
    values = ["a", "ab", "abc", "a\"b", "back\\slash", "日本", "日本語", "😀", "new\nline"] + [f"v{i}" for i in range(60)]
    schema = {"type": "array", "items": {"enum": values}, "minItems": 3, "maxItems": 3}
    c = StructuredSchema(schema, tok, enum_threshold=10)
    seen = set()
    for seed in range(6):
        torch.manual_seed(seed)
        res = generate_structured(model, tok, schema, "List:", compiled=c, max_new_tokens=120, do_sample=True)
        assert res.complete
        jsonschema.validate(res.value, schema)
        assert [f.value for f in res.fields] == res.value
        seen.update(res.value)
    assert len(seen) > 3


def _brute_value_tokens(vocab, labels, prefix: bytes) -> set[int]:
    prefixes = {lab[:i] for lab in labels for i in range(1, len(lab) + 1)}
    return {t for t, b in enumerate(vocab.token_bytes) if b and prefix + b in prefixes}


def _llg_allowed(matcher, n_words, V) -> set[int]:
    row = np.zeros(n_words, np.int32)
    matcher.unsafe_compute_mask_ptr(row.ctypes.data, row.nbytes)
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:V]
    return set(np.flatnonzero(bits).tolist())


def test_processor_equals_llguidance_without_trie_fields():
    """No enum reaches the threshold: every mask is llguidance's own, along random walks."""
    import llguidance

    tok = load_tokenizer("qwen3")
    schema = {"type": "object", "properties": {"a": {"enum": ["x", "y", "xy"]}, "b": {"type": "integer"},
                                               "c": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
                                               "d": {"type": "string", "maxLength": 3}}}
    c = StructuredSchema(schema, tok)
    assert c.slots == []
    V = c.vocab_size
    for seed in range(4):
        r = random.Random(seed)
        proc = StructuredLogitsProcessor(c, 0)
        ref = llguidance.LLMatcher(c.lltokenizer, llguidance.LLMatcher.grammar_from_lark(c.grammar), log_level=0)
        gen = []
        for _ in range(60):
            ours = set(proc.allowed(gen).tolist())
            theirs = _llg_allowed(ref, c.n_words, V)
            assert ours == theirs
            if ref.is_accepting():
                break
            t = r.choice(sorted(ours))
            assert ref.consume_token(t)
            gen.append(t)


@pytest.mark.parametrize("name", ["qwen3", "llama3"])
def test_trie_dispatch_matches_llguidance_handling_the_enum(name):
    """Same schema, enum in the trie vs in llguidance: equal outside the value; inside it ours is
    the brute-force set of tokens that stay within a value, and llguidance's extra tokens all
    straddle the value's end (they spell its closing quote and what follows)."""
    tok, vocab = load_tokenizer(name), load_vocab(name)
    values = _enum_values(random.Random(3), 40)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "pick": {"enum": values},
                                               "ok": {"type": "boolean"}}}
    ours_c = StructuredSchema(schema, tok, enum_threshold=1)
    llg_c = StructuredSchema(schema, tok, enum_threshold=10**9)
    assert len(ours_c.slots) == 1 and llg_c.slots == []
    labels = [lab.encode() for lab in ours_c.slots[0].labels]
    V = ours_c.vocab_size
    straddle = missing = inside_steps = 0
    for seed in range(6):
        r = random.Random(seed)
        proc = StructuredLogitsProcessor(ours_c, 0)
        ref = llg_c.new_matcher()
        gen, value_prefix = [], None
        for _ in range(80):
            st = proc.state(gen)
            ours = set(proc.allowed(gen).tolist())
            theirs = _llg_allowed(ref, llg_c.n_words, V)
            if st.slot >= 0 or proc.mask_row(st) is not None and st.row_slots:
                inside_steps += 1
                prefix = value_prefix or b""
                value_toks = _brute_value_tokens(vocab, labels, prefix)
                grammar_part = ours - value_toks
                assert value_toks <= ours
                if st.slot >= 0:
                    assert grammar_part == set()
                for t in theirs - ours:  # llguidance's extras: they run past the value's end
                    b = prefix + vocab.token_bytes[t]
                    assert any(b.startswith(lab) and len(b) > len(lab) for lab in labels), (name, b)
                    straddle += 1
                missing += len(ours - theirs - grammar_part)  # llguidance's near-canonical gaps
            else:
                assert ours == theirs, (name, tok.decode(gen))
            if ref.is_accepting() or not ours:
                break
            common = sorted(ours & theirs)
            if not common:  # forced end of a value: we close the quote, llguidance only straddles
                assert st.slot >= 0
                break
            t = r.choice(common)
            assert ref.consume_token(t)
            gen.append(t)
            st2 = proc.state(gen)
            if st2.slot >= 0:
                value_prefix = (value_prefix or b"") + vocab.token_bytes[t]
            else:
                value_prefix = None
    assert inside_steps > 0
    print(f"{name}: llguidance-only straddling tokens {straddle}, ours-only tokens {missing}")


def test_field_distribution_equals_brute_force(tiny_qwen):
    model, tok = tiny_qwen
    values = _enum_values(random.Random(5), 70)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "pick": {"enum": values}}}
    torch.manual_seed(1)
    res = generate_structured(model, tok, schema, "Pick one:", max_new_tokens=80, do_sample=True,
                              return_distributions=True)
    assert res.complete and len(res.fields) == 1
    f = res.fields[0]
    # brute force: every value by its own forward pass after the generated context
    prompt = tok.encode("Pick one:", add_special_tokens=False)
    text = res.text
    before = text[: text.index('"pick":') + len('"pick":')]
    ctx = prompt + res.token_ids[: len(tok.encode(before, add_special_tokens=False))]
    assert tok.decode(ctx[len(prompt):]) == before
    scores = []
    with torch.inference_mode():
        for v in values:
            lab = tok.encode(" " + json.dumps(v, ensure_ascii=False), add_special_tokens=False)
            ids = torch.tensor([ctx + lab])
            lp = torch.log_softmax(model(input_ids=ids).logits[0].double(), dim=-1)
            scores.append(sum(float(lp[len(ctx) - 1 + j, t]) for j, t in enumerate(lab)))
    p = np.exp(np.asarray(scores) - max(scores))
    np.testing.assert_allclose(f.proba, p / p.sum(), rtol=1e-3, atol=1e-6)
    assert abs(f.proba.sum() - 1) < 1e-9


@pytest.mark.parametrize(
    "schema, message",
    [
        ({"$ref": "#/defs/a"}, r"Unsupported keyword '\$ref' at /"),
        ({"type": "string", "pattern": "a+"}, r"Unsupported keyword\(s\) \['pattern'\] for type 'string'"),
        ({"type": "tuple"}, r"Unsupported type 'tuple' at /: valid types are"),
        ({"enum": []}, r"Empty enum at /"),
        ({"type": "object", "properties": {}, "required": ["x"]}, r"Required properties \['x'\]"),
        ({"type": "array", "minItems": 3, "maxItems": 1}, r"maxItems 1 < minItems 3"),
    ],
)
def test_schema_errors(schema, message):
    with pytest.raises(ValueError, match=message):
        StructuredSchema(schema, load_tokenizer("qwen3"))


@pytest.mark.model
def test_smollm2_end_to_end(smollm2):
    model, tok = smollm2
    from bench._common import tool_names  # the benchmark's label family

    schema = {"type": "object", "properties": {
        "tool": {"enum": tool_names(300)}, "urgent": {"type": "boolean"},
        "count": {"type": "integer"}}}
    prompt = "Choose the tool to fetch a user's profile and answer in JSON.\n"
    res = generate_structured(model, tok, schema, prompt, max_new_tokens=60, return_distributions=True)
    assert res.complete, res.text
    jsonschema.validate(res.value, schema)
    f = res.fields[0]
    assert f.value == res.value["tool"] and f.proba.shape == (300,)


# --------------------------------------------------------------------------- distributions vs the reference
# Issue 18: the distributions were scored by a two-pass scorer that ignored sliding windows (a crash when
# the context is longer than the window, wrong by up to 2 nats when only context + value is). They now go
# through the Scorer protocol; each is checked against judge.testing.Reference, one plain forward pass per
# value (no code shared with the engine), on the same token ids.

_PROMPT = "Pick the tool for the request and answer in JSON.\n"


@pytest.fixture(scope="module")
def smol_tok(smollm2):
    return smollm2[1]


def _values(n=40):
    from judge.testing import tool_names

    return tool_names(n, seed=1)  # 5-10 tokens per value with the SmolLM2 tokenizer


def _labels(values, lead=" "):
    return [lead + json.dumps(v, ensure_ascii=False) for v in values]


def _reference_logp(model, tok, ctx, labels):
    """log-softmax over the labels of the reference's log P(label tokens | ctx)."""
    from types import SimpleNamespace

    from judge.testing import Reference

    seqs = [tok.encode(lab, add_special_tokens=False) for lab in labels]
    s = Reference(model, tok).score_items([SimpleNamespace(ids=list(ctx), options=seqs, first_only=False)])[0]
    return s - np.logaddexp.reduce(s)


def _context(tok):
    return tok.encode(_PROMPT + '{"tool":', add_special_tokens=False)


def _window(case, ctx, tok, labels):
    """"short": shorter than the context; "fits": the context fits, context + any value does not."""
    if case == "short":
        return 8
    w = len(ctx) + 1
    assert min(len(tok.encode(lab, add_special_tokens=False)) for lab in labels) + len(ctx) > w
    return w


@pytest.mark.parametrize("case", ["short", "fits"])
@pytest.mark.parametrize("arch", ["mistral", "qwen2", "gemma3"])
def test_value_distribution_equals_reference_with_sliding_window(smol_tok, arch, case):
    from judge.testing import tiny_model

    tok, labels, ctx = smol_tok, _labels(_values()), _context(smol_tok)
    model = tiny_model(arch, tok, sliding_window=_window(case, ctx, tok, labels))
    p = S.value_distribution(model, tok, ctx, labels)
    assert p.shape == (len(labels),) and abs(p.sum() - 1) < 1e-12
    np.testing.assert_allclose(np.log(p), _reference_logp(model, tok, ctx, labels), atol=1e-4, rtol=0)


@pytest.mark.filterwarnings("ignore::judge.engine.EngineCheckWarning")
@pytest.mark.parametrize("arch", ["bloom", "falcon_alibi"])
def test_value_distribution_equals_reference_on_alibi(smol_tok, arch):
    from judge.engine import Engine
    from judge.testing import tiny_model

    tok, labels, ctx = smol_tok, _labels(_values()), _context(smol_tok)
    model = tiny_model(arch, tok)
    eng = Engine(model, tok)
    assert eng.setup().path_ == "fallback"  # ALiBi: the engine's exact causal fallback
    p = S.value_distribution(model, tok, ctx, labels, scorer=eng)
    np.testing.assert_allclose(np.log(p), _reference_logp(model, tok, ctx, labels), atol=1e-4, rtol=0)
    np.testing.assert_allclose(S.value_distribution(model, tok, ctx, labels), p, atol=1e-12)


@pytest.mark.filterwarnings("ignore::judge.engine.EngineCheckWarning")
@pytest.mark.parametrize("arch, window", [("mistral", "fits"), ("qwen2", "fits"), ("gemma3", "fits"),
                                          ("mistral", 8), ("bloom", None)])
def test_generated_distributions_equal_reference(smol_tok, arch, window):
    """Two enum fields: with window "fits", the first one's context fits the window but its values run
    past it, and the second one's context is longer than the window."""
    from judge.testing import tiny_model

    tok, values = smol_tok, _values()
    prompt_ids = tok.encode(_PROMPT, add_special_tokens=False)
    if window == "fits":
        window = len(prompt_ids) + 1  # the prompt and "[" fit
    model = tiny_model(arch, tok, sliding_window=window)
    schema = {"type": "array", "items": {"enum": values}, "minItems": 2, "maxItems": 2}
    c = StructuredSchema(schema, tok, enum_threshold=10)
    res = generate_structured(model, tok, schema, _PROMPT, compiled=c, max_new_tokens=60,
                              return_distributions=True)
    assert res.complete, res.text
    events = StructuredLogitsProcessor(c, 0).state(res.token_ids).events
    assert [f.value for f in res.fields] == res.value and len(events) == 2
    starts = [start for _, start, _, _ in events]
    if window is not None:
        assert len(prompt_ids) + starts[1] > window  # the second value's context is past the window
    for f, (slot, start, _, lab) in zip(res.fields, events):
        ctx = prompt_ids + res.token_ids[:start]
        assert f.values[lab] == f.value
        ref = _reference_logp(model, tok, ctx, c.slots[slot].labels)
        np.testing.assert_allclose(np.log(f.proba), ref, atol=1e-4, rtol=0)


def test_value_distribution_in_pieces_equals_one_pass(smol_tok, monkeypatch):
    """A big enum is scored in pieces (bounded logits per pass) on a cached root: same distribution."""
    from judge.engine import Engine
    from judge.testing import tiny_model

    tok, labels, ctx = smol_tok, _labels(_values(60)), _context(smol_tok)
    model = tiny_model("mistral", tok, sliding_window=8)
    eng = Engine(model, tok)
    whole = S.value_distribution(model, tok, ctx, labels, scorer=eng)
    monkeypatch.setattr(S.generate, "_LOGITS_PER_PASS", 0)  # pieces of 64 value tokens
    pieces = S.value_distribution(model, tok, ctx, labels, scorer=eng)
    np.testing.assert_allclose(np.log(pieces), np.log(whole), atol=1e-5, rtol=0)  # float32 noise only
    np.testing.assert_allclose(np.log(pieces), _reference_logp(model, tok, ctx, labels), atol=1e-4, rtol=0)


def test_value_distribution_errors(smol_tok):
    from judge.testing import Reference, tiny_model

    tok = smol_tok
    a, b = tiny_model("llama", tok), tiny_model("llama", tok, seed=1)
    with pytest.raises(ValueError, match="at least one context token; got none"):
        S.value_distribution(a, tok, [], [' "x"'])
    with pytest.raises(ValueError, match="at least one label; got none"):
        S.value_distribution(a, tok, [1, 2], [])
    with pytest.raises(ValueError, match="scorer scores with another model"):
        S.value_distribution(a, tok, [1, 2], [' "x"'], scorer=Reference(b, tok))
    with pytest.raises(TypeError, match="scorer must answer judge.engine.Scorer"):
        S.value_distribution(a, tok, [1, 2], [' "x"'], scorer=object())


def test_mask_row_is_the_allowed_set_and_read_only(smol_tok):
    c = StructuredSchema({"type": "object", "properties": {"tool": {"enum": _values()}}}, smol_tok,
                         enum_threshold=10)
    proc = StructuredLogitsProcessor(c, 0)
    gen = []
    for _ in range(6):
        row = proc.mask_row(proc.state(gen))
        assert row.shape == (c.n_words,) and row.dtype == np.int32 and not row.flags.writeable
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: c.vocab_size]
        np.testing.assert_array_equal(np.flatnonzero(bits), proc.allowed(gen))
        gen.append(int(proc.allowed(gen)[0]))
