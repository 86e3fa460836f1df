"""What the ``judge`` subcommands share: input errors turned into exits, a two-column table, and the
classifier options of ``predict``, ``calibrate`` and ``fit`` (labels or a saved classifier folder).

A flag that cannot apply is an error that names it (e.g. ``--labels`` beside ``--classifier DIR``:
the folder holds its labels), never silently ignored.

What it deliberately does not do: read input (`judge.io` does) or define a command.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager

__all__ = ["exit_on_input_error", "print_table", "METHODS", "add_classifier_args", "refuse_flags",
           "classifier_from_args", "print_warnings", "add_data_args", "read_data_args"]

#: ``Classifier(method=...)``'s values (``judge.classifier.METHODS``; kept here so the parser imports no model code).
METHODS = ("auto", "first_token", "exact", "search", "decode")


@contextmanager
def exit_on_input_error(prog: str = "judge"):
    """Turn a `judge.io.InputError` into ``SystemExit("PROG: message")`` (argparse's convention).

    Examples
    --------
    >>> from judge.io import read_labels
    >>> with exit_on_input_error():
    ...     read_labels("only_one")
    Traceback (most recent call last):
    ...
    SystemExit: judge: --labels 'only_one' gave a single label 'only_one'; a classifier needs at least two (with one, every text gets it). Pass a file (one per line, or a JSON list) or a comma list a,b,c.
    """
    from judge.io import InputError

    try:
        yield
    except InputError as err:
        raise SystemExit(f"{prog}: {err}") from None


def print_table(rows: list[tuple[str, str]], title: str) -> None:
    """Print ``rows`` as two aligned columns under ``title``.

    Examples
    --------
    >>> print_table([("K=10", "1.0 ms"), ("tokenizer setup", "20 ms")], "judge bench")
    <BLANKLINE>
    judge bench
    -----------------------------------
    K=10             1.0 ms
    tokenizer setup  20 ms
    """
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    print("-" * (width + 20))
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


class _OlderName(argparse.Action):
    """Store the value; warn when the option was spelled by its older name (``--calibration``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string == "--calibration":
            import warnings

            warnings.warn("--calibration is the older name of --classifier; it will be removed in 0.2.0.",
                          DeprecationWarning, stacklevel=2)
        setattr(namespace, self.dest, values)


def add_classifier_args(p, *, labels_help: str, alias_calibration: bool = False) -> None:
    """Add ``--labels``, ``--classifier``, ``--model``, ``--method`` and ``--batch-size`` to a subcommand.

    ``--method`` and ``--batch-size`` default to None, so a flag the user gave can be told from a default.

    Examples
    --------
    >>> import argparse
    >>> p = argparse.ArgumentParser()
    >>> add_classifier_args(p, labels_help="the labels")
    >>> a = p.parse_args(["--classifier", "clf/"])
    >>> a.classifier, a.labels, a.method, a.batch_size
    ('clf/', None, None, None)
    """
    p.add_argument("--labels", help=labels_help)
    names = ("--classifier", "--calibration") if alias_calibration else ("--classifier",)
    p.add_argument(*names, dest="classifier", metavar="DIR", action=_OlderName,
                   help="folder of a saved classifier (written by judge calibrate, judge fit, judge evaluate or "
                        "Classifier.save): its labels, prompt, method, fitted head and calibration"
                        + ("; --calibration is the older name" if alias_calibration else ""))
    p.add_argument("--model", default=None,
                   help="hub id, local folder or packaged alias (default: smollm2-135m-instruct, offline); with "
                        "--classifier: load that folder's classifier on this model instead of the one it names")
    p.add_argument("--method", default=None, choices=METHODS,
                   help="how labels are scored (default auto): first_token, exact (every label's sequence "
                        "log-probability), search (the certified best-first search, for huge label sets), "
                        "decode (beam search)")
    p.add_argument("--batch-size", type=int, default=None, help="texts per forward pass (default 8)")


def refuse_flags(prog: str, given: dict, why: str) -> None:
    """Exit naming every flag in ``given`` (flag -> its value) that was given; ``why`` says when and why not.

    Examples
    --------
    >>> refuse_flags("judge predict", {"--labels": False, "--method": None}, "with --classifier DIR")
    >>> refuse_flags("judge predict", {"--labels": "a,b", "--method": "exact"}, "with --classifier DIR: it holds them")
    Traceback (most recent call last):
    ...
    SystemExit: judge predict: --labels and --method cannot apply with --classifier DIR: it holds them. Drop them.
    """
    bad = [flag for flag, value in given.items() if value not in (None, False)]
    if bad:
        names = " and ".join(bad) if len(bad) < 3 else ", ".join(bad[:-1]) + " and " + bad[-1]
        raise SystemExit(f"{prog}: {names} cannot apply {why}. Drop {'it' if len(bad) == 1 else 'them'}.")


def classifier_from_args(args, prog: str, *, labels=None):
    """The classifier ``args`` name: a saved folder (``--classifier``) or new labels (``--labels`` / ``labels``).

    ``labels`` (e.g. read from a data file's label column) is used when ``--labels`` is absent.
    Flags a saved folder fixes (``--labels``, ``--method``) are refused, naming them.

    Examples
    --------
    >>> import argparse
    >>> args = argparse.Namespace(labels="a,b", classifier="clf/", model=None, method=None, batch_size=None)
    >>> classifier_from_args(args, "judge predict")
    Traceback (most recent call last):
    ...
    SystemExit: judge predict: --labels cannot apply with --classifier DIR: the saved classifier holds its labels, prompt and method (make a new one with judge calibrate/fit --labels). Drop it.
    """
    from pathlib import Path

    from judge.classifier import Classifier
    from judge.io import read_labels

    if args.classifier:
        refuse_flags(prog, {"--labels": args.labels, "--method": args.method},
                     "with --classifier DIR: the saved classifier holds its labels, prompt and method (make a new "
                     "one with judge calibrate/fit --labels)")
        if not (Path(args.classifier) / "classifier.json").is_file():
            raise SystemExit(f"{prog}: --classifier {args.classifier!r} has no classifier.json; pass a folder written "
                             f"by judge calibrate, judge fit, judge evaluate (OUT/classifier) or Classifier.save().")
        try:
            clf = Classifier.load(args.classifier, model=args.model)
        except (ValueError, OSError) as e:
            raise SystemExit(f"{prog}: --classifier {args.classifier!r}: {e}") from None
        if args.batch_size is not None:
            clf.batch_size = args.batch_size
        return clf
    if args.labels:
        with exit_on_input_error():
            labels = read_labels(args.labels)
    if not labels:
        raise SystemExit(f"{prog}: pass --labels FILE|a,b,c (or --classifier DIR of a saved classifier).")
    try:
        return Classifier(labels, args.model, method=args.method or "auto", batch_size=args.batch_size or 8)
    except (ValueError, TypeError) as e:
        raise SystemExit(f"{prog}: {e}") from None


def print_warnings(prog: str, caught) -> None:
    """Print warnings caught with ``warnings.catch_warnings(record=True)`` as ``PROG: warning: ...`` on stderr.

    Examples
    --------
    >>> import sys, warnings
    >>> sys.stderr = sys.stdout   # (so the doctest sees it)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("calibrate(): too few calibration texts")
    >>> print_warnings("judge calibrate", caught)
    judge calibrate: warning: too few calibration texts
    >>> sys.stderr = sys.__stderr__
    """
    import sys

    for w in caught:
        msg = str(w.message).removeprefix("calibrate(): ")
        print(f"{prog}: warning: {msg}", file=sys.stderr)


def add_data_args(p) -> None:
    """Add ``DATA``, ``--text-column`` and ``--label-column`` (labelled texts, `judge.io.read_labelled`).

    Examples
    --------
    >>> import argparse
    >>> p = argparse.ArgumentParser()
    >>> add_data_args(p)
    >>> a = p.parse_args(["train.csv", "--label-column", "intent"])
    >>> a.data, a.text_column, a.label_column
    ('train.csv', 'text', 'intent')
    """
    p.add_argument("data", metavar="DATA", help="labelled texts: a .csv (header row) or .jsonl file with a text "
                                                "and a label column")
    p.add_argument("--text-column", default="text", help="the column (CSV header or JSONL field) of the texts "
                                                         "(default text)")
    p.add_argument("--label-column", default="label", help="the column of their labels (default label)")


def read_data_args(args, prog: str) -> tuple[list, list]:
    """The texts and labels of ``DATA`` (exits naming the file, the line and the fix on bad input).

    Examples
    --------
    >>> import argparse, tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "d.jsonl"
    >>> _ = f.write_text('{"text": "charged twice", "label": "billing"}\\n')
    >>> read_data_args(argparse.Namespace(data=str(f), text_column="text", label_column="label"), "judge fit")
    (['charged twice'], ['billing'])
    """
    from judge.io import read_labelled

    try:
        with exit_on_input_error(prog):
            return read_labelled(args.data, text_column=args.text_column, label_column=args.label_column)
    except FileNotFoundError as e:
        raise SystemExit(f"{prog}: {e}") from None
