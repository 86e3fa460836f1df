"""Benchmark: compile time, per-step bitmask fill time and memory, ours vs grammar engines.

    python -m bench.masks --tokenizer ../shared/tokenizers/qwen3 \\
        --k 10,100,1000,10000,100000 --peers xgrammar,llguidance,outlines-core --json OUT.json

For every label family (``tools``: snake_case tool names of about 20
characters; ``icd``: ICD-10-like codes such as ``E11.65``), every K and every
engine, one worker subprocess:

1. loads the tokenizer (untimed) and does the engine's per-tokenizer setup
   (timed as ``setup_ms``): ours = ``Vocabulary.from_tokenizer`` +
   ``byte_trie()``; xgrammar = ``TokenizerInfo.from_huggingface``; llguidance =
   ``llguidance.hf.from_tokenizer``; outlines-core = ``outlines_core.Vocabulary``
   built from every token's exact bytes (offline; the byte decoding itself,
   shared with ours, is not timed);
2. ``--repeats`` times: compiles the choice grammar over the same seeded
   labels (``compile_ms``: ours = ``TrieAutomaton.build``; xgrammar =
   ``GrammarCompiler(cache_enabled=False).compile_grammar(EBNF)``; llguidance =
   ``LLMatcher(tokenizer, grammar_from_regex(...))``; outlines-core =
   ``Index(regex, vocabulary)``), then walks the canonical tokenization of
   random labels followed by the end token through the automaton / matcher,
   timing one packed-bitmask row fill (xgrammar's int32 layout) per step through
   each engine's public Python API (``fill_us`` = median over steps). The very
   first fill after compiling is timed apart (``first_mask_ms``) because lazy
   engines (llguidance) do part of their compiling there.

Reported values are medians over the repeats. Memory (``memory_mb``, MB =
10**6 bytes): ours ``auto.memory_bytes``; xgrammar
``CompiledGrammar.memory_size_bytes``; llguidance and outlines-core expose
nothing, so the worker's RSS growth over compile + walk (max over repeats) is
used; ``memory_source`` says which. ``rss_delta_mb`` is recorded for every
engine. ``mask_agree`` is the fraction of the first walk steps where the
peer's row equals ours (checked after timing, untimed).

``--ref COMMIT`` adds the engine ``ours@COMMIT``: the same worker with ``judge/`` of that commit
(exported by ``git archive``, see ``bench/automaton_identical.py``) first on ``PYTHONPATH``, run
right after ours for every family and K, so before and after share the machine's load.
``compile_cpu_ms`` is the compiling thread's CPU time (``time.thread_time``), less sensitive
to a loaded machine than the wall time. ``--tokenizer`` takes a comma-separated list; every
record names its tokenizer.

A compile (or walk) that runs past ``--timeout`` seconds is killed and recorded
with status ``"timeout"``; larger K of the same engine and family are then not
run (``"skipped": true``) unless ``--try-all``. Failures are ``"error: ..."``;
a peer that is not importable is ``"not installed"``.

What it deliberately does not do: batch several sequences per fill, use GPUs,
or pick engine options other than the defaults of each engine's documented API.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._common import FAMILY_NAMES, ebnf_choice, family_labels, regex_choice  # noqa: E402
from bench._masks_table import fmt, print_ratios, print_table  # noqa: E402

ENGINES = ("ours", "xgrammar", "llguidance", "outlines-core")
_MODULES = {"xgrammar": "xgrammar", "llguidance": "llguidance", "outlines-core": "outlines_core"}
_N_AGREE_STEPS = 200


# --------------------------------------------------------------------------- engines
class _Ours:
    memory_source = "TrieAutomaton.memory_bytes"

    def __init__(self, tok, vocab):
        self.tok = tok

    def warmup(self):
        import numpy as np

        from judge.automaton.trie import TrieAutomaton
        from judge.automaton.vocab import Vocabulary

        v = Vocabulary.from_token_bytes([b"a", b"b", b"ab", b""], end_token_ids=[3])
        a = TrieAutomaton.build(["ab", "b"], v)  # the plain intersection path
        a.fill_bitmask(np.zeros(1, np.int64), np.zeros((1, 1), np.int32))
        a.next(a.root, 0)
        TrieAutomaton.build(["ab", "aab", "bab", "abab"], v)  # the subtree-class path

    def setup(self):
        from judge.automaton.vocab import Vocabulary

        self.vocab = Vocabulary.from_tokenizer(self.tok)
        self.vocab.byte_trie()

    def compile(self, labels):
        from judge.automaton.trie import TrieAutomaton

        self.auto = TrieAutomaton.build(labels, self.vocab)
        return self.auto

    def memory_bytes(self):
        return self.auto.memory_bytes

    def walker(self):
        import numpy as np

        auto = self.auto
        state = {"node": auto.root}
        node_arr = np.zeros(1, np.int64)  # the documented fast calling convention: an int64 array

        def reset():
            state["node"] = auto.root

        def fill(bm):
            node_arr[0] = state["node"]
            auto.fill_bitmask(node_arr, bm)

        def accept(t):
            state["node"] = auto.next(state["node"], t)
            return state["node"] >= 0

        return reset, fill, accept

    def kernel_fill_us(self, walks, bm, n_steps):
        """Time of ``TrieAutomaton.fill_bitmask`` alone on the same walks: its fast path (an int64 node
        array and an int32 bitmask go straight to the numba kernel), without the walker's closure."""
        import numpy as np

        auto = self.auto
        node_arr = np.zeros(1, np.int64)
        times = []
        for walk in _cycle_walks(walks, n_steps):
            node = auto.root
            for t in walk:
                node_arr[0] = node
                t0 = time.perf_counter_ns()
                auto.fill_bitmask(node_arr, bm)
                times.append(time.perf_counter_ns() - t0)
                node = auto.next(node, t)
        return statistics.median(times) / 1e3


