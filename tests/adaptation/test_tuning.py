"""The sentence embedder tuned on labelled texts (judge.adaptation.tuning): it pulls same-class texts together,
saves and loads offline bit for bit, respects its time budget, and says which extra is missing. The packaged
all-MiniLM-L6-v2 (the embed extra); a few optimiser steps each."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")

from judge.adaptation import TunedEncoder, tune_embedder  # noqa: E402
from judge.adaptation.tuning import pair_batches  # noqa: E402

# two intents whose texts share few words with each other, and a distractor word crossing them
TEXTS = ["my card has not arrived yet", "the card I ordered is still not here", "when will my new card come",
         "waiting for the card for two weeks", "what exchange rate do you use", "the rate for euros was bad",
         "how is the currency rate set", "which rate applies to dollars"]
Y = np.array([0, 0, 0, 0, 1, 1, 1, 1])


def margin(E, y):
    S = E @ E.T
    same = (y[:, None] == y[None, :]) & ~np.eye(len(y), dtype=bool)
    return S[same].mean() - S[y[:, None] != y[None, :]].mean()


def test_tuning_moves_same_class_texts_closer_than_other_classes():
    from judge.encoders import SentenceEncoder

    before = margin(SentenceEncoder()(TEXTS), Y)
    enc = tune_embedder("minilm", TEXTS, Y, epochs=4, lr=5e-5)
    after = margin(enc(TEXTS), Y)
    assert after > before + 0.05, (before, after)
    assert enc.report["steps"] == 16 and enc.report["stopped"] is False


@pytest.mark.slow  # two tunings: about 25 s on 2 cores
def test_tuning_is_seeded_and_leaves_the_global_torch_state_alone():
    import torch

    torch.manual_seed(123)
    state = torch.get_rng_state()
    a = tune_embedder("minilm", TEXTS, Y, epochs=1, random_state=3)
    assert torch.equal(torch.get_rng_state(), state)
    b = tune_embedder("minilm", TEXTS, Y, epochs=1, random_state=3)
    np.testing.assert_array_equal(a(TEXTS), b(TEXTS))


def test_saved_weights_rebuild_the_same_encoder_and_a_foreign_set_is_refused():
    enc = tune_embedder("minilm", TEXTS, Y, epochs=1)
    back = TunedEncoder.from_saved(enc.spec, enc.arrays())
    np.testing.assert_array_equal(back(TEXTS), enc(TEXTS))
    np.testing.assert_allclose(np.linalg.norm(enc(TEXTS), axis=1), 1.0, atol=1e-5)  # unit rows: cosine = dot
    empty = enc([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert repr(enc) == "TunedEncoder(base='minilm', steps=4)"
    arrays = enc.arrays()
    arrays.pop(next(iter(arrays)))
    with pytest.raises(ValueError, match="does not match its base"):
        TunedEncoder.from_saved(enc.spec, arrays)


def test_max_seconds_stops_after_the_step_that_crosses_it():
    enc = tune_embedder("minilm", TEXTS, Y, epochs=50, max_seconds=1e-3)
    assert enc.report["stopped"] is True and enc.report["steps"] == 1
    assert sorted(enc.report) == ["seconds", "steps", "stopped", "texts"] and 0 < enc.report["seconds"] < 600
    two = tune_embedder("minilm", ["my card", "the rate"], [0, 1], epochs=1)  # the fewest texts it takes
    assert two.report["steps"] == 1


def test_a_class_with_one_text_is_its_own_pair():
    enc = tune_embedder("minilm", ["my card is late", "card not here", "what rate"], [0, 0, 1], epochs=1)
    assert enc.report["steps"] == 1 and enc(["rate"]).shape == (1, 384)  # [card, rate], then [card] alone: skipped


def test_bad_input_and_a_missing_extra_are_refused_with_what_to_do(monkeypatch):
    with pytest.raises(ValueError, match="at least 2 texts"):
        tune_embedder("minilm", ["one"], [0])
    with pytest.raises(TypeError, match="by name or folder"):
        tune_embedder(lambda t: np.zeros((len(t), 2)), TEXTS, Y)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ModuleNotFoundError, match=r"trie-judge\[embed\]"):
        tune_embedder("minilm", TEXTS, Y)


def test_batches_hold_one_text_per_class_and_cover_every_text():
    y = np.array([0, 0, 0, 1, 2, 2])
    batches = pair_batches(y, 2, np.random.default_rng(0))
    assert sorted(i for b in batches for i in b) == list(range(6))
    assert all(len(b) <= 2 and len(set(y[b])) == len(b) for b in batches)
