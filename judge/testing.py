"""Independent references and generators for tests and benchmarks.

What is here:

* ``tiny_model(arch, tokenizer)``: a random-weight 2-layer causal LM of a given
  architecture family (hidden 64, 4 heads, 2 kv heads where supported, float32,
  eval mode) whose vocabulary matches ``tokenizer``; ``ARCHITECTURES`` lists the
  names it knows in this transformers install, ``SLIDING_ARCHITECTURES`` those that
  accept ``sliding_window=``.
* ``reference_logprobs`` / ``reference_logprobs_ids``: the brute-force score of each
  continuation: one plain causal forward pass over the whole sequence (no cache, no
  custom mask), log-softmax in float64, summed over the continuation tokens.
* Seeded label generators: ``tool_names``, ``icd_codes``, ``phrases``,
  ``prefix_labels``, ``unicode_labels`` (the first two give the same lists as
  ``bench/_common.py``).

What is deliberately not here: anything from the engine. This module imports
nothing from ``judge.scoring``, ``judge.classifier`` or ``judge.prompts``, so a bug
there cannot hide in the reference.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

__all__ = [
    "classifier_reference",
    "ARCHITECTURES",
    "SLIDING_ARCHITECTURES",
    "icd_codes",
    "phrases",
    "prefix_labels",
    "reference_logprobs",
    "reference_logprobs_ids",
    "tiny_model",
    "tool_names",
    "unicode_labels",
]

_HIDDEN, _HEADS, _KV_HEADS, _LAYERS, _FFN, _MAX_POS = 64, 4, 2, 2, 128, 4096
_LOGIT_SCALE = 20.0  # lm_head multiplier (as tests/conftest.py tiny_llama): visible logit spread

# arch -> (config class name, model class name, common config kwargs)
_COMMON = dict(
    hidden_size=_HIDDEN,
    intermediate_size=_FFN,
    num_hidden_layers=_LAYERS,
    num_attention_heads=_HEADS,
    num_key_value_heads=_KV_HEADS,
    max_position_embeddings=_MAX_POS,
)
_NO_KV = dict(
    hidden_size=_HIDDEN,
    intermediate_size=_FFN,
    num_hidden_layers=_LAYERS,
    num_attention_heads=_HEADS,
    max_position_embeddings=_MAX_POS,
)
_SPECS: dict[str, tuple[str, str, dict]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(_COMMON)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(_COMMON)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(_COMMON, head_dim=16)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(_COMMON, sliding_window=None)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(_COMMON, head_dim=16)),
    "gemma2": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        dict(
            _COMMON,
            head_dim=16,
            attn_logit_softcapping=50.0,
            final_logit_softcapping=30.0,
            sliding_window=4096,
        ),
    ),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        dict(
            _COMMON,
            head_dim=16,
            sliding_window=4096,
            layer_types=["sliding_attention", "full_attention"],
        ),
    ),
    "phi3": (
        "Phi3Config",
        "Phi3ForCausalLM",
        dict(_COMMON, sliding_window=None, original_max_position_embeddings=_MAX_POS),
    ),
    "gpt2": (
        "GPT2Config",
        "GPT2LMHeadModel",
        dict(
            n_embd=_HIDDEN,
            n_layer=_LAYERS,
            n_head=_HEADS,
            n_positions=_MAX_POS,
            n_inner=_FFN,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        ),
    ),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(_NO_KV, rotary_pct=0.5)),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(_COMMON)),
    "starcoder2": (
        "Starcoder2Config",
        "Starcoder2ForCausalLM",
        dict(
            _COMMON,
            sliding_window=None,
            residual_dropout=0.0,
            embedding_dropout=0.0,
            attention_dropout=0.0,
        ),
    ),
    "falcon": (
        "FalconConfig",
        "FalconForCausalLM",
        dict(
            hidden_size=_HIDDEN,
            num_hidden_layers=_LAYERS,
            num_attention_heads=_HEADS,
            new_decoder_architecture=True,
            num_kv_heads=_KV_HEADS,
            alibi=False,
            max_position_embeddings=_MAX_POS,
        ),
    ),
    "falcon_alibi": (
        "FalconConfig",
        "FalconForCausalLM",
        dict(
            hidden_size=_HIDDEN,
            num_hidden_layers=_LAYERS,
            num_attention_heads=_HEADS,
            alibi=True,
            multi_query=False,
            new_decoder_architecture=False,
            parallel_attn=True,
            max_position_embeddings=_MAX_POS,
        ),
    ),
    "bloom": (
        "BloomConfig",
        "BloomForCausalLM",
        dict(
            hidden_size=_HIDDEN,
            n_layer=_LAYERS,
            n_head=_HEADS,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        ),
    ),
    "gpt_neo": (
        "GPTNeoConfig",
        "GPTNeoForCausalLM",
        dict(
            hidden_size=_HIDDEN,
            num_layers=_LAYERS,
            num_heads=_HEADS,
            intermediate_size=_FFN,
            attention_types=[[["global", "local"], 1]],
            window_size=256,
            max_position_embeddings=_MAX_POS,
            embed_dropout=0.0,
            attention_dropout=0.0,
            resid_dropout=0.0,
        ),
    ),
    "cohere": ("CohereConfig", "CohereForCausalLM", dict(_COMMON, logit_scale=1.0)),
    "granite": ("GraniteConfig", "GraniteForCausalLM", dict(_COMMON)),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(_COMMON)),
    "opt": (
        "OPTConfig",
        "OPTForCausalLM",
        dict(
            hidden_size=_HIDDEN,
            ffn_dim=_FFN,
            num_hidden_layers=_LAYERS,
            num_attention_heads=_HEADS,
            max_position_embeddings=_MAX_POS,
            word_embed_proj_dim=_HIDDEN,
            dropout=0.0,
            attention_dropout=0.0,
        ),
    ),
    # no_rope_layer_interval=2: layer 1 is a NoPE layer (and the sliding one when a window is set)
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(_COMMON, no_rope_layer_interval=2)),
    "qwen3_next": (
        "Qwen3NextConfig",
        "Qwen3NextForCausalLM",
        dict(
            _COMMON,
            head_dim=16,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
            linear_num_value_heads=4,
            linear_num_key_heads=2,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            linear_conv_kernel_dim=4,
            layer_types=["linear_attention", "full_attention"],
            full_attention_interval=2,
        ),
    ),
}


def _sliding_kwargs(arch: str, window: int) -> dict:
    if arch in ("qwen2", "qwen3"):
        # sliding layers are those with index >= max_window_layers; 0 makes every layer sliding
        return dict(sliding_window=window, use_sliding_window=True, max_window_layers=0)
    if arch == "gpt_neo":
        return dict(window_size=window)
    if arch == "smollm3":
        return dict(sliding_window=window, use_sliding_window=True)
    return dict(sliding_window=window)


_SLIDING = (
    "mistral",
    "qwen2",
    "qwen3",
    "gemma2",
    "gemma3",
    "phi3",
    "starcoder2",
    "gpt_neo",
    "smollm3",
)


def _available() -> tuple[str, ...]:
    try:
        import transformers
    except ImportError:  # pragma: no cover - transformers is a dependency
        return ()
    return tuple(
        a
        for a, (cfg, mdl, _) in _SPECS.items()
        if hasattr(transformers, cfg) and hasattr(transformers, mdl)
    )


ARCHITECTURES: tuple[str, ...] = _available()
"""The architecture names ``tiny_model`` builds in this transformers install."""
SLIDING_ARCHITECTURES: tuple[str, ...] = tuple(a for a in _SLIDING if a in ARCHITECTURES)
"""The subset whose ``sliding_window=`` argument sets a local attention window."""


def _special_ids(tokenizer) -> dict:
    def pick(*names):
        for n in names:
            v = getattr(tokenizer, n, None)
            if v is not None:
                return int(v)
        return None

    eos = pick("eos_token_id")
    bos = pick("bos_token_id", "eos_token_id")
    pad = pick("pad_token_id", "eos_token_id")
    return dict(
        eos_token_id=eos if eos is not None else 0,
        bos_token_id=bos if bos is not None else 0,
        pad_token_id=pad if pad is not None else 0,
    )


def tiny_model(
    arch: str,
    tokenizer,
    *,
    seed: int = 0,
    sliding_window: int | None = None,
    attn_implementation: str = "sdpa",
    **overrides: Any,
):
    """A random-weight 2-layer causal LM of family ``arch`` for ``tokenizer`` (float32, eval mode).

    ``vocab_size = len(tokenizer)``; bos/eos/pad ids come from the tokenizer. The lm_head
    is untied (``tie_word_embeddings=False`` unless overridden) and scaled 20x so that
    log-probabilities differ visibly between tokens. For archs in
    ``SLIDING_ARCHITECTURES``, ``sliding_window=N`` enables an N-token local window
    (gemma2/gemma3: on their sliding layers; gemma3 has layer types sliding, full;
    qwen2/qwen3: on every layer unless ``max_window_layers`` is overridden; gpt_neo: its
    "local" layer 1; smollm3: its NoPE layer 1). Without it, gemma2/gemma3
    keep their sliding layers with a 4096-token window and gpt_neo a 256-token one.
    ``attn_implementation="sdpa"`` falls back to ``"eager"`` for models that refuse sdpa
    (gemma2, bloom, gpt_neo). ``overrides`` go to the config.

    Examples
    --------
    >>> from transformers import AutoTokenizer  # doctest: +SKIP
    >>> m = tiny_model("llama", AutoTokenizer.from_pretrained("../shared/tokenizers/gpt2"))  # doctest: +SKIP
    """
    import torch
    import transformers

    if arch not in _SPECS:
        raise ValueError(f"unknown arch {arch!r}; known: {ARCHITECTURES}")
    cfg_name, model_name, base = _SPECS[arch]
    if arch not in ARCHITECTURES:
        raise ValueError(
            f"arch {arch!r} is not available in transformers {transformers.__version__}"
        )
    kwargs = dict(base)
    kwargs.update(_special_ids(tokenizer))
    kwargs["vocab_size"] = len(tokenizer)
    # an own lm_head, so scaling it leaves the input embeddings alone
    kwargs["tie_word_embeddings"] = False
    if sliding_window is not None:
        if arch not in SLIDING_ARCHITECTURES:
            raise ValueError(
                f"arch {arch!r} has no sliding window; those that do: {SLIDING_ARCHITECTURES}"
            )
        kwargs.update(_sliding_kwargs(arch, int(sliding_window)))
    kwargs.update(overrides)
    config = getattr(transformers, cfg_name)(**kwargs)
    model_cls = getattr(transformers, model_name)
    impl = attn_implementation
    if impl == "sdpa" and not getattr(model_cls, "_supports_sdpa", True):
        impl = "eager"  # gemma2 (softcapping), bloom, gpt_neo: sdpa is refused, eager is the reference path
    config._attn_implementation = impl
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32).eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(_LOGIT_SCALE)
    return model


# --------------------------------------------------------------------------- references
def _forward_logprobs(model, ids: list[int], start: int) -> float:
    """Sum of log p(ids[i] | ids[:i]) for i in [start, len(ids)), one plain forward pass."""
    import torch

    if start < 1:
        raise ValueError("the reference needs at least one prompt token before the continuation")
    if start >= len(ids):
        return 0.0
    device = next(model.parameters()).device
    x = torch.tensor([ids], dtype=torch.long, device=device)
    with torch.no_grad():
        logits = model(input_ids=x, use_cache=False).logits[0]
    lp = torch.log_softmax(logits.to(torch.float64), dim=-1)
    tgt = x[0, start:]
    return float(lp[start - 1 : -1].gather(1, tgt[:, None]).sum().item())


def reference_logprobs_ids(model, prompt_ids, continuation_ids) -> np.ndarray:
    """Brute-force log p(continuation | prompt) for each continuation, from token ids.

    ``continuation_ids`` is a list of id lists (an empty one scores 0.0). One full causal
    forward pass per continuation over ``prompt_ids + continuation``, no cache and no
    custom mask; log-softmax in float64. Returns float64 of shape (K,).
    """
    prompt_ids = [int(t) for t in prompt_ids]
    return np.array(
        [
            _forward_logprobs(model, prompt_ids + [int(t) for t in c], len(prompt_ids))
            for c in continuation_ids
        ],
        dtype=np.float64,
    )


def _encode(tokenizer, text: str, add_special_tokens: bool) -> list[int]:
    return list(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])


def reference_logprobs(
    model, tokenizer, prompt: str, continuations: list[str], *, add_special_tokens: bool = False
) -> np.ndarray:
    """Brute-force log p(continuation | prompt) for each continuation string (float64, (K,)).

    For each continuation, ``prompt + continuation`` is tokenized as one string with a
    plain tokenizer call. The boundary is where the prompt's own tokens end: the tokens
    of ``tokenizer(prompt)`` must be a prefix of the joint tokenization. When they are
    not (the tokenizer merges across the seam), the boundary is the longest common
    prefix of the two token lists, so the score covers every token from the first one
    that differs, i.e. it also includes the probability of the re-tokenized prompt tail.
    Then one full causal forward pass, no cache, no custom mask, and the continuation
    tokens' log-softmax in float64, summed.
    """
    p = _encode(tokenizer, prompt, add_special_tokens)
    out = []
    for c in continuations:
        ids = _encode(tokenizer, prompt + c, add_special_tokens)
        n = 0
        for a, b in zip(p, ids):
            if a != b:
                break
            n += 1
        out.append(_forward_logprobs(model, ids, n))
    return np.asarray(out, dtype=np.float64)


def classifier_reference(clf, text: str) -> np.ndarray:
    """Brute-force scores of a Classifier's labels for ``text``: (K,) float64, in ``clf.classes_`` order.

    Uses only what the classifier shows (``render_prompt``, ``surfaces_``, which labels are scored
    with the end token) and tokenizes ``render_prompt(text) + label (+ the end token's text)`` itself
    through :func:`reference_logprobs`; nothing of the engine is imported.

    Examples
    --------
    >>> classifier_reference(clf, "Where is my card?").shape      # doctest: +SKIP
    (77,)
    """
    tok = clf.tokenizer_
    end_id = clf.engine_.end_id_
    end = tok.convert_ids_to_tokens(end_id)
    conts = [s + (end if seq[-1] == end_id else "") for s, seq in zip(clf.surfaces_, clf.scored_token_ids_)]
    return reference_logprobs(clf.model_, tok, clf.render_prompt(text), conts)


# --------------------------------------------------------------------------- label generators
_VERBS = (
    "get set list create update delete find search fetch send check cancel submit approve "
    "reject archive restore export import sync validate compute resolve assign close open "
    "reset schedule notify refresh upload download merge split track lookup register verify"
).split()
_NOUNS = (
    "user profile account order invoice payment refund customer product catalog item cart "
    "shipment delivery address email message thread channel team member role permission "
    "group project task ticket issue comment review rating report dashboard metric alert "
    "event calendar meeting booking reservation flight hotel room vehicle driver route "
    "location region store inventory warehouse supplier vendor contract document file folder "
    "image video playlist song artist album podcast episode subscription plan coupon discount "
    "price quote tax currency balance transaction transfer wallet card loan budget expense "
    "employee salary payroll shift schedule device sensor reading firmware license key token "
    "session password setting preference language timezone note reminder contact lead "
    "campaign audience segment survey response form field record table column index query "
    "job pipeline build release deployment cluster node service endpoint webhook log backup "
    "snapshot volume policy rule quota usage status history summary detail version"
).split()


def tool_names(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct snake_case tool names like ``get_user_profile`` (seeded; as bench/_common.py).

    Examples
    --------
    >>> names = tool_names(3, seed=1)
    >>> len(set(names)), all("_" in n for n in names)
    (3, True)
    """
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < k:
        n_nouns = rng.choices((1, 2, 3), weights=(3, 6, 1))[0]
        out.setdefault("_".join([rng.choice(_VERBS), *rng.sample(_NOUNS, n_nouns)]), None)
    return list(out)


def icd_codes(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct ICD-10-like codes such as ``E11``, ``E11.6``, ``S72.001A`` (seeded; as bench/_common.py).

    Many codes are prefixes of others.

    Examples
    --------
    >>> codes = icd_codes(5, seed=2)
    >>> len(set(codes)), all(c[0].isupper() and c[1:3].isdigit() for c in codes)
    (5, True)
    """
    rng = random.Random(seed)
    out: dict[str, None] = {}
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    while len(out) < k:
        code = f"{rng.choice(letters)}{rng.randint(0, 99):02d}"
        if rng.random() < 0.9:
            n = rng.choices((1, 2, 3, 4), weights=(3, 4, 2, 1))[0]
            tail = "".join(rng.choice("0123456789") for _ in range(min(n, 3)))
            if n == 4:
                tail += rng.choice("ADS")
            code += "." + tail
        out.setdefault(code, None)
    return list(out)


_PHRASES = (
    "very positive",
    "positive",
    "not positive at all",
    "neutral",
    "somewhat negative",
    "negative",
    "card arrival",
    "card linking",
    "exchange rate",
    "exchange via app",
    "top up failed",
    "Top up reverted",
    "pin blocked",
    "lost or stolen card",
)
_ADJ = "very somewhat not slightly really quite fairly rather extremely barely".split()
_WORDS = (
    "positive negative neutral happy sad angry calm urgent late early lost stolen blocked failed "
    "pending refunded declined approved card transfer payment account balance rate fee app"
).split()


def phrases(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct short space-separated phrases (seeded).

    The first ones are the fixed sentiment / banking phrases the tests use
    (``"very positive"``, ``"positive"``, ``"card arrival"``...); beyond those, random
    one-to-four-word phrases, many sharing a first word.

    Examples
    --------
    >>> phrases(2)
    ['very positive', 'positive']
    >>> len(set(phrases(40, seed=3)))
    40
    """
    out: dict[str, None] = dict.fromkeys(_PHRASES[:k])
    rng = random.Random(seed)
    while len(out) < k:
        n = rng.choices((1, 2, 3, 4), weights=(2, 5, 3, 1))[0]
        words = [rng.choice(_WORDS) for _ in range(n)]
        if rng.random() < 0.3:
            words.insert(0, rng.choice(_ADJ))
        out.setdefault(" ".join(words), None)
    return list(out)


def prefix_labels() -> list[str]:
    """Labels that are prefixes of one another, including across a space (fixed).

    The union of the prefix families in tests/test_trie.py and tests/test_peers.py.

    Examples
    --------
    >>> prefix_labels()[:3]
    ['a', 'ab', 'abc']
    """
    return ["a", "ab", "abc", "abcd", "abc d", "b", "ba", "bo", "book", "booking", "booking_fee"]


_UNICODE = (
    "café",
    "café au lait",
    "naïve",
    "日本語",
    "日本",
    "中文标签",
    "😀 happy",
    "emoji 🎉🎉",
    "Ελληνικά",
    "Ωmega",
    "a\u0301",
)
_UNICODE_POOL = "éèüßøåçñ日本語中文标签한국어ÄÖÜΩλπ😀🎉🚀✓→€"


def unicode_labels(k: int, seed: int = 0) -> list[str]:
    """``k`` distinct labels with non-ASCII text: accents, CJK, emoji, Greek, a combining mark (seeded).

    The first ones are the fixed set from the tests (``"café"``, ``"日本語"``, ``"日本"``...);
    beyond those, random mixes of ASCII letters and multi-byte characters.

    Examples
    --------
    >>> unicode_labels(3)
    ['café', 'café au lait', 'naïve']
    >>> all(any(ord(ch) > 127 for ch in s) for s in unicode_labels(30, seed=1))
    True
    """
    out: dict[str, None] = dict.fromkeys(_UNICODE[:k])
    rng = random.Random(seed)
    while len(out) < k:
        n = rng.randint(1, 6)
        chars = [
            rng.choice(_UNICODE_POOL) if rng.random() < 0.5 else rng.choice("abcdefgh ")
            for _ in range(n)
        ]
        chars[rng.randrange(n)] = rng.choice(_UNICODE_POOL)
        s = "".join(chars).strip()
        if s:
            out.setdefault(s, None)
    return list(out)
