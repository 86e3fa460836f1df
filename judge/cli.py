"""The ``judge`` command: ``predict``, ``evaluate``, ``bench``, ``serve``, ``calibrate-decisions``, ``batch``.

``judge predict`` classifies texts from a file or stdin and writes JSONL;
``judge evaluate`` runs a dataset end to end (calibration included) and
writes ``metrics.json``, ``predictions.csv`` and plots; ``judge bench``
times the trie automaton on a tokenizer. Run ``judge COMMAND --help``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["main"]


# ----------------------------------------------------------------- helpers
_PATH_SUFFIXES = (".txt", ".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".lst", ".list", ".labels",
                  ".yaml", ".yml", ".text")


def _looks_like_path(spec: str) -> bool:
    """True for a --labels value that is surely meant as a file: a file suffix or a path separator."""
    s = spec.strip()
    if "," in s:  # a comma list, even of one label ("x.txt,")
        return False
    if s.lower().endswith(_PATH_SUFFIXES) or s.startswith(("/", "./", "../", "~", ".\\", "..\\")):
        return True
    return ("/" in s or "\\" in s or os.sep in s) and " " not in s


def _labels_from_file(p: Path, spec: str) -> list[str]:
    try:
        text = p.read_text(encoding="utf-8-sig")  # -sig: a BOM must not become part of the first label
    except UnicodeDecodeError as err:
        raise SystemExit(
            f"judge: --labels file {spec!r} is not UTF-8 (byte 0x{err.object[err.start]:02x} at offset "
            f"{err.start}); re-save it as UTF-8.") from None
    if p.suffix == ".json":
        try:
            labels = json.loads(text)
        except json.JSONDecodeError as err:
            raise SystemExit(
                f"judge: --labels file {spec!r} is not valid JSON ({err.msg} at line {err.lineno}, "
                f"column {err.colno}); write a JSON list of strings, e.g. [\"positive\", \"negative\"].") from None
        if not isinstance(labels, list):
            raise SystemExit(
                f"judge: --labels file {spec!r} holds a JSON {type(labels).__name__}, not a list; write a JSON "
                f"list of strings, e.g. [\"positive\", \"negative\"].")
        for i, lab in enumerate(labels):
            if not isinstance(lab, str):
                raise SystemExit(
                    f"judge: entry {i} of --labels file {spec!r} is a {type(lab).__name__} ({lab!r}), not a "
                    f"string; quote it in the JSON list.")
        return labels
    return [line.strip() for line in text.splitlines() if line.strip()]


def _read_labels(spec: str) -> list[str]:
    """Labels from a file (one per line, or a JSON list) or a comma list; refuses what would be wrong silently.

    A value that looks like a path (a file suffix or a separator) but names no file is an
    error, not one label; fewer than two labels is an error (a one-label classifier
    answers that label whatever the text); labels that print alike are refused
    (``judge.labels.check_distinguishable``). All before any model is loaded.
    """
    from judge._errors import LabelError
    from judge.labels import check_distinguishable

    p = Path(spec).expanduser()
    if p.is_dir():
        raise SystemExit(f"judge: --labels {spec!r} is a directory; pass a file (one label per line, or a JSON "
                         f"list) or a comma list a,b,c.")
    if p.is_file():
        labels, where = _labels_from_file(p, spec), f"file {spec!r}"
    elif _looks_like_path(spec):
        raise SystemExit(
            f"judge: --labels {spec!r} looks like a file path but there is no such file (looked in "
            f"{str(p.resolve().parent)!r}); check the spelling, or pass labels as a comma list a,b,c "
            f"(a value with a comma, e.g. {spec + ',other'!r}, is always read as labels).")
    else:
        labels, where = [s.strip() for s in spec.split(",") if s.strip()], repr(spec)
    if not labels:
        raise SystemExit(f"judge: --labels {where} gave no labels; pass a file (one per line, or JSON list) or a,b,c.")
    if len(labels) < 2:
        raise SystemExit(
            f"judge: --labels {where} gave a single label {labels[0]!r}; a classifier needs at least two "
            f"(with one, every text gets it). Pass a file (one per line, or a JSON list) or a comma list a,b,c.")
    try:
        check_distinguishable(labels)
    except LabelError as err:
        raise SystemExit(f"judge: --labels {where}: {err}") from None
    return labels


def _csv_texts(raw: str, column: str, name: str) -> list[str]:
    """Texts of ``column``; malformed CSV (unterminated quote, ragged row, empty cell) is an error with its line."""
    reader = csv.reader(io.StringIO(raw), strict=True)
    header, out, start = None, [], 1
    try:
        for row in reader:
            line, start = start, reader.line_num + 1
            if not row:
                continue
            if header is None:
                header = row
                if column not in header:
                    raise SystemExit(
                        f"judge: the CSV has no column {column!r} (columns: {header}); pass --column NAME.")
                col = header.index(column)
                continue
            if len(row) != len(header):
                raise SystemExit(
                    f"judge: line {line} of {name} has {len(row)} fields but the header has {len(header)} "
                    f"({header}); quote fields that contain commas (\"a, b\") or fix the row.")
            if not row[col].strip():
                raise SystemExit(
                    f"judge: line {line} of {name} has an empty {column!r} cell; there is nothing to "
                    f"classify, remove the row or fill it.")
            out.append(row[col])
    except csv.Error as err:
        if "end of data" in str(err):
            raise SystemExit(
                f"judge: {name} has an unterminated quote: the field opened on line {start} runs to the end of "
                f"the file (line {reader.line_num}); close the quote, or double quotes inside a quoted field "
                f"(\"\").") from None
        raise SystemExit(
            f"judge: line {reader.line_num} of {name} is not valid CSV ({err}); quote the field and double "
            f"any quote inside it (\"say \"\"hi\"\"\").") from None
    if header is None:
        raise SystemExit(f"judge: {name} is empty; pass a CSV with a header row and at least one row.")
    if not out:
        raise SystemExit(
            f"judge: {name} has a header ({header}) but no rows; there is nothing to classify.")
    return out


def _read_texts(source, column: str, fmt: str | None) -> list[str]:
    """Texts from lines, CSV or JSONL; empty input and malformed rows are errors naming the line."""
    name = getattr(source, "name", "")
    where = "the input (stdin)" if name in ("", "<stdin>") or not isinstance(name, str) else f"the input {name!r}"
    try:
        raw = source.read()
    except UnicodeDecodeError as err:
        raise SystemExit(
            f"judge: {where} is not UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            f"re-encode it as UTF-8.") from None
    raw = raw.removeprefix("\ufeff")  # a BOM would otherwise rename the first CSV column
    fmt = fmt or ("jsonl" if str(name).endswith((".jsonl", ".ndjson")) else
                  "csv" if str(name).endswith(".csv") else "lines")
    if fmt not in ("lines", "csv", "jsonl"):
        raise SystemExit(f"judge: unknown --format {fmt!r}; valid formats are lines, csv, jsonl.")
    if not raw.strip():
        raise SystemExit(f"judge: {where} is empty; pass texts on stdin or with --input FILE (format {fmt}).")
    if fmt == "lines":
        return [line for line in raw.splitlines() if line.strip()]
    if fmt == "csv":
        return _csv_texts(raw, column, where)
    out = []
    for i, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise SystemExit(f"judge: line {i} of the input is not JSON ({err}).") from None
        if isinstance(obj, dict) and column in obj:
            obj = obj[column]
        elif not isinstance(obj, str):
            raise SystemExit(f"judge: line {i} of the input has no {column!r} field; pass --column NAME.")
        if not isinstance(obj, str):
            raise SystemExit(
                f"judge: line {i} of the input has a {type(obj).__name__} {column!r} field ({obj!r:.40}), not "
                f"a string; write the text as a JSON string.")
        if not obj.strip():
            raise SystemExit(f"judge: line {i} of the input has an empty text; remove the line or fill it.")
        out.append(obj)
    return out


def _print_table(rows: list[tuple[str, str]], title: str) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 20))
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


# ----------------------------------------------------------------- predict
def cmd_predict(args) -> int:
    from judge import Classifier

    if args.calibration:
        clf = Classifier.load(args.calibration, model=args.model)
    else:
        if not args.labels:
            raise SystemExit("judge predict: pass --labels FILE|a,b,c (or --calibration DIR of a saved classifier).")
        clf = Classifier(_read_labels(args.labels), args.model, method=args.method, batch_size=args.batch_size)
    if args.input in (None, "-"):
        texts = _read_texts(sys.stdin, args.column, args.format)
    else:
        if not Path(args.input).is_file():
            raise SystemExit(f"judge predict: --input {args.input!r} is not a file; pass a readable file or '-' for stdin.")
        with open(args.input, encoding="utf-8") as fh:
            texts = _read_texts(fh, args.column, args.format)
    abstain = args.abstain and clf.threshold_ is not None
    if args.abstain and not abstain:
        print("judge predict: --abstain needs a calibrated classifier with a threshold (--calibration DIR); "
              "answering every row.", file=sys.stderr)
    proba = clf.predict_proba(texts)
    labels = clf.classes_[proba.argmax(1)] if len(proba) else np.empty(0, dtype=object)
    if abstain:
        labels[proba.max(1) < clf.threshold_] = None
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for text, lab, row in zip(texts, labels, proba):
            top = np.argsort(-row)[: args.top_k]
            rec = {"text": text, "label": lab,
                   "probabilities": {clf.labels[k]: round(float(row[k]), 6) for k in top},
                   "abstained": lab is None}
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


# ---------------------------------------------------------------- evaluate
def _generate_baseline(clf, texts, batch_size):
    """Plain greedy generation with the same prompt; returns raw outputs."""
    from judge.scorers import generate_unconstrained

    return generate_unconstrained(clf, texts, batch_size=batch_size)


def _scores_with_checkpoint(clf, texts, path: Path, chunk: int = 64):
    """decision_function in chunks, saved after each so an interrupted run resumes.

    The scores and their key (a digest of the texts and of everything that changes a score:
    labels as shown, prompt, path, model weights; ``Classifier.fingerprint``) are written
    together in one file, atomically, so a stale or half-written checkpoint is never reused.
    """
    from tqdm.auto import tqdm

    key = hashlib.sha256(json.dumps([clf.fingerprint(), texts]).encode()).hexdigest()
    out = np.full((len(texts), len(clf.labels)), np.nan)
    path = path.with_suffix(".npz")
    if path.exists():
        try:
            with np.load(path) as saved:
                if str(saved["key"]) == key and saved["scores"].shape == out.shape:
                    out = saved["scores"].copy()
        except (OSError, KeyError, ValueError):
            pass  # unreadable checkpoint: score again
    done = [i for i in range(0, len(texts), chunk) if not np.isnan(out[i:i + chunk]).any()]
    todo = [i for i in range(0, len(texts), chunk) if i not in done]
    if done:
        print(f"resuming: {len(done)} of {len(done) + len(todo)} chunks already scored in {path}", file=sys.stderr)
    for i in tqdm(todo, desc=f"scoring {path.stem}", unit="chunk", disable=len(todo) < 2):
        out[i:i + chunk] = clf.decision_function(texts[i:i + chunk])
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, scores=out, key=np.array(key))
        os.replace(tmp, path)
    return out


def cmd_evaluate(args) -> int:
    from sklearn.metrics import f1_score

    from judge import Classifier
    from judge import calibration as cal
    from judge import datasets as ds

    options = {}
    if args.include_oos:
        options["include_oos"] = True
    if args.granularity:
        options["granularity"] = args.granularity
    test = ds.load(args.dataset, split=args.split, data_dir=args.data_dir, **options)
    if args.limit and args.limit < len(test):
        test = test.sample(args.limit, seed=args.seed)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = list(test.label_names)
    names = ds.display_names(args.dataset, labels) if args.label_names == "dataset" else None
    clf = Classifier(labels, args.model, method=args.method, batch_size=args.batch_size, progress=False,
                     rotations=args.rotations,
                     label_names=(names or None) if args.label_names == "dataset" else args.label_names)
    texts, y_lab = list(test.texts), list(test.labels)
    pos = {lab: i for i, lab in enumerate(labels)}
    y = np.array([pos[v] for v in y_lab])

    calib = None
    if args.calibrate_on:
        calib = ds.load(args.dataset, split=args.calibrate_on, data_dir=args.data_dir, **options)
        if args.calibration_limit and args.calibration_limit < len(calib):
            calib = calib.sample(args.calibration_limit, seed=args.seed)
    t0 = time.perf_counter()
    clf.setup()  # load the model, cache the prompt prefix, compile the labels
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores = _scores_with_checkpoint(clf, texts, out_dir / f"scores_{args.split}.npy")
    score_s = time.perf_counter() - t0
    from judge.calibrator import softmax

    raw = cal_proba = softmax(scores)  # uncalibrated: no bias/temperature yet
    metrics = {
        "dataset": args.dataset, "split": args.split, "options": options, "model": clf.model or "smollm2-135m-instruct",
        "method": clf.method_, "n": len(texts), "n_labels": len(labels),
        "sample": {"limit": args.limit, "seed": args.seed, "indices": list(map(int, test.indices))}
        if args.limit else None,
        "setup_seconds": setup_s, "scoring_seconds": score_s, "texts_per_s": len(texts) / score_s,
    }
    pred_raw = raw.argmax(1)
    metrics["uncalibrated"] = _metric_block(cal, y, raw)
    metrics["validity"] = float(np.mean([labels[k] in pos for k in pred_raw]))
    if calib is not None:
        cscores = _scores_with_checkpoint(clf, list(calib.texts), out_dir / f"scores_{args.calibrate_on}.npy")
        cy = np.array([pos[v] for v in calib.labels])
        clf.calibrate(list(calib.texts), list(calib.labels), scores=cscores, bias=args.bias,
                      target_accuracy=args.target_accuracy, bias_l2=args.bias_l2)
        cal_proba = clf.calibration_.transform(scores)
        metrics["calibration"] = {"split": args.calibrate_on, "n": len(cy), "temperature": clf.temperature_,
                                  "bias": clf.calibration_.bias_method, "threshold": clf.threshold_}
        metrics["calibrated"] = _metric_block(cal, y, cal_proba)
        if clf.threshold_ is not None:
            keep = cal_proba.max(1) >= clf.threshold_
            metrics["abstention"] = {
                "target_accuracy": args.target_accuracy, "threshold": clf.threshold_,
                "coverage": float(keep.mean()),
                "selective_accuracy": float((cal_proba.argmax(1)[keep] == y[keep]).mean()) if keep.any() else None,
            }
        clf.save(out_dir / "classifier")
    final = cal_proba
    pred = final.argmax(1)
    metrics["accuracy"] = float((pred == y).mean())
    metrics["macro_f1"] = float(f1_score(y, pred, average="macro", labels=np.arange(len(labels)), zero_division=0))

    if args.baseline == "generate":
        t0 = time.perf_counter()
        gen = _generate_baseline(clf, texts, args.batch_size)
        gen_s = time.perf_counter() - t0
        names = {n.strip(): lab for n, lab in zip(clf.surfaces_, labels)}
        loose = {_loose(n): lab for n, lab in names.items()}
        exact = [names.get(g.strip()) for g in gen]
        lenient = [loose.get(_loose(g)) for g in gen]
        metrics["baseline_generate"] = {
            "validity": float(np.mean([e is not None for e in exact])),
            "accuracy": float(np.mean([e == t for e, t in zip(exact, y_lab)])),
            "lenient_validity": float(np.mean([e is not None for e in lenient])),
            "lenient_accuracy": float(np.mean([e == t for e, t in zip(lenient, y_lab)])),
            "texts_per_s": len(texts) / gen_s,
        }
    else:
        gen = None

    import pandas as pd

    frame = pd.DataFrame({"text": texts, "label": y_lab, "prediction": [labels[k] for k in pred],
                          "confidence": final.max(1), "prediction_uncalibrated": [labels[k] for k in pred_raw]})
    if clf.threshold_ is not None:
        frame["abstained"] = final.max(1) < clf.threshold_
    if gen is not None:
        frame["generated"] = gen
    frame.to_csv(out_dir / "predictions.csv", index=False)
    _plots(cal, y, raw, final, out_dir, metrics)
    (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    _print_summary(metrics)
    return 0


def _loose(s: str) -> str:
    return " ".join(s.replace("_", " ").lower().strip().strip(".").split())


def _metric_block(cal, y, proba) -> dict:
    """Point metrics plus bootstrap intervals, the ECE noise floor, baselines and coverage at 0.5 / 0.7 accuracy."""
    out = cal.calibration_report(y, proba, targets=(0.5, 0.7, 0.8))
    out.update({
        "mce": cal.maximum_calibration_error(y, proba),
        "aurc": cal.aurc(y, proba),
        "selective_accuracy_at_50": cal.selective_accuracy(y, proba, 0.5),
    })
    return out


def _plots(cal, y, raw, final, out_dir, metrics):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        metrics["plots"] = "matplotlib not installed (pip install trie-judge[plot])"
        return
    fig, ax = plt.subplots(figsize=(5, 5))
    cal.ReliabilityDiagram.from_predictions(y, raw).plot(ax=ax, name="uncalibrated")
    if final is not raw:
        cal.ReliabilityDiagram.from_predictions(y, final).plot(ax=ax, name="calibrated")
    fig.savefig(out_dir / "reliability.png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 4))
    cal.RiskCoverageDisplay.from_predictions(y, final).plot(ax=ax)
    fig.savefig(out_dir / "risk_coverage.png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def _print_summary(m: dict) -> None:
    best = m.get("calibrated", m["uncalibrated"])
    lo, hi = best["accuracy_ci"]
    rows = [("dataset", f"{m['dataset']} / {m['split']} (n={m['n']}, K={m['n_labels']})"),
            ("method", m["method"]), ("texts/s", f"{m['texts_per_s']:.2f}"),
            ("validity (constrained)", f"{m['validity']:.1%}"),
            ("accuracy", f"{m['accuracy']:.1%} (95% CI {lo:.1%}-{hi:.1%})"), ("macro-F1", f"{m['macro_f1']:.3f}"),
            ("baselines: majority / uniform", f"{best['majority']['accuracy']:.1%} / {best['uniform']:.1%}"),
            ("ECE uncalibrated", f"{m['uncalibrated']['ece']:.3f}")]
    if "calibrated" in m:
        c = m["calibrated"]
        rows += [("ECE calibrated", f"{c['ece']:.3f} (CI {c['ece_ci'][0]:.3f}-{c['ece_ci'][1]:.3f}; noise floor "
                                    f"{c['ece_floor']:.3f}, ratio {c['ece_over_floor']:.2f})"),
                 ("sel. acc @50% cov.", f"{c['selective_accuracy_at_50']:.1%}")]
        for t, cov in c["coverage_at_accuracy"].items():
            rows.append((f"coverage at accuracy >= {t} (measured)", f"{cov:.1%}"))
    if "abstention" in m:
        a = m["abstention"]
        sa = "n/a" if a["selective_accuracy"] is None else f"{a['selective_accuracy']:.1%}"
        rows += [(f"threshold from {m['calibration']['split']} for {a['target_accuracy']}",
                  f"{a['threshold']:.3f}: answers {a['coverage']:.1%} (accuracy on them {sa}), abstains on the rest")]
    if "baseline_generate" in m:
        b = m["baseline_generate"]
        rows += [("generate: validity", f"{b['validity']:.1%} (lenient {b['lenient_validity']:.1%})"),
                 ("generate: accuracy", f"{b['accuracy']:.1%} (lenient {b['lenient_accuracy']:.1%})")]
    _print_table(rows, "judge evaluate")


# ------------------------------------------------------------------- bench
def cmd_bench(args) -> int:
    import random

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
    _print_table(rows, f"judge bench ({args.tokenizer})")
    return 0


# -------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judge", description="Zero-shot classification with a causal LM over a label trie.")
    sub = p.add_subparsers(dest="command", required=True)

    pr = sub.add_parser("predict", help="classify texts from a file or stdin; writes JSONL")
    pr.add_argument("--labels", help="file (one label per line, or a JSON list) or comma-separated labels")
    pr.add_argument("--model", default=None, help="hub id, folder, or smollm2-135m-instruct (default)")
    pr.add_argument("--calibration", help="directory of a saved (calibrated) classifier, e.g. OUT/classifier of evaluate")
    pr.add_argument("--input", "-i", default=None, help="input file (lines, .csv or .jsonl); default stdin")
    pr.add_argument("--output", "-o", default=None, help="output JSONL file; default stdout")
    pr.add_argument("--format", choices=["lines", "csv", "jsonl"], default=None)
    pr.add_argument("--column", default="text", help="text column/field for CSV and JSONL")
    pr.add_argument("--method", default="auto", choices=["auto", "first_token", "exact", "decode"])
    pr.add_argument("--batch-size", type=int, default=8)
    pr.add_argument("--top-k", type=int, default=3)
    pr.add_argument("--abstain", action="store_true", help="write label null below the calibrated threshold")
    pr.set_defaults(func=cmd_predict)

    ev = sub.add_parser("evaluate", help="evaluate on a dataset; writes metrics.json, predictions.csv, plots")
    ev.add_argument("dataset", help="banking77, clinc150, trec or massive")
    ev.add_argument("--model", default=None)
    ev.add_argument("--data-dir", default=None, help="folder with the datasets (default $JUDGE_DATA_DIR, else the hub)")
    ev.add_argument("--split", default="test")
    ev.add_argument("--limit", type=int, default=None, help="seeded stratified sample of N texts")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--calibrate-on", default=None, help="split to calibrate on, e.g. validation")
    ev.add_argument("--calibration-limit", type=int, default=None, help="seeded stratified sample of the calibration split")
    ev.add_argument("--bias", default="auto",
                    choices=["auto", "contextual", "batch", "contextual+fit", "batch+fit", "fit", "none"],
                    help="label-bias correction fitted on the calibration split (auto: chosen on validation)")
    ev.add_argument("--bias-l2", type=float, default=1.0, help="shrinkage of a fitted ('+fit') bias")
    ev.add_argument("--rotations", type=int, default=1,
                    help="average over this many rotations of the label list (R times the cost)")
    ev.add_argument("--target-accuracy", type=float, default=None)
    ev.add_argument("--baseline", choices=["generate"], default=None)
    ev.add_argument("--method", default="auto", choices=["auto", "first_token", "exact", "decode"])
    ev.add_argument("--label-names", default="dataset", choices=["dataset", "natural", "raw"],
                    help="what the model writes: the dataset's readable names (TREC), natural (a_b -> a b) or raw")
    ev.add_argument("--batch-size", type=int, default=8)
    ev.add_argument("--include-oos", action="store_true", help="CLINC150: add the out-of-scope class")
    ev.add_argument("--granularity", choices=["coarse", "fine"], default=None, help="TREC label granularity")
    ev.add_argument("--out", required=True, help="output directory")
    ev.set_defaults(func=cmd_evaluate)

    be = sub.add_parser("bench", help="time the trie automaton on a tokenizer (see bench/ for peers)")
    be.add_argument("--tokenizer", required=True, help="tokenizer folder or hub id")
    be.add_argument("--k", default="100,1000,10000")
    be.add_argument("--repeats", type=int, default=3)
    be.set_defaults(func=cmd_bench)

    # integrations at the edge: their modules import FastAPI / Ray only when run
    from judge.server.cli import add_serve_parsers

    add_serve_parsers(sub)
    try:
        from judge.distributed import add_batch_parser
    except ImportError:  # pragma: no cover - judge.distributed ships with the package
        add_batch_parser = None
    if add_batch_parser is not None:
        add_batch_parser(sub)
    return p


def main(argv=None) -> int:
    """Entry point of the ``judge`` console script.

    Examples
    --------
    >>> main(["bench", "--tokenizer", "gpt2", "--k", "10"])     # doctest: +SKIP
    """
    args = build_parser().parse_args(argv)
    if getattr(args, "bias", None) == "none":
        args.bias = None
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
