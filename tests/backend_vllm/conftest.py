"""Fixtures of the vLLM suite (run in the vLLM environment: ``scripts/setup_vllm.sh``).

Without vLLM (the main environment) nothing here is collected. With it, each model gets one
vLLM engine per session (``judge.backends.vllm`` shares an engine between scorers with the same
settings, so ``Classifier(backend="vllm")`` and ``Decider(backend="vllm")`` reuse the packaged
model's). Engines run as vLLM runs them by default, their core in a spawned process (in-process
cores, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, would save a minute per engine here, but vLLM 0.32's
CPU worker then fails to start once numba is imported: its kernel-override scan of
``sys.modules`` trips over llvmlite's function wrappers).
"""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("vllm") is None:  # the main environment: this suite is not collected
    collect_ignore_glob = ["test_*.py"]
# (vLLM's settings for the tests, the KV cache size on CPU among them, are in the repository's
# conftest.py: the vLLM backend's doctests need them too)

TINY_BLOCK = 32  # the CPU attention backend's smallest block size (a multiple of 32)


@pytest.fixture(scope="session")
def smol():
    """The packaged SmolLM2 on vLLM (float32 on CPU, default settings: what Classifier(backend="vllm") builds)."""
    from judge.backends.vllm import VLLMScorer

    return VLLMScorer().setup()


@pytest.fixture(scope="session")
def smol_hf():
    """The same model on transformers: the engine (whatever path its self-check picks) and its model."""
    from judge.engine import Engine

    return Engine().setup()


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A random-weight 2-layer Llama over SmolLM2's tokenizer, saved as a folder vLLM can load."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from judge.models import packaged_model_dir

    tok = AutoTokenizer.from_pretrained(str(packaged_model_dir()))
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # larger logits than the default init, so label scores differ visibly
        model.lm_head.weight.mul_(20.0)
    out = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny(tiny_dir):
    """The tiny model on vLLM with 32-token KV blocks (so block-aligned prompts are short)."""
    from judge.backends.vllm import VLLMScorer

    return VLLMScorer(str(tiny_dir), engine_kwargs={"block_size": TINY_BLOCK, "max_model_len": 1024}).setup()


@pytest.fixture(scope="session")
def tiny_hf(tiny_dir):
    """The tiny model on transformers: (model, tokenizer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(str(tiny_dir)).eval(), AutoTokenizer.from_pretrained(str(tiny_dir))


@pytest.fixture(scope="session", autouse=True)
def _stop_engines():
    """Stop the session's vLLM engines while pytest's streams are open (else vLLM's exit hooks log into closed ones)."""
    yield
    import judge.backends.vllm as vb

    for llm in list(vb._ENGINES.values()):
        try:
            llm.llm_engine.engine_core.shutdown()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass
    vb._ENGINES.clear()
