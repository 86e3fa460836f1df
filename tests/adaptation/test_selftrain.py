"""Self-training on unlabelled texts (judge.adaptation.selftrain; fit(texts, y, unlabelled=...)): class-balanced
confident answers, a planted cluster structure recovered, nothing but the head's own answers ever used as labels,
one LM pass per text set, save/load bit for bit, bad input refused before any work. Tiny models only (CI)."""

from __future__ import annotations

import numpy as np
import pytest

from judge import Classifier
from judge.adaptation import fit_head, pseudo_labels, self_train
from judge.testing import tiny_pair

LABELS = ["card arrival", "exchange rate", "pin blocked"]
TEXTS = ["where is my card", "rate for euros", "my pin is locked", "card still not here",
         "dollar to pound rate", "pin blocked again"]
Y = [LABELS[i % 3] for i in range(len(TEXTS))]
MORE = ["has my card shipped", "exchange fee today", "cannot use my pin", "card is late",
        "what rate applies", "pin does not work", "no card yet", "euro rate please"]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def clf_of(pair, **kw):
    model, tok = pair
    return Classifier(LABELS, model, tokenizer=tok, method="exact", embedder=None, **kw)


def clusters(seed, n_unlabelled=600):
    """Three Gaussian clusters in 10-d, two labelled points per cluster, the rest unlabelled or held out."""
    rng = np.random.default_rng(seed)
    centres = 2.5 * np.eye(3, 10)
    yl = np.arange(3).repeat(2)
    yu, yt = rng.integers(0, 3, n_unlabelled), rng.integers(0, 3, 600)
    noise = lambda n: rng.normal(0, 1.0, (n, 10))  # noqa: E731
    return centres[yl] + 0.5 * noise(6), yl, centres[yu] + noise(n_unlabelled), yu, centres[yt] + noise(600), yt


def test_pseudo_labels_keep_each_class_its_share_most_confident_first():
    p = np.array([[0.9, 0.1, 0.0], [0.6, 0.3, 0.1], [0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.3, 0.5]])
    rows, labels = pseudo_labels(np.log(p + 1e-12), 0.5)
    # class 0 answered thrice: ceil(1.5) = 2 kept, the 0.9 and the 0.7; class 1 once and class 2 once: kept
    assert rows.tolist() == [0, 2, 3, 4] and labels.tolist() == [0, 0, 1, 2]
    assert pseudo_labels(np.log(p + 1e-12), 1.0)[0].tolist() == [0, 1, 2, 3, 4]
    for bad in (0, 1.5, True, "half"):
        with pytest.raises(ValueError, match="share must be a fraction in"):
            pseudo_labels(np.log(p + 1e-12), bad)
    with pytest.raises(ValueError, match=r"must be \(m, K\)"):
        pseudo_labels(np.zeros(3), 0.5)


def test_self_training_recovers_a_planted_cluster_structure():
    """Two labelled points per cluster leave the head well below what the clusters allow; the unlabelled points
    fill the clusters in. Measured on held-out points, over five seeds (each at least 2 points better)."""
    for seed in range(5):
        Xl, yl, Xu, _, Xt, yt = clusters(seed)
        head = fit_head(Xl, yl, 3, l2=1.0)
        tuned = self_train(head, (None, {"hidden": Xl}, None), yl, (None, {"hidden": Xu}, None), share=0.5, rounds=3)
        before = (head.log_proba(None, Xt).argmax(1) == yt).mean()
        after = (tuned.log_proba(None, Xt).argmax(1) == yt).mean()
        assert after >= before + 0.02, (seed, before, after)
        st = tuned.report["self_training"]
        assert st["unlabelled"] == 600 and len(st["pseudo"]) == 3 and st["rounds"] == 3 and st["share"] == 0.5
        assert tuned.l2 == head.l2 and tuned.report["n"] == 6 + st["pseudo"][-1]


