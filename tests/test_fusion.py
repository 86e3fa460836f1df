"""The zero-shot default (the embedder beside the LM), its fallback, and the transductive call (issue 38)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge import Classifier
from judge.calibrated import offset_scores
from judge.fusion import DEFAULT_FUSION, Fusion, initial_fusion, is_fused
from judge.testing import tiny_pair
from judge.transductive import refine_label_vectors

LABELS = ["card arrival", "exchange rate", "pin blocked"]
TEXTS = ["where is my card", "what rate do you use", "my pin is blocked", "card not here yet"]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def test_default_fuses_the_packaged_embedder_beside_the_packaged_model():
    clf = Classifier(LABELS)  # nothing loads at construction
    assert clf.embedder == "auto" and clf.embedder_ == "minilm" and clf.fusion_ == DEFAULT_FUSION
    assert Classifier(LABELS, embedder=None).fusion_ is None
    assert Classifier(LABELS, "smollm2").fusion_ == DEFAULT_FUSION


def test_other_models_start_at_weight_zero_and_paths_that_skip_labels_have_none():
    assert initial_fusion("auto", "org/some-7b", 3, warn=False) == Fusion(0.0, DEFAULT_FUSION.temperature)
    assert initial_fusion("auto", "gemma3-270m", 3, warn=False).weight == 0.0  # the second packaged model too
    assert initial_fusion("auto", None, 5000, warn=False) is None  # the certified search at K > decode_above
    assert initial_fusion("auto", None, 10, method="decode", warn=False) is None
    assert initial_fusion("auto", None, 10, method="search", warn=False) is None
    assert initial_fusion("auto", None, 10, shortlist=4, warn=False) is None
    assert initial_fusion("minilm", "org/some-7b", 3) == DEFAULT_FUSION  # named: fused on any model


def test_weight_zero_is_the_lm_alone_bit_for_bit(pair):
    model, tok = pair
    default = Classifier(LABELS, model, tokenizer=tok)
    alone = Classifier(LABELS, model, tokenizer=tok, embedder=None)
    assert default.fusion_.weight == 0.0 and not is_fused(default.fusion_)
    np.testing.assert_array_equal(default.predict_proba(TEXTS), alone.predict_proba(TEXTS))
    np.testing.assert_array_equal(default.decision_function(TEXTS), alone.decision_function(TEXTS))
    assert default.fingerprint() == alone.fingerprint()  # cached LM scores stay keyed as before


def test_fused_scores_differ_from_the_lm_and_change_the_fingerprint(pair):
    model, tok = pair
    fused = Classifier(LABELS, model, tokenizer=tok, embedder="minilm")
    alone = Classifier(LABELS, model, tokenizer=tok, embedder=None)
    assert not np.allclose(fused.predict_proba(TEXTS), alone.predict_proba(TEXTS))
    assert fused.fingerprint() != alone.fingerprint()


def test_changing_the_model_resets_the_fusion(pair):
    clf = Classifier(LABELS)
    assert clf.fusion_.weight == DEFAULT_FUSION.weight
    clf.model = "org/other"
    assert clf.fusion_.weight == 0.0
    clf.embedder = None
    assert clf.fusion_ is None and clf.embedder_ is None


def test_without_the_embed_extra_one_notice_and_the_lm_alone():
    code = textwrap.dedent("""
        import sys, warnings
        sys.modules["sentence_transformers"] = None   # as if the 'embed' extra were not installed
        from judge import Classifier
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            clf = Classifier(["a b", "c d"])
        notes = [str(x.message) for x in w if "embed" in str(x.message)]
        print(len(notes), clf.fusion_ is None, "trie-judge[embed]" in notes[0])
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            Classifier(["a b", "c d"], embedder=None)
        print(len(w))
    """)
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]  # this checkout's judge, not an installed one
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "True", "True", "0"]


def test_save_load_keeps_the_choice_and_what_adapt_learnt(pair, tmp_path):
    model, tok = pair
    for emb in ("auto", None, "minilm"):
        clf = Classifier(LABELS, model, tokenizer=tok, embedder=emb)
        clf.save(tmp_path / str(emb), model_ref="org/tiny")
        back = Classifier.load(tmp_path / str(emb), model=model, tokenizer=tok)
        assert back.embedder == emb and back.fusion_ == clf.fusion_
    clf = Classifier(LABELS, model, tokenizer=tok, embedder="minilm").adapt(TEXTS)
    clf.save(tmp_path / "adapted", model_ref="org/tiny")
    back = Classifier.load(tmp_path / "adapted", model=model, tokenizer=tok)
    np.testing.assert_array_equal(back.transduction_.label_vectors, clf.transduction_.label_vectors)
    np.testing.assert_array_equal(back.predict_proba(TEXTS), clf.predict_proba(TEXTS))
    assert back.fingerprint() == clf.fingerprint() != Classifier(LABELS, model, tokenizer=tok,
                                                                 embedder="minilm").fingerprint()


def test_a_saved_fusion_refuses_to_load_without_the_embedder(pair, tmp_path):
    import json

    model, tok = pair
    Classifier(LABELS, model, tokenizer=tok, embedder="minilm").save(tmp_path, model_ref="org/tiny")
    cfg = json.loads((tmp_path / "classifier.json").read_text())
    cfg["embedder"] = None  # what a machine without the extra resolves "auto" to
    cfg["fusion"] = [0.6, 0.02]
    (tmp_path / "classifier.json").write_text(json.dumps(cfg))
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)  # embedder None: saved fusion ignored, LM alone
    assert back.fusion_ is None


class Clusters:
    """A planted structure: each text is near the centre of its cluster; label texts sit between clusters."""

    spec = None

    def __init__(self):
        rng = np.random.default_rng(0)
        self.centres = np.linalg.qr(rng.normal(size=(16, 3)))[0].T  # 3 orthonormal centres
        self.rng = rng

    def __call__(self, texts):
        out = []
        for t in texts:
            if t.startswith("label "):  # a label's own text: mostly its cluster, partly the next one
                k = int(t.split()[1])
                out.append(0.55 * self.centres[k] + 0.45 * self.centres[(k + 1) % 3])
            else:
                k, j = map(int, t.split("-"))
                noise = np.random.default_rng(1000 * k + j).normal(0, 0.25, 16)
                out.append(self.centres[k] + noise)
        return np.array(out)


def test_transductive_recovers_a_planted_cluster_structure_deterministically(pair):
    model, tok = pair
    enc = Clusters()
    labels = ["label 0", "label 1", "label 2"]
    texts = [f"{k}-{j}" for j in range(40) for k in range(3)]
    gold = np.array([int(t.split("-")[0]) for t in texts])
    clf = Classifier(labels, model, tokenizer=tok, embedder=enc, label_names="raw")
    before = (clf.predict_proba(texts).argmax(1) == gold).mean()
    p1 = clf.predict_proba(texts, transductive=True)
    p2 = clf.predict_proba(texts, transductive=True)
    np.testing.assert_array_equal(p1, p2)  # deterministic
    after = (p1.argmax(1) == gold).mean()
    assert after >= 0.95 and after - before >= 0.3, (before, after)
    assert list(clf.predict(texts, transductive=True)) == [labels[k] for k in p1.argmax(1)]
    assert clf.transduction_ is None  # a transductive call keeps nothing
    clf.adapt(texts)  # ... adapt() keeps it for later calls, one text at a time too
    assert (clf.predict_proba(texts[:30]).argmax(1) == gold[:30]).mean() >= 0.9


def test_transductive_reads_no_label(pair):
    """The only inputs are texts: a label column planted in the texts' frame changes nothing."""
    import pandas as pd

    model, tok = pair
    enc = Clusters()
    labels = ["label 0", "label 1", "label 2"]
    texts = [f"{k}-{j}" for j in range(10) for k in range(3)]
    frame = pd.DataFrame({"text": texts, "label": ["label 0"] * len(texts)})  # a wrong, planted label column
    clf = Classifier(labels, model, tokenizer=tok, embedder=enc, label_names="raw")
    np.testing.assert_array_equal(clf.predict_proba(list(frame["text"]), transductive=True),
                                  clf.predict_proba(texts, transductive=True))
    import inspect

    assert list(inspect.signature(Classifier.adapt).parameters) == ["self", "texts", "rounds", "step"]


