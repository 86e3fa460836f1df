"""Shared fixtures: the read-only ../shared folder, real tokenizers, tiny models.

Nothing here touches the network. The shared folder is found beside the
repository (``../shared``) or through ``JUDGE_SHARED_DIR``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("JUDGE_SHARED_DIR", REPO.parent / "shared"))
TOKENIZERS = ("gpt2", "qwen3", "llama3", "mistral7b", "gemma3")


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is missing: point JUDGE_SHARED_DIR at the project's shared folder")
    return path


@lru_cache(maxsize=None)
def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(shared_path("tokenizers", name)))


@lru_cache(maxsize=None)
def load_vocab(name: str):
    from judge.vocab import Vocabulary

    return Vocabulary.from_tokenizer(load_tokenizer(name))


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    return shared_path("datasets")