def test_only_the_heads_own_answers_ever_label_an_unlabelled_row():
    """The self-trained head is exactly the head fitted on the labelled rows plus the kept rows labelled with the
    first head's answers: no other label reaches it (the true labels of the unlabelled rows are never given)."""
    Xl, yl, Xu, yu, _, _ = clusters(0, 200)
    head = fit_head(Xl, yl, 3, l2=1.0)
    tuned = self_train(head, (None, {"hidden": Xl}, None), yl, (None, {"hidden": Xu}, None), share=0.5, rounds=1)
    rows, answers = pseudo_labels(head.log_proba(None, Xu), 0.5)
    by_hand = fit_head(np.vstack([Xl, Xu[rows]]), np.concatenate([yl, answers]), 3, l2=head.l2)
    np.testing.assert_array_equal(tuned.weights, by_hand.weights)
    assert (answers != yu[rows]).any()  # some answers are wrong, and they are what was used


def test_the_unlabelled_rows_order_does_not_matter():
    Xl, yl, Xu, _, Xt, _ = clusters(1, 200)
    head = fit_head(Xl, yl, 3, l2=1.0)
    perm = np.random.default_rng(0).permutation(len(Xu))
    a = self_train(head, (None, {"hidden": Xl}, None), yl, (None, {"hidden": Xu}, None), rounds=2)
    b = self_train(head, (None, {"hidden": Xl}, None), yl, (None, {"hidden": Xu[perm]}, None), rounds=2)
    np.testing.assert_allclose(a.log_proba(None, Xt), b.log_proba(None, Xt), atol=1e-5)


def test_fit_with_unlabelled_texts_scores_each_set_once_and_round_trips(pair, tmp_path, monkeypatch):
    """fit(..., unlabelled=...) on the tiny model: one scoring pass for the labelled texts, one for the unlabelled
    (the labelled texts' states and scores are reused for the refit), the report says what was kept, and the
    saved classifier answers bit for bit."""
    from judge.engine import Engine

    model, tok = pair
    clf = clf_of(pair)
    clf.predict(TEXTS[:1])  # the label-free prior's own scoring, before counting
    calls = {"n": 0, "texts": []}
    real = Engine.score_items_states

    def counted(self, *a, **k):
        calls["n"] += 1
        return real(self, *a, **k)

    monkeypatch.setattr(Engine, "score_items_states", counted)
    clf.fit(TEXTS, Y, unlabelled=MORE, features="hidden+scores", cv=2, l2=1.0,
            self_training={"share": 1.0, "rounds": 2})
    assert calls["n"] == 2
    st = clf.adaptation_.report["self_training"]
    assert st["unlabelled"] == len(MORE) and st["pseudo"] == [len(MORE)] * 2 and st["share"] == 1.0
    assert clf.adaptation_.report["n"] == len(TEXTS) + len(MORE)
    monkeypatch.setattr(Engine, "score_items_states", real)
    before = clf.predict_proba(TEXTS + MORE)
    clf.save(tmp_path, model_ref="tiny")
    back = Classifier.load(tmp_path, model=model, tokenizer=tok)
    assert np.array_equal(before, back.predict_proba(TEXTS + MORE))
    assert back.adaptation_.report["self_training"]["pseudo"] == st["pseudo"]


def test_no_unlabelled_texts_give_the_plain_head_bit_for_bit(pair):
    plain = clf_of(pair).fit(TEXTS, Y, features="hidden+scores", cv=2, l2=1.0)
    empty = clf_of(pair).fit(TEXTS, Y, features="hidden+scores", cv=2, l2=1.0, unlabelled=[])
    np.testing.assert_array_equal(plain.adaptation_.weights, empty.adaptation_.weights)
    assert "self_training" not in empty.adaptation_.report


@pytest.mark.parametrize("opts, err, match", [
    ({"unlabelled": "one long text"}, TypeError, r"unlabelled= \(texts without labels\) is not a list of texts"),
    ({"unlabelled": [("where is my card", "card arrival")]}, TypeError, "not a list of texts: Text 0 is tuple"),
    ({"unlabelled": ["fine", "  "]}, ValueError, "unlabelled="),
    ({"unlabelled": MORE, "self_training": {"share": 0}}, ValueError, "share must be a fraction"),
    ({"unlabelled": MORE, "self_training": {"rounds": 0}}, ValueError, "rounds must be an int >= 1"),
    ({"unlabelled": MORE, "self_training": {"steps": 3}}, ValueError, "self_training must be None or a dict"),
])
def test_bad_unlabelled_input_is_refused_before_any_scoring(pair, monkeypatch, opts, err, match):
    """A (text, label) pair where a text belongs is refused too: labels cannot come in through unlabelled=."""
    from judge.engine import Engine

    clf = clf_of(pair)
    monkeypatch.setattr(Engine, "score_items_states", lambda *a, **k: pytest.fail("scored before the check"))
    with pytest.raises(err, match=match):
        clf.fit(TEXTS, Y, **opts)
    assert clf.adaptation_ is None


