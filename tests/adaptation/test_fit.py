"""Classifier.fit: zero examples = zero-shot, a planted signal is learned, save/load bit for bit,
adapters keep exactness against the reference, bad input fails before any training, an
interrupted fit leaves the classifier as it was. Tiny models only (CI)."""

from __future__ import annotations

import numpy as np
import pytest

from judge import Classifier
from judge.adaptation import LinearHead, answer_states, fit_head
from judge.testing import classifier_reference, tiny_pair

LABELS = ["card arrival", "exchange rate", "pin blocked"]
TEXTS = ["where is my card", "rate for euros", "my pin is locked", "card still not here",
         "dollar to pound rate", "pin blocked again", "has my card shipped", "exchange fee today",
         "cannot use my pin"]
Y = [LABELS[i % 3] for i in range(len(TEXTS))]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def clf_of(pair, **kw):
    model, tok = pair
    return Classifier(LABELS, model, tokenizer=tok, method="exact", **kw)


def test_head_at_its_start_is_zero_shot_bit_for_bit(pair):
    """At a=1, b=0, W=0 the head gives what the zero-shot classifier gives (its label-free prior included)."""
    clf = clf_of(pair)
    expected = clf.predict_proba(TEXTS)
    zero_pred = clf.predict(TEXTS)
    d = answer_states(clf, TEXTS[:1]).shape[1]
    start = LinearHead(np.zeros((3, d)), np.zeros(3), 1.0, np.zeros(d), np.ones(d), 1.0)  # a=1, b=0, W=0
    object.__setattr__(clf, "adaptation_", start)
    got = clf.predict_proba(TEXTS)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert list(clf.predict(TEXTS)) == list(zero_pred)
    raw = clf_of(pair, prior=None)  # without the prior: the raw scores' softmax
    zero = raw.decision_function(TEXTS)
    object.__setattr__(raw, "adaptation_", start)
    np.testing.assert_allclose(raw.predict_proba(TEXTS), np.exp(zero - np.log(np.exp(zero).sum(1, keepdims=True))),
                               rtol=0, atol=1e-12)


def test_fit_with_overwhelming_penalty_stays_at_zero_shot(pair):
    clf = clf_of(pair)
    zero = clf.predict(TEXTS)
    clf.fit(TEXTS, Y, features="hidden+scores", l2=1e12)  # the offset: 0 examples' worth = zero-shot
    assert clf.adaptation_.kind == "head" and np.abs(clf.adaptation_.weights).max() < 1e-6
    assert list(clf.predict(TEXTS)) == list(zero)


def test_auto_features_use_the_offset_for_few_texts_per_class_only(pair, monkeypatch):
    """features="auto": the zero-shot offset (exact scores of the training texts) up to
    AUTO_OFFSET_PER_CLASS texts per class, the states alone past it (no training text scored)."""
    from judge.adaptation import fit as fit_module
    from judge.engine import Engine

    clf = clf_of(pair).fit(TEXTS, Y, l2=1.0, embedder=False)  # 9 texts, 3 labels: 3 per class <= 8
    assert clf.adaptation_.report["features"] in ("hidden+scores", "hidden+tfidf+scores")
    assert clf.adaptation_.offset_scale is not None
    monkeypatch.setattr(fit_module, "AUTO_OFFSET_PER_CLASS", 2)  # now 3 per class is past it
    scored = []
    real = Engine.score_items
    monkeypatch.setattr(Engine, "score_items", lambda *a, **k: scored.append(1) or real(*a, **k))
    clf = clf_of(pair).fit(TEXTS, Y, l2=1.0, embedder=False)
    assert clf.adaptation_.report["features"] in ("hidden", "hidden+tfidf") and clf.adaptation_.offset_scale is None
    assert not scored  # no exact scoring of the training texts


def test_planted_signal_is_learned():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 12)
    H = rng.normal(size=(48, 16))
    H[:, :4] += 3.0 * np.eye(4)[y]
    wrong = np.log(np.full((48, 4), 0.1))
    wrong[:, 0] = np.log(0.7)  # the zero-shot prior insists on class 0
    head = fit_head(H, y, 4, scores=wrong, cv=2, grid=(0.1, 10.0, 1000.0))
    Ht = rng.normal(size=(40, 16))
    yt = np.arange(40) % 4
    Ht[:, :4] += 3.0 * np.eye(4)[yt]
    acc = (head.log_proba(np.repeat(wrong[:1], 40, 0), Ht).argmax(1) == yt).mean()
    assert acc >= 0.9, acc
    assert head.report["cv"]["l2"] in head.report["cv"]["grid"]


