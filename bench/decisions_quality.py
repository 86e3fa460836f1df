"""Decision quality: sys1bench items through /v1/systemone, prompt styles chosen on validation, before and after.

Every answer goes through the server's own path: sys1bench's ``jev_typesafe`` adapter
builds the request and parses the answer, posting to `judge.server.create_app` in this
process (FastAPI's TestClient, the ASGI app itself); the app's `judge.decisions.Decider`
scores through a `bench._decisions_data.CachedScorer` around the engine, so a query
(prompt and option strings) is scored once and kept in ``bench/cache/decisions``.
Before each item's requests are sent, all of its questions (every framing and option
permutation) are scored in one call, so the state is fed to the model once per item; the
requests then read those numbers from the cache (a query's scores differ from scoring it
alone by float32 rounding, ~1e-6).

    P=".venv/bin/python -m bench.decisions_quality"
    # validation (seed 7001): one run per prompt variant, canonical framing, 24 items per generator
    # (VALIDATION_N: run's and select's default; select reads exactly these items from the cache)
    $P run --split validation --n 24 --variant chat+list+desc+name
    # the classification datasets as one choice question each (validation splits)
    $P datasets --n 100 --variant completion+nolist+name
    # choose per question type on validation; the table. Variants are compared only on the questions
    # (generator questions and datasets) every one of them has in the cache; what is left out is named
    $P select --variants completion+nolist+description,chat+list+desc+name --json bench/results/decisions_select.json
    # test (seed 9001), once: framings, 2 option permutations, 30 items per generator,
    # uncalibrated and with a profile fitted on the validation items (judge calibrate-decisions' path)
    $P run --split test --n 30 --framings --permutations 2 --calibrated --tag after
    PYTHONPATH=/tmp/decisions_before $P run --split test ... --tag before     # today's code, copied aside
    $P banking77 --n 300        # one choice question through /v1/systemone vs Classifier, test
    $P report --json bench/results/decisions_quality.json
    # the LM alone and the default's fusion on choices (Decider(embedder="minilm") on this scorer), one run, side by side
    $P run ... --embedder none,minilm; $P compare --labels default+embedder-none,default+embedder-minilm --json ...
    $P run --model tiny --n 1 --split validation --cache /tmp/dq   # seconds: the harness runs

Variants (``--variant``) are ``+``-joined flags, applied to every question type:
``chat``/``completion`` (the tokenizer's chat template or a plain completion prompt),
``list``/``nolist`` (options listed in the prompt), ``desc`` (descriptions shown in the
list), ``name``/``description``/``both`` (what the model writes for an option with a
description: its name, its description, or ``name: description``; for score levels the
number, the level description, or ``n: description``). ``default`` is the package default.

What it deliberately does not do: look at test before the choice is made on validation,
or measure speed (bench/serve.py does).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench._decisions_bias import (
    BIASES,
    DEFAULT_BIAS,
    accuracies,
    neutral_prior,
    wire_of,
)
from bench._decisions_data import truth_index

HERE = Path(__file__).resolve().parent

DEFAULT_CACHE = HERE / "cache" / "decisions"
DATASETS = ("banking77", "clinc150", "massive", "trec")
#: Items per generator on validation: the default of both `run` and `select` (select reads what run scored).
VALIDATION_N = 24


def _seed(split: str) -> int:
    from bench._decisions_data import TEST_SEED, VALIDATION_SEED

    return {"validation": VALIDATION_SEED, "test": TEST_SEED}[split]


def style_of(variant: str):
    """``None`` for the package default, else ``{type: judge.decisions.PromptStyle}`` for a variant string."""
    if variant == "default":
        return None
    from judge.decisions import PromptStyle

    flags = set(variant.split("+"))
    known = {"chat", "completion", "list", "nolist", "desc", "name", "description", "both"}
    if flags - known or ("chat" in flags) == ("completion" in flags) or ("list" in flags) == ("nolist" in flags):
        raise SystemExit(f"bad variant {variant!r}: join one of chat/completion, one of list/nolist, optionally desc, "
                         f"and one of name/description/both with '+'.")
    answer = next((a for a in ("name", "description", "both") if a in flags), "name")
    base = dict(chat="chat" in flags, listed="list" in flags, descriptions="desc" in flags)
    return {t: PromptStyle(**base, answer=answer) for t in ("choice", "noul", "score")}  # a level's name: its number


def _decider(args, calibration=None):
    """A Decider on the cached scorer (the same object across calls, so the engine loads once)."""
    import judge.decisions as jd

    if not hasattr(_decider, "scorer"):
        from bench._common import load_bench_model
        from bench._decisions_data import CachedScorer
        from judge.engine import Engine

        model, tok = load_bench_model(None if args.model == "smollm2" else args.model, device="cpu")
        _decider.scorer = CachedScorer(Engine(model, tok), Path(args.cache) / "scores.sqlite", args.model,
                                       offline=args.cmd == "select")
    kw = {}
    if args.variant != "default":
        kw["style"] = style_of(args.variant)
    if getattr(args, "no_bias", False):
        kw["bias"] = None
    if getattr(args, "embedder", "auto") != "auto":  # auto beside a given scorer: the LM alone (judge.decisions.fusion)
        kw["embedder"] = None if args.embedder == "none" else args.embedder
    return jd.Decider(scorer=_decider.scorer, calibration=calibration, **kw)


def _preds_path(cache, tag, variant, split, calibrated=False) -> Path:
    return Path(cache) / "preds" / f"{tag}__{variant}__{split}{'__cal' if calibrated else ''}.jsonl"


from bench._decisions_server import parsed as _parsed  # noqa: E402
from bench._decisions_server import through_server as _through_server  # noqa: E402


def run(args) -> None:
    """Score each variant on one split through the server; write sys1bench prediction rows."""
    import torch

    torch.set_num_threads(args.threads)
    import judge

    print(f"judge from {Path(judge.__file__).parent}", file=sys.stderr)
    for variant in args.variant.split(","):
        for embedder in args.embedder.split(","):  # the LM's scores are cached: a second embedder costs no LM pass
            _run_one(argparse.Namespace(**{**vars(args), "variant": variant, "embedder": embedder}))


def _label(args) -> str:
    """The arm's name in its prediction file: the variant, ``+nobias``, ``+embedder-<name>`` (unless auto)."""
    emb = getattr(args, "embedder", "auto")
    return args.variant + ("+nobias" if args.no_bias else "") + ("" if emb == "auto" else f"+embedder-{emb}")


