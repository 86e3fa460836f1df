"""The ``judge`` command: ``predict``, ``calibrate``, ``fit``, ``evaluate``, ``bench``, ``batch``, ``serve``, ``calibrate-decisions``, ``fit-decisions``.

One module per subcommand, each with ``add_parser(subparsers)`` and ``run(args)``
(`judge.cli.serve` adds three commands):

- ``judge predict`` (`judge.cli.predict`) classifies texts from a file or stdin
  and writes JSONL (zero-shot labels, a saved classifier folder, or a running server);
- ``judge calibrate`` and ``judge fit`` (`judge.cli.calibrate`, `judge.cli.fit`) learn from the
  user's labelled CSV/JSONL and write a classifier folder that ``predict`` and ``serve`` load;
- ``judge evaluate`` (`judge.cli.evaluate`) runs a dataset end to end
  (`judge.evaluation.evaluate`) and writes ``metrics.json``, ``predictions.csv``
  and plots;
- ``judge bench`` (`judge.cli.bench`) times the trie automaton on a tokenizer;
- ``judge batch`` (`judge.cli.batch`) classifies files on a Ray cluster
  (`judge.distributed`);
- ``judge serve``, ``judge calibrate-decisions`` and ``judge fit-decisions``
  (`judge.cli.serve`) serve, calibrate and fit the decisions API (`judge.server`,
  `judge.decisions`).

Run ``judge COMMAND --help``. Building the parser imports no model library:
torch, transformers, Ray and FastAPI load only when a command runs.

What it deliberately does not do: read input (`judge.io`), compute metrics
(`judge.evaluation`) or touch Ray (`judge.distributed`) itself.
"""

from __future__ import annotations

import argparse
import sys

from judge.cli import batch, bench, calibrate, evaluate, fit, predict, serve

__all__ = ["main", "build_parser", "command_help"]


def build_parser() -> argparse.ArgumentParser:
    """The ``judge`` argument parser, every subcommand included (each sets ``func``).

    Examples
    --------
    >>> args = build_parser().parse_args(["predict", "--labels", "a,b"])
    >>> args.command, args.func.__module__
    ('predict', 'judge.cli.predict')
    """
    return _parser_and_commands()[0]


def _parser_and_commands():
    p = argparse.ArgumentParser(prog="judge", description="Zero-shot classification with a causal LM over a label trie.")
    sub = p.add_subparsers(dest="command", required=True)
    predict.add_parser(sub)
    calibrate.add_parser(sub)
    fit.add_parser(sub)
    evaluate.add_parser(sub)
    bench.add_parser(sub)
    serve.add_parsers(sub)  # integrations at the edge: FastAPI / Ray are imported only when run
    batch.add_parser(sub)
    return p, sub.choices


def command_help(width: int = 100) -> dict[str, str]:
    """Each command's ``--help`` text, ``{"judge": ..., "judge predict": ..., ...}`` in parser order.

    What the documentation's command-line reference is built from, so it never drifts from the parsers.

    Examples
    --------
    >>> helps = command_help()
    >>> list(helps)[:3]
    ['judge', 'judge predict', 'judge calibrate']
    >>> "--labels" in helps["judge predict"]
    True
    """
    import os

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)  # argparse wraps to the terminal's width: fix it
    try:
        parser, commands = _parser_and_commands()
        out = {"judge": parser.format_help()}
        for name, sub in commands.items():
            out[f"judge {name}"] = sub.format_help()
        return out
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def main(argv=None) -> int:
    """Entry point of the ``judge`` console script.

    Parameters
    ----------
    argv : list of str, optional
        Default: ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status (errors in the input raise ``SystemExit`` with a message).

    Examples
    --------
    With a tokenizer folder (here the project's shared GPT-2 one; a hub id works where it is cached):

    >>> main(["bench", "--tokenizer", "../shared/tokenizers/gpt2", "--k", "10"])  # doctest: +ELLIPSIS
    <BLANKLINE>
    judge bench (../shared/tokenizers/gpt2)
    ...
    0

    Input errors exit with the fix, before any model is loaded:

    >>> main(["predict", "--labels", "positive"])
    Traceback (most recent call last):
    ...
    SystemExit: judge: --labels 'positive' gave a single label 'positive'; a classifier needs at least two (with one, every text gets it). Pass a file (one per line, or a JSON list) or a comma list a,b,c.
    """
    args = build_parser().parse_args(argv)
    if getattr(args, "bias", None) == "none":
        args.bias = None
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