def test_head_log_proba_is_the_documented_formula():
    """log_softmax(a * (s - max s) + b + ((h - mean) / scale) @ W.T), with one row worked by hand."""
    W = np.array([[1.0, -2.0], [0.5, 0.0], [0.0, 3.0]])
    b = np.array([0.1, -0.2, 0.0])
    mean, scale = np.array([1.0, -1.0]), np.array([2.0, 0.5])
    s = np.log([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]])
    h = np.array([[3.0, 0.0], [-1.0, -2.0]])
    head = LinearHead(W, b, 0.7, mean, scale, 1.0)
    got = head.log_proba(s, h)
    # row 0 by hand: z = ((3 - 1) / 2, (0 + 1) / 0.5) = (1, 2); W z = (-3, 0.5, 6)
    logits0 = 0.7 * (s[0] - s[0].max()) + b + np.array([-3.0, 0.5, 6.0])
    np.testing.assert_allclose(got[0], logits0 - np.log(np.exp(logits0).sum()), rtol=0, atol=1e-12)
    z = (h - mean) / scale
    logits = 0.7 * (s - s.max(1, keepdims=True)) + b + z @ W.T
    np.testing.assert_allclose(got, logits - np.log(np.exp(logits).sum(1, keepdims=True)), rtol=0, atol=1e-12)
    # without the zero-shot scores (features="hidden"): the states alone; a label left out (-inf) stays impossible
    plain = LinearHead(W, b, None, mean, scale, 1.0)
    np.testing.assert_allclose(plain.log_proba(None, h), (z @ W.T + b) - np.log(np.exp(z @ W.T + b).sum(1))[:, None],
                               rtol=0, atol=1e-12)
    s_out = s.copy()
    s_out[:, 1] = -np.inf
    p = np.exp(head.log_proba(s_out, h))
    assert (p[:, 1] == 0).all() and np.allclose(p.sum(1), 1)
    zero = LinearHead(W, b, 0.0, mean, scale, 1.0)  # a = 0: the scores play no part
    np.testing.assert_allclose(zero.log_proba(s, h), plain.log_proba(None, h), rtol=0, atol=1e-12)


def test_fitted_head_does_not_depend_on_the_units_of_the_states():
    """The states are standardised on the training texts, so fitting on states in other units (a per-feature
    scale and shift) gives the same probabilities on test states in those units."""
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(3), 10)
    H = rng.normal(size=(30, 6))
    H[:, :3] += 1.5 * np.eye(3)[y]
    S = np.log(rng.dirichlet(np.ones(3), 30))
    Ht, St = rng.normal(size=(12, 6)), np.log(rng.dirichlet(np.ones(3), 12))
    c, m = rng.uniform(0.5, 20.0, 6), rng.normal(0, 1000.0, 6)
    for scores, test_scores in ((S, St), (None, None)):
        a = fit_head(H, y, 3, scores=scores, l2=1.0)
        b = fit_head(H * c + m, y, 3, scores=scores, l2=1.0)
        np.testing.assert_allclose(b.scale, a.scale * c, rtol=1e-9)
        np.testing.assert_allclose(a.log_proba(test_scores, Ht), b.log_proba(test_scores, Ht * c + m), atol=1e-4)


def test_fit_keeps_classes_and_works_with_calibrate_and_cascade(pair):
    from judge import Cascade

    clf = clf_of(pair)
    assert clf.fit(TEXTS, Y, l2=1.0) is clf
    assert list(clf.classes_) == LABELS
    p = clf.predict_proba(TEXTS[:2])
    assert p.shape == (2, 3) and np.allclose(p.sum(1), 1)
    clf.calibrate(TEXTS, Y, coverage=0.5)
    assert clf.is_calibrated and clf.adaptation_ is not None
    out = Cascade(clf, lambda texts: np.array([LABELS[0]] * len(texts), dtype=object)).predict(TEXTS[:3])
    assert len(out) == 3


def test_fit_drops_an_earlier_calibration_with_a_warning(pair):
    clf = clf_of(pair).calibrate(TEXTS, Y)
    with pytest.warns(UserWarning, match="fit\\(\\) drops the calibration"):
        clf.fit(TEXTS, Y, l2=1.0)
    assert clf.calibration_ is None