def _run_one(args) -> None:
    from sys1bench.runners.benchmark_runner import write_predictions

    from bench._decisions_data import GENERATORS, labelled_jsonl, task_items

    gens = args.generators.split(",") if args.generators else list(GENERATORS)
    items = task_items(gens, args.n, _seed(args.split), framings=args.framings, permutations=args.permutations,
                       framings_per_item=args.framings_per_item)
    d = _decider(args)
    label = _label(args)
    rows = _through_server(d, items, f"{args.tag}/{label}")
    out = _preds_path(args.cache, args.tag, label, args.split)
    write_predictions(rows, out)
    print(f"wrote {len(rows)} rows to {out}; cache hits {d.scorer_.hits}, misses {d.scorer_.misses}", file=sys.stderr)
    if args.calibrated:
        from judge.decisions import calibrate_decisions
        from judge.server.wire import read_labelled

        fit = task_items(gens, args.calibration_n, _seed("validation"))
        path = labelled_jsonl(fit, Path(args.cache) / "profiles" / f"{args.tag}__{label}.jsonl")
        profile = calibrate_decisions(read_labelled(path), d, min_per_level_set=20)
        saved = profile.save(path.with_suffix(".json"))
        rows = _through_server(_decider(args, calibration=saved), items, f"{args.tag}/{label}/cal")
        out = _preds_path(args.cache, args.tag, label, args.split, calibrated=True)
        write_predictions(rows, out)
        print(f"profile {saved}; wrote {len(rows)} calibrated rows to {out}", file=sys.stderr)


