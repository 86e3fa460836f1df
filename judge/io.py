"""Read what the user hands in: labels, texts, JSON lines, and table files for batch jobs.

One copy of every reader the command line, the decisions calibration and the
Ray integration use:

- `read_labels`: labels from a comma list or a file (one per line, or a JSON list);
- `read_texts`: texts from lines, CSV or JSONL (a file, a path or stdin);
- `read_labelled`: texts and their labels from a CSV or JSONL file (``judge calibrate``, ``judge fit``);
- `read_jsonl`: the objects of a JSON-lines file with their line numbers;
- `expand_inputs`: parquet / CSV / JSONL files and folders, grouped by format.

Every reader refuses what would be wrong silently (an empty file, a ragged CSV
row, a label file path with a typo read as one label) with an `InputError`
that names the file, the line and the fix. Everything is plain Python: no
model, no pandas, no Ray.

What it deliberately does not do: print, exit or add the ``judge:`` prefix
(the command line does), load models, or read parquet itself (Ray Data does:
`judge.distributed.read_inputs`).
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["InputError", "read_labels", "read_texts", "read_labelled", "read_jsonl", "expand_inputs",
           "INPUT_SUFFIXES", "TEXT_FORMATS"]

#: Formats `read_texts` understands.
TEXT_FORMATS = ("lines", "csv", "jsonl")
#: File suffixes `expand_inputs` accepts, and the reader each needs (``ray.data.read_<reader>``).
INPUT_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "json", ".ndjson": "json",
                  ".json": "json"}
_PATH_SUFFIXES = (".txt", ".json", ".jsonl", ".ndjson", ".csv", ".tsv", ".lst", ".list", ".labels",
                  ".yaml", ".yml", ".text")


class InputError(ValueError):
    """Input that cannot be read as asked; the message names the file or value, the line and the fix.

    Examples
    --------
    >>> issubclass(InputError, ValueError)
    True
    """


# ----------------------------------------------------------------------------- labels

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
        raise InputError(
            f"--labels file {spec!r} is not UTF-8 (byte 0x{err.object[err.start]:02x} at offset "
            f"{err.start}); re-save it as UTF-8.") from None
    if p.suffix == ".json":
        try:
            labels = json.loads(text)
        except json.JSONDecodeError as err:
            raise InputError(
                f"--labels file {spec!r} is not valid JSON ({err.msg} at line {err.lineno}, "
                f"column {err.colno}); write a JSON list of strings, e.g. [\"positive\", \"negative\"].") from None
        if not isinstance(labels, list):
            raise InputError(
                f"--labels file {spec!r} holds a JSON {type(labels).__name__}, not a list; write a JSON "
                f"list of strings, e.g. [\"positive\", \"negative\"].")
        for i, lab in enumerate(labels):
            if not isinstance(lab, str):
                raise InputError(
                    f"entry {i} of --labels file {spec!r} is a {type(lab).__name__} ({lab!r}), not a "
                    f"string; quote it in the JSON list.")
        return labels
    return [line.strip() for line in text.splitlines() if line.strip()]


def read_labels(spec: str) -> list[str]:
    """Labels from a file (one per line, or a JSON list) or a comma list; refuses what would be wrong silently.

    A value that names an existing file is read as that file (``.json``: a JSON
    list of strings; anything else: one label per line, blank lines skipped, a
    UTF-8 BOM dropped). A value with a comma is always a comma list. A value
    that looks like a path (a file suffix or a separator) but names no file is
    an error, not one label; fewer than two labels is an error (a one-label
    classifier answers that label whatever the text); labels that print alike
    are refused (`judge.labels.check_distinguishable`). No model is loaded.

    Parameters
    ----------
    spec : str
        A path, or labels separated by commas (``"a,b,c"``).

    Returns
    -------
    list of str, length K >= 2

    Raises
    ------
    InputError
        With the value, what is wrong with it and how to pass labels instead.

    Examples
    --------
    >>> read_labels("positive, negative")
    ['positive', 'negative']
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "labels.json").write_text('["yes", "no"]')
    >>> read_labels(str(d / "labels.json"))
    ['yes', 'no']
    >>> read_labels("positive")
    Traceback (most recent call last):
    ...
    judge.io.InputError: --labels 'positive' gave a single label 'positive'; a classifier needs at least two (with one, every text gets it). Pass a file (one per line, or a JSON list) or a comma list a,b,c.
    """
    from judge import LabelError
    from judge.labels import check_distinguishable

    p = Path(spec).expanduser()
    if p.is_dir():
        raise InputError(f"--labels {spec!r} is a directory; pass a file (one label per line, or a JSON "
                         f"list) or a comma list a,b,c.")
    if p.is_file():
        labels, where = _labels_from_file(p, spec), f"file {spec!r}"
    elif _looks_like_path(spec):
        raise InputError(
            f"--labels {spec!r} looks like a file path but there is no such file (looked in "
            f"{str(p.resolve().parent)!r}); check the spelling, or pass labels as a comma list a,b,c "
            f"(a value with a comma, e.g. {spec + ',other'!r}, is always read as labels).")
    else:
        labels, where = [s.strip() for s in spec.split(",") if s.strip()], repr(spec)
    if not labels:
        raise InputError(f"--labels {where} gave no labels; pass a file (one per line, or JSON list) or a,b,c.")
    if len(labels) < 2:
        raise InputError(
            f"--labels {where} gave a single label {labels[0]!r}; a classifier needs at least two "
            f"(with one, every text gets it). Pass a file (one per line, or a JSON list) or a comma list a,b,c.")
    try:
        check_distinguishable(labels)
    except LabelError as err:
        raise InputError(f"--labels {where}: {err}") from None
    return labels


# ----------------------------------------------------------------------------- JSON lines

def _json_lines(lines: Iterable[tuple[int, str]], bad_json) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line; ``bad_json(lineno, err)`` builds the error to raise."""
    for lineno, line in lines:
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as err:
            raise bad_json(lineno, err) from None