@pytest.mark.parametrize("features", ["hidden+scores", "hidden"])
def test_fit_save_load_round_trips_bit_for_bit(pair, tmp_path, features):
    model, tok = pair
    clf = clf_of(pair).fit(TEXTS, Y, features=features, l2=1.0).calibrate(TEXTS, Y)
    before = clf.predict_proba(TEXTS)
    clf.save(tmp_path, model_ref="tiny")
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)
    assert back.adaptation_.kind == "head"
    for k, v in clf.adaptation_.arrays().items():
        assert np.array_equal(v, back.adaptation_.arrays()[k])
    assert np.array_equal(before, back.predict_proba(TEXTS))
    assert back.fingerprint() == clf.fingerprint() != clf_of(pair).fingerprint()


def test_demos_write_examples_into_the_prompt_and_round_trip(pair, tmp_path):
    model, tok = pair
    clf = clf_of(pair).fit(TEXTS, Y, method="demos", k=2)
    s = clf.decision_function(["card?"])
    assert s.shape == (1, 3) and np.isfinite(s).all()
    # the same scores as the zero-shot classifier given, as its text, the two training texts nearest to
    # "card?" (cosine of the answer-slot states), answered in the prompt's own words, the nearest last
    zero = clf_of(pair)
    train, query = answer_states(zero, TEXTS), answer_states(zero, ["card?"])[0]
    cos = train @ query / (np.linalg.norm(train, axis=1) * np.linalg.norm(query))
    far, near = np.argsort(-cos, kind="stable")[:2][::-1]
    prompt = (f"{TEXTS[far]}\nLabel: {Y[far]}\n\nText: {TEXTS[near]}\nLabel: {Y[near]}\n\nText: card?")
    np.testing.assert_allclose(s, zero.decision_function([prompt]), rtol=0, atol=1e-6)
    assert np.abs(s - zero.decision_function(["card?"])).max() > 1e-3  # the demonstrations change the scores
    clf.save(tmp_path, model_ref="tiny")
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)
    assert np.array_equal(s, back.decision_function(["card?"]))


def test_lora_adapters_keep_exactness_and_round_trip(pair, tmp_path):
    from judge.adaptation import LoraAdapter

    model, tok = pair
    rng = np.random.default_rng(0)
    mats = {}
    for layer in range(2):
        for proj, out in (("q_proj", 64), ("v_proj", 32)):
            name = f"model.layers.{layer}.self_attn.{proj}"
            mats[name + ".lora_A"] = rng.normal(0, 0.3, (2, 64)).astype(np.float32)
            mats[name + ".lora_B"] = rng.normal(0, 0.3, (out, 2)).astype(np.float32)
    clf = clf_of(pair)
    zero = clf.decision_function(TEXTS[:3])
    object.__setattr__(clf, "adaptation_", LoraAdapter(2, 4.0, ("q_proj", "v_proj"), mats))
    inner = clf.adaptation_.classifier(clf)
    got = clf.decision_function(TEXTS[:3])
    assert inner.model is not model and inner.engine_ is not clf.engine_
    assert np.abs(got - zero).max() > 1e-3  # the adapters change the scores
    for i, t in enumerate(TEXTS[:3]):  # the engine on the adapted model vs the independent brute force
        np.testing.assert_allclose(got[i], classifier_reference(inner, t), atol=2e-4)
    clf.save(tmp_path, model_ref="tiny")
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)
    assert np.array_equal(got, back.decision_function(TEXTS[:3]))


def test_lora_training_leaves_the_callers_model_alone(pair):
    pytest.importorskip("peft")
    model, _ = pair
    w0 = model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    clf = clf_of(pair).fit(TEXTS, Y, method="lora", rank=2, epochs=1, lr=5e-2, batch_size=4)
    r = clf.adaptation_.report
    assert r["epochs_run"] == 1 and r["n_train"] + r["n_heldout"] == len(TEXTS) and len(r["heldout_nll"]) == 2
    assert r["epoch_kept"] == int(np.argmin(r["heldout_nll"]))
    assert np.array_equal(w0, model.model.layers[0].self_attn.q_proj.weight.detach())
    assert clf.predict_proba(TEXTS[:2]).shape == (2, 3)


