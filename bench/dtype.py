"""Half precision, measured on CPU: what a GPU user's default (bfloat16 on CUDA) does to the scores.

    python -m bench.dtype --json bench/results/dtype_cpu.json
    python -m bench.dtype --n 8 --archs llama --labels 300          # a smoke run (numbers mean nothing)

For each dtype (float32, bfloat16, float16):

1. **Exactness against a same-dtype brute force**: tiny random models of several families (sliding
   windows, mixed layers, softcapping, GPT-2's learned positions) and the packaged SmolLM2-135M, each
   cast to the dtype: ``method="exact"`` scores against ``judge.testing.classifier_reference`` (one
   plain causal forward per label, the model in the same dtype, log-softmax in float64), max |diff|
   in nats, and the path the engine's self-check chose.
2. **Against float32**: SmolLM2 on ``--n`` seeded Banking77 test texts with all 77 labels: max |diff|
   of the log-probabilities, argmax agreement, max total variation of ``predict_proba`` (the
   default label-free prior), accuracy, and texts/s (one thread, median of ``--repeats``).
3. **The certified search under the dtype's rounding**: ``predict`` (certified search) against the
   argmax of ``predict_proba`` (full exact scoring, the same label-free prior) *in the same dtype* on ``--search-texts`` texts over ``--labels``
   generated tool names: how many certified answers disagree (a certificate must never be wrong),
   and how many were flagged uncertified.

What it deliberately does not do: run on a GPU (bench/gpu.py does, where there is one), or choose
anything itself: the policy and its reasons are in docs/gpu.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

DTYPES = ("float32", "bfloat16", "float16")
ARCHS = ("llama", "qwen2", "mistral", "gemma2", "gemma3", "phi3", "gpt2")
LABELS = ["card_arrival", "card_linking", "card", "exchange_rate", "pin_blocked", "top_up_failed"]
TEXTS = ["I am still waiting on my card, it has been two weeks now?", "rate for euros"]


def _exact_vs_reference(model, tok, labels, texts):
    from judge import Classifier
    from judge.testing import classifier_reference

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = Classifier(labels, model, tokenizer=tok, method="exact", batch_size=2)
        s = clf.decision_function(texts)
    ref = np.stack([classifier_reference(clf, t) for t in texts])
    return {"max_abs_diff": float(np.max(np.abs(s - ref))), "path": clf.engine_.path_,
            "self_check": {k: clf.engine_.check_.get(k) for k in ("max_abs_diff", "tolerance")},
            "argmax_agree": float(np.mean(s.argmax(1) == ref.argmax(1))),
            "warnings": sorted({str(w.message)[:100] for w in caught})}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default="../shared/datasets")
    ap.add_argument("--n", type=int, default=80, help="Banking77 test texts for the float32 comparison")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--archs", default=",".join(ARCHS))
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--labels", type=int, default=3000, help="tool names for the certified-search check")
    ap.add_argument("--search-texts", type=int, default=6)
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    import torch

    from judge import Classifier
    from judge import datasets as ds
    from judge.models import load_model
    from judge.testing import SLIDING_ARCHITECTURES, tiny_model
    from judge.testing.generators import tool_names

    torch.set_num_threads(1)
    base, tok = load_model(device="cpu")
    test = ds.load("banking77", "test", data_dir=args.data_dir).sample(args.n, seed=0)
    bank = list(ds.load("banking77", "test", data_dir=args.data_dir).label_names)
    names = tool_names(args.labels, seed=0)
    out = {"n": args.n, "threads": 1, "dtypes": {}}
    fp32 = None
    for dname in args.dtypes.split(","):
        dt = getattr(torch, dname)
        rec = {"tiny": {}}
        for arch in [a for a in args.archs.split(",") if a]:
            m = tiny_model(arch, tok, sliding_window=16 if arch in SLIDING_ARCHITECTURES else None).to(dt)
            rec["tiny"][arch] = _exact_vs_reference(m, tok, LABELS, TEXTS)
            print(dname, arch, json.dumps(rec["tiny"][arch]), flush=True)
        model = base.to(dt) if dname != "float32" else base
        rec["smollm2_vs_reference"] = _exact_vs_reference(model, tok, LABELS, TEXTS)
        print(dname, "smollm2", json.dumps(rec["smollm2_vs_reference"]), flush=True)

        clf = Classifier(bank, model, tokenizer=tok, method="exact")
        times, s = [], None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            s = clf.decision_function(list(test.texts))
            times.append(time.perf_counter() - t0)
        p = clf.predict_proba(list(test.texts))
        rec["banking77"] = {"texts_per_s": args.n / statistics.median(times),
                            "accuracy": float(np.mean(np.array(bank, object)[p.argmax(1)] == np.array(test.labels)))}
        if fp32 is None:
            fp32 = (s, p)
        else:
            rec["banking77"].update(
                max_abs_diff_vs_float32=float(np.max(np.abs(s - fp32[0]))),
                argmax_agree_vs_float32=float(np.mean(p.argmax(1) == fp32[1].argmax(1))),
                max_total_variation_vs_float32=float(np.max(0.5 * np.abs(p - fp32[1]).sum(1))))
        print(dname, "banking77", json.dumps(rec["banking77"]), flush=True)

        big = Classifier(names, model, tokenizer=tok, method="exact")
        texts = list(test.texts[: args.search_texts])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = big.predict_proba(texts).argmax(1)  # full exact scoring, the same prior as predict's
            pred = big.predict(texts)
        report = big.search_report_
        cert = None if report is None else np.asarray(report.certified, bool)
        agree = np.array([names.index(x) for x in pred]) == full
        rec["certified_search"] = {
            "labels": len(names), "texts": len(texts), "agree_with_full_argmax": int(agree.sum()),
            "certified": None if cert is None else int(cert.sum()),
            "certified_but_wrong": None if cert is None else int((cert & ~agree).sum())}
        print(dname, "search", json.dumps(rec["certified_search"]), flush=True)
        out["dtypes"][dname] = rec

    print("\n| dtype | tiny models: max |engine - same-dtype brute force| | SmolLM2 vs brute force | vs float32: max |diff| | argmax agree | max TV | accuracy | texts/s | certified wrong |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for dname, r in out["dtypes"].items():
        tiny = max(v["max_abs_diff"] for v in r["tiny"].values()) if r["tiny"] else float("nan")
        b = r["banking77"]
        cs = r["certified_search"]
        print(f"| {dname} | {tiny:.2g} | {r['smollm2_vs_reference']['max_abs_diff']:.2g} | "
              f"{b.get('max_abs_diff_vs_float32', 0):.2g} | {b.get('argmax_agree_vs_float32', 1):.3f} | "
              f"{b.get('max_total_variation_vs_float32', 0):.3f} | {b['accuracy']:.3f} | {b['texts_per_s']:.2f} | "
              f"{cs['certified_but_wrong']} of {cs['certified']} certified ({cs['agree_with_full_argmax']}/{cs['texts']} agree) |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