def test_transductive_refuses_where_no_embedder_is_fused(pair):
    model, tok = pair
    with pytest.raises(ValueError, match="fusion weight is 0"):
        Classifier(LABELS, model, tokenizer=tok).predict(TEXTS, transductive=True)
    with pytest.raises(ValueError, match="no sentence embedder"):
        Classifier(LABELS, model, tokenizer=tok, embedder=None).adapt(TEXTS)
    with pytest.raises(ValueError, match="at least one text"):
        Classifier(LABELS, model, tokenizer=tok, embedder="minilm").adapt([])


def test_descriptions_reach_both_experts(pair):
    model, tok = pair
    seen = []

    def enc(texts):
        seen.extend(texts)
        return np.ones((len(texts), 4)) + np.arange(len(texts))[:, None]

    desc = {"card arrival": "a card that has not arrived", "exchange rate": "the rate of a currency",
            "pin blocked": "a PIN that no longer works"}
    clf = Classifier(desc, model, tokenizer=tok, embedder=enc, describe="both")
    clf.predict(["hello"])
    assert "card arrival: a card that has not arrived" in seen  # the embedder's side
    assert any("a card that has not arrived" in s for s in clf.surfaces_)  # the LM's side


def test_refine_label_vectors_checks_its_inputs():
    X, L = np.eye(2), np.eye(2)
    with pytest.raises(ValueError, match="must be"):
        refine_label_vectors(np.zeros((3, 2)), X, L, DEFAULT_FUSION)
    with pytest.raises(ValueError, match="step"):
        refine_label_vectors(np.zeros((2, 2)), X, L, DEFAULT_FUSION, step=0)
    with pytest.raises(ValueError, match="rounds"):
        refine_label_vectors(np.zeros((2, 2)), X, L, DEFAULT_FUSION, rounds=-1)
    np.testing.assert_array_equal(refine_label_vectors(np.zeros((2, 2)), X, L, DEFAULT_FUSION, rounds=0), L)


