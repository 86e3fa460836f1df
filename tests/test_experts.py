"""A Classifier's two experts read off it as arrays (judge.experts): the run options, the LM's scores by its path,
the embedder's similarity, and what the fusion is computed from."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

import judge.calibration
import judge.compiled
import judge.fusion
from judge import Classifier
from judge.experts import options_of
from judge.fusion import DEFAULT_FUSION
from judge.testing import tiny_pair

LABELS = ["card_arrival", "exchange_rate", "pin_blocked"]
TEXTS = ["Where is my card?", "what rate for euros"]
FLABELS = ["card arrival", "exchange rate", "pin blocked"]
FTEXTS = ["where is my card", "what rate do you use", "my pin is blocked", "card not here yet"]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def test_options_of_reads_the_run_parameters_and_batch_invariance_scores_one_text_at_a_time():
    o = options_of(Classifier(LABELS, batch_size=8, pack=4, progress=True, search_budget=77, search_tolerance=0.25))
    assert (o.batch_size, o.pack, o.progress, o.search_budget, o.search_tolerance) == (8, 4, True, 77, 0.25)
    assert options_of(Classifier(LABELS, batch_size=2, pack=4)).pack == 2  # never more packed than a batch holds
    o = options_of(Classifier(LABELS, batch_size=8, pack=4, batch_invariant=True))
    assert (o.batch_size, o.pack) == (1, 1)


@pytest.mark.parametrize("module", [judge.fusion, judge.compiled, judge.calibration])
def test_the_arithmetic_modules_take_arrays_not_a_classifier(module):
    """The fusion, the compiled label set and the calibration package never take a Classifier back: no function of
    theirs has a ``clf`` parameter (what reads one lives in judge.experts)."""
    mods = [module] + [m for name, m in vars(module).items() if inspect.ismodule(m) and m.__name__.startswith(
        module.__name__ + ".")]
    taking = []
    for m in mods:
        for node in ast.walk(ast.parse(inspect.getsource(m))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(a.arg == "clf" for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs):
                    taking.append(f"{m.__name__}.{node.name}")
    assert not taking, taking


def test_the_fused_scores_are_the_experts_bit_for_bit_with_no_prior_on_top(pair):
    from scipy.special import softmax

    from judge.encoders import get_encoder
    from judge.experts import experts
    from judge.fusion import label_similarity, label_texts

    model, tok = pair
    clf = Classifier(FLABELS, model, tokenizer=tok, embedder="minilm")
    lm, sim = experts(clf, FTEXTS)
    enc = get_encoder("minilm")
    np.testing.assert_array_equal(sim, label_similarity(enc, FTEXTS, enc(label_texts(FLABELS))))  # float64 throughout
    assert clf.prior_for(len(FTEXTS)) is None  # the fusion divides the LM's prior out itself
    np.testing.assert_allclose(clf.predict_proba(FTEXTS), softmax(DEFAULT_FUSION.combine(lm, sim), axis=1), atol=1e-12)


def test_zero_shot_scores_use_the_classifiers_run_options_and_search_unless_full(pair):
    """zero_shot_scores scores with the classifier's run options (here its search tolerance) on its own path (the
    search: labels outside the tolerance -inf), and every label exactly with ``full=True`` (the prior's input)."""
    from judge.experts import zero_shot_scores
    from judge.testing import icd_codes

    model, tok = pair
    labels = icd_codes(60, 3)
    loose = Classifier(labels, model, tokenizer=tok, method="search", search_tolerance=0.5)
    tight = Classifier(labels, model, tokenizer=tok, method="search", search_tolerance=1e-6)
    a, b = zero_shot_scores(loose, TEXTS), zero_shot_scores(tight, TEXTS)
    assert np.isneginf(a).any() and np.isfinite(b).sum() > np.isfinite(a).sum()  # each its own tolerance
    np.testing.assert_array_equal(a, loose.decision_function(TEXTS))
    full = zero_shot_scores(loose, TEXTS, full=True)
    exact = Classifier(labels, model, tokenizer=tok, method="exact").decision_function(TEXTS)
    assert np.isfinite(full).all()
    np.testing.assert_allclose(full, exact, atol=1e-5)
