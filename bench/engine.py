"""Engine benchmark: exactness on every architecture, and throughput of the scoring paths.

    python -m bench.engine exactness --json bench/results/engine_exactness.json
    python -m bench.engine throughput --dataset banking77 --n 500 --json bench/results/engine_banking77.json
    # smoke runs (seconds; numbers mean nothing):
    python -m bench.engine exactness --archs llama --skip-real --skip-gemma
    python -m bench.engine throughput --model tiny --n 4 --before ''

``exactness``: tiny random models of every family in ``judge.testing.ARCHITECTURES``
(sliding windows of 16 tokens, shorter than the cached prefix and every prompt), the
packaged SmolLM2 and Gemma-3-270M (a 600+-token prompt, window 512): max |engine -
independent brute force| for ``exact``, ``first_token`` and ``decode`` (labels it
returns), the path the engine chose (tree or fallback), and silent mismatches (> 1e-4
on the path the engine trusted).

``throughput`` (one torch thread unless --threads): a seeded stratified sample of test
texts, all labels; per variant texts/s (median of --repeats):
``before`` (the previous two-pass implementation, at git ref --before, run in a
subprocess on the same texts; it is set up by scoring the first text, untimed, since
that implementation had no public ``setup()``), ``exact`` (the single pass), ``exact packed xP``,
``predict`` (bounded argmax), ``proba tol=1e-3``, and ``bare forward`` (one ordinary
causal pass over the same number of text + trie tokens on the same cache, no tree
mask). Agreement: argmax of predict == argmax of exact on every text; max total
variation of the tolerance path.

What it deliberately does not do: compare with peers (bench/throughput.py and
bench/masks.py do), or reach into the engine: it drives `judge.Classifier` and
the public `judge.engine` names (``OptionTrie``, ``native_gqa``) only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _exact_case(name, model, tok, labels, texts, prompt=None):
    from judge import Classifier
    from judge.testing import classifier_reference, reference_logprobs_ids

    rec = {"model": name}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = Classifier(labels, model, tokenizer=tok, method="exact", prompt=prompt, batch_size=2)
        s = clf.decision_function(texts)
    rec["path"] = clf.engine_.path_
    rec["reason"] = clf.engine_.check_.get("reason")
    rec["prompt_tokens"] = len(clf.prompt_ids(texts[0]))
    rec["exact_max_abs_diff"] = float(max(np.max(np.abs(s[i] - classifier_reference(clf, t))) for i, t in enumerate(texts)))
    single = ["yes", "no", "maybe"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ft = Classifier(single, model, tokenizer=tok, method="first_token", prompt=prompt)
        f = ft.decision_function(texts)
        rec["first_token_max_abs_diff"] = float(max(np.max(np.abs(
            f[i] - reference_logprobs_ids(model, tok(ft.render_prompt(t), add_special_tokens=False)["input_ids"],
                                          [[x[0]] for x in ft.label_token_ids]))) for i, t in enumerate(texts)))
        dec = Classifier(labels, model, tokenizer=tok, method="decode", top_k=3, prompt=prompt).decision_function(texts)
        ex = Classifier(labels, model, tokenizer=tok, method="exact", end_token=True, prompt=prompt)
        exs = ex.decision_function(texts)
        refs = np.stack([classifier_reference(ex, t) for t in texts])
    found = np.isfinite(dec)
    rec["decode_found"] = int(found.sum())
    rec["decode_max_abs_diff"] = float(np.max(np.abs(dec[found] - refs[found]))) if found.any() else None
    rec["exact_end_max_abs_diff"] = float(np.max(np.abs(exs - refs)))
    rec["warnings"] = sorted({str(w.message)[:120] for w in caught})
    worst = max(v for k, v in rec.items() if k.endswith("max_abs_diff") and v is not None)
    rec["silent_mismatch"] = bool(worst > 1e-4)
    return rec


def exactness(args):
    import torch

    from judge.models import load_model
    from judge.testing import ARCHITECTURES, SLIDING_ARCHITECTURES, tiny_model

    torch.set_num_threads(args.threads)
    model, tok = load_model(device="cpu")
    archs = ARCHITECTURES if args.archs is None else [a for a in args.archs.split(",") if a]
    unknown = sorted(set(archs) - set(ARCHITECTURES))
    if unknown:
        raise SystemExit(f"bench/engine.py: unknown --archs {unknown}; available here: {', '.join(ARCHITECTURES)}")
    labels = ["card_arrival", "card_linking", "card", "exchange_rate", "pin_blocked", "top_up_failed"]
    texts = ["I am still waiting on my card, it has been two weeks now?", "rate for euros"]
    out = []
    for arch in ([] if args.only_gemma else archs):
        m = tiny_model(arch, tok, sliding_window=16 if arch in SLIDING_ARCHITECTURES else None)
        out.append({"arch": arch, **_exact_case(f"tiny {arch}", m, tok, labels, texts)})
        print(json.dumps(out[-1]), flush=True)
    if not (args.only_gemma or args.skip_real):
        out.append({"arch": "smollm2 (real)", **_exact_case("SmolLM2-135M-Instruct", model, tok, labels, texts)})
        print(json.dumps(out[-1]), flush=True)
    if not args.skip_gemma:
        from judge import datasets as ds
        from judge.prompts import PromptTemplate

        g, gt = load_model("gemma3-270m", device="cpu")
        bank = list(ds.load("banking77", split="test", data_dir=args.data_dir).label_names)
        # the 77 labels listed: a prompt longer than the 512-token window; 6 of them scored
        preamble = ("You sort customer messages of a bank into categories. Read the message, think about "
                    "what the customer wants, and answer with the one category that fits best. ") * args.gemma_preamble
        prompt = PromptTemplate(chat=False, completion=preamble + "Classify the text into exactly one of these "
                                "labels.\n\nLabels:\n{labels}\n\nText: {text}\nLabel:")
        listed = PromptTemplate(chat=False, completion=prompt.completion.replace(
            "{labels}", "\n".join(f"- {x.replace('_', ' ')}" for x in sorted(bank))))
        out.append({"arch": f"gemma3-270m (real, window {g.config.sliding_window})", **_exact_case("Gemma-3-270M", g, gt, labels, texts,
                                                                prompt=listed)})
        print(json.dumps(out[-1]), flush=True)
    print("\n| model | path | prompt tokens | exact | exact+end | first_token | decode (found) | silent mismatch |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in out:
        print(f"| {r['arch']} | {r['path']} | {r['prompt_tokens']} | {r['exact_max_abs_diff']:.1e} | "
              f"{r['exact_end_max_abs_diff']:.1e} | {r['first_token_max_abs_diff']:.1e} | "
              f"{r['decode_max_abs_diff'] if r['decode_max_abs_diff'] is None else format(r['decode_max_abs_diff'], '.1e')}"
              f" ({r['decode_found']}) | {r['silent_mismatch']} |")
    n_bad = sum(r["silent_mismatch"] for r in out)
    print(f"\nsilent mismatches: {n_bad} of {len(out)}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"records": out, "silent_mismatches": n_bad}, indent=2))


_BEFORE = r'''
import json, sys, time, numpy as np, torch
torch.set_num_threads(int(sys.argv[3]))
from judge import Classifier
from judge.models import load_model
data = json.load(open(sys.argv[1]))
model, tok = load_model(device="cpu")
clf = Classifier(data["labels"], model, tokenizer=tok, method="exact", batch_size=data["batch_size"], progress=False)
clf.decision_function(data["texts"][:1])  # set up (model, prefix cache, labels), untimed: no public setup() then
times = []
for _ in range(data["repeats"]):
    t = time.perf_counter(); s = clf.decision_function(data["texts"]); times.append(time.perf_counter() - t)
np.save(sys.argv[2], s)
print(json.dumps({"times": times}))
'''


def _before(ref, labels, texts, args):
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        arch = subprocess.run(["git", "-C", str(REPO), "archive", ref, "judge"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(src)], input=arch.stdout, check=True)
        (Path(tmp) / "in.json").write_text(json.dumps({"labels": labels, "texts": texts, "batch_size": args.batch_size,
                                                        "repeats": args.repeats}))
        (Path(tmp) / "run.py").write_text(_BEFORE)
        env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS=str(args.threads))
        res = subprocess.run([sys.executable, str(Path(tmp) / "run.py"), str(Path(tmp) / "in.json"),
                              str(Path(tmp) / "s.npy"), str(args.threads)], capture_output=True, text=True, env=env,
                             cwd=tmp)
        if res.returncode != 0:
            return None, None, res.stderr[-400:]
        times = json.loads(res.stdout.strip().splitlines()[-1])["times"]
        return times, np.load(Path(tmp) / "s.npy"), None


def _bare(clf, texts, batch_size):
    """One ordinary causal pass over the same number of text + trie tokens per text, on the root cache."""
    import torch
    from transformers import DynamicCache

    from judge.engine import OptionTrie, native_gqa

    model = clf.model_
    tok = clf.tokenizer_
    root = tok(clf.prompt_prefix_, add_special_tokens=False)["input_ids"]
    cache0 = DynamicCache()
    with torch.inference_mode():
        model(input_ids=torch.tensor([root]), use_cache=True, cache=cache0)
    kv = [(layer.keys, layer.values) for layer in cache0.layers]
    prompts = [clf.prompt_ids(t) for t in texts]
    trie = OptionTrie(clf.scored_token_ids_)
    internal = [int(trie.token[n]) for n in range(1, len(trie)) if len(trie.children(n))]
    n_read = 1 + len(internal)
    gqa = native_gqa(model.device)  # the engine's kernel choice, for a fair bare pass
    t0 = time.perf_counter()
    for s in range(0, len(prompts), batch_size):
        seqs = []
        for ids in prompts[s:s + batch_size]:
            lcp = 0
            while lcp < min(len(root), len(ids) - 1) and ids[lcp] == root[lcp]:
                lcp += 1
            att_root = lcp
            seqs.append((att_root, ids[lcp:] + internal))
        L = max(len(x) for _, x in seqs)
        B = len(seqs)
        ids = torch.zeros((B, L), dtype=torch.long)
        att = torch.zeros((B, len(root) + L), dtype=torch.long)
        for b, (lcp, x) in enumerate(seqs):
            att[b, :lcp] = 1
            ids[b, L - len(x):] = torch.as_tensor(x)
            att[b, len(root) + L - len(x):] = 1
        cache = DynamicCache()
        for i, (k, v) in enumerate(kv):
            cache.update(k.expand(B, *k.shape[1:]), v.expand(B, *v.shape[1:]), i)
        with torch.inference_mode(), gqa:
            model(input_ids=ids, attention_mask=att, use_cache=True, logits_to_keep=n_read, cache=cache)
    return time.perf_counter() - t0


def throughput(args):
    import torch

    from bench._common import load_bench_model
    from judge import Classifier
    from judge import datasets as ds
    from judge.calibration import softmax

    torch.set_num_threads(args.threads)
    test = ds.load(args.dataset, split="test", data_dir=args.data_dir)
    sample = test.sample(args.n, seed=args.seed) if args.n < len(test) else test
    labels = list(test.label_names)
    texts = list(sample.texts)
    model, tok = load_bench_model(args.model, device="cpu")
    clf = Classifier(labels, model, tokenizer=tok, method="exact", batch_size=args.batch_size, progress=False).setup()
    res = {"dataset": args.dataset, "n": len(texts), "K": len(labels), "threads": args.threads,
           "batch_size": args.batch_size, "repeats": args.repeats, "variants": {}}

    def run(name, fn):
        times, out = [], None
        for _ in range(args.repeats):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        res["variants"][name] = {"seconds": med, "texts_per_s": len(texts) / med, "all_seconds": times,
                                 "input_tokens": clf.engine_.last_usage_.get("input_tokens")}
        print(f"{name:>22}: {len(texts) / med:7.3f} texts/s  ({med:.1f} s)", flush=True)
        return out

    full = run("exact (single pass)", lambda: clf.decision_function(texts))
    for p in args.pack:
        clf.pack = p
        packed = run(f"exact packed x{p}", lambda: clf.decision_function(texts))
        clf.pack = 1
        res["variants"][f"exact packed x{p}"]["max_abs_diff_vs_exact"] = float(np.max(np.abs(packed - full)))
    pred = run("predict (bounded)", lambda: clf.predict(texts))
    res["variants"]["predict (bounded)"]["argmax_identical"] = int(np.sum(pred == clf.classes_[full.argmax(1)]))
    approx = run("proba tol=1e-3", lambda: clf.predict_proba(texts, tolerance=1e-3))
    res["variants"]["proba tol=1e-3"]["max_total_variation"] = float(
        np.max(0.5 * np.abs(approx - softmax(full)).sum(1)))
    bare = []
    for _ in range(args.repeats):
        bare.append(_bare(clf, texts, args.batch_size))
    med = statistics.median(bare)
    res["variants"]["bare forward"] = {"seconds": med, "texts_per_s": len(texts) / med, "all_seconds": bare}
    print(f"{'bare forward':>22}: {len(texts) / med:7.3f} texts/s  ({med:.1f} s)", flush=True)
    if args.before and args.model is not None:
        print(f"before: skipped (the previous implementation runs on the packaged model, not {args.model!r})")
    elif args.before:
        times, scores, err = _before(args.before, labels, texts, args)
        if times is None:
            res["variants"]["before (two-pass)"] = {"error": err}
            print("before: failed:", err)
        else:
            med = statistics.median(times)
            res["variants"]["before (two-pass)"] = {
                "seconds": med, "texts_per_s": len(texts) / med, "all_seconds": times, "ref": args.before,
                "argmax_agreement_with_exact": float(np.mean(scores.argmax(1) == full.argmax(1))),
                "max_abs_diff_vs_exact": float(np.max(np.abs(scores - full)))}
            print(f"{'before (two-pass)':>22}: {len(texts) / med:7.3f} texts/s  ({med:.1f} s)", flush=True)
    base = res["variants"].get("before (two-pass)", {}).get("texts_per_s")
    bare_tps = res["variants"]["bare forward"]["texts_per_s"]
    print("\n| variant | texts/s | x before | vs bare forward | check |")
    print("|---|---:|---:|---:|---|")
    for name, v in res["variants"].items():
        if "texts_per_s" not in v:
            continue
        check = ""
        if "argmax_identical" in v:
            check = f"argmax identical {v['argmax_identical']}/{len(texts)}"
        elif "max_total_variation" in v:
            check = f"max TV {v['max_total_variation']:.2e}"
        elif "max_abs_diff_vs_exact" in v:
            check = f"max |diff| {v['max_abs_diff_vs_exact']:.1e}"
        xb = f"{v['texts_per_s'] / base:.2f}" if base else "-"
        print(f"| {name} | {v['texts_per_s']:.3f} | {xb} | {v['texts_per_s'] / bare_tps:.2f} | {check} |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=2))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["exactness", "throughput"])
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    ap.add_argument("--dataset", default="banking77")
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pack", type=int, nargs="*", default=[2])
    ap.add_argument("--before", default="f138b36", help="git ref of the previous implementation ('' to skip)")
    ap.add_argument("--model", default=None,
                    help="throughput: model for load_model (default: the packaged SmolLM2); 'tiny': a random-weight "
                         "model, for a smoke run")
    ap.add_argument("--archs", default=None, help="exactness: comma list of tiny architectures (default: all)")
    ap.add_argument("--skip-real", action="store_true", help="exactness: skip the real SmolLM2")
    ap.add_argument("--skip-gemma", action="store_true")
    ap.add_argument("--only-gemma", action="store_true")
    ap.add_argument("--gemma-preamble", type=int, default=0, help="repeat an instruction paragraph N times")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    (exactness if args.part == "exactness" else throughput)(args)


if __name__ == "__main__":
    main()
