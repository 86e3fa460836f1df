"""Multi-label answers (judge.multilabel, Classifier(multi_label=True)): independent columns where the experts are,
per-label thresholds that recover planted ones, fit on lists and on indicator matrices, save/load, the empty answer."""

from __future__ import annotations

import numpy as np
import pytest

from judge import Classifier, multilabel
from judge.engine import Engine
from judge.testing import tiny_pair

LABELS = ["rain", "sun", "snow"]
TEXTS = ["wet day", "sunny", "cold and wet", "hot", "snowing hard", "sunny snow", "nothing", "rain and sun"]
Y = [["rain"], ["sun"], ["rain", "snow"], ["sun"], ["snow"], ["sun", "snow"], [], ["rain", "sun"]]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def clf_of(pair, **kw):
    model, tok = pair
    return Classifier(kw.pop("labels", LABELS), model, tokenizer=tok, multi_label=True,
                      **{"embedder": "minilm", "progress": False, **kw})


def test_proba_is_independent_per_label_and_rows_need_not_sum_to_one(pair):
    P = clf_of(pair).predict_proba(TEXTS)
    assert P.shape == (len(TEXTS), 3)
    assert ((P >= 0) & (P <= 1)).all()
    assert not np.allclose(P.sum(axis=1), 1.0)


def test_changing_one_label_changes_only_its_column_where_the_experts_are_independent(pair, monkeypatch):
    # the yes/no reading and the similarity judge each label alone; the single-label log-probability and the
    # similarity gap read the text's other labels too, so they are switched off here
    w = {"intercept": -0.5, "yes_no": 0.7, "similarity": 3.0, "similarity_gap": 0.0, "single": 0.0}
    monkeypatch.setattr(multilabel, "ZERO_SHOT_WEIGHTS", w)
    a = clf_of(pair).predict_proba(TEXTS)
    b = clf_of(pair, labels=["rain", "sunshine", "snow"]).predict_proba(TEXTS)
    assert np.abs(a[:, [0, 2]] - b[:, [0, 2]]).max() < 1e-6
    assert np.abs(a[:, 1] - b[:, 1]).max() > 1e-4


def test_yes_no_reading_is_one_engine_call_and_equals_each_question_alone(pair, monkeypatch):
    from judge.decisions.prompts import DEFAULT_STYLES, plan_question
    from judge.decisions.questions import YesNo

    clf = clf_of(pair).setup()
    calls = []
    real = Engine.score_items

    def counted(self, items, **kw):
        calls.append(len(list(items)))
        return real(self, items, **kw)

    monkeypatch.setattr(Engine, "score_items", counted)
    together = multilabel.yes_no_scores(clf, TEXTS[:3])
    assert calls == [9]  # every label of every text in one call
    monkeypatch.setattr(Engine, "score_items", real)
    eng = clf.engine_
    for i, text in enumerate(TEXTS[:3]):
        for j, lab in enumerate(LABELS):
            p = plan_question(eng.tokenizer_, text, YesNo(multilabel.QUESTION.format(label=lab)),
                              DEFAULT_STYLES["noul"])
            s = eng.score([multilabel_query(p)])[0]
            order = np.asarray(p.order)
            alone = np.logaddexp.reduce(s[order == 0]) - np.logaddexp.reduce(s[order == 1])
            assert abs(together[i, j] - alone) < 1e-5


def test_yes_no_questions_name_the_labels_as_the_classifier_writes_them(pair, monkeypatch):
    from judge.labels import label_names_for

    model, tok = pair
    labels = {"rain": "water falling from the sky", "sun": None, "snow": None}
    clf = Classifier(labels, model, tokenizer=tok, multi_label=True, embedder=None, progress=False,
                     label_names={"sun": "sunshine"}, describe="both")
    asked = []
    import judge.decisions.prompts as prompts

    orig = prompts.plan_question

    def spy(tokenizer, text, question, style):
        asked.append(question.instructions)
        return orig(tokenizer, text, question, style)

    monkeypatch.setattr(prompts, "plan_question", spy)
    multilabel.yes_no_scores(clf, TEXTS[:1])
    names = label_names_for(list(labels), {"sun": "sunshine"}, {"rain": "water falling from the sky"}, "both")
    assert asked == [multilabel.QUESTION.format(label=n) for n in names]
    assert "sunshine" in asked[1] and "water falling" in asked[0]


