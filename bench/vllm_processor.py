"""Benchmark: the vLLM label processor's per-step work beside xgrammar's, on the same batch (CPU).

    .venv-vllm/bin/python -m bench.vllm_processor [--tokenizer PATH] [--k 1000,10000,100000]
        [--batches 1,8,64] [--repeats 5] [--steps 24] [--json bench/results/vllm_processor_42.json]

For one tokenizer (default: the packaged SmolLM2's; ``--tokenizer`` takes a folder such as
``../shared/tokenizers/qwen3``), every K (``judge.testing.tool_names(K, seed=0)`` with a leading
space, as ``bench/_vllm_bench.py`` constrains them) and every batch size B:

* **ours**: the label processor's logic (``judge.backends.label_rows.LabelRows``, what the vLLM class
  runs in ``apply``; only ``update_state``, vLLM's bookkeeping of added and removed requests, is
  left out) with B constrained rows of one label set; one step = ``apply`` on (B, V) float32
  logits: it advances each row's node by the token appended since the last step, then masks.
* **xgrammar**: one ``GrammarMatcher`` per row from the label set compiled as a choice grammar
  (``GrammarCompiler.compile_grammar`` of ``bench._common.ebnf_choice``, compile time reported
  apart); one step = ``fill_next_token_bitmask`` for every row into one bitmask, then
  ``xgrammar.apply_token_bitmask_inplace`` on the logits (``fill_apply``), as vLLM's xgrammar
  backend does. ``accept_token`` of the previous step's tokens (which vLLM calls per step too,
  ours does inside ``apply``) is timed apart (``accept``); the comparison uses ``fill_apply``
  alone, the stricter one for ours.

Every row writes labels in turn: each label's canonical tokens then the first end token; a row
that finished a label starts the next one (continuous batching: ours gets a new walk as for a new
request, the matcher is reset; untimed). Both engines see the same rows at the same step, timed
interleaved (which one goes first alternates per step) on clones of the same logits, one thread
(``torch.set_num_threads(1)``: what each gets per request on a shared CPU). A repeat's value is
the median over its ``--steps`` steps; reported values are medians over ``--repeats`` repeats
(with each repeat's values). After timing, the rows both engines masked are compared
(``mask_agree``: the fraction of masked rows whose allowed sets are equal, -inf positions).

What it deliberately does not do: start vLLM (the processor's vLLM class adds only request
bookkeeping), use a GPU, or time anything but the per-step mask work (no model, no sampling).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path


def _tokenizer(path):
    from transformers import AutoTokenizer

    if path is None:
        from judge.models import packaged_model_dir

        path = packaged_model_dir()
    return AutoTokenizer.from_pretrained(str(path)), str(path)


def _label_tokens(tok, labels, end):
    """Canonical tokens of each label, then ``end``."""
    return [list(tok.encode(lab, add_special_tokens=False)) + [end] for lab in labels]


class _Rows:
    """B rows writing labels in turn: the token each row appends at each step (the same for both engines)."""

    def __init__(self, seqs, B):
        self.seqs, self.B = seqs, B
        self.label = list(range(B))  # row r writes labels r, r + B, r + 2B, ...
        self.pos = [0] * B

    def token(self, r):
        return self.seqs[self.label[r] % len(self.seqs)][self.pos[r]]

    def step(self):
        """Advance every row by one token; returns the rows that finished a label (start a new one)."""
        done = []
        for r in range(self.B):
            self.pos[r] += 1
            if self.pos[r] == len(self.seqs[self.label[r] % len(self.seqs)]):
                self.label[r] += self.B
                self.pos[r] = 0
                done.append(r)
        return done


def _measure(K, B, labels, seqs, vocab, compiled, V, repeats, steps, seed=0):
    import torch
    import xgrammar as xgr

    from judge.backends.label_rows import LabelRows

    gen = torch.Generator().manual_seed(seed)
    per = {"ours": [], "xgrammar": [], "accept": []}
    agree = [0, 0]
    for rep in range(repeats):
        proc = LabelRows(vocab, "cpu")
        rows = _Rows(seqs, B)
        outs = [[] for _ in range(B)]
        for r in range(B):
            proc.add(r, labels, outs[r])
        matchers = [xgr.GrammarMatcher(compiled) for _ in range(B)]
        bitmask = xgr.allocate_token_bitmask(B, V)
        logits = torch.randn(B, V, generator=gen)
        proc.apply(logits.clone())  # compiles the label set (cached: K is compiled before the repeats)
        t_ours, t_x, t_acc = [], [], []
        for s in range(steps):
            a, b = logits.clone(), logits.clone()

            for which in ("ours", "xgrammar") if s % 2 == 0 else ("xgrammar", "ours"):
                if which == "ours":
                    t0 = time.perf_counter()
                    proc.apply(a)
                    t_ours.append(time.perf_counter() - t0)
                else:
                    t0 = time.perf_counter()
                    for r in range(B):
                        matchers[r].fill_next_token_bitmask(bitmask, r)
                    xgr.apply_token_bitmask_inplace(b, bitmask)
                    t_x.append(time.perf_counter() - t0)
            if rep == 0:  # untimed: do both engines allow the same tokens in every row?
                same = torch.isneginf(a) == torch.isneginf(b)
                agree[0] += int(same.all(dim=1).sum())
                agree[1] += B
            chosen = [rows.token(r) for r in range(B)]
            for r in range(B):  # ours reads them from the output lists in its next apply
                outs[r].append(chosen[r])
            t0 = time.perf_counter()
            for r in range(B):
                if not matchers[r].accept_token(chosen[r]):
                    raise RuntimeError(f"xgrammar refused token {chosen[r]} of a label in row {r} (K={K}, B={B}).")
            t_acc.append(time.perf_counter() - t0)
            for r in rows.step():  # a finished row starts its next label: a new request in that slot
                outs[r] = []
                proc.add(r, labels, outs[r])
                matchers[r].reset()
        per["ours"].append(1000 * statistics.median(t_ours))
        per["xgrammar"].append(1000 * statistics.median(t_x))
        per["accept"].append(1000 * statistics.median(t_acc))
    med = {k: statistics.median(v) for k, v in per.items()}
    return {"K": K, "B": B, "ours_ms": med["ours"], "xgrammar_ms": med["xgrammar"],
            "xgrammar_accept_ms": med["accept"], "ours_le_xgrammar": med["ours"] <= med["xgrammar"],
            "ratio": med["ours"] / med["xgrammar"], "repeats_ms": per, "mask_agree": agree[0] / max(agree[1], 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the packaged SmolLM2's)")
    p.add_argument("--k", default="1000,10000,100000")
    p.add_argument("--batches", default="1,8,64")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=24, help="timed decoding steps per repeat")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import importlib.metadata as md

    import torch
    import xgrammar as xgr

    from bench._common import ebnf_choice
    from judge.automaton.trie import TrieAutomaton
    from judge.automaton.vocab import Vocabulary
    from judge.backends.label_rows import LabelRows
    from judge.testing import tool_names

    torch.set_num_threads(args.threads)
    tok, tok_path = _tokenizer(args.tokenizer)
    vocab = Vocabulary.from_tokenizer(tok)
    V = vocab.size
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=V, stop_token_ids=list(vocab.end_token_ids))
    out = {"tokenizer": tok_path, "vocab_size": V, "torch_threads": args.threads, "repeats": args.repeats,
           "steps": args.steps, "xgrammar": md.version("xgrammar"), "torch": torch.__version__,
           "numba": md.version("numba"), "python": platform.python_version(), "compile": {}, "points": []}
    print(f"tokenizer {tok_path} (V={V}); xgrammar {out['xgrammar']}; torch {torch.__version__}, "
          f"{args.threads} thread(s); medians of {args.repeats} repeats x {args.steps} steps", flush=True)
    for K in [int(k) for k in args.k.split(",") if k]:
        labels = [" " + x for x in tool_names(K, seed=0)]
        TrieAutomaton.build(labels[: K // 2], vocab)  # numba's kernels compiled or loaded (not timed)
        t0 = time.perf_counter()
        TrieAutomaton.build(labels, vocab)
        ours_compile = time.perf_counter() - t0
        LabelRows(vocab).add(0, labels, [])  # the processor's cache: the timed steps find it compiled
        t0 = time.perf_counter()
        compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(ebnf_choice(labels))
        x_compile = time.perf_counter() - t0
        out["compile"][str(K)] = {"ours_s": ours_compile, "xgrammar_s": x_compile}
        print(f"K={K:>6}: compile ours {ours_compile:.3f} s, xgrammar {x_compile:.3f} s", flush=True)
        seqs = _label_tokens(tok, labels, vocab.end_token_ids[0])
        for B in [int(b) for b in args.batches.split(",") if b]:
            res = _measure(K, B, labels, seqs, vocab, compiled, V, args.repeats, args.steps)
            out["points"].append(res)
            print(f"K={K:>6} B={B:>3}: ours {res['ours_ms']:8.3f} ms  xgrammar {res['xgrammar_ms']:8.3f} ms "
                  f"(+ accept {res['xgrammar_accept_ms']:.3f})  ours/xgrammar {res['ratio']:5.2f}  "
                  f"{'met' if res['ours_le_xgrammar'] else 'NOT met'}  masks agree {res['mask_agree']:.3f}",
                  flush=True)
    print("\n| K | B | ours ms/step | xgrammar ms/step | ours <= xgrammar |\n|---:|---:|---:|---:|:---|")
    for r in out["points"]:
        print(f"| {r['K']:,} | {r['B']} | {r['ours_ms']:.3f} | {r['xgrammar_ms']:.3f} | "
              f"{'met' if r['ours_le_xgrammar'] else 'not met'} ({r['ratio']:.2f}x) |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
