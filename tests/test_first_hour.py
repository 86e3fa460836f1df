"""Issue 32: the traps of a new user's first hour, each checked from the user's side.

The call a user makes and the message or output they should get: validation of ``None`` and of a
single label, a model name that is nowhere on this machine, the prompt names exported from ``judge``,
short reprs.
"""

from __future__ import annotations

import contextlib
import time
import warnings

import pytest

import judge
from judge import Classifier, LabelError
from judge.testing import tiny_pair


@pytest.fixture(scope="module")
def tiny():
    return tiny_pair()


def test_none_everywhere_is_a_clear_type_error(tiny):
    model, tok = tiny
    with pytest.raises(TypeError, match=r"labels must be a list of label names .* got None"):
        Classifier(None, model, tokenizer=tok)
    clf = Classifier(["billing", "cards"], model, tokenizer=tok)
    texts = ["I was charged twice", "my card is lost"]
    with pytest.raises(TypeError, match=r"y must be a sequence of labels, one per text, got None"):
        clf.fit(texts, None)
    with pytest.raises(TypeError, match=r"y must be a sequence of labels, one per text, got None"):
        clf.calibrate(texts, None)
    for call in (clf.predict, clf.predict_proba, clf.decision_function):
        with pytest.raises(TypeError, match=r"texts must be a list of strings, got None; pass e\.g\."):
            call(None)
    with pytest.raises(TypeError, match=r"texts must be a list of strings, got None"):
        clf.fit(None, ["billing"])
    with pytest.raises(TypeError, match=r"model must be None \(the packaged model\), a hub id, .* got int 5"):
        Classifier(["billing", "cards"], 5)
    with pytest.raises(TypeError, match=r"Classifier.load\(\) takes a folder path .* got NoneType None"):
        Classifier.load(None)
    with pytest.raises(TypeError, match=r"clf.save\('my-classifier'\)"):
        clf.save(None, model_ref="x")


def test_a_single_label_is_refused_with_what_to_do_instead(tiny):
    model, tok = tiny
    with pytest.raises(LabelError, match=r"needs at least two labels; got one, 'billing' .* "
                                         r"Classifier\(\['billing', 'other'\]\), or ask a yes/no question"):
        Classifier(["billing"], model, tokenizer=tok)
    with pytest.raises(LabelError, match=r"The label list is empty; a Classifier needs at least two labels"):
        Classifier([], model, tokenizer=tok)
    clf = Classifier(["billing", "cards"], model, tokenizer=tok)
    with pytest.raises(LabelError, match=r"got one, 'billing'"):
        clf.labels = ["billing"]
    with pytest.raises(LabelError, match=r"got one, 'billing'"):
        Classifier({"billing": "payments and invoices"}, model, tokenizer=tok)


def test_a_model_name_typo_fails_within_a_second_offline_with_close_matches(monkeypatch):
    from judge.models import locate_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(FileNotFoundError) as err:
        Classifier(["billing", "cards"], "smolm2-135m").predict(["I was charged twice"])
    took = time.perf_counter() - t0
    msg = str(err.value)
    assert took < 1.0, took
    assert "Model 'smolm2-135m' was not found on this machine" in msg
    assert "Did you mean 'smollm2-135m'" in msg                        # the packaged alias it resembles
    assert "HF_HUB_OFFLINE is set" in msg and "huggingface-cli download" in msg and "save_pretrained" in msg
    with pytest.raises(FileNotFoundError, match=r"no such folder"):
        locate_model("./no/such/model")
    assert locate_model("SmolLM2")[1] is True                           # aliases are case-insensitive, local


def test_the_hub_probe_answers_within_about_a_second(monkeypatch):
    """Without HF_HUB_OFFLINE the hub's host is probed once, bounded (this machine has no network)."""
    from judge.models import _hub_unreachable

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "http://127.0.0.1:9")   # nothing listens there
    t0 = time.perf_counter()
    why = _hub_unreachable()
    assert time.perf_counter() - t0 < 2.0 and why is not None and "127.0.0.1" in why


def test_prompt_names_are_exported_and_change_the_prompt(tiny):
    import dataclasses

    model, tok = tiny
    assert judge.PromptTemplate is judge.prompts.PromptTemplate and judge.DEFAULT_PROMPT.chat is False
    mine = dataclasses.replace(judge.DEFAULT_PROMPT, completion="Ticket: {text}\nTeam:")
    clf = Classifier(["billing", "cards"], model, tokenizer=tok, prompt=mine)
    assert clf.prompt_prefix_ == "Ticket: "


def test_reprs_are_one_short_line(tiny):
    model, tok = tiny
    clf = Classifier(["billing", "cards"], model, tokenizer=tok)
    assert repr(clf) == "Classifier(K=2, model=<LlamaForCausalLM>, method='auto')"