def test_auto_transduces_large_zero_shot_calls_only(pair, monkeypatch):
    import judge.transductive as tr

    model, tok = pair
    enc = Clusters()
    labels = ["label 0", "label 1", "label 2"]
    texts = [f"{k}-{j}" for j in range(20) for k in range(3)]
    clf = Classifier(labels, model, tokenizer=tok, embedder=enc, label_names="raw")
    on, off = clf.predict_proba(texts, transductive=True), clf.predict_proba(texts, transductive=False)
    assert not np.array_equal(on, off)
    monkeypatch.setattr(tr, "AUTO_MIN_TEXTS", len(texts))
    np.testing.assert_array_equal(clf.predict_proba(texts), on)  # a large call: moved
    np.testing.assert_allclose(clf.predict_proba(texts[:-1]), off[:-1], atol=1e-6)  # below: not (float32 batching)
    assert list(clf.predict(texts)) == [labels[k] for k in on.argmax(1)]
    clf.batch_invariant = True  # one text's answer must not depend on the others
    np.testing.assert_allclose(clf.predict_proba(texts), off, atol=1e-6)
    with pytest.raises(ValueError, match="transductive must be"):
        clf.predict(texts, transductive="yes")


CAL_TEXTS = ["where is my card", "card not arrived yet", "my new card is late", "has my card shipped",
             "what exchange rate", "the rate for euros", "currency conversion rate", "dollar rate today",
             "my pin is blocked", "pin locked out", "unblock my pin", "wrong pin too many times"]
CAL_Y = ["card arrival"] * 4 + ["exchange rate"] * 4 + ["pin blocked"] * 4


def test_calibrate_fits_the_weight_for_another_model_and_predict_reads_what_it_fitted(pair):
    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok)  # another model: weight 0 until calibrate
    assert clf.fusion_.weight == 0.0
    clf.calibrate(CAL_TEXTS, CAL_Y)
    assert clf.fusion_.weight > 0  # the packaged embedder reads these texts, the random LM does not
    s = clf.decision_function(TEXTS)
    np.testing.assert_allclose(clf.predict_proba(TEXTS), clf.calibration_.transform(s))
    from judge.experts import experts

    np.testing.assert_allclose(s, clf.fusion_.combine(*experts(clf, TEXTS)))


def test_a_calibrated_weight_of_zero_scores_the_lm_alone(pair, monkeypatch):
    import judge.fusion as fusion

    model, tok = pair
    monkeypatch.setattr(fusion, "fit_fusion", lambda *a, **k: Fusion(0.0, DEFAULT_FUSION.temperature))
    clf = Classifier(LABELS, model, tokenizer=tok, embedder="minilm").calibrate(CAL_TEXTS, CAL_Y, bias="cv")
    alone = Classifier(LABELS, model, tokenizer=tok, embedder=None)
    assert clf.fusion_.weight == 0.0 and not is_fused(clf.fusion_)
    np.testing.assert_array_equal(clf.decision_function(TEXTS), alone.decision_function(TEXTS))
    # the calibration was fitted on the very scores predict reads: the LM's raw scores
    alone.calibrate(CAL_TEXTS, CAL_Y, bias="cv")
    np.testing.assert_allclose(clf.predict_proba(TEXTS), alone.predict_proba(TEXTS), atol=1e-9)