@pytest.mark.parametrize("texts, y, opts, err, match", [
    (TEXTS[:2], ["card arrival", "nope"], {}, ValueError, "not labels of this classifier"),
    (TEXTS[:2], ["card arrival"] * 2, {}, ValueError, "at least 2 classes"),
    ([], [], {}, ValueError, "got none"),
    (TEXTS[:3], Y[:2], {}, ValueError, "differ in length"),
    (TEXTS[:2], Y[:2], {"features": "hidden+scores", "scores": np.array([[0.0, np.nan, 0.0], [0.0, 0.0, 0.0]])},
     ValueError, "NaN or infinite"),
    (TEXTS[:2], Y[:2], {"features": "hidden", "scores": np.zeros((2, 3))}, ValueError, "does not use them"),
    (TEXTS[:2], Y[:2], {"states": np.full((2, 64), np.inf)}, ValueError, "NaN or infinite"),
    (TEXTS[:2], Y[:2], {"method": "forest"}, ValueError, "Unknown fit method"),
    (TEXTS[:2], Y[:2], {"features": "words"}, ValueError, "Unknown or repeated features"),
    (TEXTS[:2], Y[:2], {"rank": 4}, TypeError, "unknown option"),
    (TEXTS[:2], Y[:2], {"l2": -1.0}, ValueError, "l2 must be"),
    (TEXTS[:4], Y[:4], {"method": "lora", "validation_fraction": 1.5}, ValueError, "validation_fraction"),
    (TEXTS[:2], Y[:2], {"method": "lora"}, ValueError, "at least 4 labelled texts"),
    (TEXTS[:4], Y[:4], {"method": "lora", "target_modules": ("nope",)}, ValueError, "not modules of this model"),
    (["ok", " "], Y[:2], {}, ValueError, "empty or only whitespace"),
])
def test_bad_input_fails_before_any_training(pair, monkeypatch, texts, y, opts, err, match):
    import judge.adaptation.features as features
    import judge.adaptation.head as head
    from judge.engine import Engine

    clf = clf_of(pair)
    work = []  # any scoring of the texts, any training step
    monkeypatch.setattr(head, "fit_head", lambda *a, **k: work.append("fit_head"))
    monkeypatch.setattr(features, "answer_states", lambda *a, **k: work.append("states"))
    monkeypatch.setattr(Engine, "logprob_tensors", lambda *a, **k: work.append("lora step"))
    monkeypatch.setattr(Engine, "score_items", lambda *a, **k: work.append("scores"))
    with pytest.raises(err, match=match):
        clf.fit(texts, y, **opts)
    assert not work and clf.adaptation_ is None


@pytest.mark.parametrize("method, opts", [("head", {"cv": 2}), ("lora", {"rank": 2, "epochs": 1, "batch_size": 3})])
def test_interrupted_fit_leaves_the_classifier_as_it_was(pair, method, opts):
    if method == "lora":
        pytest.importorskip("peft")
    model, _ = pair
    clf = clf_of(pair).fit(TEXTS, Y, l2=1.0)  # an earlier head, and a calibration on top
    clf.calibrate(TEXTS, Y)
    before, head0, cal0 = clf.decision_function(TEXTS), clf.adaptation_, clf.calibration_
    w0 = model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    calls = []

    def stop(info):
        calls.append(info)
        if len(calls) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        clf.fit(TEXTS, Y, method=method, callback=stop, **opts)
    assert clf.adaptation_ is head0 and clf.calibration_ is cal0
    assert np.array_equal(before, clf.decision_function(TEXTS))
    assert np.array_equal(w0, model.model.layers[0].self_attn.q_proj.weight.detach())


def test_changing_the_labels_after_fit_drops_the_head(pair):
    clf = clf_of(pair).fit(TEXTS, Y, l2=1.0)
    with pytest.warns(UserWarning, match="after fit\\(\\) drops the head"):
        clf.labels = LABELS[::-1]
    assert clf.adaptation_ is None