def test_fast_loads_print_no_progress_bar():
    """transformers' "Loading weights 0/272" bar is left out for loads that take about a second."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("from judge.models import load_model; from judge.encoders import get_encoder; "
            "load_model(device='cpu'); get_encoder('minilm')(['hi']); print('loaded')")
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS="1"))
    assert out.returncode == 0 and "loaded" in out.stdout, out.stderr[-1000:]
    assert "Loading weights" not in out.stderr, out.stderr[-500:]


# ----------------------------------------------------------------------------- calibration on small sets
LABELS5 = ["billing", "cards", "login", "shipping", "refund"]


def _texts(n):
    return [f"ticket {i}: a question about {LABELS5[i % 5]}" for i in range(n)], [LABELS5[i % 5] for i in range(n)]


def test_a_target_accuracy_no_set_of_that_size_can_certify_is_refused(tiny):
    """calibrate(10 texts, target_accuracy=0.9) set a threshold of 1.0000000000000002 (every answer None)."""
    model, tok = tiny
    clf = Classifier(LABELS5, model, tokenizer=tok)
    texts, y = _texts(10)
    with pytest.raises(ValueError, match=r"calibrate\(target_accuracy=0\.9\) needs at least 29 labelled texts at "
                                         r"confidence=0\.95: even if all 10 were answered right, .* only 0\.741"):
        clf.calibrate(texts, y, target_accuracy=0.9)
    assert clf.calibration_ is None                         # nothing fitted, nothing scored
    from judge.calibration.review import min_texts_for_target

    # at the limit: 29 right answers of 29 certify 0.9 (0.05 ** (1/29) = 0.9019), 28 do not (0.8985)
    assert min_texts_for_target(0.9) == 29 and 0.05 ** (1 / 29) >= 0.9 > 0.05 ** (1 / 28)


def test_small_calibration_sets_warn_and_the_report_says_where_each_figure_was_measured(tiny):
    model, tok = tiny
    clf = Classifier(LABELS5, model, tokenizer=tok)
    texts, y = _texts(10)
    with pytest.warns(UserWarning, match=r"too few calibration texts: 10 labelled texts for 5 labels, below "
                                         r"max\(20, 2 per label\) = 20"):
        clf.calibrate(texts, y)
    r = clf.calibration_report_
    assert r["measured_on"].startswith("the 10 calibration texts, in-sample")
    assert r["cross_fitted"]["folds"] == 5 and "cross-fitting" in r["cross_fitted"]["measured_on"]
    assert r["warnings"] and r["warnings"][0].startswith("too few calibration texts")
    text = repr(clf.calibration_)
    assert text.startswith("Calibration(K=5, n=10, bias='batch+fit'") and "in-sample" in text
    assert len(text) < 200 and "array" not in text                     # no probability arrays dumped
    with warnings_off():
        clf.calibrate(*_texts(20))                                      # at the limit: no size warning
    assert not any(w.startswith("too few") for w in clf.calibration_report_["warnings"])


def test_a_temperature_outside_the_sane_range_is_flagged(tiny):
    """After fit, calibrating on texts it got right gave temperature 0.0248 and NLL -0.0 without a word."""
    import numpy as np

    model, tok = tiny
    clf = Classifier(LABELS5, model, tokenizer=tok)
    texts, y = _texts(40)
    separated = 10.0 * np.eye(5)[[i % 5 for i in range(40)]]           # every text right, by a wide margin
    with pytest.warns(UserWarning, match=r"temperature outside the sane range: the fitted temperature .* is below "
                                         r"0\.1: the scores separate these 40 texts \(almost\) perfectly \(100% right\)"):
        clf.calibrate(texts, y, scores=separated, bias=None)
    assert clf.temperature_ < 0.1


def test_a_threshold_that_abstains_on_everything_says_so_and_each_abstention_says_why(tiny):
    import numpy as np

    model, tok = tiny
    clf = Classifier(LABELS5, model, tokenizer=tok)
    texts, y = _texts(40)
    useless = np.zeros((40, 5))                                          # no text distinguishable: 20% right
    with pytest.warns(UserWarning, match=r"the threshold abstains on every text: no threshold certifies accuracy "
                                         r">= 0\.9 at 95% confidence on the 40 calibration texts"):
        clf.calibrate(texts, y, scores=useless, target_accuracy=0.9, bias=None)
    with pytest.warns(UserWarning, match=r"Every text is abstained on: no threshold certifies"):
        assert list(clf.predict(texts[:2], abstain=True)) == [None, None]
    with pytest.warns(UserWarning, match=r"Every text is abstained on"):
        rec = clf.predict_records(texts[:1], abstain=True)[0]
    assert rec["label"] is None and rec["abstained"] is True
    assert rec["abstain_reason"].startswith("no answer is given: no threshold certifies accuracy >= 0.9")
    assert len(rec["probabilities"]) == 5                               # every label, most probable first
    answered = clf.predict_records(texts[:1])[0]
    assert answered["abstained"] is False and answered["abstain_reason"] is None


def test_a_working_threshold_gives_each_abstention_its_confidence_and_threshold(tiny):
    import numpy as np

    model, tok = tiny
    clf = Classifier(LABELS5, model, tokenizer=tok)
    texts, y = _texts(40)
    s = np.log(np.full((40, 5), 0.1)) + 3.0 * np.eye(5)[[i % 5 for i in range(40)]]
    s[::4] = 0.0                                                        # a quarter of the texts undecided
    with warnings_off():
        clf.calibrate(texts, y, scores=s, coverage=0.7, bias=None)
    with warnings_off():                                                # (the tiny model's answers collapse)
        recs = clf.predict_records(texts, abstain=True)
    reasons = [r["abstain_reason"] for r in recs if r["abstained"]]
    assert reasons and all(" is below the threshold " in r and "keeps about 70% of the 40 calibration texts" in r
                           for r in reasons)


def test_fitted_state_reprs_are_short(tiny):
    model, tok = tiny
    clf = Classifier(["yes", "no"], model, tokenizer=tok)
    clf.fit(["sure", "nope", "yes!", "never"], ["yes", "no", "yes", "no"], cv=2, features="hidden")
    assert repr(clf) == "Classifier(K=2, model=<LlamaForCausalLM>, method='auto', fitted='head')"
    assert repr(clf.adaptation_).startswith("LinearHead(K=2, d=64") and len(repr(clf.adaptation_)) < 120


@contextlib.contextmanager
def warnings_off():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