class _Xgrammar:
    memory_source = "CompiledGrammar.memory_size_bytes"

    def __init__(self, tok, vocab):
        self.tok, self.ends = tok, list(vocab.end_token_ids)
        self.size = vocab.size

    def setup(self):
        import xgrammar as xgr

        self.info = xgr.TokenizerInfo.from_huggingface(
            self.tok, vocab_size=self.size, stop_token_ids=self.ends)

    def compile(self, labels):
        import xgrammar as xgr

        compiler = xgr.GrammarCompiler(self.info, cache_enabled=False)
        self.compiled = compiler.compile_grammar(ebnf_choice(labels))
        return self.compiled

    def memory_bytes(self):
        return self.compiled.memory_size_bytes

    def walker(self):
        import torch
        import xgrammar as xgr

        m = xgr.GrammarMatcher(self.compiled)
        tensors = {}

        def fill(bm):
            t = tensors.get(id(bm))
            if t is None:
                t = tensors[id(bm)] = (torch.from_numpy(bm), bm)
            m.fill_next_token_bitmask(t[0], 0)

        return m.reset, fill, m.accept_token


class _Llguidance:
    memory_source = "rss_delta"

    def __init__(self, tok, vocab):
        self.tok, self.ends, self.size = tok, list(vocab.end_token_ids), vocab.size

    def setup(self):
        import llguidance.hf

        self.lltok = llguidance.hf.from_tokenizer(self.tok, n_vocab=self.size, eos_token=self.ends)

    def compile(self, labels):
        import llguidance

        grammar = llguidance.LLMatcher.grammar_from_regex(regex_choice(labels))
        self.matcher = llguidance.LLMatcher(self.lltok, grammar, log_level=0)
        if self.matcher.is_error():
            raise RuntimeError(self.matcher.get_error())
        return self.matcher

    def memory_bytes(self):
        return None

    def walker(self):
        import llguidance.numpy as lln

        m = self.matcher

        def fill(bm):
            lln.fill_next_token_bitmask(m, bm, 0)

        return m.reset, fill, m.consume_token


class _OutlinesCore:
    memory_source = "rss_delta"

    def __init__(self, tok, vocab):
        self.vocab = vocab

    def setup(self):
        import outlines_core

        by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(self.vocab.token_bytes):
            if b:
                by_bytes.setdefault(b, []).append(i)
        self.ends = set(self.vocab.end_token_ids)
        self.ovocab = outlines_core.Vocabulary(self.vocab.end_token_ids[0], by_bytes)

    def compile(self, labels):
        import outlines_core

        self.index = outlines_core.Index(regex_choice(labels), self.ovocab)
        return self.index

    def memory_bytes(self):
        return None

    def walker(self):
        import outlines_core

        g = outlines_core.Guide(self.index)
        ends = self.ends

        def fill(bm):
            g.write_mask_into(bm.ctypes.data, bm.shape[1], 4)

        def accept(t):
            if t in ends:  # the Guide has no transition out of a final state
                return bool(g.is_finished())
            g.advance(t, return_tokens=False)
            return True

        return g.reset, fill, accept


_ADAPTERS = {"ours": _Ours, "xgrammar": _Xgrammar, "llguidance": _Llguidance,
             "outlines-core": _OutlinesCore}


