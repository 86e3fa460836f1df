"""``judge calibrate``: calibrate a classifier on the user's own labelled CSV/JSONL and save it to a folder.

``judge calibrate DATA --out DIR`` reads texts and labels (`judge.io.read_labelled`; the labels
are the label column's values, sorted, unless ``--labels`` or ``--classifier`` says otherwise),
fits bias, temperature and (with ``--target-accuracy`` or ``--coverage``) an abstention threshold
(`judge.Classifier.calibrate`), saves the classifier to ``DIR`` and prints what was fitted, where
each figure was measured and every warning (too few texts, a temperature out of range, a
threshold that abstains on everything). ``judge predict --classifier DIR`` and ``judge serve
--classifier DIR`` load the folder. ``--classifier SRC`` calibrates a saved (e.g. fitted) one.

What it deliberately does not do: fit a head (``judge fit``) or evaluate on a named dataset
(``judge evaluate``).
"""

from __future__ import annotations

import argparse

from judge.cli._common import add_classifier_args, add_data_args

__all__ = ["add_parser", "run", "BIAS_CHOICES"]

#: ``calibrate(bias=...)``'s values, ``none`` for None (judge.calibration.state.BIASES).
BIAS_CHOICES = ("auto", "contextual", "batch", "contextual+fit", "batch+fit", "fit", "cv", "none")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``calibrate`` to the ``judge`` command's subparsers (sets ``func=run``).

    Examples
    --------
    >>> p = argparse.ArgumentParser(prog="judge")
    >>> _ = add_parser(p.add_subparsers(dest="command"))
    >>> a = p.parse_args(["calibrate", "val.csv", "--out", "clf", "--target-accuracy", "0.8"])
    >>> a.data, a.out, a.target_accuracy, a.bias, a.func.__module__
    ('val.csv', 'clf', 0.8, 'auto', 'judge.cli.calibrate')
    """
    c = subparsers.add_parser(
        "calibrate", help="calibrate a classifier on your labelled CSV/JSONL; writes a classifier folder",
        description="Calibrate on labelled texts (a CSV or JSONL file with a text and a label column): label "
                    "bias, temperature and, with --target-accuracy or --coverage, an abstention threshold. Writes "
                    "a classifier folder for judge predict --classifier DIR and judge serve --classifier DIR. Use "
                    "texts the classifier (and judge fit) never saw.")
    add_data_args(c)
    add_classifier_args(c, labels_help="the labels (a file, one per line, or a comma list a,b,c); default: the "
                                       "label column's values, sorted")
    c.add_argument("--out", required=True, metavar="DIR", help="folder to write the calibrated classifier to")
    c.add_argument("--bias", default="auto", choices=BIAS_CHOICES,
                   help="label-bias correction (default auto: chosen on validation splits; none: temperature only)")
    goal = c.add_mutually_exclusive_group()
    goal.add_argument("--target-accuracy", type=float, default=None,
                      help="fit a threshold that certifies this accuracy on the answers it keeps (Clopper-Pearson "
                           "at --confidence); needs at least log(1-confidence)/log(target) texts, 29 for 0.9")
    goal.add_argument("--coverage", type=float, default=None,
                      help="fit a threshold that keeps about this fraction of the answers")
    c.add_argument("--confidence", type=float, default=0.95,
                   help="confidence of the --target-accuracy bound (default 0.95)")
    c.set_defaults(func=run)
    return c


def run(args) -> int:
    """Run ``judge calibrate`` (see `add_parser`): calibrate, save, print a summary; returns 0.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from judge.cli import main
    >>> from judge.testing import tiny_pair
    >>> d = Path(tempfile.mkdtemp())
    >>> model, tok = tiny_pair(); model.save_pretrained(d / "m"); _ = tok.save_pretrained(d / "m")
    >>> rows = ["text,label"] + [f"ticket {i},{['billing', 'cards'][i % 2]}" for i in range(20)]
    >>> _ = (d / "val.csv").write_text("\\n".join(rows))
    >>> main(["calibrate", str(d / "val.csv"), "--model", str(d / "m"), "--out", str(d / "clf")])  # doctest: +ELLIPSIS
    <BLANKLINE>
    judge calibrate: wrote ...clf
    ...
    0
    >>> sorted(p.name for p in (d / "clf").iterdir())
    ['calibration.safetensors', 'classifier.json']
    """
    import warnings

    from judge.cli._common import classifier_from_args, print_warnings, read_data_args

    prog = "judge calibrate"
    texts, y = read_data_args(args, prog)
    clf = classifier_from_args(args, prog, labels=sorted(set(y)))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            clf.calibrate(texts, y, bias=None if args.bias == "none" else args.bias,
                          target_accuracy=args.target_accuracy, coverage=args.coverage, confidence=args.confidence)
    except (ValueError, TypeError) as e:
        raise SystemExit(f"{prog}: {e}") from None
    folder = clf.save(args.out)
    print_summary(prog, folder, clf.calibration_report_, len(clf.labels))
    print_warnings(prog, caught)
    return 0


def print_summary(prog: str, folder, r: dict, k: int) -> None:
    """Print what a calibration fitted and where each figure was measured.

    Examples
    --------
    >>> print_summary("judge calibrate", "clf", {"n": 40, "bias": "batch+fit", "temperature": 1.8, "threshold": 0.61,
    ...     "coverage": 0.5, "selective_accuracy": 0.95, "target_accuracy": 0.9, "confidence": 0.95, "accuracy": 0.8,
    ...     "nll": 0.6, "cross_fitted": {"accuracy": 0.75, "nll": 0.7, "folds": 5}}, 4)   # doctest: +NORMALIZE_WHITESPACE
    <BLANKLINE>
    judge calibrate: wrote clf
    ------------------------------------------------
    calibrated on                 40 texts, 4 labels
    bias / temperature            batch+fit / 1.8
    threshold                     0.610 (threshold 0.610 certifies accuracy >= 0.9 at 95% confidence on 40 calibration texts)
    answered on these texts       50.0%, 95.0% of them right
    accuracy, NLL on these texts  0.800, 0.600 (in-sample: fitted on them)
    accuracy, NLL cross-fitted    0.750, 0.700 (5 folds: each text scored by a fit without it)
    next                          judge predict --classifier clf [--abstain]
    """
    from judge.calibration.review import threshold_words
    from judge.cli._common import print_table

    T = r.get("temperature")
    rows = [("calibrated on", f"{r['n']} texts, {k} labels"),
            ("bias / temperature", f"{r.get('bias')} / {'none' if T is None else format(T, '.4g')}")]
    if r.get("threshold") is not None:
        rows.append(("threshold", f"{min(r['threshold'], 1.0):.3f} ({threshold_words(r)})"))
        sa = r.get("selective_accuracy")
        rows.append(("answered on these texts", f"{r['coverage']:.1%}" + ("" if sa is None else f", {sa:.1%} of them right")))
    rows.append(("accuracy, NLL on these texts", f"{r['accuracy']:.3f}, {r['nll']:.3f} (in-sample: fitted on them)"))
    cf = r.get("cross_fitted")
    if cf:
        rows.append(("accuracy, NLL cross-fitted", f"{cf['accuracy']:.3f}, {cf['nll']:.3f} ({cf['folds']} folds: each "
                                                   f"text scored by a fit without it)"))
    rows.append(("next", f"judge predict --classifier {folder}" + (" [--abstain]" if r.get("threshold") is not None
                                                                    else "")))
    print_table(rows, f"{prog}: wrote {folder}")