def test_load_refuses_a_head_for_another_label_set(pair, tmp_path):
    import json

    model, tok = pair
    clf_of(pair).fit(TEXTS, Y, l2=1.0).save(tmp_path, model_ref="tiny")
    cfg = json.loads((tmp_path / "classifier.json").read_text())
    cfg["adaptation"]["kind"] = "forest"
    (tmp_path / "classifier.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="valid kinds are"):
        Classifier.load(tmp_path, model=model, tokenizer=tok)


def test_evaluate_fits_on_train_then_calibrates_on_validation(tiny_dir, datasets_dir, tmp_path, capsys):
    import json

    from judge.cli import main

    out = tmp_path / "ev"
    args = ["evaluate", "trec", "--model", tiny_dir, "--data-dir", str(datasets_dir), "--limit", "12",
            "--fit-on", "train", "--per-class", "1", "--calibrate-on", "validation", "--calibration-limit", "12",
            "--bias-l2", "cv", "--out", str(out)]
    assert main(args) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["fit"]["n"] == 6 and m["fit"]["method"] == "head" and m["n"] == 12
    assert "fit" in capsys.readouterr().out
    back = Classifier.load(out / "classifier")
    # the reported accuracy is that of the predictions written, which the saved classifier reproduces
    import pandas as pd

    rows = pd.read_csv(out / "predictions.csv", keep_default_na=False)
    assert len(rows) == 12
    assert m["calibrated"]["accuracy"] == m["accuracy"] == pytest.approx((rows.prediction == rows.label).mean())
    assert list(back.predict(list(rows.text))) == list(rows.prediction)
    cal = back.calibration_  # after a head, bias="auto" is calibrate's "cv": batch+fit at a chosen L2, or none
    assert back.adaptation_.kind == "head" and cal.bias_method in ("cv: none", "cv: batch+fit")
    assert cal.report["bias_l2"] in ((None,) if cal.bias_method == "cv: none" else (0.1, 0.3, 1.0, 3.0, 10.0,
                                                                                    30.0, 100.0))
    with pytest.raises(ValueError, match="three different splits"):
        main(args[:-6] + ["--calibrate-on", "train", "--out", str(out)])


def test_answer_states_use_the_classifiers_batch_settings(pair, monkeypatch):
    import judge.engine.engine as engine  # the scorer's hidden_states runs the engine's states_of_prompts

    seen = []
    real = engine.states_of_prompts
    monkeypatch.setattr(engine, "states_of_prompts", lambda *a, **k: seen.append(k["batch_size"]) or real(*a, **k))
    batched = answer_states(clf_of(pair, batch_size=3), TEXTS)
    alone = answer_states(clf_of(pair, batch_size=3, batch_invariant=True), TEXTS)
    assert seen == [3, 1]
    np.testing.assert_allclose(batched, alone, atol=1e-4)
    one_by_one = np.concatenate([answer_states(clf_of(pair, batch_invariant=True), [t]) for t in TEXTS])
    assert np.array_equal(alone, one_by_one)  # one text per pass: the batch's other texts change nothing


@pytest.mark.parametrize("method", ["head", "demos", "lora"])
@pytest.mark.parametrize("kw, match", [({"think": True, "think_tokens": 4}, "think=True"),
                                       ({"rotations": 2}, "rotations=2 averages")])
def test_fit_refuses_prompts_it_does_not_learn_from(pair, monkeypatch, method, kw, match):
    from judge.engine import Engine
    from judge.prompts import PromptTemplate

    model, tok = pair
    clf = Classifier(LABELS, model, tokenizer=tok, method="exact", prompt=PromptTemplate(chat=False), **kw)
    work = []
    monkeypatch.setattr(Engine, "score_items", lambda *a, **k: work.append("scores"))
    monkeypatch.setattr(Engine, "logprob_tensors", lambda *a, **k: work.append("lora step"))
    with pytest.raises(ValueError, match=match):
        clf.fit(TEXTS, Y, method=method)
    assert not work and clf.adaptation_ is None


def test_fingerprint_ignores_the_fit_report_but_not_the_weights(pair):
    from dataclasses import replace

    clf = clf_of(pair).fit(TEXTS, Y, l2=1.0)
    head = clf.adaptation_
    before = clf.fingerprint()
    object.__setattr__(clf, "adaptation_", replace(head, report=dict(head.report, seconds=head.report["seconds"] + 9)))
    assert clf.fingerprint() == before  # a refit that learned the same reuses checkpoints
    object.__setattr__(clf, "adaptation_", replace(head, bias=head.bias + 1e-3))
    assert clf.fingerprint() != before


def test_lora_merged_copy_follows_settings_changed_after_fit(pair):
    from judge.adaptation import LoraAdapter

    rng = np.random.default_rng(1)
    mats = {"model.layers.0.self_attn.q_proj.lora_A": rng.normal(0, 0.3, (2, 64)).astype(np.float32),
            "model.layers.0.self_attn.q_proj.lora_B": rng.normal(0, 0.3, (64, 2)).astype(np.float32)}
    clf = clf_of(pair)
    ad = LoraAdapter(2, 4.0, ("q_proj",), mats)
    object.__setattr__(clf, "adaptation_", ad)
    first = ad.classifier(clf)
    scores = clf.decision_function(TEXTS[:3])
    assert ad.classifier(clf) is first  # cached while nothing changes
    clf.device = "cpu"  # kept by fit (the adapters stay); the merged copy must follow it
    clf.batch_invariant = True
    again = ad.classifier(clf)
    assert clf.adaptation_ is ad and again is not first
    assert again.device == "cpu" and again.batch_invariant and ad.classifier(clf) is again
    np.testing.assert_allclose(clf.decision_function(TEXTS[:3]), scores, atol=1e-5)


def test_load_names_what_fit_learned_when_its_labels_were_edited(pair, tmp_path):
    import json

    model, tok = pair
    clf_of(pair).fit(TEXTS, Y, l2=1.0).save(tmp_path, model_ref="tiny")
    cfg = json.loads((tmp_path / "classifier.json").read_text())
    cfg["labels"] = cfg["labels"][::-1]
    (tmp_path / "classifier.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match=r"what fit\(\) learned .* was fitted for the labels") as err:
        Classifier.load(tmp_path, model=model, tokenizer=tok)
    assert "calibrat" not in str(err.value)


def test_calibrate_cv_chooses_the_bias_or_none_and_auto_after_fit_follows_the_table(pair, monkeypatch):
    """``bias="cv"`` fits what choose_bias_l2(with_none=True) picks on the same scores, and names it;
    ``bias="auto"`` after fit(method="head") resolves through AUTO_BIAS_AFTER_FIT, before fit through AUTO_BIAS."""
    from judge.calibration import state
    from judge.calibration.state import Calibration, choose_bias_l2, prior_bias

    clf = clf_of(pair).fit(TEXTS, Y, l2=1.0)
    s = clf.decision_function(TEXTS)
    yi = np.array([clf.labels.index(v) for v in Y])
    pick = choose_bias_l2(s, yi, "batch", with_none=True)["l2"]
    clf.calibrate(TEXTS, Y, bias="cv")
    if pick is None:
        want = Calibration.fit(tuple(clf.labels), s, yi)
        assert clf.calibration_.bias_method == "cv: none" and clf.bias_ is None
    else:
        want = Calibration.fit(tuple(clf.labels), s, yi, bias=prior_bias("batch", s), fit_bias=pick)
        assert clf.calibration_.bias_method == "cv: batch+fit"
    np.testing.assert_allclose(clf.predict_proba(TEXTS), want.transform(s), rtol=1e-9, atol=1e-12)
    monkeypatch.setattr(state, "AUTO_BIAS_AFTER_FIT", {"head": None})
    assert clf.calibrate(TEXTS, Y).calibration_.bias_method is None and clf.bias_ is None
    monkeypatch.setattr(state, "AUTO_BIAS_AFTER_FIT", {"lora": None})  # another kind: the zero-shot default
    assert clf.calibrate(TEXTS, Y).calibration_.bias_method == state.AUTO_BIAS


def test_head_standardisation_statistics_by_hand():
    """mean and scale are the training states' mean and standard deviation, floored at 1e-3 of the mean
    standard deviation (a constant feature), whatever the units (here a few millionths)."""
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(2), 6)
    H = rng.normal(size=(12, 4)) * 1e-6
    H[:, 0] += 1e-6 * y
    H[:, 3] = 5.0  # constant
    head = fit_head(H, y, 2, l2=1.0)
    sd = H.std(0)
    np.testing.assert_allclose(head.mean, H.mean(0), rtol=1e-12)
    np.testing.assert_allclose(head.scale[:3], sd[:3], rtol=1e-12)
    assert head.scale[3] == pytest.approx(1e-3 * sd.mean(), rel=1e-12)
    assert (head.log_proba(None, H).argmax(1) == y).mean() > 0.8  # the tiny units are learned from


def test_head_cross_validation_is_seeded_and_reports_every_fit():
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(3), 8)
    H = rng.normal(size=(24, 5))
    H[:, :3] += np.eye(3)[y]
    a, b = (fit_head(H, y, 3, cv=3, grid=(0.1, 10.0), random_state=1).report["cv"] for _ in range(2))
    assert a == b  # the same folds for the same random_state
    c = fit_head(H, y, 3, cv=3, grid=(0.1, 10.0), random_state=2).report["cv"]
    assert c["nll"] != a["nll"]  # other folds for another
    seen = []
    fit_head(H, y, 3, cv=3, grid=(0.1, 10.0), callback=lambda info: seen.append(info["l2"]))
    assert {0.1, 10.0} <= set(seen)  # the callback hears the cross-validation's fits, not only the final one


