"""A snapshot of scores on fixed inputs, to show a refactor changed no figure: bit for bit.

    python -m bench.snapshot --out /tmp/after.json
    git worktree add /tmp/base BASE_COMMIT && (cd /tmp/base && python -m bench.snapshot --out /tmp/before.json)
    python -m bench.snapshot --compare /tmp/before.json /tmp/after.json

What is scored (CPU, one torch thread, float32): tiny random models of three families (llama,
gemma3 with mixed sliding/full layers, gpt2) and the packaged SmolLM2-135M, through the public API
only: ``decision_function`` (exact), the first-token path, ``predict`` (the certified search) with
its report (and with the chat prompt on SmolLM2), ``predict_proba`` with the default label-free prior and after ``calibrate``, and
``Decider.ask`` (choice, yes/no, score) about two states. Every float is stored as its exact
``float.hex()``; ``--compare`` counts the values that differ and the largest difference.

What it deliberately does not do: time anything, or touch private names (a base commit's code
must run it too; names that a base commit lacks are skipped and reported).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

LABELS = ["card_arrival", "card_linking", "card", "exchange_rate", "pin_blocked", "top_up_failed"]
TEXTS = ["I am still waiting on my card, it has been two weeks now?", "rate for euros",
         "my pin is blocked, what do I do", "How do I link the card I just got?"]
STATES = [{"ticket": "My card was charged twice for the same order, please refund me."},
          {"ticket": "Hi, just checking which exchange rate you use for euros."}]


def _hex(a) -> list:
    return [float(x).hex() for x in np.asarray(a, dtype=np.float64).ravel()]


def _classifier_case(model, tok, labels, prompt=None) -> dict:
    from judge import Classifier

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = Classifier(labels, model, tokenizer=tok, method="exact", prompt=prompt)
        out["decision_function"] = _hex(clf.decision_function(TEXTS))
        out["predict"] = [str(x) for x in clf.predict(TEXTS)]
        rep = getattr(clf, "search_report_", None)
        if rep is not None:
            out["search_best_score"] = _hex(rep.best_score)
            out["search_certified"] = [bool(x) for x in rep.certified]
            out["search_fed"] = [int(x) for x in rep.fed]
        out["predict_proba"] = _hex(clf.predict_proba(TEXTS))
        clf.calibrate(TEXTS * 3, [labels[i % len(labels)] for i in range(len(TEXTS) * 3)])
        out["predict_proba_calibrated"] = _hex(clf.predict_proba(TEXTS))
        ft = Classifier(["yes", "no", "maybe"], model, tokenizer=tok, method="first_token")
        out["first_token"] = _hex(ft.decision_function(TEXTS))
    return out


def _decider_case(model, tok) -> dict:
    from judge import Choice, Decider, Score, YesNo

    questions = {"queue": Choice({"billing": None, "fraud": "unauthorised use", "cards": None}, instructions="Which team?"),
                 "refund": YesNo("Does the customer want a refund?"),
                 "urgency": Score(["not urgent", "somewhat", "very urgent"], instructions="How urgent is it?")}
    d = Decider(model, tok)
    out = {}
    for i, state in enumerate(STATES):
        ans = d.ask(state, questions)
        for qid, a in ans.items():
            out[f"{i}.{qid}.probabilities"] = _hex(list(a.probabilities.values()) if isinstance(a.probabilities, dict)
                                                   else a.probabilities)
    return out


def snapshot() -> dict:
    import torch

    import judge
    from judge.models import load_model
    from judge.testing import SLIDING_ARCHITECTURES, tiny_model

    torch.set_num_threads(1)
    base, tok = load_model(device="cpu")
    out = {"judge": str(Path(judge.__file__).resolve().parent), "cases": {}}
    for arch in ("llama", "gemma3", "gpt2"):
        m = tiny_model(arch, tok, sliding_window=16 if arch in SLIDING_ARCHITECTURES else None)
        out["cases"][f"tiny {arch}"] = _classifier_case(m, tok, LABELS)
        out["cases"][f"tiny {arch} decider"] = _decider_case(m, tok)
    out["cases"]["smollm2"] = _classifier_case(base, tok, LABELS)
    from judge import PromptTemplate

    out["cases"]["smollm2 chat prompt"] = _classifier_case(base, tok, LABELS, PromptTemplate(chat=True))
    out["cases"]["smollm2 decider"] = _decider_case(base, tok)
    return out


def compare(a: dict, b: dict) -> tuple[int, int, float]:
    """(values compared, values that differ, largest absolute difference) over the cases both hold."""
    n = bad = 0
    worst = 0.0
    for case in sorted(set(a["cases"]) & set(b["cases"])):
        for key in sorted(set(a["cases"][case]) & set(b["cases"][case])):
            x, y = a["cases"][case][key], b["cases"][case][key]
            if len(x) != len(y):
                bad += max(len(x), len(y))
                print(f"{case} / {key}: lengths differ ({len(x)} vs {len(y)})")
                continue
            for u, v in zip(x, y):
                n += 1
                if u != v:
                    bad += 1
                    if isinstance(u, str) and u.startswith(("0x", "-0x", "inf", "-inf", "nan")):
                        worst = max(worst, abs(float.fromhex(u) - float.fromhex(v)))
        for key in sorted(set(a["cases"][case]) ^ set(b["cases"][case])):
            print(f"{case} / {key}: only in one snapshot")
    return n, bad, worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the snapshot here (JSON)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="compare two snapshots")
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        n, bad, worst = compare(a, b)
        print(f"{n} values compared, {bad} differ (largest difference {worst:.3g})")
        return 1 if bad else 0
    snap = snapshot()
    text = json.dumps(snap, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
