"""Certified search at every K: small label sets, ICD-10-CM's 74,719 codes, and scaling.

Three parts, each printing a table and writing JSON (``--json``):

* ``small``: Banking77 and CLINC150 test texts (seeded), the default prompt: full exact
  ``predict_proba`` against ``predict`` (the certified argmax): seconds, tokens fed, and
  whether the argmax is identical on every text.
* ``icd``: ICD-10-CM (``judge.datasets.icd10cm``: inclusion term -> billable code, the model
  shown each code's title): beam search (``method="decode"``), the certified search with a
  budget of fed tokens, a retrieval shortlist of M labels scored exactly, and retrieval alone
  (TF-IDF, scikit-learn): accuracy@1 and @5, seconds per text, compile time and peak RSS;
  how often beam search missed the certified argmax. The shortlist's encoder and M are
  chosen on the validation half (``icd-select``), test is reported once (``icd``).
* ``scaling``: tokens fed and seconds per text of the certified search at K = 10^3, 10^4,
  10^5 (tool names and ICD titles), against full exact scoring where it fits.

    python -m bench.search small --n 500 --json bench/results/search_small.json
    python -m bench.search icd-select --n 200 --json bench/results/search_icd_select.json
    python -m bench.search icd --n 100 --budget 5000 --json bench/results/search_icd.json
    python -m bench.search scaling --n 10 --json bench/results/search_scaling.json
    python -m bench.search small --model tiny --n 4 --datasets banking77     # smoke run (seconds)

One torch thread by default (the machines here are shared: read ratios measured in the same
run more than absolute seconds). What it deliberately does not do: tune anything on test data.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _model(name):
    if name == "tiny":
        from judge.testing import tiny_pair

        return tiny_pair()
    from judge.models import load_model

    return load_model(name, device="cpu")


def _write(args, rec):
    if args.json:
        Path(args.json).write_text(json.dumps(rec, indent=1, default=float) + "\n")
        print(f"wrote {args.json}")


# ----------------------------------------------------------------------------- small K
def small(args):
    from judge import Classifier
    from judge import datasets as ds

    # the packaged default as `Classifier(labels)` builds it: a model object passed in counts as "another
    # model", whose fused default is the LM alone (weight 0), which is not what a user gets
    model, tok = _model(args.model) if args.model else (None, None)
    rows = []
    for name in args.datasets.split(","):
        data = ds.load(name, "test", data_dir=args.data_dir).sample(args.n, seed=args.seed)
        texts = list(data.texts)
        clf = Classifier(list(data.label_names), model, tokenizer=tok, batch_size=args.batch_size, progress=False)
        clf.setup()
        fusion = getattr(clf, "fusion_", None)
        clf.predict_proba(texts[:2])  # one-time work (the embedder's load, the label vectors, the prior's
        clf.predict(texts[:2])        # content-free pass) is not timed, and the usage read is a scoring call's
        # interleaved in chunks, so a change of load on this shared machine hits both alike; wall
        # seconds and this process's CPU seconds (one torch thread: the compute itself)
        wall = {"full": 0.0, "predict": 0.0}
        cpu = {"full": 0.0, "predict": 0.0}
        fed_full, fed_pred, rounds, certified, same = 0, 0, [], 0, 0
        for _ in range(args.repeats):
            for s0 in range(0, len(texts), args.chunk):
                part = texts[s0:s0 + args.chunk]
                w0, c0 = time.perf_counter(), time.process_time()
                proba = clf.predict_proba(part)
                wall["full"] += time.perf_counter() - w0
                cpu["full"] += time.process_time() - c0
                fed_full += clf.engine_.last_usage_["input_tokens"]
                w0, c0 = time.perf_counter(), time.process_time()
                pred = clf.predict(part)
                wall["predict"] += time.perf_counter() - w0
                cpu["predict"] += time.process_time() - c0
                r = clf.search_report_
                fed_pred += int(r.fed.sum())
                rounds += r.rounds.tolist()
                certified += int(r.certified.sum())
                same += int(np.sum(clf.classes_[proba.argmax(1)] == pred))
        reps = args.repeats
        row = {"dataset": name, "K": len(clf.labels), "n": len(texts), "method": clf.method_,
               "seconds_full": wall["full"] / reps, "seconds_predict": wall["predict"] / reps,
               "cpu_seconds_full": cpu["full"] / reps, "cpu_seconds_predict": cpu["predict"] / reps,
               "speedup": wall["full"] / wall["predict"], "cpu_speedup": cpu["full"] / cpu["predict"],
               "tokens_full": fed_full // reps, "tokens_predict": fed_pred // reps,
               "rounds_median": float(np.median(rounds)), "argmax_identical": same // reps,
               "certified": certified // reps, "repeats": reps, "chunk": args.chunk,
               "fusion_weight": None if fusion is None else float(fusion.weight)}
        rows.append(row)
        print(f"{name:10s} K={row['K']:3d} n={row['n']}: full {row['seconds_full']:.1f}s wall / "
              f"{row['cpu_seconds_full']:.1f}s cpu ({row['tokens_full']} tokens); predict {row['seconds_predict']:.1f}s "
              f"wall / {row['cpu_seconds_predict']:.1f}s cpu ({row['tokens_predict']} tokens, {row['rounds_median']:.0f} "
              f"rounds) -> x{row['speedup']:.2f} wall, x{row['cpu_speedup']:.2f} cpu; argmax identical "
              f"{row['argmax_identical']}/{row['n']}", flush=True)
    print("\n| dataset | K | n | full predict_proba s (cpu s) | predict s (cpu s) | speed-up wall / cpu | "
          "tokens full / predict | rounds (median) | argmax identical |")
    print("|---|---:|---:|---:|---:|---|---|---:|---|")
    for r in rows:
        print(f"| {r['dataset']} | {r['K']} | {r['n']} | {r['seconds_full']:.0f} ({r['cpu_seconds_full']:.0f}) | "
              f"{r['seconds_predict']:.0f} ({r['cpu_seconds_predict']:.0f}) | {r['speedup']:.2f}x / "
              f"{r['cpu_speedup']:.2f}x | {r['tokens_full']} / {r['tokens_predict']} | {r['rounds_median']:.0f} | "
              f"{r['argmax_identical']}/{r['n']} |")
    _write(args, {"part": "small", "model": args.model or "smollm2-135m-instruct", "rows": rows})


# ----------------------------------------------------------------------------- ICD-10-CM
ICD_PROMPTS = {
    "default": None,
    "clinical": "Clinical phrase: {text}\nICD-10-CM diagnosis:",
}


def _icd_classifier(model, tok, codes, titles, prompt, **kw):
    from judge import Classifier

    return Classifier(codes, model, tokenizer=tok, label_names=titles, prompt=ICD_PROMPTS[prompt],
                      progress=False, **kw)


def _topk(scores, k):
    s = np.where(np.isfinite(scores), scores, -np.inf)
    return np.argsort(-s, axis=1, kind="stable")[:, :k]


def _tfidf_rank(label_texts, texts, k):
    from judge.retrieval import Shortlist

    return Shortlist(label_texts, m=k).query(texts)


def icd_select(args):
    """Validation: shortlist recall per encoder and M; search accuracy per prompt on a few texts."""
    from judge import datasets as ds
    from judge.datasets import icd10cm

    model, tok = _model(args.model)
    data = ds.load("icd10cm", "validation").sample(args.n, seed=args.seed) if args.n else ds.load("icd10cm", "validation")
    codes = list(data.label_names)
    t = icd10cm.titles()
    titles = [t[c] for c in codes]
    texts, gold = list(data.texts), [codes.index(c) for c in data.labels]
    rows = []
    from judge.encoders import LMEncoder as ModelEncoder
    from judge.encoders import TfidfEncoder
    from judge.retrieval import Shortlist

    # both encoders on a K-label subset (every gold label plus random distractors): embedding all
    # 74,719 titles with the model costs hours of CPU here, so the two are compared where both fit
    rng = np.random.default_rng(args.seed)
    sub = sorted(set(gold) | set(rng.choice(len(codes), max(0, args.subset_k - len(set(gold))), replace=False).tolist()))
    where = {k: i for i, k in enumerate(sub)}
    for enc_name in args.encoders.split(","):
        t0 = time.perf_counter()
        enc = TfidfEncoder() if enc_name == "tfidf" else ModelEncoder(model, tok)
        sl = Shortlist([titles[k] for k in sub], m=min(max(args.ms), len(sub)), encoder=enc)
        build = time.perf_counter() - t0
        keep = sl.query(texts)
        for m in args.ms:
            rec = float(np.mean([where[g] in row[:m] for g, row in zip(gold, keep)]))
            rows.append({"encoder": enc_name, "K": len(sub), "M": m, "recall": rec, "index_seconds": build})
            print(f"K={len(sub)} subset, encoder {enc_name:6s} M={m:5d}: recall {100 * rec:.1f}% "
                  f"(labels embedded in {build:.1f}s)", flush=True)
    pick = max((r for r in rows if r["M"] == 256), key=lambda r: r["recall"])
    print(f"chosen encoder (best recall at M=256 on the validation subset): {pick['encoder']}")
    t0 = time.perf_counter()
    full_sl = Shortlist(titles, m=max(args.ms), encoder=TfidfEncoder() if pick["encoder"] == "tfidf"
                        else ModelEncoder(model, tok))
    build = time.perf_counter() - t0
    keep = full_sl.query(texts)
    for m in args.ms:
        rec = float(np.mean([g in row[:m] for g, row in zip(gold, keep)]))
        rows.append({"encoder": pick["encoder"], "K": len(codes), "M": m, "recall": rec, "index_seconds": build})
        print(f"K={len(codes)}, encoder {pick['encoder']:6s} M={m:5d}: recall {100 * rec:.1f}% "
              f"(labels embedded in {build:.1f}s)", flush=True)
    prompt_rows = []
    for prompt in args.prompts.split(","):
        clf = _icd_classifier(model, tok, codes, titles, prompt, shortlist=256, shortlist_encoder=pick["encoder"])
        sub = list(range(min(len(texts), args.n_prompt)))
        pred = clf.predict([texts[i] for i in sub])
        acc = float(np.mean([codes.index(p) == gold[i] for p, i in zip(pred, sub)]))
        prompt_rows.append({"prompt": prompt, "n": len(sub), "accuracy_shortlist256": acc})
        print(f"prompt {prompt:9s}: shortlist-256 accuracy {100 * acc:.1f}% on {len(sub)} validation texts", flush=True)
    best_prompt = max(prompt_rows, key=lambda r: r["accuracy_shortlist256"])["prompt"]
    print(f"chosen prompt: {best_prompt}")
    _write(args, {"part": "icd-select", "split": "validation", "n": len(texts), "recall": rows,
                  "prompts": prompt_rows, "chosen": {"encoder": pick["encoder"], "prompt": best_prompt}})


def icd(args):
    from judge import datasets as ds
    from judge.datasets import icd10cm

    model, tok = _model(args.model)
    data = ds.load("icd10cm", "test").sample(args.n, seed=args.seed)
    codes = list(data.label_names)
    t = icd10cm.titles()
    titles = [t[c] for c in codes]
    texts, gold = list(data.texts), np.array([codes.index(c) for c in data.labels])
    out = {"part": "icd", "split": "test", "n": len(texts), "K": len(codes), "prompt": args.prompt,
           "encoder": args.encoder, "budget": args.budget, "methods": {}}

    def report(name, top, seconds, extra=None):
        acc1 = float(np.mean(top[:, 0] == gold))
        acc5 = float(np.mean([g in row[:5] for g, row in zip(gold, top)]))
        rec = {"acc1": acc1, "acc5": acc5, "seconds_per_text": seconds / len(texts), "rss_mb": _rss_mb(),
               **(extra or {})}
        out["methods"][name] = rec
        print(f"{name:22s} acc@1 {100 * acc1:5.1f}%  acc@5 {100 * acc5:5.1f}%  {rec['seconds_per_text']:.2f} s/text "
              f"RSS {rec['rss_mb']:.0f} MB {extra or ''}", flush=True)
        _write(args, out)  # after every method: a run stopped part-way keeps what it measured

    t0 = time.perf_counter()
    top = _tfidf_rank(titles, texts, 5)
    report("tfidf retrieval", top, time.perf_counter() - t0)
    # the certified search (auto above decode_above)
    t0 = time.perf_counter()
    clf = _icd_classifier(model, tok, codes, titles, args.prompt, search_budget=args.budget)
    clf.setup()
    compile_s = time.perf_counter() - t0
    c = clf.compiled_
    out["compile"] = {"seconds_tokenize_and_trie": compile_s, "trie_nodes": len(c.option_trie),
                      "method": clf.method_}
    t0 = time.perf_counter()
    from judge.automaton import TrieAutomaton

    TrieAutomaton.build(c.surfaces, c.engine.vocab_)
    out["compile"]["seconds_automaton"] = time.perf_counter() - t0
    print(f"compile: tokenize + option trie {compile_s:.2f}s ({len(c.option_trie)} nodes), automaton "
          f"{out['compile']['seconds_automaton']:.2f}s", flush=True)
    preds, reps = [], []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(len(texts)):
            pred = clf.predict([texts[i]])
            preds.append(codes.index(pred[0]))
            reps.append(clf.search_report_)
            if args.progress:
                print(f"  search {i + 1}/{len(texts)} fed {int(reps[-1].fed[0])} certified {bool(reps[-1].certified[0])}",
                      file=sys.stderr, flush=True)
    secs = time.perf_counter() - t0
    fed = np.array([int(r.fed[0]) for r in reps])
    cert = np.array([bool(r.certified[0]) for r in reps])
    found5 = []
    for r in reps:
        f = r.found[0]
        found5.append(sorted(f, key=lambda k: -f[k])[:5])
    top = np.array([(row + [-1] * 5)[:5] for row in found5])
    top[:, 0] = preds
    report("certified search", top, secs, {"certified": float(cert.mean()), "fed_median": float(np.median(fed)),
                                           "fed_p90": float(np.percentile(fed, 90)), "fed_max": int(fed.max()),
                                           "fed": fed.tolist()})
    search_pred = np.array(preds)
    # beam search through the automaton
    dec = _icd_classifier(model, tok, codes, titles, args.prompt, method="decode", top_k=5)
    dec.setup()
    t0 = time.perf_counter()
    s = dec.decision_function(texts)
    report("beam search (decode)", _topk(s, 5), time.perf_counter() - t0)
    beam = s.argmax(1)
    miss = (beam != search_pred) & cert
    out["methods"]["beam search (decode)"]["missed_certified_argmax"] = float(miss.sum() / max(1, cert.sum()))
    print(f"beam search missed the certified argmax on {int(miss.sum())} of {int(cert.sum())} certified texts")
    # shortlists
    for m in args.ms:
        sl = _icd_classifier(model, tok, codes, titles, args.prompt, method="exact", shortlist=m,
                             shortlist_encoder=args.encoder)
        sl.setup()
        sub = list(range(min(len(texts), args.n_shortlist.get(m, len(texts)))))
        t0 = time.perf_counter()
        s = sl.decision_function([texts[i] for i in sub])
        secs = time.perf_counter() - t0
        top = _topk(s, 5)
        acc1 = float(np.mean(top[:, 0] == gold[sub]))
        acc5 = float(np.mean([g in row for g, row in zip(gold[sub], top)]))
        rec = {"acc1": acc1, "acc5": acc5, "seconds_per_text": secs / len(sub), "n": len(sub),
               "recall": sl.shortlist_recall([texts[i] for i in sub], [codes[g] for g in gold[sub]]),
               "rss_mb": _rss_mb()}
        out["methods"][f"shortlist {m} + exact"] = rec
        print(f"shortlist {m:5d} + exact acc@1 {100 * acc1:5.1f}%  acc@5 {100 * acc5:5.1f}%  "
              f"{rec['seconds_per_text']:.2f} s/text (n={len(sub)}, recall {100 * rec['recall']:.1f}%)", flush=True)
        _write(args, out)
    _write(args, out)


# ----------------------------------------------------------------------------- scaling
def scaling(args):
    from judge import Classifier
    from judge.datasets import icd10cm
    from judge.testing import tool_names

    model, tok = _model(args.model)
    texts = ["I need to look up the balance of my savings account", "cancel the flight booking for tomorrow",
             "Fracture of the left femur after a fall", "Type 2 diabetes with kidney complications",
             "send the invoice to the customer by email", "update my profile picture",
             "chronic cough and shortness of breath", "restore the backup from last week",
             "schedule a meeting with the sales team", "acute appendicitis with perforation"][: args.n]
    rows = []
    all_titles = list(icd10cm.titles().values())
    rng = np.random.default_rng(0)
    for family in args.families.split(","):
        for k in args.ks:
            if family == "icd" and k > len(all_titles):  # 10^5 asked: every billable title there is
                k = len(all_titles)
            labels = tool_names(k, 0) if family == "tools" else \
                [all_titles[i] for i in sorted(rng.choice(len(all_titles), k, replace=False))]
            clf = Classifier(labels, model, tokenizer=tok, method="search", search_budget=None,
                             label_names="raw", progress=False)
            clf.setup()
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                clf.predict(texts)
            secs = (time.perf_counter() - t0) / len(texts)
            rep = clf.search_report_
            row = {"family": family, "K": k, "trie_nodes": len(clf.compiled_.option_trie),
                   "fed_median": float(np.median(rep.fed)), "fed_max": int(rep.fed.max()),
                   "seconds_per_text": secs, "certified": float(rep.certified.mean())}
            if k <= args.full_up_to:
                full = Classifier(labels, model, tokenizer=tok, method="exact", label_names="raw", progress=False)
                t0 = time.perf_counter()
                full.decision_function(texts)
                row["full_seconds_per_text"] = (time.perf_counter() - t0) / len(texts)
                row["full_tokens_per_text"] = full.engine_.last_usage_["input_tokens"] / len(texts)
            rows.append(row)
            print(f"{family:6s} K={k:6d} nodes={row['trie_nodes']:7d}: fed median {row['fed_median']:.0f} "
                  f"max {row['fed_max']} tokens, {secs:.2f} s/text, certified {row['certified']:.2f}"
                  + (f"; full exact {row['full_tokens_per_text']:.0f} tokens, {row['full_seconds_per_text']:.2f} s/text"
                     if "full_seconds_per_text" in row else ""), flush=True)
    _write(args, {"part": "scaling", "n": len(texts), "rows": rows})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["small", "icd-select", "icd", "scaling"])
    ap.add_argument("--model", default=None, help="hub id or folder (default: the packaged SmolLM2); 'tiny': smoke run")
    ap.add_argument("--data-dir", default=str(REPO.parent / "shared" / "datasets"))
    ap.add_argument("--datasets", default="banking77,clinc150")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=50, help="small: texts per interleaved chunk")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget", type=int, default=5000, help="icd: fed tokens per text for the certified search")
    ap.add_argument("--prompt", default="default", choices=sorted(ICD_PROMPTS))
    ap.add_argument("--prompts", default="default,clinical")
    ap.add_argument("--n-prompt", type=int, default=50, help="icd-select: validation texts per prompt")
    ap.add_argument("--encoder", default="tfidf", choices=["tfidf", "model"])
    ap.add_argument("--encoders", default="tfidf,model")
    ap.add_argument("--subset-k", type=int, default=3000, help="icd-select: labels in the encoder comparison")
    ap.add_argument("--ms", type=int, nargs="*", default=[32, 256, 2048])
    ap.add_argument("--n-shortlist", type=json.loads, default={},
                    help='icd: texts per M, e.g. \'{"2048": 20}\' (default: all)')
    ap.add_argument("--ks", type=int, nargs="*", default=[1000, 10000, 100000])
    ap.add_argument("--families", default="tools,icd")
    ap.add_argument("--full-up-to", type=int, default=1000)
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    args.n_shortlist = {int(k): int(v) for k, v in args.n_shortlist.items()}
    import torch

    torch.set_num_threads(args.threads)
    {"small": small, "icd-select": icd_select, "icd": icd, "scaling": scaling}[args.part](args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