def test_head_without_scores_never_computes_them(pair):
    clf = clf_of(pair)
    d = answer_states(clf, TEXTS[:1]).shape[1]
    head = LinearHead(np.zeros((3, d)), np.array([0.0, 1.0, 0.0]), None, np.zeros(d), np.ones(d), 1.0)
    lp = head.decision_function(clf, TEXTS[:2], lambda texts: pytest.fail("zero-shot scores computed"))
    np.testing.assert_allclose(np.exp(lp), np.tile(np.exp([0.0, 1.0, 0.0]) / np.exp([0.0, 1.0, 0.0]).sum(), (2, 1)))


def test_head_checks_its_arrays_with_clear_messages():
    from judge.adaptation.head import check_features

    with pytest.raises(ValueError, match=r"^scores has shape \(2, 4\), expected \(2, 3\): one row per text\.$"):
        check_features("scores", np.zeros((2, 4)), 2, 3)
    with pytest.raises(ValueError, match=r"^states has shape \(3, 4\), expected \(2, d\): one row per text\.$"):
        check_features("states", np.zeros((3, 4)), 2)
    with pytest.raises(ValueError, match=r"^head arrays hold NaN or infinite values; fit again\.$"):
        LinearHead(np.full((2, 1), np.nan), np.zeros(2), 1.0, np.zeros(1), np.ones(1), 1.0)
    with pytest.raises(ValueError, match=r"^head scale must be > 0 everywhere; fit again\.$"):
        LinearHead(np.zeros((2, 1)), np.zeros(2), 1.0, np.zeros(1), np.zeros(1), 1.0)
    with pytest.raises(ValueError, match=r"^head offset_scale must be a finite number >= 0 or None, got -1\.0\.$"):
        LinearHead(np.zeros((2, 1)), np.zeros(2), -1.0, np.zeros(1), np.ones(1), 1.0)


