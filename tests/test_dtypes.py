"""What a GPU user gets, stated and tested without a GPU: the default dtype, and exactness per dtype.

Tolerances, each from a measurement (bench/results/dtype_cpu.json, tiny models and SmolLM2 on CPU):

* float32: the engine equals a same-dtype brute force to < 1e-4 nats (measured <= 2.2e-5).
* bfloat16 / float16: the tree pass and a brute force run different kernels on differently shaped
  inputs and round differently (8 / 11 bits of mantissa). Where the engine keeps the tree pass, its
  self-check found it within ``HALF`` of causal passes on its probe, and the scores stay within
  ``HALF`` of the brute force (measured <= 0.092 on the tiny models); where the probe differs by
  more (SmolLM2-135M in bfloat16: 0.40 nats), the engine must refuse the tree pass and say so.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch

from judge import Classifier
from judge.testing import SLIDING_ARCHITECTURES, classifier_reference, tiny_model, tiny_pair

HALF = 0.15  # nats: the engine's self-check tolerance for half precision
TOL = {torch.float32: 1e-4, torch.bfloat16: HALF, torch.float16: HALF}
SELF_CHECK = {torch.float32: 2e-3, torch.bfloat16: HALF, torch.float16: HALF}  # the probe's tolerance
LABELS = ["card_arrival", "card_linking", "card", "exchange_rate", "pin_blocked"]
TEXTS = ["I am still waiting on my card, it has been two weeks now?", "rate for euros"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("arch", ["llama", "gemma3", "gpt2"])
def test_exact_scores_against_a_same_dtype_brute_force(arch, dtype):
    tok = tiny_pair()[1]
    model = tiny_model(arch, tok, sliding_window=16 if arch in SLIDING_ARCHITECTURES else None).to(dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = Classifier(LABELS, model, tokenizer=tok, method="exact")
        s = clf.decision_function(TEXTS)
    ref = np.stack([classifier_reference(clf, t) for t in TEXTS])
    diff = float(np.max(np.abs(s - ref)))
    check = clf.engine_.check_
    if clf.engine_.path_ == "tree":
        assert check["tolerance"] == SELF_CHECK[dtype] and check["max_abs_diff"] <= check["tolerance"]
        assert diff <= TOL[dtype], (arch, dtype, diff)
    else:  # refused by the self-check: said so, and the fallback is the brute force's own computation
        assert any("tree pass differs" in str(w.message) for w in caught)
        assert diff <= TOL[dtype], (arch, dtype, diff)
    assert s.dtype == np.float64 and np.all(np.isfinite(s))


def test_the_self_check_refuses_a_tree_pass_outside_the_half_precision_tolerance(smollm2):
    """SmolLM2-135M in bfloat16: the tree pass differs from causal passes by ~0.4 nats on the probe
    (measured 0.398): the engine must fall back, with a warning, not score with it silently."""
    model, tok = smollm2
    half = copy.deepcopy(model).to(torch.bfloat16)  # a copy: the session's model stays float32
    with pytest.warns(UserWarning, match="tree pass differs"):
        clf = Classifier(LABELS, half, tokenizer=tok, method="exact")
        clf.decision_function(TEXTS[:1])
    assert clf.engine_.path_ == "fallback"
    assert clf.engine_.check_["max_abs_diff"] > HALF


def test_the_default_dtype_is_float32_on_cuda_too(monkeypatch):
    """Half precision changes answers (4 of 80 Banking77 texts in bfloat16, and the tree pass is
    refused for SmolLM2): the default is float32 on every device; bfloat16 is the caller's choice."""
    import transformers

    import judge.models as models

    seen = {}

    def fake_from_pretrained(path, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop here: no GPU")

    monkeypatch.setattr(models, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fake_from_pretrained)
    with pytest.raises(RuntimeError, match="no GPU"):
        models.load_model()
    assert seen["dtype"] == torch.float32 and seen["device_map"] == "auto"
    with pytest.raises(RuntimeError, match="no GPU"):
        models.load_model(dtype=torch.bfloat16)
    assert seen["dtype"] == torch.bfloat16
