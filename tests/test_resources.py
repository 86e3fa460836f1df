"""Scorers and their owners release what they hold: close(), context managers, lazy imports.

The vLLM side (a script using ``backend="vllm"`` exits by itself) is in
tests/backend_vllm/test_vllm_exit.py; what is checked here runs in the main environment.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from judge import Classifier
from judge.decisions import Decider
from judge.engine import Closing, Engine, Query, Scorer
from judge.testing import Reference, tiny_pair

Q = [Query((("Sky colour:", False),), (" blue", " green", " grey"))]


def test_import_judge_loads_no_numba():
    """vLLM's CPU worker re-imports the user's script and, once llvmlite's wrappers are in
    ``sys.modules``, fails to start (its kernel-override scan trips over them): importing judge
    and building a Classifier must not load numba or llvmlite. The kernels compile on first use."""
    code = ("import sys\nfrom judge import Classifier\nfrom judge.decisions import Decider\n"
            "import judge.backends.vllm, judge.server\n"
            "print(sorted(m for m in ('numba', 'llvmlite') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_kernels_compile_on_first_use_and_agree():
    from judge.automaton import _kernels as K
    from judge.automaton.trie import TrieAutomaton
    from judge.automaton.vocab import Vocabulary

    auto = TrieAutomaton.build(["alpha", "alpine", "beta"], Vocabulary.from_tokenizer(tiny_pair()[1]))
    assert type(K.build_trie_msd).__name__ != "_Lazy" and not K._PENDING  # every kernel swapped at once
    assert len(auto.labels) == 3


def test_every_scorer_declares_close_and_is_a_context_manager():
    model, tok = tiny_pair()
    for scorer in (Engine(model, tok), Reference(model, tok)):
        assert isinstance(scorer, Scorer)
        with scorer as s:
            assert s is scorer
    from judge.backends.vllm import VLLMScorer

    assert isinstance(VLLMScorer(), Scorer) and isinstance(VLLMScorer(), Closing)


def test_engine_close_releases_and_a_later_call_scores_the_same():
    model, tok = tiny_pair()
    eng = Engine(model, tok)
    before = eng.score(Q)[0]
    eng.set_root(eng.encode([("Sky", False)]))
    eng.close()
    assert not hasattr(eng, "model_") and not eng._roots and not eng._ready
    eng.close()  # idempotent
    np.testing.assert_array_equal(eng.score(Q)[0], before)
    assert eng.model_ is model  # the caller's model object, used again


def test_engine_context_manager_closes_on_error():
    model, tok = tiny_pair()
    with pytest.raises(RuntimeError, match="inside"):
        with Engine(model, tok) as eng:
            eng.setup()
            raise RuntimeError("inside")
    assert not hasattr(eng, "model_")


def test_classifier_close_keeps_what_was_fitted():
    model, tok = tiny_pair()
    texts = ["a red sky", "green grass", "a red rose", "green leaves"] * 3
    y = ["red", "green", "red", "green"] * 3
    with Classifier(["red", "green"], model, tokenizer=tok) as clf:
        clf.calibrate(texts, y)
        before = clf.predict_proba(texts)
        engine = clf.engine_
    assert "engine_" not in vars(clf) and not hasattr(engine, "model_")
    assert clf.calibration_ is not None
    np.testing.assert_allclose(clf.predict_proba(texts), before, rtol=0, atol=1e-12)
    clf.close()
    clf.close()


def test_decider_closes_only_the_scorer_it_built():
    model, tok = tiny_pair()
    given = Engine(model, tok)
    d = Decider(scorer=given)
    assert d.tokenizer_ is tok
    d.close()
    assert hasattr(given, "model_")  # the caller's scorer is left open
    with Decider(model, tok) as d2:
        built = d2.scorer_
        assert d2.tokenizer_ is tok
    assert not hasattr(built, "model_")