def _decoded_lines(fh, name: str) -> Iterator[tuple[int, str]]:
    """Numbered lines of a binary file, decoded as UTF-8 one by one (an error names its line)."""
    for lineno, raw in enumerate(fh, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{name}:{lineno}: not UTF-8 (byte 0x{raw[err.start]:02x} at column "
                             f"{err.start + 1}); re-save the file as UTF-8.") from None
        yield lineno, line.removeprefix("\ufeff") if lineno == 1 else line


def read_jsonl(path) -> Iterator[tuple[int, dict]]:
    """The JSON object on each non-blank line of a JSON-lines file, with its line number.

    Lazy: the path is checked now, then the file is read line by line as the
    iterator is consumed (a large file is never held in memory), and an error
    in a line is raised when that line is reached. Blank lines are skipped (they keep their numbers); a UTF-8 BOM
    on the first line is dropped.

    Parameters
    ----------
    path : str or os.PathLike

    Yields
    ------
    lineno : int
        1-based line number in the file.
    record : dict
        The line's JSON object.

    Raises
    ------
    InputError
        ``"PATH:LINE: ..."``: a line that is not UTF-8, not JSON, or JSON but
        not an object.
    FileNotFoundError
        No such file (raised by the call itself, before any iteration).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "data.jsonl"
    >>> _ = path.write_text('{"state": "hi", "label": 1}\\n\\n{"state": "bye"}\\n')
    >>> list(read_jsonl(path))
    [(1, {'state': 'hi', 'label': 1}), (3, {'state': 'bye'})]
    >>> _ = path.write_text('{"state": "hi"}\\n["a", "list"]\\n')
    >>> list(read_jsonl(path))   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    judge.io.InputError: ...data.jsonl:2: a JSON list (['a', 'list']), not an object; each line must be one JSON object, e.g. {"state": "..."}.
    """
    name = os.fspath(path)
    p = Path(name).expanduser()
    if not p.exists():
        raise FileNotFoundError(f"JSON-lines file {name!r} does not exist (looked in {str(p.resolve().parent)!r}); "
                                f"check the path.")
    if p.is_dir():
        raise InputError(f"{name} is a directory; pass a JSON-lines file (one JSON object per line).")

    return _jsonl_records(p, name)


def _jsonl_records(p: Path, name: str) -> Iterator[tuple[int, dict]]:
    def bad_json(lineno, err):
        return InputError(f"{name}:{lineno}: not JSON ({err}); each line must be one JSON object.")

    with open(p, "rb") as fh:
        for lineno, rec in _json_lines(_decoded_lines(fh, name), bad_json):
            if not isinstance(rec, dict):
                raise InputError(f"{name}:{lineno}: a JSON {type(rec).__name__} ({rec!r:.40}), not an object; "
                                 f"each line must be one JSON object, e.g. {{\"state\": \"...\"}}.")
            yield lineno, rec


# ----------------------------------------------------------------------------- texts

def _csv_rows(raw: str, columns, name: str, flags) -> list[tuple]:
    """The ``columns`` of every row; malformed CSV (unterminated quote, ragged row, empty cell) is an error with its line.

    ``flags``: the option naming each column (``--column``), for the fix in a message.
    """
    reader = csv.reader(io.StringIO(raw), strict=True)
    header, out, start = None, [], 1
    try:
        for row in reader:
            line, start = start, reader.line_num + 1
            if not row:
                continue
            if header is None:
                header = row
                for column, flag in zip(columns, flags):
                    if column not in header:
                        raise InputError(
                            f"the CSV has no column {column!r} (columns: {header}); pass {flag} NAME.")
                cols = [header.index(c) for c in columns]
                continue
            if len(row) != len(header):
                raise InputError(
                    f"line {line} of {name} has {len(row)} fields but the header has {len(header)} "
                    f"({header}); quote fields that contain commas (\"a, b\") or fix the row.")
            for column, c in zip(columns, cols):
                if not row[c].strip():
                    raise InputError(
                        f"line {line} of {name} has an empty {column!r} cell; there is nothing to "
                        f"{'classify' if c == cols[0] else 'learn from'}, remove the row or fill it.")
            out.append(tuple(row[c] for c in cols))
    except csv.Error as err:
        if "end of data" in str(err):
            raise InputError(
                f"{name} has an unterminated quote: the field opened on line {start} runs to the end of "
                f"the file (line {reader.line_num}); close the quote, or double quotes inside a quoted field "
                f"(\"\").") from None
        raise InputError(
            f"line {reader.line_num} of {name} is not valid CSV ({err}); quote the field and double "
            f"any quote inside it (\"say \"\"hi\"\"\").") from None
    if header is None:
        raise InputError(f"{name} is empty; pass a CSV with a header row and at least one row.")
    if not out:
        raise InputError(
            f"{name} has a header ({header}) but no rows; there is nothing to classify.")
    return out


def _csv_texts(raw: str, column: str, name: str) -> list[str]:
    return [r[0] for r in _csv_rows(raw, [column], name, ["--column"])]


def _jsonl_texts(raw: str, column: str) -> list[str]:
    def bad_json(lineno, err):
        return InputError(f"line {lineno} of the input is not JSON ({err}).")

    out = []
    for i, obj in _json_lines(enumerate(raw.splitlines(), 1), bad_json):
        if isinstance(obj, dict) and column in obj:
            obj = obj[column]
        elif not isinstance(obj, str):
            raise InputError(f"line {i} of the input has no {column!r} field; pass --column NAME.")
        if not isinstance(obj, str):
            raise InputError(
                f"line {i} of the input has a {type(obj).__name__} {column!r} field ({obj!r:.40}), not "
                f"a string; write the text as a JSON string.")
        if not obj.strip():
            raise InputError(f"line {i} of the input has an empty text; remove the line or fill it.")
        out.append(obj)
    return out


def _jsonl_labelled(raw: str, where: str, text_column: str, label_column: str) -> list[tuple]:
    def bad_json(lineno, err):
        return InputError(f"line {lineno} of {where} is not JSON ({err}).")

    out = []
    for i, obj in _json_lines(enumerate(raw.splitlines(), 1), bad_json):
        if not isinstance(obj, dict):
            raise InputError(f"line {i} of {where} is a JSON {type(obj).__name__}, not an object; write one "
                             f"object per line, e.g. {{\"{text_column}\": \"...\", \"{label_column}\": \"...\"}}.")
        row = []
        for col, flag in ((text_column, "--text-column"), (label_column, "--label-column")):
            if col not in obj:
                raise InputError(f"line {i} of {where} has no {col!r} field (fields: {sorted(obj)}); pass {flag} NAME.")
            v = obj[col]
            if not isinstance(v, str) or not v.strip():
                raise InputError(f"line {i} of {where} has {'an empty' if isinstance(v, str) else 'a non-string'} "
                                 f"{col!r} field ({v!r:.40}); write it as a non-empty JSON string or remove the line.")
            row.append(v)
        out.append(tuple(row))
    return out


def read_labelled(path, *, text_column: str = "text", label_column: str = "label",
                  fmt: str | None = None) -> tuple[list[str], list[str]]:
    """Texts and their labels from a CSV or JSONL file (what ``judge calibrate`` and ``judge fit`` learn from).

    Parameters
    ----------
    path : str or os.PathLike
        A UTF-8 ``.csv`` (a header row naming the columns) or ``.jsonl`` file (one object per line).
    text_column, label_column : str
        The columns (CSV header names, JSONL fields) holding each text and its label.
    fmt : {"csv", "jsonl"}, optional
        Default: from the suffix (``.jsonl``/``.ndjson``: jsonl, else csv).

    Returns
    -------
    (list of str, list of str)
        Texts and labels, same length, at least one row; none empty.

    Raises
    ------
    InputError
        A missing column, an empty cell, a malformed row (naming the line and the fix).
    FileNotFoundError
        No such file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "train.csv"
    >>> _ = f.write_text('text,label\\nI was charged twice,billing\\n"my card, it is lost",cards\\n')
    >>> read_labelled(f)
    (['I was charged twice', 'my card, it is lost'], ['billing', 'cards'])
    >>> read_labelled(f, label_column="intent")
    Traceback (most recent call last):
    ...
    judge.io.InputError: the CSV has no column 'intent' (columns: ['text', 'label']); pass --label-column NAME.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a file; pass a .csv or .jsonl file with a {text_column!r} "
                                f"and a {label_column!r} column.")
    fmt = fmt or ("jsonl" if p.suffix in (".jsonl", ".ndjson") else "csv")
    if fmt not in ("csv", "jsonl"):
        raise InputError(f"unknown format {fmt!r} for labelled texts; valid formats are csv and jsonl.")
    try:
        raw = p.read_text(encoding="utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise InputError(f"{str(path)!r} is not UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
                         f"re-encode it as UTF-8.") from None
    where = f"{str(path)!r}"
    if not raw.strip():
        raise InputError(f"{where} is empty; pass labelled texts ({fmt}).")
    rows = (_csv_rows(raw, [text_column, label_column], where, ["--text-column", "--label-column"])
            if fmt == "csv" else _jsonl_labelled(raw, where, text_column, label_column))
    return [r[0] for r in rows], [r[1].strip() for r in rows]


def read_texts(source, *, column: str = "text", fmt: str | None = None) -> list[str]:
    """Texts from lines, CSV or JSONL; empty input and malformed rows are errors naming the line.

    Parameters
    ----------
    source : text file object, str or os.PathLike
        An open text file (e.g. ``sys.stdin``) or the path of a UTF-8 file.
    column : str
        The text column of a CSV (by header name) or the text field of a JSONL
        object (a JSONL line may also be a bare JSON string).
    fmt : {"lines", "csv", "jsonl"}, optional
        Default: from the file name (``.jsonl``/``.ndjson``: jsonl, ``.csv``:
        csv), else one text per non-blank line.

    Returns
    -------
    list of str
        At least one text, none empty.

    Raises
    ------
    InputError
        Empty input, not UTF-8, an unknown format, a missing column, a ragged
        or unterminated CSV row, a JSONL line that is not JSON or holds no
        string text; each names the line and the fix.
    FileNotFoundError
        ``source`` is a path that does not exist.

    Examples
    --------
    >>> import io
    >>> read_texts(io.StringIO("my card is late\\n\\nwhat is the rate\\n"))
    ['my card is late', 'what is the rate']
    >>> read_texts(io.StringIO('id,body\\n1,"rate, please"\\n'), column="body", fmt="csv")
    ['rate, please']
    >>> read_texts(io.StringIO('{"text": "card late"}\\n"rate?"\\n'), fmt="jsonl")
    ['card late', 'rate?']
    >>> read_texts(io.StringIO("id,text\\n1,ok\\n2,a, b\\n"), fmt="csv")
    Traceback (most recent call last):
    ...
    judge.io.InputError: line 3 of the input (stdin) has 3 fields but the header has 2 (['id', 'text']); quote fields that contain commas ("a, b") or fix the row.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as fh:
            return read_texts(fh, column=column, fmt=fmt)
    name = getattr(source, "name", "")
    where = "the input (stdin)" if name in ("", "<stdin>") or not isinstance(name, str) else f"the input {name!r}"
    try:
        raw = source.read()
    except UnicodeDecodeError as err:
        raise InputError(
            f"{where} is not UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start}); "
            f"re-encode it as UTF-8.") from None
    raw = raw.removeprefix("\ufeff")  # a BOM would otherwise rename the first CSV column
    fmt = fmt or ("jsonl" if str(name).endswith((".jsonl", ".ndjson")) else
                  "csv" if str(name).endswith(".csv") else "lines")
    if fmt not in TEXT_FORMATS:
        raise InputError(f"unknown --format {fmt!r}; valid formats are lines, csv, jsonl.")
    if not raw.strip():
        raise InputError(f"{where} is empty; pass texts on stdin or with --input FILE (format {fmt}).")
    if fmt == "lines":
        return [line for line in raw.splitlines() if line.strip()]
    if fmt == "csv":
        return _csv_texts(raw, column, where)
    return _jsonl_texts(raw, column)


# ----------------------------------------------------------------------------- table files

def expand_inputs(inputs) -> dict[str, list[str]]:
    """Input files grouped by reader; folders are searched (not recursively) for known suffixes.

    Parameters
    ----------
    inputs : str, os.PathLike or a list of them
        Files with a suffix of `INPUT_SUFFIXES` (parquet, CSV, JSON lines), or
        folders holding some.

    Returns
    -------
    dict of str to list of str
        Reader kind (``"parquet"``, ``"csv"``, ``"json"``) to absolute file
        paths, in the order given (a folder's files sorted by name).

    Raises
    ------
    InputError
        No inputs, or a file with another suffix.
    FileNotFoundError
        A path that does not exist, or a folder with no readable file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("b.jsonl", "a.csv", "notes.txt"):
    ...     _ = (d / name).write_text("{}")
    >>> {kind: [pathlib.Path(f).name for f in files] for kind, files in expand_inputs(d).items()}
    {'csv': ['a.csv'], 'json': ['b.jsonl']}
    >>> expand_inputs(d / "notes.txt")   # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    judge.io.InputError: input '...notes.txt' has suffix '.txt'; valid suffixes are [...] (parquet, CSV, JSON lines).
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    inputs = list(inputs)
    if not inputs:
        raise InputError("inputs is empty; pass one or more parquet, CSV or JSONL files or folders.")
    groups: dict[str, list[str]] = {}
    for spec in inputs:
        p = Path(spec).expanduser()
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in INPUT_SUFFIXES)
            if not files:
                raise FileNotFoundError(f"input folder {str(spec)!r} holds no {sorted(set(INPUT_SUFFIXES))} files; "
                                        f"pass files, or a folder with some.")
        elif p.is_file():
            if p.suffix.lower() not in INPUT_SUFFIXES:
                raise InputError(f"input {str(spec)!r} has suffix {p.suffix!r}; valid suffixes are "
                                 f"{sorted(INPUT_SUFFIXES)} (parquet, CSV, JSON lines).")
            files = [p]
        else:
            raise FileNotFoundError(f"input {str(spec)!r} does not exist (looked in {str(p.resolve().parent)!r}); "
                                    f"check the path.")
        for f in files:
            groups.setdefault(INPUT_SUFFIXES[f.suffix.lower()], []).append(str(f.resolve()))
    return groups