def test_label_features_compute_only_what_is_asked_and_the_gap_is_to_the_best_label(pair):
    clf = clf_of(pair)
    only = multilabel.label_features(clf, TEXTS[:2], which=("yes_no",))
    assert (only[..., 1:] == 0).all() and (only[..., 0] != 0).any()
    gap = multilabel.label_features(clf, TEXTS[:2], which=("similarity_gap",))
    assert (gap[..., 2] < 0).any()
    F = multilabel.label_features(clf, TEXTS[:2], which=("similarity", "similarity_gap"))
    np.testing.assert_allclose(F[..., 2], F[..., 1] - F[..., 1].max(axis=1, keepdims=True))
    assert (F[..., 2].max(axis=1) == 0).all()


def multilabel_query(plan):
    from judge.engine.protocol import Query

    return Query(plan.pieces, plan.surfaces)


def test_fit_on_lists_equals_fit_on_an_indicator_matrix(pair):
    from sklearn.preprocessing import MultiLabelBinarizer

    M = MultiLabelBinarizer(classes=LABELS).fit_transform(Y)
    a = clf_of(pair).fit(TEXTS, Y, cv=2)
    b = clf_of(pair).fit(TEXTS, M, cv=2)
    np.testing.assert_array_equal(a.predict_proba(TEXTS), b.predict_proba(TEXTS))
    assert a.multilabel_.head is not None
    # the fitted head learned the training targets
    got = multilabel.as_indicator(a.predict(TEXTS), LABELS)
    assert (got == M).mean() > 0.8


def test_fit_uses_the_given_regularisation_and_warns_that_it_drops_a_calibration(pair):
    clf = clf_of(pair).calibrate(TEXTS, Y)
    with pytest.warns(UserWarning, match="fit\\(\\) drops the calibration fitted before it") as got:
        clf.fit(TEXTS, Y, cv=2, Cs=(1e-6,))
    # it points at the caller's code, not at the library line that warns
    assert not any(w.filename.endswith(("multilabel/__init__.py", "multilabel\\__init__.py")) for w in got)
    assert clf.multilabel_.state is None
    assert np.abs(clf.multilabel_.head.coef).max() < 1e-3  # C = 1e-6: the weights all but vanish
    loose = clf_of(pair).fit(TEXTS, Y, cv=2, Cs=(100.0,))
    assert np.abs(loose.multilabel_.head.coef).max() > 0.1


def test_predict_gives_lists_and_an_empty_list_where_no_label_reaches_its_threshold(pair):
    clf = clf_of(pair)
    clf.multilabel_ = multilabel.MultiLabelFit(None, multilabel.MultiLabelState(np.ones(3), np.zeros(3),
                                                                                np.full(3, 1.1)))
    out = clf.predict(TEXTS[:2])
    assert out.dtype == object and out.tolist() == [[], []]
    clf.multilabel_ = multilabel.MultiLabelFit(None, multilabel.MultiLabelState(np.ones(3), np.zeros(3),
                                                                                np.full(3, 0.0)))
    assert clf.predict(TEXTS[:1]).tolist() == [LABELS]
    with pytest.raises(ValueError, match="empty list"):
        clf.predict(TEXTS, abstain=True)


def test_save_load_round_trips_the_fit_and_the_calibration(pair, tmp_path):
    model, tok = pair
    clf = clf_of(pair).fit(TEXTS, Y, cv=2).calibrate(TEXTS, Y)
    clf.save(tmp_path, model_ref="my-org/my-model")
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)
    assert back.multi_label
    np.testing.assert_array_equal(back.predict_proba(TEXTS), clf.predict_proba(TEXTS))
    assert back.predict(TEXTS).tolist() == clf.predict(TEXTS).tolist()
    assert back.fingerprint() == clf.fingerprint()
    assert clf_of(pair).fingerprint() != clf.fingerprint()


