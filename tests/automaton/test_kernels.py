"""The automaton's kernels in a fresh interpreter: the lazy compile, ``fill_rows``' typed compile, and
its Python fallback, each from the first call on.

These wrappers run once per process (the first kernel call swaps every kernel for its dispatcher;
``fill_rows`` replaces itself), so a test in this process only ever sees them already done. Each case
here starts a new interpreter, with numba compiling and with ``NUMBA_DISABLE_JIT=1``, builds a small
automaton and checks every state's packed row against ``allowed()``, and that the fast path refuses
(``TypeError``) what it was not compiled for.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CODE = r"""
import numpy as np
from judge.automaton import _kernels as K
from judge.automaton.trie import TrieAutomaton
from judge.automaton.vocab import Vocabulary

# 40 filler tokens first: the labels' token ids are larger than the automaton's edge count, so a row
# read past the edge table (an accepting state taken for a trie node) cannot come out empty by luck
pieces = [b"x%d" % i for i in range(40)] + [b"a", b"b", b"ab", b"ba", b"c", b""]
v = Vocabulary.from_token_bytes(pieces, end_token_ids=[45])
auto = TrieAutomaton.build(["ab", "abc", "ba", "c"], v)
states = np.arange(auto.n_states, dtype=np.int64)
bm = np.zeros((len(states), 2), np.int32)
auto.fill_bitmask(states, bm)                      # the first kernel calls: compile (or not) here
for r, s in enumerate(states):
    want = np.zeros(64, bool)
    want[auto.allowed(int(s))] = True
    got = np.unpackbits(bm[r].view(np.uint8), bitorder="little").astype(bool)
    assert (got == want).all(), (int(s), np.flatnonzero(got), np.flatnonzero(want))
assert type(K.build_trie_msd).__name__ != "_Lazy"      # every kernel swapped at once
tab = auto._tab
assert K.fill_rows(tab, states, bm) == -1
for nodes, mask in ((states.astype(np.float64), bm), (states, bm.astype(np.int64)), (states, bm[:, 0].copy())):
    try:
        K.fill_rows(tab, nodes, mask)
    except TypeError:
        pass
    else:
        raise AssertionError(f"fill_rows accepted {nodes.dtype} nodes and a {mask.dtype} {mask.ndim}-D bitmask")
print("OK")
"""


@pytest.mark.parametrize("jit", ["1", "0"], ids=["numba", "python"])
def test_kernels_from_the_first_call_in_a_fresh_interpreter(jit):
    if jit == "1" and "MUTANT_UNDER_TEST" in os.environ:
        pytest.skip("under mutmut: numba cannot compile mutmut's trampolines, so only the Python path is measured")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env["NUMBA_DISABLE_JIT"] = "0" if jit == "1" else "1"
    out = subprocess.run([sys.executable, "-c", CODE], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("OK"), out.stdout[-2000:] + out.stderr[-3000:]
