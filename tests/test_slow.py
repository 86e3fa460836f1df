"""Slow end-to-end checks (run with -m slow; not in CI)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_100k_labels_end_to_end(smollm2):
    from bench.huge_k import icd_codes
    from judge import Classifier

    labels = icd_codes(100_000)
    model, tok = smollm2
    clf = Classifier(labels, model, tokenizer=tok, top_k=2)
    pred = clf.predict(["Type 2 diabetes mellitus with hyperglycemia"])
    assert clf.method_ == "decode" and pred[0] in set(labels)
    assert clf.automaton_.memory_bytes < 64e6
