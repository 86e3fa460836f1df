"""Benchmark: classification throughput on CPU, ours vs per-label scoring, CAPPr and constrained generation.

    python -m bench.throughput --json OUT.json
    python -m bench.throughput --n 4 --n-per-label 1 --n-cappr 2 --n-generate 2   # smoke test
    python -m bench.throughput --model tiny --n 2 --n-per-label 1 --n-cappr 1 --n-generate 1   # harness check

SmolLM2-135M-Instruct (the packaged model, float32 on CPU), the first ``--n``
(100) Banking77 test texts, all 77 labels, the default chat prompt. Engines:

``ours``
    ``Classifier(labels, method="auto")``; for these labels ``auto`` picks the
    ``exact`` trie path. ``decision_function`` is timed after the classifier's
    one-time setup (prefix KV cache, label trie: reported as ``setup_seconds``)
    and one untimed warm-up call; median of ``--repeats-ours`` (3) runs.
``per-label``
    What lm-eval does: one forward pass per (text, label) over the full prompt
    plus the label's tokens, no cache sharing (``judge.testing.reference_logprobs_ids``
    with the same prompt ids, ``clf.prompt_ids(text)``, and
    the same scored token sequences, ``clf.scored_token_ids_``). This is the
    reference the argmax agreement of every engine is measured against.
``cappr``
    CAPPr 0.9.6, ``cappr.huggingface.classify.predict_proba`` with its KV caching:
    the shared prompt prefix (system message with the label list) is cached once
    with ``cache_model`` (untimed setup, like ours), each text's prompt is the
    rest of ``clf.render_prompt(text)``, the completions are ``clf.surfaces_``
    (exactly the strings ours scores), ``end_of_prompt=""``. CAPPr ranks by the
    *mean* token log-probability of a completion (its default), not the sum, so
    its argmax can differ from per-label scoring even on identical inputs; the
    summed log-probabilities it computed are captured too (a pass-through wrapper
    around its ``log_probs_conditional``) to check that its inputs match ours
    (``max_abs_logprob_diff``, ``sum_argmax_agreement``). ``--cappr-mode full``
    skips ``cache_model`` and passes whole prompts (CAPPr still caches each
    prompt across its completions). Shims needed on numpy 2 / transformers 5.x
    are listed in :data:`CAPPR_SHIMS` and printed with the results.
``xgrammar-generate``
    HF ``model.generate`` (greedy, batches of ``--generate-batch-size`` left-padded
    prompts, the same prompt ids) with xgrammar's HF logits processor
    (``xgrammar.contrib.hf.LogitsProcessor``: a token bitmask per step) for the
    grammar ``root ::= "<surface 1>" | "<surface 2>" | ...``; the grammar is
    compiled once (untimed setup), a fresh processor is made per ``generate``
    call (timed). The decoded answer must be one of the label surfaces
    (``valid_fraction``); greedy token-by-token choice is not the argmax of the
    whole-label probability, so disagreements with per-label scoring are expected.

Reported per engine (``--json OUT`` writes a list of these records):
``engine, n_texts, seconds`` (median over repeats of the time for all
``n_texts``), ``texts_per_s, ratio_vs_ours`` (ours texts/s divided by the
engine's texts/s: how many times faster ours is; 1 for ours),
``agreement_with_per_label`` (fraction of identical argmax labels on the
texts both ran: the first ``min(n_texts, n_per_label)``), ``accuracy`` (vs the
gold labels, on the engine's own texts), ``valid_fraction`` (predictions that
are one of the labels), ``status`` (``"ok"``, ``"skipped"`` or
``"error: ..."``), plus ``n_agreement, seconds_all, setup_seconds,
max_abs_logprob_diff, notes``. Each peer runs in its own try/except so a
failing peer does not stop the run.

The subsets of the slow peers are the first texts of the same ``--n`` texts.
Reference timings on the 2-core development machine: per-label scoring about
57 s/text, CAPPr about 0.23-0.25 texts/s, hence the defaults ``--n-per-label 5
--n-cappr 20 --n-generate 20``.

What it deliberately does not do: use a GPU, tune peers beyond their documented
defaults (CAPPr's ``batch_size`` is its default 2), or include model loading in
any timing.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]

PEERS = ("per-label", "cappr", "xgrammar-generate")
_PEER_ALIASES = {"per-label": "per-label", "perlabel": "per-label", "brute": "per-label", "lm-eval": "per-label",
                 "cappr": "cappr", "generate": "xgrammar-generate", "xgrammar": "xgrammar-generate",
                 "xgrammar-generate": "xgrammar-generate"}
TARGETS = {"per-label": 100.0, "cappr": 5.0}

#: What this harness changes so that CAPPr 0.9.6 runs here; printed with the results.
CAPPR_SHIMS = (
    "1. numpy 2 removed np.VisibleDeprecationWarning (CAPPr's cappr/utils/classify.py names it "
    "in a warnings filter / except clause): set np.VisibleDeprecationWarning = "
    "np.exceptions.VisibleDeprecationWarning (a UserWarning subclass) before importing cappr.",
    "2. transformers 5.x removed DynamicCache.from_legacy_cache / DynamicCache.to_legacy_cache, "
    "which CAPPr calls (at import time: dynamic_cache_from_tuple = DynamicCache.from_legacy_cache; "
    "after each forward: out.past_key_values.to_legacy_cache()): added both back on DynamicCache "
    "(to_legacy_cache -> tuple of per-layer (keys, values); from_legacy_cache -> a new DynamicCache "
    "filled layer by layer with cache.update(k, v, i)). Only added when missing.",
    "3. transformers 5.24 renamed the forward argument and output field past_key_values to cache "
    "(5.24 still maps the old names through deprecated aliases that log a warning; removal is "
    "announced for 5.40): CAPPr gets a thin model adapter that renames its past_key_values keyword "
    "to cache and returns a plain output object with logits and past_key_values = out.cache (the "
    "two attributes CAPPr reads and writes); everything else (config, device, eval/train) is "
    "forwarded to the real model, no weights copied.",
    "4. With a BPE tokenizer CAPPr thinks a space must separate cached prefix, prompt and completion: "
    "inside its cache context (_blessed_helper) it prepends ' ' to every prompt, which puts a space "
    "after the chat template's 'user\\n' and breaks the prompt. The harness replaces "
    "cappr.huggingface._utils.does_tokenizer_need_prepended_space with a wrapper that returns False "
    "for the benchmark's tokenizer (a private copy, so nothing else sees CAPPr's tokenizer patches), "
    "so CAPPr adds no space to prompts or completions; end_of_prompt='' is passed as well. The "
    "result is checked: CAPPr's token ids equal ours, and its summed completion log-probs equal "
    "per-label scoring's (max_abs_logprob_diff).",
)


# --------------------------------------------------------------------------- helpers
def _default_data_dir() -> Path:
    env = os.environ.get("JUDGE_DATA_DIR")
    return Path(env) if env else (REPO_ROOT / ".." / "shared" / "datasets")


def _status_error(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    return f"error: {type(exc).__name__}: {msg[:300]}"


def _timed(fn, repeats: int):
    """Run ``fn`` ``repeats`` times; (median seconds, all seconds, last result)."""
    secs, out = [], None
    for _ in range(max(1, repeats)):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        secs.append(time.perf_counter() - t0)
    return statistics.median(secs), secs, out


def _record(engine, n_texts=0, status="ok", **extra):
    rec = {"engine": engine, "n_texts": n_texts, "seconds": None, "texts_per_s": None,
           "ratio_vs_ours": None, "agreement_with_per_label": None, "accuracy": None,
           "valid_fraction": None, "status": status, "n_agreement": 0, "seconds_all": [],
           "setup_seconds": None, "max_abs_logprob_diff": None, "notes": ""}
    rec.update(extra)
    return rec


# --------------------------------------------------------------------------- engines
def run_ours(clf, texts, repeats, setup):
    clf.decision_function(texts[: min(2, len(texts))])  # warm-up, untimed
    med, secs, scores = _timed(lambda: clf.decision_function(texts), repeats)
    preds = np.argmax(scores, axis=1).tolist()
    return dict(seconds=med, seconds_all=secs, setup_seconds=setup, preds=preds, scores=scores,
                valid=[True] * len(preds),
                notes=f"method_={clf.method_}; prefix {len(clf.compiled_.root_ids)} tokens cached once; "
                      f"batch_size={clf.batch_size}")


def run_per_label(clf, texts, repeats):
    from judge.testing import reference_logprobs_ids

    seqs = [list(s) for s in clf.scored_token_ids_]

    def go():
        return np.stack([reference_logprobs_ids(clf.model_, clf.prompt_ids(t), seqs) for t in texts])

    med, secs, scores = _timed(go, repeats)
    preds = np.argmax(scores, axis=1).tolist()
    n_fwd = len(texts) * len(seqs)
    return dict(seconds=med, seconds_all=secs, setup_seconds=0.0, preds=preds, scores=scores,
                valid=[True] * len(preds),
                notes=f"{n_fwd} forward passes (one per text x label, full prompt + label tokens, "
                      f"batch 1, no KV sharing)")


# ---- CAPPr
def _install_cappr_shims():
    """Shims 1-2 of CAPPR_SHIMS; must run before ``import cappr``."""
    if not hasattr(np, "VisibleDeprecationWarning"):
        np.VisibleDeprecationWarning = np.exceptions.VisibleDeprecationWarning
    from transformers import DynamicCache

    if not hasattr(DynamicCache, "to_legacy_cache"):
        def to_legacy_cache(self):
            return tuple((layer.keys, layer.values) for layer in self.layers)

        DynamicCache.to_legacy_cache = to_legacy_cache
    if not hasattr(DynamicCache, "from_legacy_cache"):
        def from_legacy_cache(cls, past_key_values=None):
            cache = cls()
            if past_key_values is not None:
                for i, (k, v) in enumerate(past_key_values):
                    cache.update(k, v, i)
            return cache

        DynamicCache.from_legacy_cache = classmethod(from_legacy_cache)


class _CapprModel:
    """Shim 3: the model as CAPPr 0.9.6 calls it (``past_key_values`` in, ``out.past_key_values`` out).

    transformers 5.24 still accepts and returns the old name through deprecated
    aliases (with a warning; removal is announced for 5.40); this adapter uses the
    new ``cache`` name directly and hands CAPPr a plain output with the two
    attributes it reads and writes, ``logits`` and ``past_key_values``.
    """

    def __init__(self, model):
        import inspect

        self._model = model
        params = inspect.signature(model.forward).parameters
        self._kw = "cache" if "cache" in params else "past_key_values"

    def __call__(self, *args, **kwargs):
        import types

        if self._kw == "cache" and "past_key_values" in kwargs:
            kwargs["cache"] = kwargs.pop("past_key_values")
        out = self._model(*args, **kwargs)
        if self._kw != "cache":
            return out
        return types.SimpleNamespace(logits=out.logits, past_key_values=getattr(out, "cache", None))

    forward = __call__

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __repr__(self):
        return f"_CapprModel({self._model.__class__.__name__})"


def run_cappr(clf, texts, repeats, *, batch_size=2, mode="prefix"):
    import copy

    _install_cappr_shims()
    import cappr
    import cappr.huggingface._utils as cappr_utils
    import cappr.huggingface.classify as cappr_hf

    tok = copy.deepcopy(clf.tokenizer_)  # CAPPr may patch its tokenizer; keep ours untouched
    original = cappr_utils.does_tokenizer_need_prepended_space
    if not getattr(original, "_judge_shim", False):
        def no_space_for_bench(tokenizer):  # shim 4
            if getattr(tokenizer, "_judge_bench_no_space", False):
                return False
            return original(tokenizer)

        no_space_for_bench._judge_shim = True
        cappr_utils.does_tokenizer_need_prepended_space = no_space_for_bench
    tok._judge_bench_no_space = True

    # Pass-through capture of the completion token log-probs CAPPr computes (for the sum check).
    captured = []
    inner = cappr_hf.log_probs_conditional
    if not getattr(inner, "_judge_capture", False):
        def capture(*args, **kwargs):
            out = inner(*args, **kwargs)
            captured.append(out)
            return out

        capture._judge_capture = True
        cappr_hf.log_probs_conditional = capture

    surfaces = list(clf.surfaces_)
    prefix = clf.prompt_prefix_
    full = [clf.render_prompt(t) for t in texts]
    if not all(p.startswith(prefix) for p in full):
        raise RuntimeError("render_prompt(text) does not start with the shared prefix text")

    # Untimed input check: the token ids CAPPr will feed equal ours (prompt and completions).
    prefix_tok = tok(prefix)["input_ids"] if mode == "prefix" else []
    mism = 0
    for t, p in zip(texts, full, strict=True):
        body = p[len(prefix):] if mode == "prefix" else p
        cappr_ids = list(prefix_tok) + tok(body, add_special_tokens=False)["input_ids"]
        mism += cappr_ids != clf.prompt_ids(t)
    comp_ok = all(tok(s, add_special_tokens=False)["input_ids"] == list(ids)
                  for s, ids in zip(surfaces, clf.scored_token_ids_, strict=True))

    model = _CapprModel(clf.model_)
    t0 = time.perf_counter()
    if mode == "prefix":
        mt = cappr_hf.cache_model((model, tok), prefix)
        prompts = [p[len(prefix):] for p in full]
    else:
        mt = (model, tok)
        prompts = full
    setup = time.perf_counter() - t0

    def go():
        captured.clear()
        return cappr_hf.predict_proba(prompts, completions=surfaces, model_and_tokenizer=mt,
                                      end_of_prompt="", batch_size=batch_size,
                                      show_progress_bar=False)

    try:
        med, secs, proba = _timed(go, repeats)
    finally:
        cappr_hf.log_probs_conditional = inner
    proba = np.asarray(proba, np.float64).reshape(len(texts), len(surfaces))
    preds = np.argmax(proba, axis=1).tolist()
    sums = None
    if captured:
        lp = captured[-1]
        sums = np.array([[float(np.sum(c)) for c in row] for row in lp], np.float64)
    notes = (f"cappr {cappr.__version__}, mode={mode}, batch_size={batch_size}; ranks by mean "
             f"token log-prob; prompt token ids equal ours for {len(texts) - mism}/{len(texts)} "
             f"texts; completion ids equal ours: {comp_ok}")
    return dict(seconds=med, seconds_all=secs, setup_seconds=setup, preds=preds, scores=sums,
                valid=[True] * len(preds), notes=notes)


# ---- HF generate + xgrammar
def run_generate(clf, texts, repeats, *, batch_size=8):
    import torch
    import xgrammar as xgr
    import xgrammar.contrib.hf  # noqa: F401
    from transformers import GenerationConfig

    from bench._common import ebnf_choice

    model, tok = clf.model_, clf.tokenizer_
    surfaces = list(clf.surfaces_)
    index = {s: i for i, s in enumerate(surfaces)}
    stops = [int(t) for t in clf.engine_.vocab_.end_token_ids]
    vocab_size = int(getattr(model.config, "vocab_size", len(tok)))
    t0 = time.perf_counter()
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab_size, stop_token_ids=stops)
    compiled = xgr.GrammarCompiler(info).compile_grammar(ebnf_choice(surfaces))
    setup = time.perf_counter() - t0
    pad = tok.pad_token_id if tok.pad_token_id is not None else stops[0]
    max_new = max(len(s.encode("utf-8")) for s in surfaces) + 1  # any tokenization, plus the stop
    gen_cfg = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=max_new,
                               eos_token_id=stops, pad_token_id=pad)
    dev = model.device
    from judge.engine import left_pad

    def go():
        answers = []
        for s in range(0, len(texts), batch_size):
            prompts = [clf.prompt_ids(t) for t in texts[s:s + batch_size]]
            ids, att = left_pad(prompts, pad, dev)
            L = ids.shape[1]
            proc = xgr.contrib.hf.LogitsProcessor(compiled)  # single use: one per generate call
            with torch.inference_mode():
                out = model.generate(input_ids=ids, attention_mask=att,
                                     generation_config=gen_cfg, logits_processor=[proc])
            for row in out[:, L:].tolist():
                cut = next((j for j, t in enumerate(row) if t in stops), None)
                body = row if cut is None else row[:cut]
                answers.append((tok.decode(body), cut is not None))
        return answers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        med, secs, answers = _timed(go, repeats)
    preds = [index.get(a) for a, _ in answers]
    valid = [p is not None for p in preds]
    bad = [a for (a, _), v in zip(answers, valid, strict=True) if not v]
    no_stop = sum(not stopped for _, stopped in answers)
    notes = (f"greedy, generate batch {batch_size}, max_new_tokens={max_new}; "
             f"{no_stop} answers without a stop token")
    if bad:
        notes += f"; invalid answers e.g. {bad[:3]!r}"
    return dict(seconds=med, seconds_all=secs, setup_seconds=setup, preds=preds, scores=None,
                valid=valid, notes=notes)


# --------------------------------------------------------------------------- report
def _fmt(v, spec):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, spec)


def print_table(records, out=sys.stdout):
    cols = [("engine", 18, "s"), ("n_texts", 7, "d"), ("seconds", 9, ".2f"), ("texts_per_s", 11, ".3f"),
            ("ratio_vs_ours", 13, ".1f"), ("agreement_with_per_label", 9, ".3f"), ("accuracy", 8, ".3f"),
            ("valid_fraction", 6, ".3f"), ("status", 0, "s")]
    heads = {"engine": "engine", "n_texts": "texts", "seconds": "seconds", "texts_per_s": "texts/s",
             "ratio_vs_ours": "ours faster x", "agreement_with_per_label": "agree",
             "accuracy": "accuracy", "valid_fraction": "valid", "status": "status"}
    line = "  ".join(heads[c].ljust(w) if s == "s" else heads[c].rjust(w) for c, w, s in cols)
    print(line, file=out)
    print("-" * len(line), file=out)
    for r in records:
        cells = []
        for c, w, s in cols:
            v = r.get(c)
            cells.append(str(v).ljust(w) if s == "s" else _fmt(v, s).rjust(w))
        print("  ".join(cells).rstrip(), file=out)


def print_predictions(records, labels, gold, texts, n_show, out=sys.stdout):
    """Gold and each engine's label for the first ``n_show`` texts ('-': not run on that text)."""
    ran = [r for r in records if r["status"] == "ok" and r.get("preds") is not None]
    n = min(n_show, max((len(r["preds"]) for r in ran), default=0))
    if n == 0:
        return
    name = lambda i: "-" if i is None else labels[i]  # noqa: E731
    print(f"predictions on the first {n} texts (* = differs from per-label):", file=out)
    pl = next((r["preds"] for r in ran if r["engine"] == "per-label"), None)
    for i in range(n):
        print(f"  [{i}] {texts[i][:70]!r}", file=out)
        print(f"       gold: {labels[gold[i]]}", file=out)
        for r in ran:
            if i >= len(r["preds"]):
                continue
            p = r["preds"][i]
            mark = "*" if pl is not None and i < len(pl) and r["engine"] != "per-label" and p != pl[i] else " "
            print(f"      {mark}{r['engine']}: {name(p)}", file=out)