def test_head_reaches_the_optimum_an_independent_solver_finds():
    """The head's weights are the minimiser of its documented objective (summed NLL + l2/2 (|b|^2 + |W|^2) on the
    standardised features), as scipy's L-BFGS-B finds it at a tight tolerance: an optimiser stopped early fails."""
    from scipy.optimize import minimize
    from scipy.special import log_softmax

    rng = np.random.default_rng(3)
    K, n, d = 3, 60, 5
    y = np.repeat(np.arange(K), n // K)
    X = rng.normal(size=(n, d)) + 1.5 * np.eye(K, d)[y]
    head = fit_head(X, y, K, l2=2.0)
    Z = (X - head.mean) / head.scale

    def f(theta):
        b, W = theta[:K], theta[K:].reshape(K, d)
        lp = log_softmax(Z @ W.T + b, axis=1)
        p = np.exp(lp)
        g = p - np.eye(K)[y]
        val = -lp[np.arange(n), y].sum() + 1.0 * (b @ b + (W * W).sum())
        return val, np.concatenate([g.sum(0) + 2.0 * b, (g.T @ Z + 2.0 * W).ravel()])

    ref = minimize(f, np.zeros(K + K * d), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15,
                                                                                  "maxiter": 10_000})
    np.testing.assert_allclose(head.bias, ref.x[:K], atol=1e-4)
    np.testing.assert_allclose(head.weights, ref.x[K:].reshape(K, d), atol=1e-4)


def test_cv_folds_and_each_candidates_choice_are_the_documented_ones():
    """choose_l2's folds: 5 by default, stratified down to the smallest class (2 examples: 2 folds); choose_features
    gives each candidate exactly choose_l2's table on its own offsets and grid."""
    from judge.adaptation import choose_features, choose_l2

    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(3), 10)
    X = rng.normal(size=(30, 4)) + np.eye(3, 4)[y]
    S = np.log(np.full((30, 3), 0.2) + 0.6 * np.eye(3)[y])  # an informative zero-shot offset
    assert choose_l2(X, y, 3)["folds"] == 5
    assert choose_l2(X[::5], y[::5], 3)["folds"] == 2  # two examples a class: two stratified folds
    grid = (3.0, 0.3)
    got = choose_features({"plain": (X, None, None), "offset": (X, S, None)}, y, 3, grid=grid, cv=3)
    for name, s in (("plain", None), ("offset", S)):
        want = choose_l2(X, y, 3, scores=s, grid=grid, cv=3)
        assert got["tables"][name]["grid"] == want["grid"] == [3.0, 0.3]
        np.testing.assert_allclose(got["tables"][name]["nll"], want["nll"], rtol=0, atol=1e-12)
    assert got["nll"]["offset"] < got["nll"]["plain"]  # the offset carries the signal


