"""What a fitted classifier costs at predict time, beside the zero-shot classifier it was fitted from.

For each dataset and training size: ``Classifier(labels).fit(draw)`` with the defaults (the head,
``features="auto"``), then ``predict_proba`` on the same test texts with the fitted classifier and
with a zero-shot ``Classifier(labels)``, each timed in process CPU seconds on one thread (best of
``--repeats``), after a warm-up call (model loaded, prefix cached, label prior scored). The fitted
call is broken into what it runs (`judge.adaptation.head.LinearHead.decision_function`): the
zero-shot scores (only when the head reads them as an offset: the default up to 8 texts per class),
the answer-slot states (one plain forward pass over each prompt, apart from the scoring pass), the
sentence embedding and the TF-IDF block.

    python -m bench.fit_predict_cost --json bench/results/fit_predict_cost.json

What it deliberately does not do: measure accuracy (bench/fit_curve.py does) or use a GPU.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = str(HERE.parent.parent / "shared" / "datasets")


def _cpu(fn, repeats):
    best = None
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        dt = time.process_time() - t0
        best = dt if best is None else min(best, dt)
    return best


def _draw(data, per_class, seed):
    rng = np.random.default_rng(seed)
    y = np.asarray(data.labels)
    idx = []
    for lab in sorted(set(data.labels)):
        pool = np.flatnonzero(y == lab)
        idx += rng.choice(pool, min(per_class, len(pool)), replace=False).tolist()
    return [data.texts[i] for i in idx], [data.labels[i] for i in idx]


def measure(dataset, per_class, n_test, repeats, seed=0, data_dir=DATA, model=None) -> dict:
    from judge import Classifier
    from judge.adaptation.features import answer_states
    from judge.datasets import load
    from judge.encoders import get_encoder

    train, test = load(dataset, "train", data_dir=data_dir), load(dataset, "test", data_dir=data_dir)
    labels = sorted(set(train.labels))
    texts, y = _draw(train, per_class, seed)
    probe = list(test.texts[:n_test])
    m, tok = model if model is not None else (None, None)
    zs = Classifier(labels, m, tokenizer=tok, progress=False)
    fitted = Classifier(labels, m, tokenizer=tok, progress=False)
    t0 = time.process_time()
    fitted.fit(texts, y, random_state=seed)
    fit_s = time.process_time() - t0
    zs.predict_proba(probe[:2])
    fitted.predict_proba(probe[:2])  # warm-up: model, prefix cache, label prior, embedder
    head = fitted.adaptation_
    row = {"dataset": dataset, "K": len(labels), "per_class": per_class, "n_train": len(texts), "n_test": n_test,
           "method": zs.method_, "head": repr(head), "features": head.features, "fit_cpu_s": fit_s,
           "zero_shot_cpu_s": _cpu(lambda: zs.predict_proba(probe), repeats),
           "fitted_cpu_s": _cpu(lambda: fitted.predict_proba(probe), repeats)}
    parts = {"answer_states": _cpu(lambda: answer_states(fitted, probe), repeats)}
    if head.uses_scores:
        parts["zero_shot_scores"] = _cpu(lambda: zs.decision_function(probe), repeats)
    if "embed" in head.block_names or head.uses_similarity:
        enc = get_encoder(head.embedder)
        parts["sentence_embedding"] = _cpu(lambda: enc(probe), repeats)
    if head.tfidf is not None:
        parts["tfidf"] = _cpu(lambda: head.tfidf.encode(probe), repeats)
    row["fitted_parts_cpu_s"] = parts
    row["ratio"] = row["fitted_cpu_s"] / row["zero_shot_cpu_s"]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="trec,banking77", help="comma-separated (default trec,banking77)")
    ap.add_argument("--per-class", default="4,16", help="training texts per class, comma-separated (default 4,16)")
    ap.add_argument("--n-test", type=int, default=64, help="test texts timed per call (default 64)")
    ap.add_argument("--repeats", type=int, default=2, help="timings per call; the best is kept (default 2)")
    ap.add_argument("--model", default=None, help="the packaged SmolLM2 (default), or tiny for a smoke run")
    ap.add_argument("--data-dir", default=DATA, help="folder of the datasets (default ../shared/datasets)")
    ap.add_argument("--json", default=str(HERE / "results" / "fit_predict_cost.json"), help="where to write the rows")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    model = None
    if args.model is not None:
        from bench._common import load_bench_model

        model = load_bench_model(args.model)
    rows = []
    for ds in args.datasets.split(","):
        for pc in (int(x) for x in args.per_class.split(",")):
            r = measure(ds, pc, args.n_test, args.repeats, data_dir=args.data_dir, model=model)
            print(json.dumps(r), flush=True)
            rows.append(r)
    Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
