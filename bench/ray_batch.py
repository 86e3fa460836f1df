"""Benchmark: ``judge.distributed.classify_dataset`` on 1 and 2 Ray actors vs the single-process Classifier.

    OMP_NUM_THREADS=1 python -m bench.ray_batch --n 64 --json bench/results/ray_batch.json
    python -m bench.ray_batch --n 8 --actors 1          # smoke test
    python -m bench.ray_batch --model tiny --n 4 --actors 1   # a random-weight model: the harness only

The packaged SmolLM2-135M-Instruct (float32, CPU), the first ``--n`` Banking77
test texts, all 77 labels, the default prompt, ``batch_size`` 16 everywhere.

``single-process``
    ``Classifier(labels).predict_proba(texts)`` in this process with torch on
    ``--threads`` (1) thread(s), after ``setup()`` (model load, prefix cache,
    label trie: reported as ``setup_seconds``, not timed).
``ray-N``
    ``classify_dataset(ray.data.from_items(rows), actors=N, num_cpus_per_actor=1)``
    on a local cluster of ``ray.init(num_cpus=max(actors))``, one torch thread
    per actor (``OMP_NUM_THREADS=1`` in the workers). ``seconds`` is the wall
    time of ``materialize()`` of the whole job *including* actor start and
    each actor's model load (what a user waits for); ``setup_seconds`` is
    the same job on 1 row per actor (start + load only, measured first),
    and ``steady_texts_per_s`` is ``n / (seconds - setup_seconds)``.

Reported per engine: ``engine, n_texts, actors, seconds, texts_per_s,
setup_seconds, steady_texts_per_s, overhead_vs_single`` (single-process
texts/s divided by this engine's texts/s; above 1 means slower) and
``agree_with_single`` (fraction of identical argmax labels), ``max_abs_diff``
(largest probability difference from the single-process run).

The 1-minute load average at the start and the end is recorded: on a shared
machine other processes take CPU from the actors (Ray runs its workers at a
lower priority, ``nice``), so compare runs only at similar load.

What it deliberately does not measure: multi-node clusters, GPUs, or the
parquet readers/writers (``classify_files``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--model", default=None, help="hub id or folder (default: the packaged SmolLM2); 'tiny': a "
                                                 "random-weight model saved to a temporary folder (smoke run)")
    p.add_argument("--actors", default="1,2", help="comma list of pool sizes")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the single-process run")
    p.add_argument("--data-dir", default=os.environ.get("JUDGE_DATA_DIR", str(REPO.parent / "shared" / "datasets")))
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    model, tmp = args.model, None
    if model == "tiny":  # actors load models by path: save the tiny one where they can read it
        from bench._common import load_bench_model

        tmp = tempfile.mkdtemp(prefix="judge-ray-tiny-")
        for part in load_bench_model("tiny"):
            part.save_pretrained(tmp)
        model = tmp
    try:
        return _run(args, model, torch)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _run(args, model, torch) -> int:
    from judge import datasets as ds
    from judge.classifier import Classifier

    load_start = os.getloadavg()[0]
    data = ds.load("banking77", split="test", data_dir=args.data_dir)
    labels = list(data.label_names)
    texts = list(data.texts[: args.n])
    rows = [{"id": i, "text": t} for i, t in enumerate(texts)]
    pools = [int(a) for a in args.actors.split(",")]
    records = []

    clf = Classifier(labels, model, batch_size=args.batch_size, progress=False)
    t0 = time.perf_counter()
    clf.setup()
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = clf.predict_proba(texts)
    sec = time.perf_counter() - t0
    single_tps = len(texts) / sec
    records.append({"engine": "single-process", "n_texts": len(texts), "actors": 0, "seconds": sec,
                    "texts_per_s": single_tps, "setup_seconds": setup, "steady_texts_per_s": single_tps,
                    "overhead_vs_single": 1.0, "agree_with_single": 1.0, "max_abs_diff": 0.0})
    del clf

    import ray

    from judge.distributed import classify_dataset

    ray.init(num_cpus=max(pools), include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}})
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        for n_act in pools:
            opts = dict(labels=labels, model=model, actors=n_act, batch_size=args.batch_size, num_cpus_per_actor=1)
            t0 = time.perf_counter()
            warm = ray.data.from_items(rows[:n_act], override_num_blocks=n_act)
            classify_dataset(warm, **{**opts, "batch_size": 1}).materialize()
            setup_s = time.perf_counter() - t0
            blocks = max(n_act * 4, 1)
            t0 = time.perf_counter()
            out = classify_dataset(ray.data.from_items(rows, override_num_blocks=blocks), **opts).materialize()
            sec = time.perf_counter() - t0
            got = {r["id"]: r for r in out.take_all()}
            if sorted(got) != list(range(len(rows))):
                raise RuntimeError(f"ray-{n_act}: rows lost or duplicated ({len(got)} ids of {len(rows)})")
            proba = np.array([got[i]["probabilities"] for i in range(len(rows))])
            tps = len(texts) / sec
            steady = len(texts) / max(sec - setup_s, 1e-9)
            records.append({"engine": f"ray-{n_act}", "n_texts": len(texts), "actors": n_act, "seconds": sec,
                            "texts_per_s": tps, "setup_seconds": setup_s, "steady_texts_per_s": steady,
                            "overhead_vs_single": single_tps / tps,
                            "agree_with_single": float(np.mean(proba.argmax(1) == ref.argmax(1))),
                            "max_abs_diff": float(np.abs(proba - ref).max())})
    finally:
        ray.shutdown()

    print(f"\nBanking77 test, first {len(texts)} texts, K={len(labels)}, {args.model or 'SmolLM2-135M-Instruct'}, CPU, "
          f"batch_size={args.batch_size}")
    print(f"{'engine':<16}{'seconds':>9}{'texts/s':>9}{'setup s':>9}{'steady/s':>10}{'overhead':>10}"
          f"{'agree':>7}{'max|dp|':>10}")
    for r in records:
        print(f"{r['engine']:<16}{r['seconds']:>9.1f}{r['texts_per_s']:>9.2f}{r['setup_seconds']:>9.1f}"
              f"{r['steady_texts_per_s']:>10.2f}{r['overhead_vs_single']:>10.2f}{r['agree_with_single']:>7.3f}"
              f"{r['max_abs_diff']:>10.1e}")
    if args.json:
        meta = {"ray": ray.__version__, "torch": torch.__version__, "cpus": os.cpu_count(),
                "machine": platform.machine(), "omp_threads": os.environ.get("OMP_NUM_THREADS"),
                "batch_size": args.batch_size, "dataset": "banking77/test", "model": args.model or "smollm2-135m-instruct",
                "load_avg_1min_start_end": [load_start, os.getloadavg()[0]]}
        Path(args.json).write_text(json.dumps({"meta": meta, "records": records}, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