def _dataset_question(dataset, labels):
    """A classification dataset as one choice question (TREC: its display names, with Li & Roth's descriptions)."""
    from bench._accuracy_prompts import TREC_DESCRIPTIONS
    from judge import datasets as ds
    from judge.decisions import Choice

    shown = ds.display_names(dataset, labels)
    if dataset == "trec":
        opts = {shown[lab]: TREC_DESCRIPTIONS.get(shown[lab]) for lab in labels}
        return Choice(opts, "Classify the text."), [shown[lab] for lab in labels]
    return Choice({lab: None for lab in labels}, "Classify the text."), list(labels)


def datasets(args) -> None:
    """The classification datasets' validation splits as one choice question each; accuracy with and without bias."""
    import torch

    from bench._accuracy_cache import gold

    torch.set_num_threads(args.threads)
    out_dir = Path(args.cache) / "datasets"
    out_dir.mkdir(parents=True, exist_ok=True)
    for variant in args.variant.split(","):
        vargs = argparse.Namespace(**{**vars(args), "variant": variant})
        on, off = _decider(vargs), _decider(argparse.Namespace(**{**vars(vargs), "no_bias": True}))
        for dataset in args.datasets.split(","):
            n = args.n_trec if dataset == "trec" else args.n
            y, labels, texts = gold(dataset, "validation", args.data_dir, n)
            q, names = _dataset_question(dataset, labels)
            res = {"dataset": dataset, "variant": variant, "n": len(texts), "k": len(labels),
                   "majority": float(np.bincount(y).max() / len(y))}
            t0 = time.time()
            for key, d in (("bias", on), ("nobias", off)):
                pred = []
                for s in range(0, len(texts), 8):
                    for a in d.ask_many([(t, {"q": q}) for t in texts[s:s + 8]]):
                        pred.append(names.index(a["q"].choice))
                res[f"accuracy_{key}"] = float(np.mean(np.array(pred) == y))
                res[f"top_share_{key}"] = float(np.bincount(pred).max() / len(pred))
            res["seconds"] = time.time() - t0
            (out_dir / f"{variant}__{dataset}.json").write_text(json.dumps(res, indent=1))
            print(json.dumps(res), file=sys.stderr, flush=True)