def test_a_head_missing_what_its_features_need_is_refused_with_what_is_missing():
    W, b, m, s = np.zeros((2, 3)), np.zeros(2), np.zeros(3), np.ones(3)
    with pytest.raises(ValueError, match=r"reads a sentence embedder \(embed block or similarity\) but names none"):
        LinearHead(W, b, None, m, s, 1.0, blocks=(("embed", 3),)).validate()  # an embed block, no embedder
    with pytest.raises(ValueError, match=r"label_vectors must be finite, shape \(2, e\), for the similarity offset; "
                                         r"got None\. Fit again\.$"):
        LinearHead(W, b, None, m, s, 1.0, similarity_scale=1.0, embedder="minilm").validate()
    with pytest.raises(ValueError, match=r"got \(3, 4\)\. Fit again\.$"):
        LinearHead(W, b, None, m, s, 1.0, similarity_scale=1.0, embedder="minilm",
                   label_vectors=np.ones((3, 4))).validate()
    import scipy.sparse as sp

    y = np.array([0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"the sparse \(TF-IDF\) features have 3 rows, expected 4: one per text\."):
        fit_head((np.zeros((4, 2)), sp.csr_matrix(np.ones((3, 7)))), y, 2, l2=1.0)


def test_fit_reads_states_and_zero_shot_scores_from_one_model_pass(pair, monkeypatch):
    """fit(features="hidden+scores") and the fitted head's predict: the answer-slot states come from the pass that
    scores the labels (Engine.hidden_states, a pass of their own, is never called; score_items_states once per
    call), and the head equals the one fitted on states from a pass of their own, within the float noise between
    the two passes."""
    from judge.adaptation import fit_adaptation
    from judge.calibrated import offset_scores
    from judge.engine import Engine

    ref = clf_of(pair, embedder=None)
    two_pass = fit_adaptation(ref, TEXTS, Y, base_scores=lambda t: offset_scores(ref, t), features="hidden+scores",
                              cv=3, l2=1.0)
    calls = {"hidden_states": 0, "score_items_states": 0}
    for name in calls:
        real = getattr(Engine, name)
        monkeypatch.setattr(Engine, name, lambda *a, _real=real, _name=name, **k: (
            calls.__setitem__(_name, calls[_name] + 1), _real(*a, **k))[1])
    one = clf_of(pair, embedder=None)
    one.predict(TEXTS[:1])  # the label-free prior's own scoring, before counting
    calls.update(hidden_states=0, score_items_states=0)
    one.fit(TEXTS, Y, features="hidden+scores", cv=3, l2=1.0)
    assert calls == {"hidden_states": 0, "score_items_states": 1}
    np.testing.assert_allclose(one.adaptation_.weights, two_pass.weights, atol=1e-4)
    p = one.predict_proba(TEXTS)
    assert calls == {"hidden_states": 0, "score_items_states": 2}
    ref_p = two_pass.decision_function(ref, TEXTS, lambda t: offset_scores(ref, t))  # states from their own pass
    np.testing.assert_allclose(p, np.exp(ref_p - np.logaddexp.reduce(ref_p, axis=1, keepdims=True)), atol=1e-5)


def test_choose_l2_with_features_per_fold_reads_each_folds_own_and_equals_the_plain_call_when_they_agree():
    from judge.adaptation import choose_l2, cv_folds

    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(3), 8)
    X = rng.normal(size=(24, 4)) + np.eye(3, 4)[y]
    folds = cv_folds(y, 4, 0)
    plain = choose_l2(X, y, 3, folds=folds)
    same = choose_l2(None, y, 3, folds=folds, per_fold=lambda f: (X, None, None))
    np.testing.assert_allclose(same["nll"], plain["nll"], rtol=0, atol=1e-12)
    seen = []
    noise = rng.normal(size=(24, 4))
    mixed = choose_l2(None, y, 3, folds=folds, per_fold=lambda f: (seen.append(f) or (X if f else noise), None, None))
    assert seen == [0, 1, 2, 3] and mixed["nll"] != plain["nll"]


def test_given_scores_keep_the_offset_among_the_auto_candidates_past_the_few_shot_regime(pair):
    """Scores handed to fit are an offset at any size; scored by the path, only up to 8 texts per class."""
    texts = TEXTS * 3  # 27 texts over 3 labels: past AUTO_OFFSET_PER_CLASS * K = 24
    y = Y * 3
    given = np.log(np.full((len(texts), 3), 1 / 3))
    with_scores = clf_of(pair, progress=False).fit(texts, y, scores=given, cv=2, embedder=False)
    assert set(with_scores.adaptation_.report["features_cv"]["nll"]) == {"hidden+tfidf+scores", "hidden+scores"}
    without = clf_of(pair, progress=False).fit(texts, y, cv=2, embedder=False)
    assert set(without.adaptation_.report["features_cv"]["nll"]) == {"hidden+tfidf", "hidden"}
