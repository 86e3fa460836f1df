"""The vLLM section of ``bench/gpu.py`` (``--vllm``): constrained generation and label scoring on vLLM.

Run with the vLLM environment's python (``scripts/setup_vllm.sh``); see ``bench/gpu.py``'s
docstring for what is measured. Everything runs under ``bench/gpu.py``'s ``__main__`` guard
(vLLM's engine core is a spawned process).

What it deliberately does not do: tune vLLM (defaults, ``enforce_eager=True`` as the backend
uses), or compare anything but our processor with vLLM's own ``choice`` and our two scorers.
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from pathlib import Path


def _timed(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _generate(llm, batch, B, sp, is_label, valid) -> None:
    """``batch`` through ``llm.generate`` B requests per call; ``valid`` gets whether each wrote a label."""
    valid.clear()
    for s in range(0, len(batch), B):
        valid.extend(is_label(o.outputs[0]) for o in llm.generate(batch[s:s + B], sp, use_tqdm=False))


def processor_overhead(scorer, labels, batches, device) -> dict:
    """Milliseconds per decoding step of the logits processor alone, for B constrained rows of random logits.

    The processor is built as vLLM builds it (its class, a config naming the model) and fed a
    ``BatchUpdate`` adding B requests of one label set; each step advances every row by one
    canonical label token, then times ``apply`` (walks, bitmask rows, the kernel) on (B, V) logits.
    """
    from types import SimpleNamespace

    import torch
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate

    from judge.backends.vllm import LABELS_KEY, logits_processor_class

    path = str(scorer.llm_.llm_engine.model_config.model)
    cfg = SimpleNamespace(speculative_config=None, model_config=SimpleNamespace(model=path, tokenizer=path))
    seqs = scorer.option_ids("Tool:", labels[:64], end_token=True)
    V = len(scorer.tokenizer_)
    out = {}
    for B in batches:
        proc = logits_processor_class()(cfg, torch.device(device), False)
        live = [[] for _ in range(B)]
        sp = SamplingParams(extra_args={LABELS_KEY: labels})
        proc.update_state(BatchUpdate(batch_size=B, removed=[], added=[(i, sp, None, live[i]) for i in range(B)],
                                      moved=[]))
        logits = torch.randn(B, V, device=device)
        proc.apply(logits.clone())  # compiles the label set
        times = []
        for step in range(max(len(s) for s in seqs)):
            x = logits.clone()
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            proc.apply(x)
            if device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            for i, ids in enumerate(live):
                seq = seqs[i % len(seqs)]
                ids.append(seq[min(step, len(seq) - 1)])
        out[B] = 1000 * statistics.median(times)
    return out


def run_vllm(args) -> int:
    """Measure; print one line per figure; write ``args.json`` when given. Returns 0."""
    import numpy as np
    import torch
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import StructuredOutputsParams

    from judge import Classifier
    from judge import datasets as ds
    from judge.backends.vllm import VLLMScorer
    from judge.testing import tool_names

    cuda = torch.cuda.is_available()
    ks = [int(k) for k in args.ks.split(",") if k]
    batches = [int(b) for b in args.batches.split(",") if b]
    test = ds.load("banking77", split="test", data_dir=args.data_dir)
    texts = list(test.sample(args.n, seed=0).texts)
    # ONE vLLM engine for the whole run. On CUDA an engine takes gpu_memory_utilization (0.9 by
    # default) of the GPU at start-up, so a second one in this process (Classifier(backend="vllm")
    # below) would fail for lack of memory, and tearing an engine down does not reliably give its
    # memory back (its core is another process). So this scorer uses exactly the settings
    # Classifier(backend="vllm") builds (the defaults): judge.backends.vllm keeps one engine per
    # setting per process, and the Classifier below reuses this one. vLLM's structured-output
    # backend is then its default "auto", which picks xgrammar for a `choice` list (guidance only
    # where xgrammar refuses one); the backend each choice run used is recorded from its params.
    scorer = VLLMScorer(args.model).setup()
    llm = scorer.llm_
    out = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "model": args.model or "packaged",
           "dtype": scorer.dtype_, "block_size": scorer.block_size_, "generation": {}, "scoring": {}}
    prompts = [TokensPrompt(prompt_token_ids=scorer.encode([("Which tool handles this request?\nRequest: ", False),
                                                             (t, True), ("\nTool:", False)])) for t in texts]
    ends, tb = set(scorer.vocab_.end_token_ids), scorer.vocab_.token_bytes
    for K in ks:
        labels = [" " + x for x in tool_names(K, seed=0)]
        labelset = set(labels)
        label_bytes = {x.encode() for x in labels}
        ours = scorer.sampling_params(labels)
        theirs = SamplingParams(temperature=0.0, max_tokens=ours.max_tokens,
                                structured_outputs=StructuredOutputsParams(choice=labels))
        for name, sp in (("judge", ours), ("vllm-choice", theirs)):
            t0 = time.perf_counter()
            first = llm.generate(prompts[:1], sp, use_tqdm=False)  # compiles the label set
            compile_s = time.perf_counter() - t0
            if name == "judge":  # the label's bytes, end tokens dropped (as generate_labels does)
                def is_label(c, label_bytes=label_bytes):
                    return b"".join(tb[t] for t in c.token_ids if t not in ends) in label_bytes
            else:  # vLLM writes the backend "auto" resolved to into the caller's params
                name += "-" + str(getattr(sp.structured_outputs, "_backend", None) or "auto")

                def is_label(c, labelset=labelset):
                    return c.text in labelset
            for B in batches:
                n_req = max(2 * B, 16)
                batch = [prompts[i % len(prompts)] for i in range(n_req)]
                valid = []
                go = functools.partial(_generate, llm, batch, B, sp, is_label, valid)
                dt = _timed(go, repeat=1 if B == 1 or not cuda else 3)
                key = f"{name}@K={K},B={B}"
                out["generation"][key] = {"requests_per_s": n_req / dt, "first_call_s": compile_s,
                                          "valid": float(np.mean(valid))}
                print(f"{name:>22} K={K:>6} B={B:>4}: {n_req / dt:8.1f} requests/s  (first call {compile_s:.2f} s, "
                      f"{100 * np.mean(valid):.0f}% exact labels)", flush=True)
            del first
    dev = "cuda" if cuda else "cpu"
    for K in ks:
        labels = [" " + x for x in tool_names(K, seed=0)]
        for B, ms in processor_overhead(scorer, labels, batches, dev).items():
            out.setdefault("processor_ms_per_step", {})[f"K={K},B={B}"] = ms
            print(f"processor alone K={K:>6} B={B:>4}: {ms:7.3f} ms per decoding step ({dev})", flush=True)
    labels77 = list(test.label_names)
    score_texts = texts[: min(len(texts), 64 if cuda else 8)]
    vc = Classifier(labels77, args.model, method="exact", backend="vllm")
    tc = Classifier(labels77, args.model, method="exact", batch_size=8)
    for name, clf in (("vllm", vc), ("transformers", tc)):
        clf.decision_function(score_texts[:2])  # warm-up, compile
        dt = _timed(lambda c=clf: c.decision_function(score_texts), repeat=1 if not cuda else 3)
        out["scoring"][name] = {"texts_per_s": len(score_texts) / dt, "texts": len(score_texts),
                                "path": getattr(clf.engine_, "path_", None)}
        print(f"label scoring {name:>12} ({out['scoring'][name]['path']}): {len(score_texts) / dt:8.2f} texts/s "
              f"({len(score_texts)} texts x 77 labels)", flush=True)
    diff = np.abs(vc.decision_function(score_texts) - tc.decision_function(score_texts)).max()
    out["scoring"]["max_abs_diff"] = float(diff)
    out["scoring"]["cache_stats"] = dict(vc.engine_.cache_stats_)
    print(f"label scoring max |vllm - transformers| = {diff:.3g} nats; vLLM cache: {vc.engine_.cache_stats_}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0