def banking77(args) -> None:
    """Test, once: Banking77 as one choice question through /v1/systemone vs Classifier with the same prompt."""
    import torch
    from fastapi.testclient import TestClient

    from bench._accuracy_cache import gold
    from judge import Classifier
    from judge.calibration import apply_bias, batch_bias, contextual_bias
    from judge.decisions import CONTENT_FREE
    from judge.prompts import DEFAULT_PROMPT, PromptTemplate
    from judge.server import ServerConfig, create_app

    torch.set_num_threads(args.threads)
    args.variant, args.no_bias = "default", False
    y, labels, texts = gold("banking77", "test", args.data_dir, args.n)
    q, names = _dataset_question("banking77", labels)
    import judge.decisions as jd

    scorer = _decider(args).scorer_
    prefill = jd.Decider(scorer=scorer, bias="contextual")
    out = {"dataset": "banking77", "split": "test", "n": len(texts), "k": len(labels),
           "majority": float(np.bincount(y).max() / len(y)), "sample": "first n rows of a seeded (0) permutation"}
    t0 = time.time()
    for s in range(0, len(texts), 8):  # every query (and its content-free ones) scored once, 8 texts a call
        prefill.log_probs([(t, {"q": q}) for t in texts[s:s + 8]])
    wire = {"type": "choice", "instructions": "Classify the text.", "criteria": {lab: None for lab in labels}}
    got = {}
    for bias in ("running", "contextual", None):
        served = jd.Decider(scorer=scorer, bias=bias)  # a fresh server per bias
        answers = []
        with TestClient(create_app(served, ServerConfig(max_wait_ms=0))) as client:
            for t in texts:
                r = client.post("/v1/systemone", json={"model": "jev-latest", "state": t, "questions": {"intent": wire}})
                answers.append(labels.index(r.json()["answers"]["intent"]["choice"]))
        got[str(bias)] = float(np.mean(np.array(answers) == y))
    out["decisions_through_server"] = got
    out["decisions_seconds"] = time.time() - t0
    # the Classifier on the same engine with the decision's prompt: the completion text up to the answer
    plan = served.plan("\x00TEXT\x00", q)
    template = "".join(t for t, _ in plan.pieces).replace("\x00TEXT\x00", "{text}")
    model, tok = scorer.inner.model_, scorer.inner.tokenizer_
    clfs = {"same prompt": Classifier(labels, model, tokenizer=tok, prompt=PromptTemplate.from_string(template),
                                      method="exact", progress=False)}
    if args.default_prompt:
        clfs["Classifier default prompt"] = Classifier(labels, model, tokenizer=tok, prompt=DEFAULT_PROMPT,
                                                       method="exact", progress=False)
    for name, clf in clfs.items():
        t0 = time.time()
        s = clf.decision_function(texts)
        cf = clf.content_free_scores(CONTENT_FREE)
        res = {"none": float(np.mean(s.argmax(1) == y)),
               "contextual": float(np.mean(apply_bias(s, contextual_bias(cf)).argmax(1) == y)),
               "batch (all texts at once)": float(np.mean(apply_bias(s, batch_bias(s)).argmax(1) == y)),
               "seconds": time.time() - t0, "prompt_prefix": clf.render_prompt("{text}")[:400]}
        if name == "same prompt":  # the same numbers as the decisions: raw log-probs side by side
            raw = jd.Decider(scorer=scorer, bias=None)
            dec = np.stack([r["q"] for s0 in range(0, len(texts), 8)
                            for r in raw.log_probs([(t, {"q": q}) for t in texts[s0:s0 + 8]])])
            cols = [clf.classes_.tolist().index(lab) for lab in labels]
            res["max_abs_logprob_difference_vs_decisions"] = float(np.max(np.abs(dec - s[:, cols])))
            res["surfaces_equal"] = [clf.surfaces_[c] for c in cols] == \
                [plan.surfaces[plan.order.index(i)] for i in range(len(labels))]
        out[name] = res
        print(name, json.dumps(res)[:300], file=sys.stderr, flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


def report(args) -> None:
    """Test figures (computed once, from the prediction rows), targets, and the other results, into one JSON."""
    from bench._decisions_report import markdown, question_cards, targets

    arms = {}
    for tag in ("before", "after"):
        for cal in (False, True):
            path = _preds_path(args.cache, tag, args.variant if tag == "after" else "default", "test", cal)
            if path.exists():
                arms[f"{tag}{' + profile' if cal else ''}"] = question_cards(path)
    out = {"test_seed": _seed("test"), "validation_seed": _seed("validation"), "arms": arms}
    results = HERE / "results"
    for name in ("decisions_select", "decisions_banking77", "decisions_audit_before", "decisions_audit_after"):
        p = results / f"{name}.json"
        if p.exists():
            out[name] = json.loads(p.read_text())
    # every target, per code; one whose inputs are absent says "not measured" (never estimated)
    out["targets"] = {tag: targets(arms.get(tag), arms.get(f"{tag} + profile"), audit=out.get(f"decisions_audit_{tag}"),
                                   banking77=out.get("decisions_banking77") if tag == "after" else None, tag=tag)
                      for tag in ("before", "after")
                      if tag == "after" or tag in arms or f"decisions_audit_{tag}" in out}
    Path(args.json).write_text(json.dumps(out, indent=1))
    print(markdown(arms))
    print(json.dumps(out["targets"], indent=1))


def compare(args) -> None:
    """Test figures of several arms of one run (prediction files by label), side by side: the median gain, per type.

    Per arm: every question's card (`bench._decisions_report.question_cards`), the median over questions of
    accuracy - majority overall and per question type, and how many questions answer one option on more than
    gold's top share + 20 points. No scoring here.
    """
    from bench._decisions_report import question_cards

    out = {"split": args.split, "seed": _seed(args.split), "tag": args.tag, "arms": {}}
    for label in args.labels.split(","):
        for cal in (False, True):
            path = _preds_path(args.cache, args.tag, label, args.split, cal)
            if not path.exists():
                if not cal:
                    raise SystemExit(f"no prediction rows for {label!r}: {path.name}")
                continue
            cards = question_cards(path)
            gain = {k: c["accuracy"] - c["majority"] for k, c in cards.items()}
            by_type = defaultdict(list)
            for k, c in cards.items():
                by_type[c["type"]].append(gain[k])
            over = sorted(k for k, c in cards.items() if c["answer_top_share"] > c["majority"] + 0.20 + 1e-9)
            out["arms"][label + (" + profile" if cal else "")] = {
                "file": path.name, "n_rows": sum(c["n_rows"] for c in cards.values()),
                "median_accuracy_minus_majority_points": round(100 * float(np.median(list(gain.values()))), 1),
                "median_accuracy_minus_majority_points_by_type": {
                    t: round(100 * float(np.median(g)), 1) for t, g in sorted(by_type.items())},
                "mean_accuracy_by_type": {t: round(100 * float(np.mean([c["accuracy"] for c in cards.values()
                                                                          if c["type"] == t])), 1)
                                          for t in sorted(by_type)},
                "questions_over_top_share_plus_20": len(over), "n_questions": len(cards), "over": over,
                "cards": cards}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))
    for name, a in out["arms"].items():
        print(f"{name:40s} median acc - majority {a['median_accuracy_minus_majority_points']:+6.1f} points; by type "
              + ", ".join(f"{t} {v:+.1f}" for t, v in a["median_accuracy_minus_majority_points_by_type"].items())
              + f"; over top share + 20: {a['questions_over_top_share_plus_20']} of {a['n_questions']}")
    keys = sorted(next(iter(out["arms"].values()))["cards"])
    print(f"\n{'question':38s} {'type':6s} {'maj':>4s} " + " ".join(f"{n[:22]:>22s}" for n in out["arms"]))
    for k in keys:
        c0 = next(iter(out["arms"].values()))["cards"][k]
        print(f"{k:38s} {c0['type']:6s} {100 * c0['majority']:4.0f} " + " ".join(
            f"{100 * a['cards'][k]['accuracy']:>12.0f} / top {100 * a['cards'][k]['answer_top_share']:3.0f}"
            for a in out["arms"].values()))


