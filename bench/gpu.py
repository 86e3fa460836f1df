"""GPU check of the engine: exactness in bfloat16 and throughput at batch 1 / 8 / 64; and the vLLM backend.

    python -m bench.gpu [--model smollm2-135m-instruct] [--n 256] [--json bench/results/gpu.json]
    .venv-vllm/bin/python -m bench.gpu --vllm [--ks 1000,10000] [--batches 1,8,64,256] [--json ...]

``--vllm`` (run it with the vLLM environment's python, ``scripts/setup_vllm.sh [--cuda]``) measures
the vLLM backend instead: constrained generation in requests/s with this package's logits processor
(``judge.backends.vllm``) against vLLM's built-in ``choice`` (its default structured-output
backend, which picks xgrammar for a choice list; the one used is recorded), at K labels (tool names)
and batch B (B requests per ``LLM.generate`` call, greedy, Banking77 texts as prompts), with each
one's first-call compile time and the share of outputs that are exactly a label; then label scoring
in texts/s (Banking77, 77 labels, exact) of ``Classifier(backend="vllm")`` (on the same vLLM
engine: one per process, as a GPU holds one) against the transformers engine in the same
process (its ``path_`` is recorded: the main environment's engine, measured by the plain run
above, is the reference). ``--cpu`` runs it without CUDA (small sizes; CPU figures).

Runs as is on a CUDA machine (exits with a message where there is none). Exactness: the
tree pass in bfloat16 against a same-dtype brute force (each label after the rendered
prompt, tokenized independently, one plain causal forward per label, log-softmax in
float64), on Banking77 texts with all 77 labels; reported as max |diff| and argmax
agreement (bfloat16 rounds differently for different shapes, so ~1e-2 nats is expected,
not 1e-4). Throughput: texts/s of ``decision_function`` (full exact) and ``predict``
(bounded) at batch sizes 1, 8 and 64, medians of 3 runs after a warm-up.

What it deliberately does not do: run on CPU (it says so and exits 0), compare
with peers, or tune anything for the device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--n-exact", type=int, default=8)
    ap.add_argument("--json")
    ap.add_argument("--vllm", action="store_true", help="measure the vLLM backend (run with .venv-vllm/bin/python)")
    ap.add_argument("--ks", default="1000,10000", help="--vllm: label-set sizes")
    ap.add_argument("--batches", default="1,8,64,256", help="--vllm: requests per generate() call")
    ap.add_argument("--cpu", action="store_true", help="--vllm: run without CUDA (CPU figures)")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available() and not (args.vllm and args.cpu):
        print("bench/gpu.py: no CUDA device here; run it on a machine with a GPU.")
        return 0
    if args.vllm:
        # a private module (leading _): test_bench_scripts runs --help of the public scripts only
        from bench._vllm_bench import run_vllm

        if args.cpu and not torch.cuda.is_available():
            # vLLM's CPU backend otherwise reserves 92% of the machine's memory for its KV cache and refuses
            # to start when other processes hold more than 8% (as the vLLM test suite's conftest does)
            import os

            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB
        return run_vllm(args)
    from judge import Classifier
    from judge import datasets as ds
    from judge.models import load_model
    from judge.testing import classifier_reference

    model, tok = load_model(args.model, device="cuda", dtype=torch.bfloat16)
    test = ds.load("banking77", split="test", data_dir=args.data_dir)
    labels = list(test.label_names)
    texts = list(test.sample(args.n, seed=0).texts)
    out = {"device": torch.cuda.get_device_name(0), "dtype": "bfloat16", "model": args.model or "packaged"}
    clf = Classifier(labels, model, tokenizer=tok, method="exact", batch_size=8).setup()
    out["path"] = clf.engine_.path_
    out["self_check"] = clf.engine_.check_
    scores = clf.decision_function(texts[: args.n_exact])
    diffs, agree = [], 0
    for i, t in enumerate(texts[: args.n_exact]):
        ref = classifier_reference(clf, t)
        diffs.append(float(np.max(np.abs(scores[i] - ref))))
        agree += int(np.argmax(scores[i]) == np.argmax(ref))
    out["exact_bf16_max_abs_diff"] = max(diffs)
    out["exact_bf16_argmax_agreement"] = agree / len(diffs)
    print(f"bf16 exactness on {len(diffs)} texts x {len(labels)} labels: max |diff| {max(diffs):.3g}, "
          f"argmax agreement {agree}/{len(diffs)}", flush=True)
    out["throughput"] = {}
    for bs in (1, 8, 64):
        clf.batch_size = bs
        clf.decision_function(texts[:bs])  # warm-up
        for name, fn in (("exact", clf.decision_function), ("predict", clf.predict)):
            times = []
            for _ in range(3):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn(texts)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            tps = len(texts) / statistics.median(times)
            out["throughput"][f"{name}@{bs}"] = tps
            print(f"batch {bs:>3} {name:>8}: {tps:8.1f} texts/s", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
