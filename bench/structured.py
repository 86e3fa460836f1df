"""Benchmark: JSON schemas with one big enum field, ours (llguidance + trie) vs llguidance vs xgrammar.

    OMP_NUM_THREADS=1 python -m bench.structured --tokenizers qwen3,llama3 --k 100,1000,10000,100000 \\
        --repeats 3 --timeout 120 --json bench/results/structured.json
    OMP_NUM_THREADS=1 python -m bench.structured --e2e --k 100,1000,10000,100000 --docs 5

The schema: ``{"id": integer, "tool": enum of K tool names, "urgent": boolean,
"note": string (maxLength 16)}``. For every tokenizer, K and engine, one
worker subprocess (killed after ``--timeout`` seconds, recorded as ``timeout``):

* ``compile_ms``: from the schema to the first mask (llguidance compiles
  lazily, so the first mask is included for every engine), median of
  ``--repeats``. Ours = ``judge.structured.StructuredSchema`` (Lark grammar for
  the structure + one ``TrieAutomaton`` for the enum); ``llguidance`` alone = the
  same Lark grammar with the enum as alternatives in it; ``llguidance-json`` =
  ``LLMatcher.grammar_from_json_schema`` (same separators, no free whitespace);
  xgrammar alone =
  ``GrammarCompiler.compile_json_schema`` (same separators, no free whitespace).
  Per-tokenizer setup (llguidance/xgrammar tokenizer objects, our vocabulary
  trie) is done before and not counted.
* ``mask_us``: per-step mask time along the document
  ``{"id": 12, "tool": <label>, "urgent": true, "note": "on it"}`` for 50
  seeded labels, median over steps (ours also split into steps inside the
  enum value, ``enum_us``, and grammar steps, ``grammar_us``). Ours walks the
  tokens it allows (the value tokenized on its own); the peers walk the
  canonical tokenization of the same text.
* ``dispatch_us``: ours only, the time of one grammar -> trie -> grammar
  switch: the sum of the medians (``disp_p90``: of the 90th percentiles) of
  its three parts: OR-ing the automaton's root row into llguidance's mask,
  consuming the virtual token, and handing back at the closing quote.

``--e2e``: end-to-end generation with the packaged SmolLM2-135M-Instruct on
CPU: ``--docs`` sampled documents per K; ``valid`` = documents that parse and
validate (jsonschema) / documents; ``s_per_doc``; ``proc_ms_per_token`` = time
spent in our logits processor per generated token.

What it deliberately does not do: use a GPU, batch sequences, or tune any
engine's options beyond matching the output format.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ENGINES = ("ours", "llguidance", "llguidance-json", "xgrammar")


def make_schema(k: int, seed: int = 0) -> dict:
    from judge.testing import tool_names  # imported here: --help stays fast

    return {"type": "object", "properties": {
        "id": {"type": "integer"}, "tool": {"enum": tool_names(k, seed=seed)},
        "urgent": {"type": "boolean"}, "note": {"type": "string", "maxLength": 16}}}


def _doc(label: str) -> tuple[str, str, str]:
    pre = '{"id": 12, "tool":'
    val = " " + json.dumps(label, ensure_ascii=False)
    post = ', "urgent": true, "note": "on it"}'
    return pre, val, post


def _bits(row, V):
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")[:V])


# --------------------------------------------------------------------------- workers
def _worker(spec: dict) -> dict:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(spec["tokenizer"])
    engine, k, reps = spec["engine"], spec["K"], spec["repeats"]
    schema = make_schema(k, spec["seed"])
    labels = schema["properties"]["tool"]["enum"]
    rng = np.random.default_rng(spec["seed"] + 1)
    picks = [labels[i] for i in rng.choice(len(labels), size=min(50, len(labels)), replace=False)]
    eos = tok.eos_token_id
    V = len(tok)
    out = {"engine": engine, "K": k}
    if engine in ("ours", "llguidance"):
        from judge.structured import StructuredLogitsProcessor, StructuredSchema

        thr = 1 if engine == "ours" else 10**9
        StructuredSchema(make_schema(100, 99), tok, enum_threshold=thr)  # per-tokenizer setup, JIT warm-up
        comp = []
        for _ in range(reps):
            t0 = time.perf_counter()
            c = StructuredSchema(schema, tok, enum_threshold=thr)
            p = StructuredLogitsProcessor(c, 0)
            p.allowed([])
            comp.append((time.perf_counter() - t0) * 1e3)
        out["compile_ms"] = statistics.median(comp)
        out["compile_parts_ms"] = c.compile_ms
        steps, enum_steps, gram_steps, disp = [], [], [], {}
        for lab in picks:
            pre, val, post = _doc(lab)
            if engine == "ours":
                ids = (tok.encode(pre, add_special_tokens=False) + tok.encode(val, add_special_tokens=False)
                       + tok.encode(post, add_special_tokens=False))
            else:
                ids = tok.encode(pre + val + post, add_special_tokens=False)
            proc = StructuredLogitsProcessor(c, 0)
            for i, t in enumerate(ids + [eos]):
                st = proc.state(ids[:i])
                t0 = time.perf_counter_ns()
                row = proc.mask_row(st)
                dt = time.perf_counter_ns() - t0
                steps.append(dt)
                (enum_steps if st.slot >= 0 else gram_steps).append(dt)
                if t not in set(_bits(row, V).tolist()):
                    out.setdefault("rejected", 0)
                    out["rejected"] += 1
                    break
            for key, v in proc.dispatch_ns.items():
                disp.setdefault(key, []).extend(v)
        out["mask_us"] = statistics.median(steps) / 1e3
        out["enum_us"] = statistics.median(enum_steps) / 1e3 if enum_steps else None
        out["grammar_us"] = statistics.median(gram_steps) / 1e3 if gram_steps else None
        if engine == "ours" and disp.get("enter"):
            # one switch = mask union at the slot start + entering + leaving
            med = {key: statistics.median(v) / 1e3 for key, v in disp.items() if v}
            p90 = {key: float(np.percentile(v, 90)) / 1e3 for key, v in disp.items() if v}
            out["dispatch_parts_us"] = med
            out["dispatch_us"] = sum(med.values())
            out["dispatch_p90_us"] = sum(p90.values())
            out["switches"] = len(disp["enter"])
        out["steps"] = len(steps)
    elif engine == "llguidance-json":
        import llguidance
        import llguidance.hf

        lltok = llguidance.hf.from_tokenizer(tok, n_vocab=V, eos_token=eos)
        words = (V + 31) // 32
        row = np.zeros(words, np.int32)
        opts = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
        comp = []
        for _ in range(reps):
            t0 = time.perf_counter()
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=opts)
            m = llguidance.LLMatcher(lltok, grammar, log_level=0)
            if m.is_error():
                raise RuntimeError(m.get_error()[:300])
            m.unsafe_compute_mask_ptr(row.ctypes.data, row.nbytes)
            comp.append((time.perf_counter() - t0) * 1e3)
        out["compile_ms"] = statistics.median(comp)
        steps = []
        for lab in picks:
            pre, val, post = _doc(lab)
            ids = tok.encode(pre + val + post, add_special_tokens=False) + [eos]
            m = llguidance.LLMatcher(lltok, grammar, log_level=0)
            for t in ids:
                t0 = time.perf_counter_ns()
                m.unsafe_compute_mask_ptr(row.ctypes.data, row.nbytes)
                steps.append(time.perf_counter_ns() - t0)
                if not m.consume_token(t):
                    out["rejected"] = out.get("rejected", 0) + 1
                    break
        out["mask_us"] = statistics.median(steps) / 1e3
        out["steps"] = len(steps)
    else:
        import torch
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V, stop_token_ids=[eos])
        comp = []
        for _ in range(reps):
            t0 = time.perf_counter()
            compiler = xgr.GrammarCompiler(info, cache_enabled=False)
            cg = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                              separators=(", ", ": "), strict_mode=True)
            m = xgr.GrammarMatcher(cg)
            bm = torch.zeros((1, (V + 31) // 32), dtype=torch.int32)
            m.fill_next_token_bitmask(bm, 0)
            comp.append((time.perf_counter() - t0) * 1e3)
            print(json.dumps({"event": "compile", "ms": comp[-1]}), flush=True)
        out["compile_ms"] = statistics.median(comp)
        steps = []
        for lab in picks:
            pre, val, post = _doc(lab)
            ids = tok.encode(pre + val + post, add_special_tokens=False) + [eos]
            m = xgr.GrammarMatcher(cg)
            for t in ids:
                t0 = time.perf_counter_ns()
                m.fill_next_token_bitmask(bm, 0)
                steps.append(time.perf_counter_ns() - t0)
                if not m.accept_token(t):
                    out["rejected"] = out.get("rejected", 0) + 1
                    break
        out["mask_us"] = statistics.median(steps) / 1e3
        out["steps"] = len(steps)
    return out


def _run(spec, timeout):
    cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           cwd=str(Path(__file__).resolve().parents[1]))
    except subprocess.TimeoutExpired as e:
        done = [json.loads(x)["ms"] for x in (e.stdout or b"").decode().splitlines() if x.startswith('{"event"')]
        return {"engine": spec["engine"], "K": spec["K"], "status": "timeout", "timeout_s": timeout,
                "partial_compile_ms": done}
    lines = [x for x in p.stdout.splitlines() if x.startswith('{"engine"')]
    if p.returncode != 0 or not lines:
        tail = [x for x in p.stderr.strip().splitlines() if x.strip() and "backtrace" not in x]
        return {"engine": spec["engine"], "K": spec["K"], "status": f"error: {tail[-1] if tail else p.returncode}"}
    return {**json.loads(lines[-1]), "status": "ok"}


def _e2e(ks, docs, seed):
    import jsonschema
    import torch

    from judge.models import load_model
    from judge.structured import StructuredLogitsProcessor, StructuredSchema, generate_structured

    model, tok = load_model(device="cpu")
    recs = []
    orig = StructuredLogitsProcessor.__call__
    proc_s = 0.0

    def timed(self, input_ids, scores):
        nonlocal proc_s
        t = time.perf_counter()
        r = orig(self, input_ids, scores)
        proc_s += time.perf_counter() - t
        return r

    for k in ks:
        schema = make_schema(k, seed)
        t0 = time.perf_counter()
        c = StructuredSchema(schema, tok)
        compile_ms = (time.perf_counter() - t0) * 1e3
        valid, times, ntok, proc_s = 0, [], 0, 0.0
        StructuredLogitsProcessor.__call__ = timed
        try:
            for d in range(docs):
                torch.manual_seed(seed + d)
                msgs = [{"role": "user", "content": "Pick the tool to look up a customer's invoice; answer in JSON."}]
                prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
                t1 = time.perf_counter()
                res = generate_structured(model, tok, schema, prompt, compiled=c, max_new_tokens=80,
                                          do_sample=True, temperature=1.0)
                times.append(time.perf_counter() - t1)
                ntok += len(res.token_ids) + 1
                try:
                    if res.complete:
                        jsonschema.validate(json.loads(res.text), schema)
                        valid += 1
                except jsonschema.ValidationError:
                    pass
                last = res.text
        finally:
            StructuredLogitsProcessor.__call__ = orig
        rec = {"K": k, "docs": docs, "valid": valid, "compile_ms": compile_ms,
               "s_per_doc": statistics.median(times), "tokens": ntok,
               "proc_ms_per_token": proc_s * 1e3 / max(ntok, 1), "example": last}
        recs.append(rec)
        print(f"  e2e K={k:<7} valid={valid}/{docs} compile={compile_ms:.0f} ms "
              f"s/doc={rec['s_per_doc']:.2f} proc={rec['proc_ms_per_token']:.2f} ms/token  {last}", flush=True)
    return recs


def _f(x, spec):
    return "-" if x is None else format(x, spec)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizers", default="qwen3,llama3")
    p.add_argument("--root", default="../shared/tokenizers")
    p.add_argument("--k", default="100,1000,10000,100000")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--e2e", action="store_true", help="end-to-end generation with SmolLM2 instead")
    p.add_argument("--docs", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(json.loads(args.worker))), flush=True)
        return
    ks = [int(x) for x in args.k.split(",") if x.strip()]
    print(f"K={ks} repeats={args.repeats} timeout={args.timeout}s cpus={os.cpu_count()} "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}", flush=True)
    if args.e2e:
        recs = _e2e(ks, args.docs, args.seed)
    else:
        recs = []
        for name in [x for x in args.tokenizers.split(",") if x]:
            path = str((Path(args.root) / name).resolve())
            for k in ks:
                for eng in [x for x in args.engines.split(",") if x]:
                    spec = {"engine": eng, "tokenizer": path, "K": k, "repeats": args.repeats, "seed": args.seed}
                    rec = {"tokenizer": name, **_run(spec, args.timeout)}
                    recs.append(rec)
                    print(f"  {name:<7}{eng:<11}K={k:<7}{rec['status']:<8} compile_ms={_f(rec.get('compile_ms'), '.1f')} "
                          f"mask_us={_f(rec.get('mask_us'), '.1f')}", flush=True)
        head = (f"{'tokenizer':<10}{'engine':<11}{'K':>7}{'compile_ms':>12}{'mask_us':>9}{'enum_us':>9}"
                f"{'gram_us':>9}{'disp_us':>9}{'disp_p90':>9}{'rej':>5}  status")
        print("\n" + head + "\n" + "-" * len(head))
        for r in recs:
            print(f"{r['tokenizer']:<10}{r['engine']:<11}{r['K']:>7}{_f(r.get('compile_ms'), '12.1f'):>12}"
                  f"{_f(r.get('mask_us'), '9.1f'):>9}{_f(r.get('enum_us'), '9.2f'):>9}"
                  f"{_f(r.get('grammar_us'), '9.1f'):>9}{_f(r.get('dispatch_us'), '9.2f'):>9}"
                  f"{_f(r.get('dispatch_p90_us'), '9.2f'):>9}{r.get('rejected', 0):>5}  {r['status']}")
    if args.json:
        Path(args.json).write_text(json.dumps(recs, indent=1))
        print(f"wrote {len(recs)} records to {args.json}")


if __name__ == "__main__":
    main()
