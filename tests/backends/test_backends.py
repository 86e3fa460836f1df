"""The backend seam in the main environment, where vLLM is not installed and never imported.

* ``import judge`` and every module on the way to a backend load no vLLM;
* backend names are validated where they are given, with the valid names in the message;
* the vLLM logits processor's row logic (``judge.backends.vllm``'s walks and bitmask rows, which
  need no vLLM) masks exactly as :class:`judge.TrieLogitsProcessor` does, with xgrammar's kernel
  and with the plain torch path, for a batch mixing constrained and unconstrained rows.

The vLLM suite itself is ``tests/backend_vllm`` (run in the vLLM environment).
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from judge.backends import check_backend, make_scorer


def test_nothing_imports_vllm():
    code = ("import sys, judge, judge.backends, judge.backends.vllm, judge.classifier, judge.decisions, "
            "judge.compiled, judge.cli, judge.cli.batch, judge.cli.serve, judge.distributed; "
            "print([m for m in sys.modules if m == 'vllm' or m.startswith('vllm.')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_backend_names_are_validated():
    from judge import Classifier, Decider
    from judge.testing import tiny_pair

    with pytest.raises(ValueError, match=r"Unknown backend 'sglang'; valid backends are \('transformers', 'vllm'\)"):
        Classifier(["a", "b"], backend="sglang")
    with pytest.raises(ValueError, match="Unknown backend 'vLLM'"):
        Decider(backend="vLLM")
    with pytest.raises(ValueError, match="Unknown backend"):
        check_backend(None)
    model, tok = tiny_pair()
    with pytest.raises(TypeError, match="backend='vllm' loads the model itself"):
        Classifier(["a", "b"], model, tokenizer=tok, backend="vllm")
    with pytest.raises(TypeError, match="takes a hub id or a folder"):
        make_scorer("vllm", model, tok)
    assert type(make_scorer("vllm", "some/model")).__name__ == "VLLMScorer"  # nothing started


def test_vllm_refuses_what_needs_the_transformers_model():
    from judge import Classifier
    from judge.backends.vllm import check_classifier

    for kw, what in (({"think": True}, "think=True"), ({"method": "decode"}, "method='decode'"),
                     ({"shortlist": 2, "shortlist_encoder": "model"}, "shortlist_encoder='model'")):
        with pytest.raises(ValueError, match=f"backend='vllm' .*; {what} needs the transformers model"):
            check_classifier(Classifier(["a", "b", "c"], "some/model", backend="vllm", **kw))
    check_classifier(Classifier(["a", "b", "c"], "some/model", backend="vllm", shortlist=2, shortlist_encoder="tfidf"))
    check_classifier(Classifier(["a", "b", "c"], "some/model", backend="vllm", shortlist=2))  # TF-IDF by default


def test_vllm_refuses_fit_and_fitted_classifiers(tmp_path):
    from judge import Classifier
    from judge.backends.vllm import check_classifier
    from judge.testing import tiny_pair

    with pytest.raises(ValueError, match=r"backend='vllm' .*; fit\(method='head'\) needs the transformers model "
                                         r".*with backend='transformers'"):
        check_classifier(Classifier(["a", "b"], "some/model", backend="vllm"), fit="head")
    model, tok = tiny_pair()
    clf = Classifier(["yes", "no"], model, tokenizer=tok)
    clf.fit(["sure", "nope", "yes!", "never"], ["yes", "no", "yes", "no"], cv=2)
    clf.save(tmp_path, model_ref="some/model")
    fitted = "this Classifier carries a fitted head .*use backend='transformers' for it"
    with pytest.raises(TypeError, match="backend='vllm' loads the model itself"):  # refused when set (the table's
        clf.backend = "vllm"                                                      # check across parameters)
    assert clf.backend == "transformers" and clf.adaptation_.kind == "head"      # and nothing changed
    loaded = Classifier.load(tmp_path)  # the saved head, on the model named by reference (never loaded here)
    assert loaded.adaptation_.kind == "head"
    loaded.backend = "vllm"
    with pytest.raises(ValueError, match=fitted):
        loaded.decision_function(["ok"])


def test_vllm_weightless_copy_refuses_to_run(tmp_path):
    import torch

    from judge.testing import tiny_pair

    model, tok = tiny_pair()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    from judge.backends import _vllm_front

    front = _vllm_front.front(str(tmp_path), str(tmp_path))
    assert front.model_.device.type == "meta" and front.option_ids("Label:", [" yes"])  # tokenizes
    x = torch.tensor([[1, 2, 3]])
    for run in (front.model_, front.model_.get_decoder()):  # what fit() and the reference would run
        with pytest.raises(RuntimeError, match="weightless .* backend='vllm' .*use backend='transformers'"):
            run(input_ids=x)


def test_vllm_missing_says_where_it_lives(monkeypatch):
    from judge import Classifier
    from judge.backends.vllm import VLLMScorer

    monkeypatch.setitem(sys.modules, "vllm", None)  # as where vLLM is not installed (the main environment)
    where = r"backend='vllm' needs vLLM, which does not import .*`bash scripts/setup_vllm.sh`.*\.venv-vllm"
    with pytest.raises(ImportError, match=where):
        VLLMScorer("some/model").setup()
    with pytest.raises(ImportError, match=where):
        VLLMScorer("some/model").sampling_params([" yes", " no"])
    with pytest.raises(ImportError, match=where):
        Classifier(["a", "b"], "some/model", backend="vllm").predict(["text"])


def test_processor_refuses_speculative_decoding():
    from judge.backends import vllm as vb

    with pytest.raises(ValueError, match="cannot run under speculative decoding"):
        vb._processor_vocab(SimpleNamespace(speculative_config=object(), model_config=None))


@pytest.mark.parametrize("kernel", ["direct", "torch", "xgrammar"])
def test_processor_rows_mask_like_trie_logits_processor(kernel):
    """Every path of the processor's masking (CPU logits in place; a bitmask applied by torch or
    by xgrammar's kernel, as on other devices) masks like TrieLogitsProcessor."""
    import torch

    from judge import TrieAutomaton, TrieLogitsProcessor
    from judge.backends.label_rows import LabelRows, _Walk
    from judge.engine import Engine
    from judge.testing import tiny_pair

    apply_bitmask = None
    if kernel == "xgrammar":
        apply_bitmask = pytest.importorskip("xgrammar").apply_token_bitmask_inplace
    eng = Engine(*tiny_pair()).setup()
    labels = [" card arrival", " card linking", " exchange rate"]
    auto = TrieAutomaton.build(labels, eng.vocab_)
    other = TrieAutomaton.build([" yes", " no"], eng.vocab_)
    canon = eng.option_ids("Label:", labels, end_token=True)[0]
    rows = LabelRows(eng.vocab_, "cpu")
    rows._xgr_apply = apply_bitmask
    if kernel != "direct":  # the bitmask path other devices and dtypes take
        rows._direct_dtypes = ()
    live = {1: [], 2: canon[:1], 3: list(canon), 5: []}  # 0 and 4: unconstrained; 3: finished; 5: another set
    for r, out in live.items():
        rows.req_info[r] = _Walk(other if r == 5 else auto, out)
    V = auto.vocab_size + 7  # logits padded past the tokenizer, as some models are
    gen = torch.Generator().manual_seed(0)
    for step in range(3):
        logits = torch.randn(6, V, generator=gen)
        got = rows.apply(logits.clone())
        for r in range(6):
            if r not in live:
                assert torch.equal(got[r], logits[r])
                continue
            ref = TrieLogitsProcessor(other if r == 5 else auto, prompt_length=0)(
                torch.tensor([live[r]], dtype=torch.long).reshape(1, -1), logits[r:r + 1])[0]
            assert torch.equal(torch.isinf(got[r]), torch.isinf(ref)), (step, r)
            assert torch.equal(got[r][~torch.isinf(got[r])], logits[r][~torch.isinf(ref)])
        for r, out in live.items():  # each request writes its best allowed token (the live lists grow)
            out.append(int(np.argmax(got[r].numpy())))
