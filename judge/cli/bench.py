"""``judge bench``: time the trie automaton's compile on a tokenizer for several label counts.

Loads a tokenizer, builds its `judge.automaton.vocab.Vocabulary` once, then
compiles seeded random label sets of K labels (`TrieAutomaton.build`) and
prints the median compile time and memory per K.

What it deliberately does not do: load a model or compare with peers (the
scripts in ``bench/`` do).
"""

from __future__ import annotations

import argparse
import time

from judge.cli._common import print_table

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``bench`` to the ``judge`` command's subparsers (sets ``func=run``).

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> _ = add_parser(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["bench", "--tokenizer", "gpt2"])
    >>> a.tokenizer, a.k, a.repeats
    ('gpt2', '100,1000,10000', 3)
    """
    be = subparsers.add_parser("bench", help="time the trie automaton on a tokenizer (see bench/ for peers)")
    be.add_argument("--tokenizer", required=True, help="tokenizer folder or hub id")
    be.add_argument("--k", default="100,1000,10000", help="label-set sizes to time, comma-separated "
                                                           "(default 100,1000,10000)")
    be.add_argument("--repeats", type=int, default=3, help="timings per size; the median is shown (default 3)")
    be.set_defaults(func=run)
    return be


def run(args) -> int:
    """Run ``judge bench`` (see `add_parser`); returns 0.

    Examples
    --------
    >>> import contextlib, io
    >>> from judge.cli import main
    >>> from judge.models import packaged_model_dir
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     code = main(["bench", "--tokenizer", str(packaged_model_dir()), "--k", "10"])
    >>> code, "10" in out.getvalue()
    (0, True)
    """
    import random

    import numpy as np
    from transformers import AutoTokenizer

    from judge.automaton.trie import TrieAutomaton
    from judge.automaton.vocab import Vocabulary

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    vocab = Vocabulary.from_tokenizer(tok)
    vocab.byte_trie()
    setup = time.perf_counter() - t0
    rng = random.Random(0)
    words = "get set list create delete update user profile account order item payment invoice search".split()
    rows = [("tokenizer setup", f"{setup * 1000:.0f} ms (V={vocab.size})")]
    TrieAutomaton.build(["warm_up"], vocab)
    for k in [int(x) for x in args.k.split(",")]:
        labels = set()
        while len(labels) < k:
            labels.add("_".join(rng.choice(words) for _ in range(rng.randint(2, 4))) + f"_{rng.randint(0, 10**6)}")
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            auto = TrieAutomaton.build(sorted(labels), vocab)
            times.append(time.perf_counter() - t0)
        rows.append((f"K={k}", f"compile {np.median(times) * 1000:.1f} ms, {auto.memory_bytes / 2**20:.1f} MiB"))
    print_table(rows, f"judge bench ({args.tokenizer})")
    return 0
