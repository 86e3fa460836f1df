"""judge.io: every reader on good input, and each bad input refused with a message naming the fix."""

from __future__ import annotations

import io
import json

import pytest

from judge.io import InputError, expand_inputs, read_jsonl, read_labels, read_texts


# ----------------------------------------------------------------------------- read_labels
def test_labels_from_comma_list_txt_and_json(tmp_path):
    assert read_labels(" yes , no ,, maybe ") == ["yes", "no", "maybe"]
    (tmp_path / "l.txt").write_text("card_arrival\n\n  exchange_rate  \n")
    assert read_labels(str(tmp_path / "l.txt")) == ["card_arrival", "exchange_rate"]
    (tmp_path / "l.json").write_text(json.dumps(["a b", "c,d"]))
    assert read_labels(str(tmp_path / "l.json")) == ["a b", "c,d"]
    (tmp_path / "bom.txt").write_bytes("\ufeffyes\nno\n".encode())
    assert read_labels(str(tmp_path / "bom.txt")) == ["yes", "no"]


def test_labels_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\nno\n")
    (tmp_path / "bad.json").write_text('["a",]')
    (tmp_path / "obj.json").write_text('{"a": 1}')
    (tmp_path / "num.json").write_text('["a", null]')
    (tmp_path / "empty.txt").write_text("\n\n")
    cases = {
        "labls.txt": r"^--labels 'labls.txt' looks like a file path but there is no such file .*comma list a,b,c",
        "d": r"^--labels 'd' is a directory; pass a file",
        "latin1.txt": r"'latin1.txt' is not UTF-8 \(byte 0xe9 at offset 3\); re-save it as UTF-8",
        "bad.json": r"'bad.json' is not valid JSON \(.* at line 1, column \d+\); write a JSON list of strings",
        "obj.json": r"holds a JSON dict, not a list",
        "num.json": r"entry 1 of --labels file 'num.json' is a NoneType \(None\), not a string",
        "empty.txt": r"--labels file 'empty.txt' gave no labels",
        "only": r"gave a single label 'only'; a classifier needs at least two",
        "caf\u00e9,cafe\u0301": r"both print as 'café'",
    }
    for spec, message in cases.items():
        with pytest.raises(InputError, match=message):
            read_labels(spec)


# ----------------------------------------------------------------------------- read_texts
def test_texts_lines_csv_jsonl_and_paths(tmp_path):
    assert read_texts(io.StringIO("a\n\n  \nb\n")) == ["a", "b"]
    assert read_texts(io.StringIO('\ufefftext,id\n"x, y",1\n"two\nlines",2\n'), fmt="csv") == ["x, y", "two\nlines"]
    assert read_texts(io.StringIO('{"body": "a"}\n\n"b"\n'), column="body", fmt="jsonl") == ["a", "b"]
    (tmp_path / "in.jsonl").write_text('{"text": "from a path"}\n')
    assert read_texts(tmp_path / "in.jsonl") == ["from a path"]  # format from the suffix
    (tmp_path / "in.csv").write_text("text\nc\n")
    with open(tmp_path / "in.csv", encoding="utf-8") as fh:
        assert read_texts(fh) == ["c"]


@pytest.mark.parametrize("body, fmt, message", [
    ("", None, r"^the input \(stdin\) is empty; pass texts on stdin or with --input FILE \(format lines\)"),
    ("a\n", "xml", r"^unknown --format 'xml'; valid formats are lines, csv, jsonl"),
    ("id,body\n1,x\n", "csv", r"^the CSV has no column 'text' \(columns: \['id', 'body'\]\); pass --column NAME"),
    ("id,text\n", "csv", r"has a header \(\['id', 'text'\]\) but no rows"),
    ("id,text\n1,a, b\n", "csv", r"^line 2 of the input \(stdin\) has 3 fields but the header has 2"),
    ("id,text\n1,\"open\n2,x\n", "csv", r"unterminated quote: the field opened on line 2 runs to the end"),
    ('id,text\n1,"q"junk\n', "csv", r"^line 2 of .* is not valid CSV"),
    ("id,text\n1, \n", "csv", r"^line 2 of the input \(stdin\) has an empty 'text' cell"),
    ('"ok"\n{oops\n', "jsonl", r"^line 2 of the input is not JSON"),
    ('{"body": "x"}\n', "jsonl", r"^line 1 of the input has no 'text' field; pass --column NAME"),
    ('{"text": 3}\n', "jsonl", r"^line 1 of the input has a int 'text' field \(3\), not a string"),
    ('"ok"\n"  "\n', "jsonl", r"^line 2 of the input has an empty text"),
])
def test_texts_errors(body, fmt, message):
    with pytest.raises(InputError, match=message):
        read_texts(io.StringIO(body), fmt=fmt)


