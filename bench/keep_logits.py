"""The tree pass against the exact fallback under the installed transformers, on the same texts.

    python -m bench.keep_logits --n 32 --repeats 3 --json bench/results/keep_logits_5.25.json
    .venv-vllm/bin/python -m bench.keep_logits --n 32 --repeats 3 --json bench/results/keep_logits_5.19.json

Before transformers 5.20 (vLLM's pin), a causal LM's forward indexed every row of a batch by a
(B, P) ``logits_to_keep`` (``hidden[:, keep]``), so the engine's tree pass read wrong logits, its
self-check caught them, and every call took the exact fallback (one causal pass per prompt,
options batched on its cache). ``judge.engine.passes.keep_mode`` now finds how the installed
version takes the argument; where it cannot keep positions per row, the tree pass runs one row
at a time. This script scores seeded test texts against all labels both ways, through the
public ``judge.engine.Engine`` (``path="fallback"`` and ``path="auto"``), one torch thread, and
prints texts/s (median of ``--repeats``), the largest |difference| between the two and whether
every argmax agrees.

What it deliberately does not do: time the certified search or a Classifier's other paths
(bench/engine.py does), or compare transformers versions in one process (run it in each
environment).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"))
    ap.add_argument("--dataset", default="banking77")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    import torch
    import transformers

    from judge import datasets as ds
    from judge.engine import Engine, Query
    from judge.engine.passes import keep_mode
    from judge.models import load_model

    torch.set_num_threads(1)
    test = ds.load(args.dataset, split="test", data_dir=args.data_dir)
    sample = test.sample(args.n, seed=args.seed)
    labels = [" " + name.replace("_", " ") for name in test.label_names]
    queries = [Query((("Classify the banking query.\nText: ", False), (t, True), ("\nLabel:", False)), labels)
               for t in sample.texts]
    model, tok = load_model(device="cpu")
    res = {"transformers": transformers.__version__, "keep_mode": keep_mode(model), "dataset": args.dataset,
           "n": len(queries), "K": len(labels), "threads": 1, "repeats": args.repeats, "variants": {}}
    scores = {}
    for name, path in (("exact fallback", "fallback"), ("tree pass", "auto")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eng = Engine(model, tok, path=path).setup()
        eng.score(queries[:1])  # warm: the shared prompt's root cached, as a served model has it
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            scores[name] = np.array(eng.score(queries))
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        res["variants"][name] = {"path": eng.path_, "seconds": med, "all_seconds": times,
                                 "texts_per_s": len(queries) / med}
    diff = float(np.max(np.abs(scores["tree pass"] - scores["exact fallback"])))
    same = int(np.sum(scores["tree pass"].argmax(1) == scores["exact fallback"].argmax(1)))
    res.update(max_abs_diff=diff, argmax_identical=same,
               speedup=res["variants"]["exact fallback"]["seconds"] / res["variants"]["tree pass"]["seconds"])
    print(f"transformers {res['transformers']}, keep_mode {res['keep_mode']}; {res['n']} {args.dataset} test texts "
          f"x {res['K']} labels, one thread, median of {args.repeats}")
    print("| variant | engine path | texts/s | seconds |\n|---|---|---:|---:|")
    for name, v in res["variants"].items():
        print(f"| {name} | {v['path']} | {v['texts_per_s']:.2f} | {v['seconds']:.1f} |")
    print(f"tree pass / fallback speed: {res['speedup']:.2f}x; max |diff| {diff:.2e} nats; "
          f"argmax identical {same}/{res['n']}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
