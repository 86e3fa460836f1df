"""``judge fit``: learn from the user's own labelled CSV/JSONL and save the fitted classifier to a folder.

``judge fit DATA --out DIR`` reads texts and labels (`judge.io.read_labelled`; the labels are the
label column's values, sorted, unless ``--labels`` or ``--classifier`` says otherwise), fits
(`judge.Classifier.fit`: by default a head on the frozen model), saves the classifier to ``DIR``
and prints what was fitted. Then calibrate it on texts the fit never saw (``judge calibrate
HELD_OUT --classifier DIR --out DIR``, or ``--calibrate-on HELD_OUT`` here), and load it with
``judge predict --classifier DIR`` or ``judge serve --classifier DIR``.

What it deliberately does not do: evaluate on a named dataset (``judge evaluate --fit-on``).
"""

from __future__ import annotations

import argparse

from judge.cli._common import add_classifier_args, add_data_args

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``fit`` to the ``judge`` command's subparsers (sets ``func=run``).

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> _ = add_parser(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["fit", "train.csv", "--out", "clf"])
    >>> a.data, a.out, a.fit_method, a.calibrate_on, a.func.__module__
    ('train.csv', 'clf', 'head', None, 'judge.cli.fit')
    """
    f = subparsers.add_parser(
        "fit", help="fit a classifier on your labelled CSV/JSONL; writes a classifier folder",
        description="Fit on labelled texts (a CSV or JSONL file with a text and a label column): by default a "
                    "logistic-regression head on the frozen model's features. Writes a classifier folder for judge "
                    "predict --classifier DIR and judge serve --classifier DIR.")
    add_data_args(f)
    add_classifier_args(f, labels_help="the labels (a file, one per line, or a comma list a,b,c); default: the "
                                       "label column's values, sorted")
    f.add_argument("--out", required=True, metavar="DIR", help="folder to write the fitted classifier to")
    f.add_argument("--fit-method", default="head", choices=["head", "lora", "demos"],
                   help="head (default): a head on the frozen model; lora: adapters (needs peft; slow on CPU); "
                        "demos: the nearest training texts written into each prompt")
    f.add_argument("--seed", type=int, default=0, help="random state of the fit (default 0)")
    f.add_argument("--calibrate-on", metavar="HELD_OUT", default=None,
                   help="then calibrate on these labelled texts (same columns), which the fit must never see")
    goal = f.add_mutually_exclusive_group()
    goal.add_argument("--target-accuracy", type=float, default=None,
                      help="with --calibrate-on: a threshold certifying this accuracy (see judge calibrate)")
    goal.add_argument("--coverage", type=float, default=None,
                      help="with --calibrate-on: a threshold keeping about this fraction of answers")
    f.set_defaults(func=run)
    return f


def run(args) -> int:
    """Run ``judge fit`` (see `add_parser`): fit, (calibrate,) save, print a summary; returns 0.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from judge.cli import main
    >>> from judge.testing import tiny_pair
    >>> d = Path(tempfile.mkdtemp())
    >>> model, tok = tiny_pair(); model.save_pretrained(d / "m"); _ = tok.save_pretrained(d / "m")
    >>> rows = ["text,label"] + [f"ticket {i},{['billing', 'cards'][i % 2]}" for i in range(12)]
    >>> _ = (d / "train.csv").write_text("\\n".join(rows))
    >>> main(["fit", str(d / "train.csv"), "--model", str(d / "m"), "--out", str(d / "clf")])  # doctest: +ELLIPSIS
    <BLANKLINE>
    judge fit: wrote ...clf
    ...
    0
    """
    import time
    import warnings
    from collections import Counter

    from judge.cli._common import (
        classifier_from_args,
        print_table,
        print_warnings,
        read_data_args,
        refuse_flags,
    )

    prog = "judge fit"
    if not args.calibrate_on:
        refuse_flags(prog, {"--target-accuracy": args.target_accuracy, "--coverage": args.coverage},
                     "without --calibrate-on HELD_OUT: a threshold is fitted on held-out texts")
    texts, y = read_data_args(args, prog)
    held = None
    if args.calibrate_on:
        held = read_data_args(argparse.Namespace(data=args.calibrate_on, text_column=args.text_column,
                                                 label_column=args.label_column), prog)
        overlap = set(held[0]) & set(texts)
        if overlap:
            raise SystemExit(f"{prog}: {len(overlap)} text(s) of --calibrate-on {args.calibrate_on!r} are also in "
                             f"{args.data!r} (e.g. {sorted(overlap)[0][:60]!r}); calibrate on texts the fit never "
                             f"saw, or its probabilities will be over-confident.")
    clf = classifier_from_args(args, prog, labels=sorted(set(y)))
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.fit(texts, y, method=args.fit_method, random_state=args.seed)
            seconds = time.perf_counter() - t0
            if held is not None:
                clf.calibrate(*held, target_accuracy=args.target_accuracy, coverage=args.coverage)
    except (ValueError, TypeError, ImportError) as e:
        raise SystemExit(f"{prog}: {e}") from None
    folder = clf.save(args.out)
    counts = Counter(y)
    ad = clf.adaptation_
    rows = [("fitted", f"{ad!r}"), ("on", f"{len(texts)} texts, {len(counts)} of {len(clf.labels)} labels "
                                          f"({min(counts.values())}-{max(counts.values())} per label)"),
            ("took", f"{seconds:.1f} s")]
    if held is not None:
        r = clf.calibration_report_
        cf = r.get("cross_fitted") or {}
        rows.append(("calibrated on", f"{r['n']} held-out texts: accuracy {r['accuracy']:.3f} in-sample"
                                      + (f", {cf['accuracy']:.3f} cross-fitted" if cf else "")))
    rows.append(("next", f"judge calibrate HELD_OUT --classifier {folder} --out {folder}" if held is None
                 else f"judge predict --classifier {folder}"))
    print_table(rows, f"{prog}: wrote {folder}")
    print_warnings(prog, caught)
    return 0
