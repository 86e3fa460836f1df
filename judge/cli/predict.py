"""``judge predict``: classify texts from a file or stdin and write one JSON line per text.

Reads labels and texts with `judge.io` (every input error is reported before
the model loads), scores with `judge.Classifier.predict_proba`, writes
``{"text", "label", "probabilities" (top k), "abstained"}`` per line.

What it deliberately does not do: calibrate (``judge evaluate`` does and saves
the classifier; pass it with ``--calibration DIR``) or batch over a cluster
(``judge batch``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from judge.cli._common import exit_on_input_error

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``predict`` to the ``judge`` command's subparsers (sets ``func=run``).

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> _ = add_parser(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["predict", "--labels", "a,b", "--top-k", "1"])
    >>> a.labels, a.top_k, a.column, a.func.__name__
    ('a,b', 1, 'text', 'run')
    """
    pr = subparsers.add_parser("predict", help="classify texts from a file or stdin; writes JSONL")
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
    pr.set_defaults(func=run)
    return pr


def run(args) -> int:
    """Run ``judge predict`` (see `add_parser`); returns 0, input errors exit naming the fix.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> from judge.cli import main
    >>> from judge.testing import tiny_pair
    >>> folder = Path(tempfile.mkdtemp())
    >>> model, tok = tiny_pair(); model.save_pretrained(folder); _ = tok.save_pretrained(folder)
    >>> _ = (folder / "texts.txt").write_text("my card has not arrived")
    >>> main(["predict", "--model", str(folder), "--labels", "card_arrival,exchange_rate",
    ...       "--input", str(folder / "texts.txt"), "--output", str(folder / "out.jsonl")])
    0
    >>> sorted(json.loads((folder / "out.jsonl").read_text()))
    ['abstained', 'label', 'probabilities', 'text']
    """
    from judge.classifier import Classifier
    from judge.io import read_labels, read_texts

    if args.calibration:
        clf = Classifier.load(args.calibration, model=args.model)
    else:
        if not args.labels:
            raise SystemExit("judge predict: pass --labels FILE|a,b,c (or --calibration DIR of a saved classifier).")
        with exit_on_input_error():
            labels = read_labels(args.labels)
        clf = Classifier(labels, args.model, method=args.method, batch_size=args.batch_size)
    if args.input in (None, "-"):
        with exit_on_input_error():
            texts = read_texts(sys.stdin, column=args.column, fmt=args.format)
    else:
        if not Path(args.input).is_file():
            raise SystemExit(f"judge predict: --input {args.input!r} is not a file; pass a readable file or '-' for stdin.")
        with open(args.input, encoding="utf-8") as fh, exit_on_input_error():
            texts = read_texts(fh, column=args.column, fmt=args.format)
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