def test_damaged_multilabel_file_is_refused(pair, tmp_path):
    from safetensors.numpy import load_file, save_file

    model, tok = pair
    clf_of(pair).fit(TEXTS, Y, cv=2).calibrate(TEXTS, Y).save(tmp_path, model_ref="my-org/my-model")
    f = tmp_path / "multilabel.safetensors"
    arrays = load_file(str(f))
    save_file({k: v for k, v in arrays.items() if k != "head.scale"}, str(f),
              metadata={"labels": '["rain", "sun", "snow"]'})
    with pytest.raises(ValueError, match=r"the multi-label head lacks the arrays \['scale'\]"):
        Classifier.load(tmp_path, model=model, tokenizer=tok)
    for key in ("state.a", "state.b", "state.threshold", "head.intercept"):  # each per-label array's shape
        bad = dict(arrays, **{key: arrays[key][:2]})
        save_file(bad, str(f), metadata={"labels": '["rain", "sun", "snow"]'})
        with pytest.raises(ValueError, match=key.replace(".", r"\.") + " has shape"):
            Classifier.load(tmp_path, model=model, tokenizer=tok)
    f.unlink()
    with pytest.raises(FileNotFoundError, match="multilabel.safetensors"):
        Classifier.load(tmp_path, model=model, tokenizer=tok)


def test_parameters_it_cannot_score_with_are_refused_and_changing_it_drops_the_fit(pair):
    model, tok = pair
    for bad in ({"method": "search"}, {"shortlist": 2}, {"think": True}):
        with pytest.raises(ValueError, match="multi_label=True judges every label"):
            Classifier(LABELS, model, tokenizer=tok, multi_label=True, **bad)
    clf = clf_of(pair).calibrate(TEXTS, Y)
    with pytest.warns(UserWarning, match="drops the multi-label fit"):
        clf.set_params(multi_label=False)
    assert clf.multilabel_ is None
    assert clf.predict(TEXTS[:1])[0] in LABELS  # back to one label per text


def test_sklearn_clone_and_get_params_carry_multi_label(pair):
    clf = clf_of(pair)
    twin = type(clf)(**clf.get_params())
    assert twin.multi_label is True
    assert twin.predict_proba(TEXTS[:2]).shape == (2, 3)


def test_fit_and_calibrate_refuse_what_multi_label_does_not_take(pair):
    clf = clf_of(pair)
    with pytest.raises(ValueError, match="one-vs-rest head"):
        clf.fit(TEXTS, Y, method="lora")
    with pytest.raises(TypeError, match="Cs and cv"):
        clf.fit(TEXTS, Y, features="hidden")
    with pytest.raises(TypeError, match=r"target_precision alone; the options \['coverage'\]"):
        clf.calibrate(TEXTS, Y, coverage=0.5)
    with pytest.raises(TypeError, match=r"\['content_free'\]"):
        clf.calibrate(TEXTS, Y, content_free=["N/A"])
    for name, value in (("bias", "batch"), ("temperature", False), ("target_accuracy", 0.9), ("confidence", 0.9),
                        ("scores", np.zeros((len(TEXTS), 3))), ("bias_l2", 2.0)):
        with pytest.raises(TypeError, match=rf"the options \['{name}'\] are for one label per text"):
            clf.calibrate(TEXTS, Y, **{name: value})
    with pytest.raises(ValueError, match="8 texts and 2 targets"):
        clf.calibrate(TEXTS, Y[:2])


