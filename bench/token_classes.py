"""Benchmark: token classes of the label automaton (counts, ratio, and whether they pay).

    OMP_NUM_THREADS=1 python -m bench.token_classes --tokenizers gpt2,qwen3,llama3,mistral7b,gemma3 \\
        --k 100,1000,10000,100000 --json bench/results/token_classes.json

For every tokenizer in ``../shared/tokenizers`` and every K (tool-name
labels, ``bench/_common.py``), in one process:

* ``classes``: number of token classes (tokens with identical transitions at
  every node; all tokens no label uses are one class) and ``ratio`` =
  vocabulary size / classes;
* ``build_ms``: ``TrieAutomaton.build``; ``classes_ms``: computing the classes
  from the built automaton (classes cannot make the build faster: they are
  derived from it);
* ``fill_us`` vs ``class_fill_us``: one packed-bitmask row through the CSR
  (``TrieAutomaton.fill_bitmask``) vs rebuilt from the class-level automaton
  (``TokenClasses.fill_bitmask``), median over the nodes of seeded label
  walks;
* memory: ``csr_mb`` (``TrieAutomaton.memory_bytes``), ``class_mb`` (class-level
  automaton + membership), ``class_table_mb`` (a dense per-node bit table over
  classes, what a device would hold to gather masks with ``table[node][class_of]``)
  vs ``token_table_mb`` (a dense per-node token bitmask table, the naive
  device table).

Every timing is the median of ``--repeats`` runs (fills: median over steps of
each run, then median over runs). MB = 10**6 bytes.

What it deliberately does not do: time a device gather (no GPU here), or
compute classes for grammar engines (llguidance exposes no transition table).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from bench._common import family_labels  # noqa: E402


def _fill_times(fill, nodes, bm):
    ts = []
    for n in nodes:
        arr = np.array([n], np.int64)
        t0 = time.perf_counter_ns()
        fill(arr, bm)
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1e3


def run(tok_dir: Path, ks, repeats: int, seed: int):
    from transformers import AutoTokenizer

    from judge.automaton.token_classes import TokenClasses
    from judge.automaton.trie import TrieAutomaton
    from judge.automaton.vocab import Vocabulary

    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    vocab = Vocabulary.from_tokenizer(tok)
    vocab.byte_trie()
    warm = TrieAutomaton.build(family_labels("tools", 50, seed=seed + 1), vocab)  # compile kernels (class path too)
    TrieAutomaton.build(["ab", "b"], vocab)  # and the plain path
    TokenClasses.from_automaton(warm).fill_bitmask([0], np.zeros((1, (vocab.size + 31) // 32), np.int32))
    out = []
    for k in ks:
        labels = family_labels("tools", k, seed=seed)
        builds, cls_t, fills, cfills = [], [], [], []
        bm = np.zeros((1, (vocab.size + 31) // 32), np.int32)
        rng = np.random.default_rng(seed)
        for _ in range(repeats):
            t0 = time.perf_counter()
            auto = TrieAutomaton.build(labels, vocab)
            builds.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            tc = TokenClasses.from_automaton(auto)
            cls_t.append((time.perf_counter() - t0) * 1e3)
            nodes = []  # the nodes along random walks (root included)
            for _ in range(200):
                n = auto.root
                while not auto.is_accepting(n):
                    nodes.append(n)
                    al = auto.allowed(n)
                    n = auto.next(n, int(al[rng.integers(al.shape[0])]))
            fills.append(_fill_times(auto.fill_bitmask, nodes, bm))
            cfills.append(_fill_times(tc.fill_bitmask, nodes, bm))
        rec = {
            "tokenizer": tok_dir.name, "K": k, "vocab": vocab.size, "classes": tc.n_classes,
            "ratio": tc.compression_ratio, "nodes": auto.n_nodes, "edges": auto.n_edges,
            "class_edges": int(tc.class_ids.shape[0]),
            "build_ms": statistics.median(builds), "classes_ms": statistics.median(cls_t),
            "fill_us": statistics.median(fills), "class_fill_us": statistics.median(cfills),
            "csr_mb": auto.memory_bytes / 1e6, "class_mb": tc.memory_bytes / 1e6,
            "class_table_mb": auto.n_nodes * ((tc.n_classes + 31) // 32) * 4 / 1e6,
            "token_table_mb": auto.n_nodes * ((vocab.size + 31) // 32) * 4 / 1e6,
        }
        out.append(rec)
        print(f"  {rec['tokenizer']:<10} K={k:<7} classes={rec['classes']:<6} ratio={rec['ratio']:.0f}x "
              f"build={rec['build_ms']:.1f} ms classes={rec['classes_ms']:.1f} ms", flush=True)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizers", default="gpt2,qwen3,llama3,mistral7b,gemma3")
    p.add_argument("--root", default="../shared/tokenizers", help="folder holding the tokenizers")
    p.add_argument("--k", default="100,1000,10000,100000")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    ks = [int(x) for x in args.k.split(",") if x.strip()]
    recs = []
    for name in [x.strip() for x in args.tokenizers.split(",") if x.strip()]:
        recs += run(Path(args.root) / name, ks, args.repeats, args.seed)
    head = (f"{'tokenizer':<10}{'K':>7}{'vocab':>8}{'classes':>8}{'ratio':>8}{'build_ms':>10}"
            f"{'cls_ms':>8}{'fill_us':>9}{'cfill_us':>9}{'csr_MB':>8}{'cls_MB':>8}{'ctab_MB':>9}{'ttab_MB':>10}")
    print("\n" + head + "\n" + "-" * len(head))
    for r in recs:
        print(f"{r['tokenizer']:<10}{r['K']:>7}{r['vocab']:>8}{r['classes']:>8}{r['ratio']:>7.0f}x"
              f"{r['build_ms']:>10.1f}{r['classes_ms']:>8.1f}{r['fill_us']:>9.2f}{r['class_fill_us']:>9.2f}"
              f"{r['csr_mb']:>8.2f}{r['class_mb']:>8.2f}{r['class_table_mb']:>9.1f}{r['token_table_mb']:>10.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(recs, indent=1))
        print(f"wrote {len(recs)} records to {args.json}")


if __name__ == "__main__":
    main()