def audit(args) -> None:
    """``dmguard audit --no-guard`` (all checks, its bundled cases) against ``judge serve`` run as a subprocess."""
    import os
    import subprocess
    import urllib.request

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    log = open(Path(args.cache) / "logs" / f"serve_{args.tag}.log", "w")
    cmd = [sys.executable, "-m", "judge.cli", "serve", "--port", str(args.port)]
    if args.bias is not None:  # a bias other than the server's default: through a tiny launcher
        cmd = [sys.executable, "-c", f"import judge.cli.serve as s, judge.decisions as d; orig = d.Decider; "
                                     f"d.Decider = lambda *a, **k: orig(*a, bias={args.bias!r}, **k); "
                                     f"from judge.cli import main; raise SystemExit(main(['serve', '--port', "
                                     f"'{args.port}']))"]
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd="/tmp")
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{args.port}/healthz", timeout=2)
                break
            except OSError:
                time.sleep(1)
        else:
            raise SystemExit("judge serve did not come up in 10 minutes; see its log")
        cfg = Path(args.cache) / f"dmguard_{args.tag}.yml"
        cfg.write_text(f"model:\n  type: systemone_http\n  url: http://127.0.0.1:{args.port}/v1/systemone\n"
                       f"  model: jev-latest\n  concurrency: 1\n  timeout: 600\ngate: false\n")
        out = HERE / "results" / f"decisions_audit_{args.tag}.json"
        t0 = time.time()
        res = subprocess.run([str(Path(sys.executable).parent / "dmguard"), "audit", "--no-guard", "--config", str(cfg),
                              "--out", str(out), "--markdown", str(out.with_suffix(".md"))],
                             capture_output=True, text=True)
        print(res.stdout, res.stderr[-2000:], f"({time.time() - t0:.0f} s)")
        if res.returncode:
            raise SystemExit(f"dmguard audit failed ({res.returncode})")
    finally:
        server.terminate()
        server.wait(timeout=60)


