"""Every GPU figure the docs promise, in one command: exactness per dtype, float32 vs bfloat16, speed.

    python -m bench.gpu --all --json bench/results/gpu.json          # on a CUDA machine, <= 8 minutes
    python -m bench.gpu --all --cpu --quick --json /tmp/gpu.json     # the dry run (CI: under a minute)
    .venv-vllm/bin/python -m bench.gpu --vllm [--ks 1000,10000] [--batches 1,8,64] [--json ...]

``--all`` runs these sections in order, each printing its lines and each written to ``--json`` as
soon as it is done (a section that fails is recorded with its error and the others still run; the
exit status is then 1):

``env``
    The device, its memory, torch / transformers / CUDA versions, the model.
``exactness``
    For float32 and bfloat16: the path the engine's self-check chose (tree pass or exact fallback)
    and the engine's scores against a same-dtype brute force (``judge.testing.classifier_reference``:
    each label after the rendered prompt, one plain causal forward per label, log-softmax in
    float64) on ``--n-exact`` Banking77 texts with all 77 labels: max |diff| and argmax agreement.
``huge_k``
    ``--huge-k`` generated tool names (``judge.testing.tool_names``), 32 Banking77 texts, batch 8,
    float32: ``predict`` by the certified search (``method="search"``, the default above ``decode_above``) against
    ``decision_function`` scoring every label: texts/s, tokens fed per text, and whether every
    certified answer equals full scoring's argmax (the prior is None on both: the content-free
    prior of thousands of labels is a measurement of its own).
``dtype``
    bfloat16 against float32 on ``--n-dtype`` texts: max |diff| of the log-probabilities, argmax
    agreement, max total variation of ``predict_proba`` (the default label-free prior).
``throughput``
    Texts/s on Banking77 test texts (``max(32, 2 x batch)`` of them, at most ``--n``) at each batch
    size of ``--batches`` (float32, medians of ``--repeats`` runs after a warm-up, fewer where a row
    has run ``--row-seconds``): ``exact`` (``decision_function``: every label scored),
    ``predict`` (what users get: the default method's ``predict``; on a GPU the exact path scores in
    full, see ``CompiledLabels.search_pays``), ``certified`` (``method="search"``'s ``predict``: the
    certified argmax, with its tokens fed and rounds per text; and ``certified_no_prior``, the same
    with ``prior=None``),
    ``first_token`` (the single-pass path, on the Banking77 labels whose first tokens differ, greedily
    in label order: K is recorded), and ``exact_bf16`` (``decision_function`` in bfloat16, on whatever
    path its self-check chose).
``vllm``
    When ``.venv-vllm/bin/python`` exists (``scripts/setup_vllm.sh --cuda``), this script's
    ``--vllm`` mode run there (vLLM's label processor against its own ``choice`` at ``--ks`` and
    ``--batches``, and label scoring), merged in; otherwise recorded as skipped, with why.

Without CUDA it stops at once with exit status 2 and says so, unless ``--cpu`` is given. ``--quick``
shrinks everything (a tiny random-weight Llama over the packaged tokenizer, or ``--tokenizer``;
12 labels; 8 texts; batches 1 and 4; one repeat): the numbers mean nothing, the code paths are the real ones.

``--vllm`` alone (run it with the vLLM environment's python) measures the vLLM backend: constrained
generation in requests/s with this package's logits processor (``judge.backends.vllm``) against
vLLM's built-in ``choice`` (its default structured-output backend, which picks xgrammar for a choice
list; the one used is recorded), at K labels (tool names) and batch B, with each one's first-call
compile time and the share of outputs that are exactly a label; then label scoring in texts/s
(Banking77, 77 labels, exact) of ``Classifier(backend="vllm")`` against the transformers engine in
the same process. ``--cpu`` runs it without CUDA (small sizes; CPU figures).

What it deliberately does not do: compare with peers outside vLLM, or tune anything for the device
(the defaults users get are what is measured).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("env", "exactness", "throughput", "huge_k", "dtype", "vllm")


def _parser():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="run every section (env, exactness, throughput, huge_k, dtype, vllm)")
    ap.add_argument("--sections", default=None,
                    help=f"comma-separated subset of {','.join(SECTIONS)} (default with --all: all of them)")
    ap.add_argument("--model", default=None, help="default: the packaged SmolLM2-135M-Instruct")
    ap.add_argument("--tokenizer", default=None, help="--quick: the tiny model's tokenizer folder (default: packaged)")
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    ap.add_argument("--n", type=int, default=128, help="texts for the throughput runs")
    ap.add_argument("--labels", type=int, default=77, help="the first N Banking77 labels (default: all 77)")
    ap.add_argument("--n-exact", type=int, default=8, help="texts checked against the brute force, per dtype")
    ap.add_argument("--n-dtype", type=int, default=128, help="texts for bfloat16 vs float32")
    ap.add_argument("--batches", default="1,8,64", help="batch sizes (texts per forward; --vllm: requests)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--row-seconds", type=float, default=20.0,
                    help="throughput: no further repeats of a row once it has run this long (the median of fewer)")
    ap.add_argument("--budget-s", type=float, default=420.0,
                    help="once the run has taken this long, the sections and rows not yet run are recorded as skipped")
    ap.add_argument("--json")
    ap.add_argument("--cpu", action="store_true", help="run without CUDA (a dry run: CPU figures)")
    ap.add_argument("--quick", action="store_true", help="tiny model, 12 labels, 8 texts, batches 1,4, one repeat")
    ap.add_argument("--vllm", action="store_true", help="measure the vLLM backend (run with .venv-vllm/bin/python)")
    ap.add_argument("--huge-k", type=int, default=3000, help="huge_k: generated labels (quick: 200)")
    ap.add_argument("--ks", default="1000,10000,100000", help="--vllm: label-set sizes")
    return ap


def main(argv=None):
    args = _parser().parse_args(argv)
    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.cpu:
        print("bench/gpu.py: no CUDA device here (torch.cuda.is_available() is False); run it on a machine "
              "with a GPU, or pass --cpu for a dry run on the CPU.", file=sys.stderr)
        return 2
    if args.vllm:
        # a private module (leading _): test_bench_scripts runs --help of the public scripts only
        from bench._vllm_bench import run_vllm

        if args.quick:
            args.ks, args.batches, args.n = "100", "1,4", 8
        if not cuda:
            # vLLM's CPU backend otherwise reserves 92% of the machine's memory for its KV cache and refuses
            # to start when other processes hold more than 8% (as the vLLM test suite's conftest does)
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB
        return run_vllm(args)
    if not args.all and not args.sections:
        args.sections = "env,exactness,throughput"
    wanted = SECTIONS if (args.all and not args.sections) else tuple(s for s in args.sections.split(",") if s)
    unknown = sorted(set(wanted) - set(SECTIONS))
    if unknown:
        print(f"bench/gpu.py: unknown section(s) {unknown}; choose from {list(SECTIONS)}.", file=sys.stderr)
        return 2
    if args.quick:
        args.n, args.n_exact, args.n_dtype, args.batches, args.repeats, args.labels = 8, 2, 8, "1,4", 1, 12
        args.huge_k = 200
    run = _Run(args, device="cuda" if cuda else "cpu")
    failed = 0
    for name in wanted:
        t0 = time.perf_counter()
        if run.over_budget():
            run.out[name] = {"skipped": f"the run's time budget (--budget-s {args.budget_s:g}) was spent"}
            print(f"[{name}] skipped: time budget spent", flush=True)
            continue
        try:
            run.out[name] = getattr(run, name)()
        except Exception as e:  # recorded, the other sections still run; the exit status says so
            failed += 1
            run.out[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}
            print(f"[{name}] FAILED: {type(e).__name__}: {e}", flush=True)
        run.out.setdefault("seconds", {})[name] = round(time.perf_counter() - t0, 2)
        print(f"[{name}] {time.perf_counter() - t0:.1f} s", flush=True)
        run.write()
    return 1 if failed else 0


def _median_time(fn, repeats, sync, budget=float("inf")):
    """Median seconds of ``repeats`` calls; stops repeating once a row has taken ``budget`` seconds."""
    times = []
    for _ in range(repeats):
        if sum(times) > budget:
            break
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _distinct_first_tokens(labels, tok):
    """Labels (in order) whose first token, written as the model writes them, no earlier one shares."""
    from judge.labels import label_names_for

    seen, keep = set(), []
    for label, name in zip(labels, label_names_for(labels, None)):
        first = tok.encode(" " + name, add_special_tokens=False)[:1]
        if first and first[0] not in seen:
            seen.add(first[0])
            keep.append(label)
    return keep


class _Run:
    """The state one ``--all`` run shares between its sections: arguments, texts, loaded models."""

    def __init__(self, args, device):
        import torch

        from judge import datasets as ds

        self.args, self.device, self.torch = args, device, torch
        self.out = {"args": {k: v for k, v in vars(args).items()}, "quick": bool(args.quick)}
        test = ds.load("banking77", split="test", data_dir=args.data_dir)
        self.labels = list(test.label_names)[: args.labels]
        n = max(args.n, args.n_dtype, args.n_exact)
        self.texts = list(test.sample(min(n, len(test.texts)), seed=0).texts)
        self.batches = [int(b) for b in args.batches.split(",") if b]
        self._models = {}
        self.t0 = time.perf_counter()

    def over_budget(self) -> bool:
        return time.perf_counter() - self.t0 > self.args.budget_s

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def write(self):
        if self.args.json:
            Path(self.args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(self.args.json).write_text(json.dumps(self.out, indent=2, default=str))

    def model(self, dtype: str):
        """(model, tokenizer) in ``dtype`` on the device, loaded once per dtype."""
        if dtype not in self._models:
            torch = self.torch
            dt = getattr(torch, dtype)
            if self.args.quick:
                from judge.testing import tiny_model, tiny_pair

                if self.args.tokenizer:
                    from transformers import AutoTokenizer

                    tok = AutoTokenizer.from_pretrained(self.args.tokenizer)
                    model = tiny_model("llama", tok, seed=0)
                else:
                    model, tok = tiny_pair()
                # a copy: Module.to converts in place, and tiny_pair's model is shared (cached)
                model = copy.deepcopy(model).to(device=self.device, dtype=dt).eval()
            else:
                from judge.models import load_model

                model, tok = load_model(self.args.model, device=self.device, dtype=dt)
            self._models[dtype] = (model, tok)
        return self._models[dtype]

    def classifier(self, dtype="float32", labels=None, **kw):
        from judge import Classifier

        model, tok = self.model(dtype)
        return Classifier(labels or self.labels, model, tokenizer=tok, **kw)

    # ------------------------------------------------------------------ sections
    def env(self):
        torch = self.torch
        import transformers

        import judge

        rec = {"device": torch.cuda.get_device_name(0) if self.device == "cuda" else platform.processor() or "cpu",
               "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
               "judge": judge.__version__, "python": platform.python_version(),
               "model": "tiny random llama (--quick)" if self.args.quick else (self.args.model or "packaged"),
               "cpu_threads": torch.get_num_threads()}
        if self.device == "cuda":
            free, total = torch.cuda.mem_get_info()
            rec["memory_gib"] = round(total / 2**30, 1)
        print(" ".join(f"{k}={v}" for k, v in rec.items()), flush=True)
        return rec

    def exactness(self):
        from judge.testing import classifier_reference

        rec = {}
        texts = self.texts[: self.args.n_exact]
        for dtype in ("float32", "bfloat16"):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                clf = self.classifier(dtype, method="exact", batch_size=8).setup()
                scores = clf.decision_function(texts)
            ref = np.stack([classifier_reference(clf, t) for t in texts])
            rec[dtype] = {"path": clf.engine_.path_,
                          "self_check": {k: clf.engine_.check_.get(k) for k in ("max_abs_diff", "tolerance")},
                          "max_abs_diff": float(np.max(np.abs(scores - ref))),
                          "argmax_agreement": float(np.mean(scores.argmax(1) == ref.argmax(1))),
                          "texts": len(texts), "labels": len(self.labels),
                          "warnings": sorted({str(w.message)[:160] for w in caught})}
            r = rec[dtype]
            print(f"exactness {dtype:>8}: path {r['path']}, max |engine - brute force| {r['max_abs_diff']:.3g} nats, "
                  f"argmax agreement {r['argmax_agreement']:.3f} ({len(texts)} texts x {len(self.labels)} labels)",
                  flush=True)
        return rec

    def dtype(self):
        texts = self.texts[: self.args.n_dtype]
        res = {}
        for dtype in ("float32", "bfloat16"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clf = self.classifier(dtype, method="exact", batch_size=32)
                res[dtype] = (clf.decision_function(texts), clf.predict_proba(texts), clf.engine_.path_)
        (s32, p32, path32), (s16, p16, path16) = res["float32"], res["bfloat16"]
        rec = {"texts": len(texts), "path_float32": path32, "path_bfloat16": path16,
               "max_abs_diff": float(np.max(np.abs(s16 - s32))),
               "argmax_agreement": float(np.mean(s16.argmax(1) == s32.argmax(1))),
               "proba_argmax_agreement": float(np.mean(p16.argmax(1) == p32.argmax(1))),
               "max_total_variation": float(np.max(0.5 * np.abs(p16 - p32).sum(1)))}
        print(f"bfloat16 vs float32 on {len(texts)} texts: max |diff| {rec['max_abs_diff']:.3g} nats, argmax agreement "
              f"{rec['argmax_agreement']:.3f}, max TV of predict_proba {rec['max_total_variation']:.3g} "
              f"(paths {path32} / {path16})", flush=True)
        return rec

    def throughput(self):
        texts = self.texts[: self.args.n]
        rec = {"texts": len(texts), "rows": {}}
        _, tok = self.model("float32")
        first = _distinct_first_tokens(self.labels, tok)
        rec["first_token_labels"] = len(first)
        runs = (("exact", "float32", self.labels, "exact", "decision_function"),
                ("predict", "float32", self.labels, "auto", "predict"),
                ("certified", "float32", self.labels, "search", "predict"),
                ("certified_no_prior", "float32", self.labels, "search", "predict"),
                ("first_token", "float32", first, "first_token", "decision_function"),
                ("exact_bf16", "bfloat16", self.labels, "exact", "decision_function"))
        for name, dtype, labels, method, call in runs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                kw = {"prior": None} if name.endswith("no_prior") else {}
                clf = self.classifier(dtype, labels=labels, method=method, **kw)
                for bs in self.batches:
                    if self.over_budget():
                        rec["rows"][f"{name}@{bs}"] = {"skipped": "time budget spent"}
                        continue
                    clf.batch_size = bs
                    fn = getattr(clf, call)
                    fn(texts[: max(bs, 2)])  # warm-up (and the label-free prior, compiled once)
                    some = texts[: max(32, 2 * bs)]  # small batches: fewer texts, the same per-text cost
                    dt = _median_time(lambda fn=fn, some=some: fn(some), self.args.repeats, self.sync,
                                      self.args.row_seconds)
                    row = {"texts_per_s": len(some) / dt, "texts": len(some), "K": len(labels), "batch": bs,
                           "dtype": dtype,
                           "path": clf.engine_.path_, "method": clf.method_}
                    if call == "predict" and name.startswith("certified") and clf.search_report_ is not None:
                        r = clf.search_report_
                        row.update(tokens_fed_per_text=float(np.mean(r.fed)), rounds_per_text=float(np.mean(r.rounds)),
                                   certified=float(np.mean(r.certified)))
                    rec["rows"][f"{name}@{bs}"] = row
                    extra = (f", {row['tokens_fed_per_text']:.0f} tokens fed and {row['rounds_per_text']:.1f} rounds "
                             f"per text" if "tokens_fed_per_text" in row else "")
                    print(f"{name:>12} K={len(labels):>3} batch {bs:>3}: {row['texts_per_s']:9.1f} texts/s "
                          f"({row['path']}{extra})", flush=True)
        return rec

    def huge_k(self):
        from judge.testing import tool_names

        labels = tool_names(self.args.huge_k, seed=0)
        texts = self.texts[: 4 if self.args.quick else 32]
        rec = {"K": len(labels), "texts": len(texts), "batch": 8}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # method="search" is what "auto" takes above decode_above (2,000); named so --quick's 200 search too
            clf = self.classifier("float32", labels=labels, method="search", prior=None, batch_size=8)
            clf.predict(texts[:2])  # warm-up: compiles the label set
            t0 = time.perf_counter()
            top = clf.predict(texts)
            self.sync()
            rec["predict_s"] = time.perf_counter() - t0
            r = clf.search_report_
            rec.update(method=clf.method_, tokens_fed_per_text=float(np.mean(r.fed)),
                       rounds_per_text=float(np.mean(r.rounds)), certified=float(np.mean(r.certified)))
            t0 = time.perf_counter()
            full = clf.decision_function(texts)
            self.sync()
            rec["full_s"] = time.perf_counter() - t0
        rec["same_answers"] = float(np.mean(top == clf.classes_[full.argmax(1)]))
        rec["full_over_predict"] = rec["full_s"] / rec["predict_s"]
        print(f"huge K={len(labels)}: predict ({rec['method']}) {len(texts) / rec['predict_s']:.1f} texts/s, "
              f"{rec['tokens_fed_per_text']:.0f} tokens fed per text in {rec['rounds_per_text']:.1f} rounds; full "
              f"scoring {len(texts) / rec['full_s']:.1f} texts/s ({rec['full_over_predict']:.2f}x slower); same answers "
              f"{rec['same_answers']:.3f}", flush=True)
        return rec

    def vllm(self):
        py = REPO / ".venv-vllm" / "bin" / "python"
        if not py.exists():
            rec = {"skipped": f"{py.relative_to(REPO)} is not there (bash scripts/setup_vllm.sh"
                              f"{' --cuda' if self.device == 'cuda' else ''} builds it)"}
            print(f"vllm: skipped, {rec['skipped']}", flush=True)
            return rec
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [str(py), "-m", "bench.gpu", "--vllm", "--json", f"{tmp}/vllm.json", "--ks", self.args.ks,
                   "--batches", self.args.batches, "--data-dir", self.args.data_dir]
            cmd += (["--cpu"] if self.device == "cpu" else []) + (["--quick"] if self.args.quick else [])
            cmd += ["--model", self.args.model] if self.args.model else []
            done = subprocess.run(cmd, cwd=REPO, text=True, capture_output=True, timeout=3600)
            print(done.stdout[-6000:], flush=True)
            if done.returncode != 0:
                raise RuntimeError(f"the vLLM run exited {done.returncode}: {done.stderr[-2000:]}")
            return json.loads(Path(f"{tmp}/vllm.json").read_text())


if __name__ == "__main__":
    sys.exit(main())