def test_unlabelled_is_an_option_of_the_head_only(pair):
    with pytest.raises(TypeError, match=r"fit\(method='demos'\) got unknown option\(s\) \['unlabelled'\]"):
        clf_of(pair).fit(TEXTS, Y, method="demos", unlabelled=MORE)


def test_settings_refuse_what_is_not_a_whole_number_of_rounds():
    from judge.adaptation.selftrain import check_settings

    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="rounds must be an int >= 1"):
            check_settings(0.5, bad)
    assert check_settings(1, np.int64(3)) == {"share": 1.0, "rounds": 3}


def test_no_unlabelled_row_keeps_the_head_and_its_report():
    Xl, yl, _, _, Xt, _ = clusters(2)
    head = fit_head(Xl, yl, 3, l2=1.0)
    rows, labels = pseudo_labels(np.zeros((0, 3)), 0.5)
    assert rows.shape == labels.shape == (0,) and rows.dtype == labels.dtype == np.int64
    same = self_train(head, (None, {"hidden": Xl}, None), yl, (None, {"hidden": np.zeros((0, 10))}, None))
    np.testing.assert_array_equal(same.log_proba(None, Xt), head.log_proba(None, Xt))
    assert same.report["l2"] == head.l2 and same.report["n"] == 6
    assert same.report["self_training"] | {"seconds": 0} == {"unlabelled": 0, "share": 0.5, "rounds": 2, "pseudo": [],
                                                              "changed": 0, "seconds": 0}


def test_the_offsets_of_the_kept_rows_go_into_the_refit():
    """With both offsets (zero-shot scores and label similarities) the refit equals fit_head on the labelled rows
    plus the kept rows, each with its own offsets; ``changed`` counts the answers the refit moved."""
    Xl, yl, Xu, _, _, _ = clusters(3, 200)
    rng = np.random.default_rng(0)
    Sl, Su, Rl, Ru = (rng.normal(size=(n, 3)) for n in (6, 200, 6, 200))
    Rl = Rl + 3 * np.eye(3)[yl]  # a similarity that points at the labels: its fitted scale is > 0
    named = {"embedder": "minilm", "label_vectors": np.eye(3, 4)}  # recorded, not read: the features are given
    head = fit_head(Xl, yl, 3, l2=1.0, scores=Sl, similarity=Rl, **named)
    assert head.uses_scores and head.uses_similarity
    tuned = self_train(head, (Sl, {"hidden": Xl}, Rl), yl, (Su, {"hidden": Xu}, Ru), share=0.5, rounds=1)
    first = head.log_proba(Su, {"hidden": Xu}, Ru)
    rows, answers = pseudo_labels(first, 0.5)
    by_hand = fit_head(np.vstack([Xl, Xu[rows]]), np.concatenate([yl, answers]), 3, l2=head.l2,
                       scores=np.vstack([Sl, Su[rows]]), similarity=np.vstack([Rl, Ru[rows]]), **named)
    np.testing.assert_array_equal(tuned.weights, by_hand.weights)
    assert tuned.offset_scale == by_hand.offset_scale and tuned.similarity_scale == by_hand.similarity_scale > 0
    moved = int((tuned.log_proba(Su, {"hidden": Xu}, Ru).argmax(1) != first.argmax(1)).sum())
    assert tuned.report["self_training"]["changed"] == moved


def test_a_head_without_states_reads_the_unlabelled_texts_zero_shot_scores(pair):
    """TF-IDF and the scores, no answer-slot block: so the unlabelled texts' scores come from the zero-shot scoring itself; self-training
    with every answer kept moves the offset head towards its own answers."""
    clf = clf_of(pair).fit(TEXTS, Y, features="tfidf+scores", cv=2, l2=1.0, unlabelled=MORE,
                           self_training={"share": 1.0, "rounds": 1})
    assert clf.adaptation_.features == "tfidf+scores" and clf.adaptation_.report["self_training"]["pseudo"] == [len(MORE)]
    assert clf.predict_proba(MORE).shape == (len(MORE), 3)