def select(args) -> None:
    """Validation only: each variant x bias, per question; the style chosen per question type (the rule below).

    Every variant is compared on the same questions: per type, those all of them have in the cache (a dataset or
    a variant whose scores are missing is left out and named, never averaged over a different set).
    """
    from bench._accuracy_cache import gold
    from bench._decisions_data import GENERATORS, task_items

    args.no_bias = False
    items = task_items(GENERATORS, args.n, _seed("validation"))
    table: dict = {}
    skipped: dict = {}                      # variant -> why it has no numbers at all
    missing: dict = defaultdict(list)       # variant -> questions (keys of `per`) not in the cache
    for variant in args.variants.split(","):
        vargs = argparse.Namespace(**{**vars(args), "variant": variant})
        on, off = _decider(vargs), _decider(argparse.Namespace(**{**vars(vargs), "no_bias": True}))
        rows, memo = defaultdict(list), {}
        try:
            for it in items:
                qs = _parsed(it)
                a, b = on.log_probs([(it.state, qs)])[0], off.log_probs([(it.state, qs)])[0]
                for k, q in it.questions.items():
                    shape = json.dumps(wire_of(q), sort_keys=True)
                    rows[(q.type, f"{it.metadata['generator']}.{k}")].append(
                        (b[k], b[k] - a[k], truth_index(q), shape, neutral_prior(off, qs[k], memo)))
        except LookupError as e:
            skipped[variant] = f"its sys1bench validation items (n={args.n} per generator) are not all scored: {e}"
            print(f"skip {variant}: {skipped[variant]}", file=sys.stderr)
            continue
        per = {f"{t}:{name}": accuracies(rs) for (t, name), rs in sorted(rows.items())}
        for dataset in DATASETS:
            n = args.n_trec if dataset == "trec" else args.n_datasets
            y, labels, texts = gold(dataset, "validation", args.data_dir, n)
            q, _ = _dataset_question(dataset, labels)
            try:
                rs = []
                for s in range(0, len(texts), 8):
                    part = [(t, {"q": q}) for t in texts[s:s + 8]]
                    for a, b, yy in zip(on.log_probs(part), off.log_probs(part), y[s:s + 8]):
                        rs.append((b["q"], b["q"] - a["q"], int(yy), "q", neutral_prior(off, q, memo)))
            except LookupError:
                missing[variant].append(f"choice:{dataset}")
                continue
            per[f"choice:{dataset}"] = accuracies(rs)
        table[variant] = per
        print(f"{variant}: " + "  ".join(f"{k}={v['contextual']['accuracy']:.2f}" for k, v in per.items()),
              file=sys.stderr, flush=True)
    if not table:
        raise SystemExit("select: no variant has its validation scores in the cache; "
                         + "; ".join(f"{v}: {why}" for v, why in skipped.items()))
    # Variants are compared on the same questions only: per type, those every variant has. What is left out (a
    # dataset some variant never scored, or that none did) is named, in the JSON and on stderr.
    expected = {k for per in table.values() for k in per} | {k for ks in missing.values() for k in ks}
    compared, left_out = {}, {}
    for t in ("choice", "noul", "score"):
        want = sorted(k for k in expected if k.startswith(t + ":"))
        common = [k for k in want if all(k in per for per in table.values())]
        compared[t] = common
        lacking = {v: [k for k in want if k not in per] for v, per in table.items()}
        lacking = {v: ks for v, ks in lacking.items() if ks}
        if lacking:
            left_out[t] = lacking
            print(f"select: {t} questions compared on {len(common)} of {len(want)}; left out, as not every variant has "
                  f"them: " + "; ".join(f"{v} lacks {', '.join(ks)}" for v, ks in lacking.items()), file=sys.stderr)
        if not common:
            print(f"select: no {t} question is scored for every variant; nothing chosen for {t}", file=sys.stderr)
    # The rule (set after the first variant's numbers): the bias is the server's default, "contextual" (content-
    # free prior: an answer never depends on other requests, as the contract's isolation asks; "running" is
    # measured beside it, as an opt-in). Per question type, among the variants under that bias, keep those whose
    # every question of the type answers no option on more than its gold top share + 20 points of the validation
    # items (the target; all variants if none does), then take the highest mean validation accuracy over
    # the type's questions (choice: the five sys1bench questions and the four datasets, each weighing the same).
    summary, chosen = {}, {}
    for t in ("choice", "noul", "score"):
        cands = []
        for variant, per in table.items():
            keys = compared[t]
            for b in BIASES:
                accs = [per[k][b]["accuracy"] for k in keys if b in per[k]]
                if len(accs) != len(keys) or not keys:
                    continue
                m = float(np.mean(accs))
                ok = all(per[k][b]["top_share"] <= per[k]["majority"] + 0.20 + 1e-9 for k in keys)
                summary.setdefault(t, {}).setdefault(variant, {})[b] = {"mean_accuracy": m, "n_questions": len(keys),
                                                                       "top_share_within_gold_plus_20": ok}
                if b == DEFAULT_BIAS:
                    cands.append((ok, m, variant, b))
        if cands:
            pool = [c for c in cands if c[0]] or cands
            ok, m, variant, b = max(pool, key=lambda c: c[1])
            chosen[t] = {"variant": variant, "bias": b, "mean_accuracy": m, "top_share_constraint_met": ok}
    report = {"rule": "bias: contextual (the default; answers independent of other requests). Per question type: "
                      "among the variants under that bias whose every question answers no option on more than gold's "
                      "top share + 20 points (all if none), the highest mean validation accuracy over the type's "
                      "questions (choice: 5 sys1bench questions + 4 datasets as one choice question each, equal "
                      "weight), counting only the questions every variant has (compared_on; left_out names the rest)",
              "validation_seed": _seed("validation"), "n_per_generator": args.n, "n_datasets": args.n_datasets,
              "n_trec": args.n_trec, "compared_on": compared, "left_out": left_out, "skipped_variants": skipped,
              "chosen": chosen, "summary": summary, "per_question": table}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1))
    for t, byv in summary.items():
        print(f"\n{t}: mean validation accuracy over {next(iter(byv.values()))['none']['n_questions']} questions")
        print(f"{'variant':32s} " + " ".join(f"{b:>10s}" for b in BIASES))
        for variant, d in byv.items():  # * : every question within gold's top share + 20 points
            print(f"{variant:32s} " + " ".join(
                f"{d[b]['mean_accuracy']:9.3f}{'*' if d[b]['top_share_within_gold_plus_20'] else ' '}" if b in d
                else f"{'-':>10s}" for b in BIASES))
    print("\nchosen:", json.dumps(chosen))
    if skipped or left_out:
        print("not compared:", json.dumps({"skipped_variants": skipped, "left_out": left_out}))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="sys1bench items through /v1/systemone for one prompt variant")
    r.add_argument("--split", choices=("validation", "test"), default="validation")
    r.add_argument("--n", type=int, default=VALIDATION_N, help="items per generator (test: pass --n 30)")
    r.add_argument("--generators", default=None, help="comma-separated (default: the five with framings)")
    r.add_argument("--framings", action="store_true", help="expand sys1bench's framings (paraphrases, criteria variants)")
    r.add_argument("--framings-per-item", type=int, default=None,
                   help="with --framings: keep the canonical framing and K-1 others drawn at random (default: all)")
    r.add_argument("--permutations", type=int, default=0, help="option shuffles per item (sys1bench --permutations)")
    r.add_argument("--variant", default="default", help="a variant, or several joined by commas (run in turn)")
    r.add_argument("--tag", default="after", help="which code: 'after' (this tree) or 'before' (PYTHONPATH elsewhere)")
    r.add_argument("--calibrated", action="store_true",
                   help="also answer with a profile fitted (calibrate_decisions) on --calibration-n validation items")
    r.add_argument("--calibration-n", type=int, default=40)
    r.add_argument("--no-bias", action="store_true", help="switch the default bias correction off")
    r.add_argument("--embedder", default="auto",
                   help="the Decider's embedder, or several joined by commas (run in turn on the cached LM scores): "
                        "'auto' (its default; beside this given scorer that is the LM alone), 'none' (the LM alone), "
                        "'minilm' (the packaged MiniLM fused on choice questions, as Decider() does for the packaged "
                        "model); not 'auto', it names the prediction file (+embedder-<name>)")
    ds = sub.add_parser("datasets", help="the classification datasets as one choice question (validation)")
    ds.add_argument("--variant", default="default")
    ds.add_argument("--datasets", default=",".join(DATASETS))
    ds.add_argument("--n", type=int, default=60, help="texts per dataset (a seeded uniform sample)")
    ds.add_argument("--n-trec", type=int, default=200, help="texts of TREC (6 options: cheap)")
    ds.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"))
    se = sub.add_parser("select", help="validation table; the style per question type")
    se.add_argument("--variants", required=True, help="comma-separated variants scored on validation")
    se.add_argument("--n", type=int, default=VALIDATION_N,
                    help="items per generator (as scored by run --split validation --n)")
    se.add_argument("--n-datasets", type=int, default=60)
    se.add_argument("--n-trec", type=int, default=200)
    se.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"))
    se.add_argument("--json", default=str(HERE / "results" / "decisions_select.json"))
    b7 = sub.add_parser("banking77", help="test, once: Banking77 through /v1/systemone vs Classifier")
    b7.add_argument("--n", type=int, default=200)
    b7.add_argument("--default-prompt", action="store_true", help="also the Classifier's own default prompt")
    b7.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"))
    b7.add_argument("--json", default=str(HERE / "results" / "decisions_banking77.json"))
    rp = sub.add_parser("report", help="the test figures and targets from the prediction rows, into one JSON")
    rp.add_argument("--variant", default="default", help="the 'after' run's variant")
    rp.add_argument("--json", default=str(HERE / "results" / "decisions_quality.json"))
    cp = sub.add_parser("compare", help="several arms of one run side by side: median gain overall and per type")
    cp.add_argument("--labels", required=True, help="comma-separated arm labels (e.g. default+embedder-none)")
    cp.add_argument("--split", choices=("validation", "test"), default="test")
    cp.add_argument("--tag", default="after")
    cp.add_argument("--json", required=True)
    au = sub.add_parser("audit", help="dmguard audit --no-guard against judge serve (a subprocess)")
    au.add_argument("--tag", default="after")
    au.add_argument("--pythonpath", default=None, help="where `judge` comes from (the copy of today's code: before)")
    au.add_argument("--port", type=int, default=8731)
    au.add_argument("--bias", default=None, help="serve with this Decider bias instead of the default")
    for q in (r, ds, se, b7, rp, cp, au):
        q.add_argument("--model", default="smollm2", help="'smollm2' (packaged) or 'tiny' (random weights)")
        q.add_argument("--cache", default=str(DEFAULT_CACHE))
        q.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    {"run": run, "datasets": datasets, "select": select, "banking77": banking77, "report": report,
     "compare": compare, "audit": audit}[a.cmd](a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
