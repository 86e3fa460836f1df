"""What the ``judge`` subcommands share: input errors turned into exits, and a two-column table.

What it deliberately does not do: read input (`judge.io` does) or define a command.
"""

from __future__ import annotations

from contextlib import contextmanager

__all__ = ["exit_on_input_error", "print_table"]


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