def test_texts_not_utf8_names_the_file(tmp_path):
    (tmp_path / "in.txt").write_bytes(b"ok\ncaf\xe9\n")
    with pytest.raises(InputError, match=r"^the input '.*in.txt' is not UTF-8 \(byte 0xe9 at offset 6\)"):
        read_texts(tmp_path / "in.txt")


# ----------------------------------------------------------------------------- read_jsonl
def test_jsonl_records_and_line_numbers(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes('\ufeff{"state": "a"}\n\n   \n{"state": "é", "n": [1]}\n{"last": true}'.encode())
    assert list(read_jsonl(path)) == [(1, {"state": "a"}), (4, {"state": "é", "n": [1]}), (5, {"last": True})]
    assert list(read_jsonl(str(path)))[0] == (1, {"state": "a"})


@pytest.mark.parametrize("body, message", [
    (b'{"a": 1}\n{"a": \n', r"d.jsonl:2: not JSON \(Expecting value.*\); each line must be one JSON object"),
    (b'{"a": 1}\n\n[1, 2]\n', r"d.jsonl:3: a JSON list \(\[1, 2\]\), not an object; each line must be one JSON object"),
    (b'{"a": 1}\n"just a string"\n', r"d.jsonl:2: a JSON str \('just a string'\), not an object"),
    (b'{"a": 1}\n{"a": "caf\xe9"}\n', r"d.jsonl:2: not UTF-8 \(byte 0xe9 at column 11\); re-save the file as UTF-8"),
])
def test_jsonl_errors_name_file_and_line(tmp_path, body, message):
    path = tmp_path / "d.jsonl"
    path.write_bytes(body)
    records = read_jsonl(path)
    first = next(records)  # lazy: the lines before the bad one are read
    assert first == (1, {"a": 1})
    with pytest.raises(InputError, match=message):
        list(records)


def test_jsonl_error_on_the_first_line_and_bad_paths(tmp_path):
    (tmp_path / "d.jsonl").write_text("[]\n")
    with pytest.raises(InputError, match=r"d.jsonl:1: a JSON list \(\[\]\), not an object"):
        list(read_jsonl(tmp_path / "d.jsonl"))
    with pytest.raises(FileNotFoundError, match=r"JSON-lines file '.*missing.jsonl' does not exist"):
        read_jsonl(tmp_path / "missing.jsonl")  # raised by the call, before any iteration
    with pytest.raises(InputError, match=r"is a directory; pass a JSON-lines file"):
        read_jsonl(tmp_path)
    assert issubclass(InputError, ValueError)


# ----------------------------------------------------------------------------- expand_inputs
def test_expand_inputs_groups_files_and_folders(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for name in ("b.parquet", "a.PQ", "c.ndjson", "skip.txt"):
        (d / name).write_text("")
    (tmp_path / "x.csv").write_text("")
    got = expand_inputs([d, str(tmp_path / "x.csv")])
    names = {k: [p.rsplit("/", 1)[1] for p in v] for k, v in got.items()}
    assert names == {"parquet": ["a.PQ", "b.parquet"], "json": ["c.ndjson"], "csv": ["x.csv"]}
    assert all(p.startswith("/") for v in got.values() for p in v)


def test_expand_inputs_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(InputError, match=r"^inputs is empty"):
        expand_inputs([])
    with pytest.raises(FileNotFoundError, match=r"input folder '.*empty' holds no \[.*\] files"):
        expand_inputs(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match=r"input '.*nope.csv' does not exist \(looked in"):
        expand_inputs(str(tmp_path / "nope.csv"))
    with pytest.raises(InputError, match=r"has suffix '.txt'; valid suffixes are \["):
        expand_inputs([tmp_path / "x.txt"])