# --------------------------------------------------------------------------- worker
def _cycle_walks(walks, n_steps):
    done, i = 0, 0
    while done < n_steps:
        w = walks[i % len(walks)]
        yield w
        done += len(w)
        i += 1


def _emit(**event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _walk(adapter, walks, bm, n_steps, keep_rows=0):
    """Per-step fill times (ns) over the walks, rejected walks, and the first rows filled.

    A walk the engine rejects (a known peer deviation, see tests/test_peers.py)
    is cut at the rejected token and the next walk starts on a fresh matcher.
    """
    reset, fill, accept = adapter.walker()
    times, rows, rejected = [], {}, []
    for w, walk in enumerate(_cycle_walks(walks, n_steps)):
        reset()
        for s, t in enumerate(walk):
            t0 = time.perf_counter_ns()
            fill(bm)
            times.append(time.perf_counter_ns() - t0)
            if len(rows) < keep_rows:
                rows[w, s] = bm[0].copy()
            try:
                ok = accept(int(t))
            except Exception:  # outlines-core raises on a token it does not allow
                ok = False
            if not ok:
                rejected.append((w, s))
                reset, fill, accept = adapter.walker()
                break
    return times, rows, rejected


def _worker(spec: dict) -> None:
    import numpy as np
    from transformers import AutoTokenizer

    from judge.automaton.vocab import Vocabulary

    engine = spec["engine"]
    tok = AutoTokenizer.from_pretrained(spec["tokenizer"])
    if engine == "ours":
        adapter = _ADAPTERS[engine](tok, None)
        adapter.warmup()
        t0 = time.perf_counter()
        adapter.setup()
        setup_ms = (time.perf_counter() - t0) * 1e3
        vocab = adapter.vocab
    else:
        vocab = Vocabulary.from_tokenizer(tok)  # end tokens and token bytes; untimed
        adapter = _ADAPTERS[engine](tok, vocab)
        t0 = time.perf_counter()
        adapter.setup()
        setup_ms = (time.perf_counter() - t0) * 1e3
    _emit(event="setup", setup_ms=setup_ms)

    labels = family_labels(spec["family"], spec["K"], seed=spec["seed"])
    rng = np.random.default_rng(spec["seed"] + 1)
    picks = rng.choice(len(labels), size=min(len(labels), 2000), replace=False)
    enc = tok([labels[i] for i in picks], add_special_tokens=False)["input_ids"]
    walks = [list(ids) + [vocab.end_token_ids[0]] for ids in enc]
    mean_len = float(np.mean([len(lab) for lab in labels]))
    _emit(event="ready", mean_label_len=mean_len, mean_walk_tokens=float(np.mean([len(w) for w in walks])))

    bm = np.zeros((1, (vocab.size + 31) // 32), np.int32)
    n_steps = spec["walk_steps"]
    rows = []
    for r in range(spec["repeats"]):
        gc.collect()
        rss0 = _rss()
        _emit(event="compile_start")
        t0, c0 = time.perf_counter(), time.thread_time()
        adapter.compile(labels)
        compile_ms = (time.perf_counter() - t0) * 1e3
        compile_cpu_ms = (time.thread_time() - c0) * 1e3
        _emit(event="compile_done", compile_ms=compile_ms)
        reset, fill, _ = adapter.walker()
        reset()
        t0 = time.perf_counter()
        fill(bm)
        first_mask_ms = (time.perf_counter() - t0) * 1e3
        times, rows_r, rejected = _walk(adapter, walks, bm, n_steps,
                                        keep_rows=_N_AGREE_STEPS if r == 0 else 0)
        rows = rows or rows_r
        mem = adapter.memory_bytes()
        rss_delta = _rss() - rss0
        extra = {}
        if engine == "ours":
            extra["fill_kernel_us"] = adapter.kernel_fill_us(walks, bm, n_steps)
        if rejected:
            w, s = rejected[0]
            walk = walks[w % len(walks)]
            extra["rejected_example"] = {"label": tok.decode(walk[:-1]), "tokens": walk, "step": s,
                                         "token": tok.convert_ids_to_tokens(walk[s])}
        _emit(event="repeat", compile_ms=compile_ms, compile_cpu_ms=compile_cpu_ms, first_mask_ms=first_mask_ms,
              fill_us=statistics.median(times) / 1e3,
              fill_p90_us=float(np.percentile(times, 90)) / 1e3, steps=len(times),
              rejected_walks=len(rejected), memory_bytes=mem, rss_delta=rss_delta, **extra)
        del fill, reset
    if engine != "ours" and rows:  # untimed agreement check against our automaton
        ours = _Ours(tok, None)
        ours.vocab = vocab
        ours.compile(labels)
        reset, fill, accept = ours.walker()
        same = []
        for w, walk in enumerate(_cycle_walks(walks, _N_AGREE_STEPS)):
            reset()
            for s, t in enumerate(walk):
                fill(bm)
                if (w, s) in rows:
                    same.append(np.array_equal(rows[w, s], bm[0]))
                accept(int(t))
        _emit(event="agree", mask_agree=float(np.mean(same)), agree_steps=len(same))
    _emit(event="done")


# --------------------------------------------------------------------------- parent
def _run_worker(spec: dict, timeout: float, setup_timeout: float, ref_path: str | None = None) -> dict:
    """Run one (engine, family, K) worker; returns the parsed events and a status.

    ``ref_path``: a folder holding an earlier commit's ``judge/``, put first on ``PYTHONPATH``."""
    stderr = tempfile.TemporaryFile(mode="w+")
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    if ref_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([ref_path, repo])
    proc = subprocess.Popen([sys.executable, "-m", "bench.masks", "--worker", json.dumps(spec)],
                            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env,
                            cwd=ref_path or repo)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    events: list[dict] = []
    deadline = time.monotonic() + setup_timeout
    status = "ok"
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            status = "timeout"
            phase = events[-1]["event"] if events else "start"
            break
        if line is None:
            proc.wait()
            if not events or events[-1]["event"] != "done":
                stderr.seek(0)
                tail = [x for x in stderr.read().strip().splitlines() if x.strip()]
                status = f"error: {tail[-1] if tail else f'worker exited with code {proc.returncode}'}"
            break
        ev = json.loads(line)
        events.append(ev)
        # every compile, and every walk after it, gets its own time budget
        deadline = time.monotonic() + (setup_timeout if ev["event"] == "setup" else timeout)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    stderr.close()
    out = {"events": events, "status": status}
    if status == "timeout":
        out["timeout_phase"] = phase
    return out


def _summarize(engine: str, family: str, k: int, run: dict, args) -> dict:
    ev = run["events"]
    reps = [e for e in ev if e["event"] == "repeat"]
    setup = next((e["setup_ms"] for e in ev if e["event"] == "setup"), None)
    ready = next((e for e in ev if e["event"] == "ready"), {})
    agree = next((e for e in ev if e["event"] == "agree"), {})
    rec = {"engine": engine, "family": family, "K": k, "compile_ms": None, "fill_us": None,
           "memory_mb": None, "status": run["status"], "setup_ms": setup,
           "mean_label_len": ready.get("mean_label_len"), "repeats": len(reps)}

    def med(key):
        vals = [e[key] for e in reps if e.get(key) is not None]
        return statistics.median(vals) if vals else None

    if run["status"] == "ok":
        rec["compile_ms"] = med("compile_ms")
        rec["compile_cpu_ms"] = med("compile_cpu_ms")
        rec["fill_us"] = med("fill_us")
        rec["first_mask_ms"] = med("first_mask_ms")
        rec["fill_p90_us"] = med("fill_p90_us")
        rec["steps"] = reps[0]["steps"] if reps else None
        rec["rejected_walks"] = max(e["rejected_walks"] for e in reps)
        example = next((e["rejected_example"] for e in reps if "rejected_example" in e), None)
        if example:
            rec["rejected_example"] = example
        if engine.startswith("ours"):
            rec["fill_kernel_us"] = med("fill_kernel_us")
        mem = med("memory_bytes")
        rss = max((e["rss_delta"] for e in reps), default=None)
        rec["rss_delta_mb"] = None if rss is None else rss / 1e6
        if mem is not None:
            rec["memory_mb"] = mem / 1e6
            rec["memory_source"] = _ADAPTERS[engine.split("@")[0]].memory_source
        else:
            rec["memory_mb"] = rec["rss_delta_mb"]
            rec["memory_source"] = "rss_delta (psutil; max over repeats)"
        if agree:
            rec["mask_agree"] = agree["mask_agree"]
    else:
        done = [e["compile_ms"] for e in ev if e["event"] == "compile_done"]
        if done:
            rec["partial_compile_ms"] = done
        if run["status"] == "timeout":
            rec["timeout_s"] = args.timeout
            rec["timeout_phase"] = run.get("timeout_phase")
    return rec


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokenizer", default="../shared/tokenizers/qwen3",
                   help="tokenizer folder or hub name (loaded offline by AutoTokenizer)")
    p.add_argument("--k", default="10,100,1000,10000,100000", help="comma-separated label counts")
    p.add_argument("--peers", default="xgrammar,llguidance,outlines-core",
                   help=f"comma-separated peers from {ENGINES[1:]} ('' for ours only)")
    p.add_argument("--families", default="tools,icd", help=f"comma-separated, from {FAMILY_NAMES}")
    p.add_argument("--repeats", type=int, default=3, help="runs per measurement; medians are reported")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds allowed for one compile (and for the walk after it)")
    p.add_argument("--setup-timeout", type=float, default=300.0,
                   help="seconds allowed for imports, tokenizer loading and per-tokenizer setup")
    p.add_argument("--walk-steps", type=int, default=1000, help="timed fill steps per repeat")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--try-all", action="store_true",
                   help="also run larger K after an engine timed out at a smaller K")
    p.add_argument("--json", default=None, help="write the records to this file")
    p.add_argument("--ref", default=None,
                   help="also run ours with judge/ of this commit (engine 'ours@REF'), interleaved")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker is not None:
        _worker(json.loads(args.worker))
        return

    ks = sorted(int(x) for x in args.k.split(",") if x.strip())
    peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    families = [x.strip() for x in args.families.split(",") if x.strip()]
    for name in peers:
        if name not in ENGINES[1:]:
            p.error(f"unknown peer {name!r}; valid peers are {', '.join(ENGINES[1:])}")
    for fam in families:
        if fam not in FAMILY_NAMES:
            p.error(f"unknown family {fam!r}; valid families are {', '.join(FAMILY_NAMES)}")
    import importlib.metadata
    import importlib.util

    versions = {"ours": "local"}
    for name in peers:
        mod = _MODULES[name]
        versions[name] = (importlib.metadata.version(name.replace("-", "_"))
                          if importlib.util.find_spec(mod) is not None else None)
    ref_path = None
    if args.ref:
        from bench.automaton_identical import export_ref

        ref_path = export_ref(args.ref)
        versions[f"ours@{args.ref}"] = args.ref
    tokenizers = [str(Path(t).resolve()) if Path(t).exists() else t for t in args.tokenizer.split(",") if t]
    print(f"tokenizer={args.tokenizer} K={ks} families={families} repeats={args.repeats} "
          f"timeout={args.timeout}s walk_steps={args.walk_steps} cpus={os.cpu_count()} "
          f"versions={versions}", flush=True)

    records = []
    ours = ["ours", f"ours@{args.ref}"] if args.ref else ["ours"]
    for tokenizer, fam in ((t, f) for t in tokenizers for f in families):
        timed_out: set[str] = set()
        for k in ks:
            for engine in [*ours, *peers]:
                base = {"engine": engine, "family": fam, "K": k, "compile_ms": None,
                        "fill_us": None, "memory_mb": None, "version": versions[engine]}
                if versions[engine] is None:
                    rec = {**base, "status": "not installed"}
                elif engine in timed_out and not args.try_all:
                    rec = {**base, "status": "timeout", "skipped": True, "timeout_s": args.timeout,
                           "note": "not run: a smaller K already timed out"}
                else:
                    spec = {"engine": engine.split("@")[0], "tokenizer": tokenizer, "family": fam, "K": k,
                            "repeats": args.repeats, "walk_steps": args.walk_steps, "seed": args.seed}
                    t0 = time.monotonic()
                    run = _run_worker(spec, args.timeout, args.setup_timeout,
                                      ref_path if "@" in engine else None)
                    rec = {**_summarize(engine, fam, k, run, args), "version": versions[engine],
                           "tokenizer": Path(tokenizer).name, "wall_s": round(time.monotonic() - t0, 1)}
                    if rec["status"] == "timeout":
                        timed_out.add(engine)
                records.append(rec)
                print(f"  {Path(tokenizer).name:<10}{engine:<14}{fam:<6}K={k:<7} {rec['status']:<8} compile_ms={fmt(rec['compile_ms'], '.2f')} "
                      f"fill_us={fmt(rec['fill_us'], '.2f')} memory_mb={fmt(rec['memory_mb'], '.3f')}",
                      flush=True)
    print()
    print_table(records)
    print_ratios(records)
    setups = {}
    for r in records:
        if r.get("setup_ms") is not None:
            setups.setdefault(r["engine"], []).append(r["setup_ms"])
    print("\nper-tokenizer setup (median over workers): "
          + ", ".join(f"{e} {statistics.median(v):.0f} ms" for e, v in setups.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
        print(f"wrote {len(records)} records to {args.json}")


if __name__ == "__main__":
    main()