def _finish(records, gold, per_label_preds, per_label_scores, ours_tps):
    for r in records:
        preds = r.pop("preds", None)
        scores = r.pop("scores", None)
        valid = r.pop("valid", None)
        if r["status"] != "ok" or preds is None:
            continue
        n = r["n_texts"]
        r["texts_per_s"] = n / r["seconds"] if r["seconds"] else None
        if ours_tps and r["texts_per_s"]:
            r["ratio_vs_ours"] = ours_tps / r["texts_per_s"]
        r["accuracy"] = float(np.mean([p == g for p, g in zip(preds, gold[:n], strict=True)])) if n else None
        r["valid_fraction"] = float(np.mean(valid)) if valid else None
        if per_label_preds is not None:
            m = min(n, len(per_label_preds))
            r["n_agreement"] = m
            if m:
                r["agreement_with_per_label"] = float(np.mean(
                    [a == b for a, b in zip(preds[:m], per_label_preds[:m], strict=True)]))
                if scores is not None and r["engine"] != "per-label":
                    sc = np.asarray(scores)[:m]
                    r["max_abs_logprob_diff"] = float(np.max(np.abs(sc - per_label_scores[:m])))
                    if r["engine"] == "cappr":
                        agree = float(np.mean(np.argmax(sc, 1) == np.asarray(per_label_preds[:m])))
                        r["notes"] += f"; argmax of CAPPr's summed log-probs agrees with per-label on {agree:.3f}"
                if r["engine"] != "per-label":
                    dis = [i for i in range(m) if preds[i] != per_label_preds[i]]
                    if dis:
                        r["notes"] += f"; disagrees with per-label on text(s) {dis[:10]}"
    return records


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=None, help="folder holding banking77/ (default: $JUDGE_DATA_DIR, "
                                                     "else ../shared/datasets beside the repository)")
    ap.add_argument("--model", default=None, help="model for load_model (default: the packaged SmolLM2); "
                                                  "'tiny': a random-weight model, for a smoke run")
    ap.add_argument("--n", type=int, default=100, help="texts for ours (default 100)")
    ap.add_argument("--n-per-label", type=int, default=5, help="texts for per-label scoring (default 5)")
    ap.add_argument("--n-cappr", type=int, default=20, help="texts for CAPPr (default 20)")
    ap.add_argument("--n-generate", type=int, default=20, help="texts for xgrammar generate (default 20)")
    ap.add_argument("--repeats", type=int, default=1, help="timed runs of each peer; median (default 1)")
    ap.add_argument("--repeats-ours", type=int, default=3, help="timed runs of ours; median (default 3)")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated peers to run besides ours, from {', '.join(PEERS)} "
                         f"(aliases: generate, xgrammar, lm-eval); 'none' for ours only")
    ap.add_argument("--batch-size", type=int, default=8, help="ours: texts per forward pass (default 8)")
    ap.add_argument("--generate-batch-size", type=int, default=None,
                    help="xgrammar generate: prompts per generate call (default: --batch-size)")
    ap.add_argument("--cappr-batch-size", type=int, default=2, help="CAPPr batch_size (its default, 2)")
    ap.add_argument("--cappr-mode", choices=("prefix", "full"), default="prefix",
                    help="prefix: cache the shared prompt prefix with cache_model (default); "
                         "full: pass whole prompts")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--show", type=int, default=5,
                    help="print gold and predicted labels of every engine for this many texts (default 5)")
    ap.add_argument("--json", dest="json_out", default=None, help="write the records as a JSON list here")
    args = ap.parse_args(argv)

    peers = []
    for name in (p.strip().lower() for p in args.peers.split(",")):
        if not name or name == "none":
            continue
        if name not in _PEER_ALIASES:
            ap.error(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")
        if _PEER_ALIASES[name] not in peers:
            peers.append(_PEER_ALIASES[name])
    counts = {"per-label": args.n_per_label, "cappr": args.n_cappr, "xgrammar-generate": args.n_generate}
    if args.n < 1 or any(c < 0 for c in counts.values()):
        ap.error("--n must be >= 1 and the per-peer counts >= 0")

    import torch
    import transformers

    from bench._common import load_bench_model
    from judge import Classifier
    from judge.datasets import load

    if args.threads:
        torch.set_num_threads(args.threads)
    data_dir = Path(args.data_dir) if args.data_dir else _default_data_dir()
    data = load("banking77", split="test", data_dir=data_dir)
    labels = list(data.label_names)
    n_max = max([args.n] + [counts[p] for p in peers])
    if n_max > len(data.texts):
        ap.error(f"asked for {n_max} texts; the Banking77 test split has {len(data.texts)}")
    texts = list(data.texts[:n_max])
    gold = [labels.index(g) for g in data.labels[:n_max]]

    t0 = time.perf_counter()
    model, tok = load_bench_model(args.model)
    load_s = time.perf_counter() - t0
    clf = Classifier(labels, model, tokenizer=tok, method="auto", batch_size=args.batch_size,
                     progress=False)
    print(f"trie-judge throughput: Banking77 test, K={len(labels)}, model "
          f"{args.model or 'smollm2-135m-instruct (packaged)'} on {model.device} "
          f"({next(model.parameters()).dtype}), torch {torch.__version__} with "
          f"{torch.get_num_threads()} threads, transformers {transformers.__version__}; "
          f"model loaded in {load_s:.1f} s (not timed)", flush=True)
    t0 = time.perf_counter()
    clf.setup()  # ours' one-time setup: prefix KV cache, label token trie (reported, not timed)
    setup_s = time.perf_counter() - t0
    with torch.inference_mode():  # warm up kernels once for every engine, untimed
        model(input_ids=torch.tensor([clf.prompt_ids(texts[0])], device=model.device))

    records = []
    rec = _record("ours", args.n)
    try:
        res = run_ours(clf, texts[: args.n], args.repeats_ours, setup_s)
        rec.update(res)
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        rec["status"] = _status_error(exc)
    records.append(rec)
    print(f"  ours: {rec['status']} {rec['seconds'] or 0:.2f} s for {args.n} texts", flush=True)

    runners = {
        "per-label": lambda ts: run_per_label(clf, ts, args.repeats),
        "cappr": lambda ts: run_cappr(clf, ts, args.repeats, batch_size=args.cappr_batch_size,
                                      mode=args.cappr_mode),
        "xgrammar-generate": lambda ts: run_generate(
            clf, ts, args.repeats, batch_size=args.generate_batch_size or args.batch_size),
    }
    for peer in peers:
        n = counts[peer]
        rec = _record(peer, n)
        if n == 0:
            rec["status"] = "skipped"
        else:
            try:
                rec.update(runners[peer](texts[:n]))
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                rec["status"] = _status_error(exc)
        records.append(rec)
        print(f"  {peer}: {rec['status']} {rec['seconds'] or 0:.2f} s for {n} texts", flush=True)

    by = {r["engine"]: r for r in records}
    ours = by["ours"]
    pl = by.get("per-label")
    pl_ok = pl is not None and pl["status"] == "ok"
    per_label_preds = pl["preds"] if pl_ok else None
    per_label_scores = np.asarray(pl["scores"]) if pl_ok else None
    ours_tps = args.n / ours["seconds"] if ours["status"] == "ok" and ours["seconds"] else None
    print()
    print_predictions(records, labels, gold, texts, args.show)
    _finish(records, gold, per_label_preds, per_label_scores, ours_tps)

    print()
    print_table(records)
    print()
    print("ours faster x = ours texts/s / engine texts/s; agree = argmax agreement with per-label "
          "scoring on the texts both ran; accuracy vs gold on the engine's own texts.")
    for r in records:
        if r["engine"] in TARGETS and r["ratio_vs_ours"] is not None:
            tgt = TARGETS[r["engine"]]
            print(f"target: ours >= {tgt:g}x {r['engine']}: {r['ratio_vs_ours']:.1f}x "
                  f"({'met' if r['ratio_vs_ours'] >= tgt else 'NOT met'})")
    if ours["agreement_with_per_label"] is not None:
        ok = ours["agreement_with_per_label"] == 1.0
        print(f"target: identical argmax to per-label scoring: {ours['n_agreement']} texts, "
              f"agreement {ours['agreement_with_per_label']:.3f} ({'met' if ok else 'NOT met'}); "
              f"max |log-prob diff| {_fmt(ours['max_abs_logprob_diff'], '.2e')}")
    print()
    for r in records:
        if r["notes"] or r["setup_seconds"] is not None:
            print(f"{r['engine']}: setup {_fmt(r['setup_seconds'], '.2f')} s (untimed); "
                  f"runs {[round(s, 2) for s in r['seconds_all']]}; {r['notes']}")
    if "cappr" in peers:
        print("\nCAPPr shims applied by this harness (judge/ is unchanged):")
        for s in CAPPR_SHIMS:
            print("  " + s)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(records, indent=2) + "\n")
        print(f"\nwrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