def test_cli_predict_multi_label_writes_a_list_of_labels_per_text(tiny_dir, monkeypatch, capsys, tmp_path):
    import io
    import json

    from judge.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO("wet and sunny\ncold\n"))
    assert main(["predict", "--labels", "rain,sun,snow", "--model", tiny_dir, "--multi-label", "--top-k", "2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [sorted(r) for r in rows] == [["labels", "probabilities", "text"]] * 2
    for r in rows:
        assert isinstance(r["labels"], list) and set(r["labels"]) <= {"rain", "sun", "snow"}
        assert len(r["probabilities"]) == 2
    with pytest.raises(SystemExit, match="--abstain is for one label per text"):
        monkeypatch.setattr("sys.stdin", io.StringIO("x\n"))
        main(["predict", "--labels", "rain,sun", "--model", tiny_dir, "--multi-label", "--abstain"])
    with pytest.raises(SystemExit, match="--multi-label applies to new labels"):
        main(["predict", "--classifier", str(tmp_path), "--multi-label"])


def test_classify_route_answers_a_multi_label_classifier_with_lists(pair):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from judge import Decider
    from judge.server.app import ServerConfig, create_app

    model, tok = pair
    clf = clf_of(pair, embedder=None).calibrate(TEXTS, Y).setup()
    app = create_app(Decider(model, tok), ServerConfig(max_wait_ms=0, max_questions=4), classifier=clf,
                     classifier_name="weather")
    with TestClient(app) as client:
        r = client.post("/v1/classify", json={"texts": TEXTS[:3]}).json()
        assert r["multi_label"] is True and r["calibrated"] is True and r["fitted"] is None
        # the same labels, most probable first in the records (classes_ order from predict)
        assert [sorted(p["labels"]) for p in r["predictions"]] == [sorted(x) for x in clf.predict(TEXTS[:3])]
        got = np.array([[p["probabilities"][lab] for lab in LABELS] for p in r["predictions"]])
        np.testing.assert_allclose(got, clf.predict_proba(TEXTS[:3]), atol=1e-12)
        bad = client.post("/v1/classify", json={"texts": ["x"], "abstain": True})
        assert bad.status_code == 422 and "is multi-label" in bad.json()["detail"][0]["msg"]


def test_batch_refuses_a_multi_label_classifier_before_ray_starts(pair, tmp_path):
    pytest.importorskip("ray")
    from judge.distributed import classify_dataset

    clf_of(pair, embedder=None).save(tmp_path, model_ref="my-org/my-model")
    with pytest.raises(ValueError, match="is multi-label .* writes one label per row"):
        classify_dataset(None, classifier_dir=tmp_path)


def test_calibrate_is_one_signature_and_target_precision_is_refused_with_one_label(pair):
    import inspect

    from judge import Classifier

    params = inspect.signature(Classifier.calibrate).parameters
    assert params["bias_l2"].default == 1.0 and params["target_precision"].default is None
    model, tok = pair
    single = Classifier(LABELS, model, tokenizer=tok, embedder=None)
    with pytest.raises(TypeError, match="is for multi_label=True"):
        single.calibrate(TEXTS, [y[0] if y else LABELS[0] for y in Y], target_precision=0.9)
    assert single.calibration_ is None


def test_predict_records_of_a_multi_label_classifier_keep_the_top_k_probabilities(pair):
    clf = clf_of(pair)
    full, top = clf.predict_records(TEXTS[:2]), clf.predict_records(TEXTS[:2], top_k=1)
    assert [sorted(r) for r in full] == [["labels", "probabilities"]] * 2
    assert [len(r["probabilities"]) for r in full] == [3, 3] and [len(r["probabilities"]) for r in top] == [1, 1]
    assert [r["labels"] for r in top] == [r["labels"] for r in full]
    with pytest.raises(ValueError, match="empty list"):
        clf.predict_records(TEXTS[:1], abstain=True)


def test_proba_after_calibrate_is_the_fitted_scaling_not_the_raw_sigmoid(pair):
    clf = clf_of(pair).calibrate(TEXTS, Y)
    z = multilabel.logits(clf, TEXTS)
    np.testing.assert_allclose(clf.predict_proba(TEXTS), clf.multilabel_.state.proba(z))
    assert np.abs(clf.predict_proba(TEXTS) - multilabel.sigmoid(z)).max() > 1e-3


def test_the_yes_no_reading_shows_a_progress_bar_only_when_asked(pair, capsys):
    clf = clf_of(pair)  # progress=False on the classifier
    multilabel.label_features(clf, TEXTS[:2], which=("yes_no",), progress=True)
    assert "%|" in capsys.readouterr().err
    multilabel.label_features(clf, TEXTS[:2], which=("yes_no",))
    assert "%|" not in capsys.readouterr().err


def test_the_single_label_feature_is_a_log_distribution_per_text_and_every_label_is_scored(pair):
    # decode_above=2: method="auto" resolves to the search path, which leaves labels unscored unless asked for all
    clf = clf_of(pair, decode_above=2)
    F = multilabel.label_features(clf, TEXTS[:3], which=("single",))
    np.testing.assert_allclose(np.logaddexp.reduce(F[..., 3], axis=1), 0.0, atol=1e-9)
    assert (F[..., 3] > -100).all()