def test_fit_head_offsets_are_the_lm_scores_beside_an_embedder(pair):
    model, tok = pair
    fused = Classifier(LABELS, model, tokenizer=tok, embedder="minilm")
    alone = Classifier(LABELS, model, tokenizer=tok, embedder=None)
    np.testing.assert_array_equal(offset_scores(fused, TEXTS), offset_scores(alone, TEXTS))
    assert not np.allclose(offset_scores(alone, TEXTS), alone.decision_function(TEXTS))  # the prior divided out
    raw = Classifier(LABELS, model, tokenizer=tok, embedder=None, prior=None)
    np.testing.assert_array_equal(offset_scores(raw, TEXTS), raw.decision_function(TEXTS))


def test_adapt_keeps_its_settings_and_the_vectors_they_give(pair):
    from judge.experts import expert_inputs

    model, tok = pair
    clf = Classifier(["label 0", "label 1", "label 2"], model, tokenizer=tok, embedder=Clusters(), label_names="raw")
    texts = [f"{k}-{j}" for j in range(6) for k in range(3)]
    tr = clf.adapt(texts, rounds=2, step=1.0).transduction_
    assert (tr.rounds, tr.step, tr.n_texts) == (2, 1.0, len(texts))
    lm, X, L = expert_inputs(clf, texts, adapted=False)
    np.testing.assert_array_equal(tr.label_vectors, refine_label_vectors(lm, X, L, clf.fusion_, rounds=2, step=1.0))
    assert not np.allclose(tr.label_vectors, refine_label_vectors(lm, X, L, clf.fusion_, rounds=2))
    with pytest.raises(ValueError, match=r"embedder=None, a path"):
        Classifier(LABELS, model, tokenizer=tok, embedder=None).predict(TEXTS, transductive=True)


def test_a_fused_calibration_is_fitted_on_the_fused_scores_and_their_content_free_prior(pair):
    from judge.calibration import CONTENT_FREE, contextual_bias
    from judge.experts import experts

    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok)  # another model: weight 0 until calibrate refits it
    assert clf.fusion_.weight == 0
    clf.calibrate(CAL_TEXTS, CAL_Y, bias="contextual")
    assert clf.fusion_.weight > 0
    # the calibration texts' probabilities are those predict gives them: fitted on the fused scores
    np.testing.assert_allclose(clf.calibration_.proba, clf.predict_proba(CAL_TEXTS), atol=1e-9)
    # the contextual bias is the refitted fusion's on content-free inputs, not the LM's it started from
    fused_cf = contextual_bias(clf.fusion_.combine(*experts(clf, list(CONTENT_FREE))))
    lm_cf = contextual_bias(Classifier(LABELS, model, tokenizer=tok, embedder=None).content_free_scores(list(CONTENT_FREE)))
    bias = clf.calibration_.bias
    assert np.allclose(bias - bias.mean(), fused_cf - fused_cf.mean(), atol=1e-6)
    assert not np.allclose(bias - bias.mean(), lm_cf - lm_cf.mean(), atol=1e-3)


def test_the_head_offsets_divide_the_prior_out_with_two_labels_too(pair):
    model, tok = pair
    clf = Classifier(["yes", "no"], model, tokenizer=tok, embedder=None)
    assert not np.allclose(offset_scores(clf, TEXTS), clf.decision_function(TEXTS))


# the certified search proves a fused answer under this per-text bias (judge.experts.search_correction; the search
# itself: tests/engine/test_search.py)
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), w=st.sampled_from([0.0, 0.3, 0.6, 0.9]), tau=st.sampled_from([0.02, 0.1, 1.0]),
       calibrated=st.booleans())
def test_the_fusions_argmax_bias_gives_the_fused_argmax(seed, w, tau, calibrated):
    rng = np.random.default_rng(seed)
    n, k = 6, 9
    logp = np.log(rng.dirichlet(np.ones(k), n))
    offset, sim = rng.normal(0, 1, k), rng.uniform(-0.2, 0.8, (n, k))
    bias = rng.normal(0, 2, k) if calibrated else None
    f = Fusion(w, tau)
    fused = f.combine(logp - offset, sim) - (0.0 if bias is None else bias)
    np.testing.assert_array_equal((logp - f.argmax_bias(offset, sim, bias)).argmax(1), fused.argmax(1))
    with pytest.raises(ValueError, match="embedder alone"):
        Fusion(1.0, tau).argmax_bias(offset, sim)
