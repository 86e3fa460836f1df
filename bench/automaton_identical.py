"""Check: the automaton's arrays are bit-identical to those of an earlier commit's code.

    python -m bench.automaton_identical --ref 0125412 --tokenizers qwen3,llama3,gpt2,mistral7b,gemma3

The package ``judge`` of commit ``--ref`` is exported (``git archive``) into a temporary folder and
run in a subprocess; both sides build the same label sets over the same tokenizers and every array
of the automaton (``indptr``, ``token_ids``, ``next_nodes``, ``node_label``, ``n_nodes``) and of the
label trie (``ByteTrie`` of the labels' bytes, every attribute) is compared exactly. Label sets: tool
names and ICD codes at K = 10^2..10^5, unicode labels, labels that are prefixes of others, labels
with every byte value, and single-character labels; the end tokens of each tokenizer are the
detected ones plus, in one case, a second set of three ids. Exit status 1 on any difference.

What it deliberately does not do: time anything (see ``bench/masks.py``), or check the arrays
against a reference (the tests do: tests/automaton/test_trie.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _label_sets():
    import random

    from judge.testing import icd_codes, tool_names

    r = random.Random(7)
    sets = {f"tools{k}": tool_names(k, seed=3) for k in (100, 1000, 10000, 100000)}
    sets.update({f"icd{k}": icd_codes(k, seed=3) for k in (100, 1000, 10000, 100000)})
    sets["unicode"] = ["café", "naïve", "日本語", "日本", "中文标签", "😀 happy", "emoji 🎉🎉", "Ελληνικά",
                       "a\u0301", "ü", "ü_x", "Ünïcödé label", "\u00a0nbsp", "tab\there"]
    sets["prefixes"] = ["a", "ab", "abc", "abcd", "book", "booking", "booking_fee", "b", "bo", "x", "xyz",
                        "get", "get_user", "get_user_id", "get_users"]
    rand = ("".join(chr(r.randrange(1, 0x250)) for _ in range(r.randint(1, 12))) for _ in range(3000))
    sets["bytes"] = [s for s in rand if s.strip()]
    sets["chars"] = [chr(c) for c in range(33, 127)]
    sets["long"] = ["_".join(tool_names(r.randint(3, 9), seed=i)) for i in range(300)]
    return {k: list(dict.fromkeys(v)) for k, v in sets.items()}


def _digest(tokenizers: list[str], shared: str) -> dict:
    """Per (tokenizer, label set, end tokens): sha256 of every array (computed by whichever judge is importable)."""
    import numpy as np
    from transformers import AutoTokenizer

    from judge.automaton.trie import ByteTrie, TrieAutomaton
    from judge.automaton.vocab import Vocabulary

    out = {}
    sets = _label_sets()
    for name in tokenizers:
        tok = AutoTokenizer.from_pretrained(f"{shared}/{name}")
        vocab = Vocabulary.from_tokenizer(tok)
        extra = Vocabulary.from_token_bytes(vocab.token_bytes, end_token_ids=[0, 5, vocab.size - 1],
                                            special=vocab.special, name=name)
        for lname, labels in sets.items():
            for ename, v in (("ends", vocab), ("ends3", extra)):
                if ename == "ends3" and not lname.startswith(("prefixes", "unicode", "tools1000")):
                    continue
                try:
                    a = TrieAutomaton.build(labels, v)
                except Exception as e:  # the same error on both sides is identical output too
                    out[f"{name}/{lname}/{ename}"] = f"error {type(e).__name__}: {e}"
                    continue
                h = hashlib.sha256()
                for arr in (a.indptr, a.token_ids, a.next_nodes, a.node_label):
                    h.update(str(arr.dtype).encode() + np.ascontiguousarray(arr).tobytes())
                h.update(str(a.n_nodes).encode())
                t = ByteTrie.from_strings([s.encode() for s in labels])
                for arr in (t.parent, t.byte_in, t.depth, t.node_of, t.child_indptr, t.child_nodes,
                            t.child_bytes, t.end_indptr, t.end_ids):
                    h.update(str(arr.dtype).encode() + np.ascontiguousarray(arr).tobytes())
                out[f"{name}/{lname}/{ename}"] = f"{h.hexdigest()} edges={a.n_edges} nodes={a.n_nodes}"
    return out


def export_ref(ref: str) -> str:
    """``judge/`` of commit ``ref`` in a folder kept between runs (so numba's disk cache stays valid)."""
    sha = subprocess.run(["git", "rev-parse", "--short=12", ref], cwd=REPO, check=True, capture_output=True,
                         text=True).stdout.strip()
    dest = Path(tempfile.gettempdir()) / f"judge_ref_{sha}"
    if not (dest / "judge").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        tar = dest / "ref.tar"
        subprocess.run(["git", "archive", "-o", str(tar), sha, "judge"], cwd=REPO, check=True)
        with tarfile.open(tar) as tf:
            tf.extractall(dest, filter="data")
    return str(dest)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ref", default="HEAD", help="commit whose judge/ is the reference")
    p.add_argument("--tokenizers", default="qwen3,llama3,gpt2,mistral7b,gemma3")
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "tokenizers"))
    p.add_argument("--digest", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    toks = [t for t in args.tokenizers.split(",") if t]
    if args.digest:
        print(json.dumps(_digest(toks, args.shared)))
        return 0
    tmp = export_ref(args.ref)
    env_old = {"PYTHONPATH": f"{tmp}:{REPO}"}
    res = {}
    for side, env in (("ref", env_old), ("new", {"PYTHONPATH": str(REPO)})):
        proc = subprocess.run([sys.executable, "-m", "bench.automaton_identical", "--digest",
                               "--tokenizers", args.tokenizers, "--shared", args.shared],
                              cwd=tmp if side == "ref" else REPO, env={**os.environ, **env},
                              capture_output=True, text=True, check=True)
        res[side] = json.loads(proc.stdout.strip().splitlines()[-1])
    diff = [k for k in res["ref"] if res["ref"][k] != res["new"].get(k)]
    for k in res["ref"]:
        print(f"{'DIFF' if k in diff else 'same'} {k} {res['new'].get(k)}")
    print(f"{len(res['ref']) - len(diff)}/{len(res['ref'])} identical to {args.ref}")
    return 1 if diff or set(res["ref"]) != set(res["new"]) else 0


if __name__ == "__main__":
    sys.exit(main())
