"""Bad input fails loudly (issue 10, "Nothing silently wrong").

A mistyped labels path, a broken CSV, empty input and labels that print alike
each raise a message naming what was wrong, and most of them before any model
is loaded: those tests pass ``--model`` a folder that does not exist, so
reaching the model would fail with a different error.
"""

from __future__ import annotations

import io
import json

import pytest

from judge import LabelError
from judge.cli import main
from judge.labels import check_distinguishable, visible_form

NO_MODEL = "/nonexistent/judge-test-model"  # loading it would fail: errors below must come first


def predict(*args):
    return main(["predict", "--model", NO_MODEL, *args])


# ------------------------------------------------------------------ --labels
@pytest.mark.parametrize("spec", ["labls.txt", "labels.json", "data/labels", "./labels"])
def test_missing_labels_file_is_an_error_not_a_label(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match=rf"--labels '{spec}' looks like a file path but there is no such file"):
        predict("--labels", spec)


def test_comma_list_with_a_suffix_is_labels(tmp_path, monkeypatch, capsys):
    from judge.io import read_labels

    monkeypatch.chdir(tmp_path)
    assert read_labels("report.pdf,notes.txt") == ["report.pdf", "notes.txt"]
    assert read_labels("billing refund/return,other") == ["billing refund/return", "other"]


def test_single_label_is_an_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match=r"gave a single label 'positive'; a classifier needs at least two"):
        predict("--labels", "positive")
    (tmp_path / "one.txt").write_text("only\n")
    with pytest.raises(SystemExit, match=r"file 'one.txt' gave a single label 'only'"):
        predict("--labels", "one.txt")


def test_labels_file_problems(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.txt").write_text("\n  \n")
    with pytest.raises(SystemExit, match=r"--labels file 'empty.txt' gave no labels"):
        predict("--labels", "empty.txt")
    (tmp_path / "bad.json").write_text('["a", "b",]')
    with pytest.raises(SystemExit, match=r"'bad.json' is not valid JSON \(.* at line 1, column \d+\)"):
        predict("--labels", "bad.json")
    (tmp_path / "obj.json").write_text('{"a": 1}')
    with pytest.raises(SystemExit, match=r"holds a JSON dict, not a list"):
        predict("--labels", "obj.json")
    (tmp_path / "num.json").write_text('["a", 2]')
    with pytest.raises(SystemExit, match=r"entry 1 of --labels file 'num.json' is a int \(2\)"):
        predict("--labels", "num.json")
    (tmp_path / "dir").mkdir()
    with pytest.raises(SystemExit, match=r"--labels 'dir' is a directory"):
        predict("--labels", "dir")


def test_labels_file_bom_is_not_part_of_the_first_label(tmp_path):
    from judge.io import read_labels

    path = tmp_path / "labels.txt"
    path.write_bytes("\ufeffyes\nno\n".encode())
    assert read_labels(str(path)) == ["yes", "no"]


def test_lookalike_labels_in_a_file_are_refused(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_text("caf\u00e9\ncafe\u0301\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"Labels 0 'caf\\xe9' and 1 'cafe\\u0301' both print as 'café'"):
        predict("--labels", str(path))


# ------------------------------------------------------------------ texts
def test_empty_stdin_is_an_error(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(SystemExit, match=r"the input \(stdin\) is empty"):
        predict("--labels", "a,b")
    monkeypatch.setattr("sys.stdin", io.StringIO("\n   \n"))
    with pytest.raises(SystemExit, match=r"the input \(stdin\) is empty"):
        predict("--labels", "a,b")


def test_header_only_csv_is_an_error(tmp_path):
    (tmp_path / "in.csv").write_text("id,text\n")
    with pytest.raises(SystemExit, match=r"has a header \(\['id', 'text'\]\) but no rows; there is nothing to classify"):
        predict("--labels", "a,b", "--input", str(tmp_path / "in.csv"))
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(SystemExit, match=r"the input '.*empty.csv' is empty"):
        predict("--labels", "a,b", "--input", str(tmp_path / "empty.csv"))


def test_unterminated_quote_is_reported_with_its_line(tmp_path):
    body = "id,text\n1,fine\n2,\"this quote never closes\n3,swallowed\n4,also swallowed\n"
    (tmp_path / "in.csv").write_text(body)
    with pytest.raises(SystemExit, match=r"unterminated quote: the field opened on line 3 runs to the end of the "
                                         r"file \(line 5\)"):
        predict("--labels", "a,b", "--input", str(tmp_path / "in.csv"))


def test_csv_junk_after_quote_ragged_rows_and_empty_cells(tmp_path):
    cases = {
        'id,text\n1,"quoted"junk\n': r"line 2 of .* is not valid CSV \(',' expected after '\"'\)",
        "id,text\n1,ok\n2,a, b\n": r"line 3 of .* has 3 fields but the header has 2",
        "id,text\n1,ok\n2\n": r"line 3 of .* has 1 fields but the header has 2",
        "id,text\n1,ok\n2,  \n": r"line 3 of .* has an empty 'text' cell",
    }
    for body, message in cases.items():
        (tmp_path / "in.csv").write_text(body)
        with pytest.raises(SystemExit, match=message):
            predict("--labels", "a,b", "--input", str(tmp_path / "in.csv"))


def test_multiline_quoted_field_keeps_line_numbers(tmp_path):
    from judge.io import InputError, read_texts

    body = 'text\n"two\nlines"\n"x""y"\n'
    assert read_texts(io.StringIO(body), column="text", fmt="csv") == ["two\nlines", 'x"y']
    with pytest.raises(InputError, match=r"^line 4 of the input \(stdin\) has an empty 'text' cell"):
        read_texts(io.StringIO('text\n"two\nlines"\n""\n'), column="text", fmt="csv")


def test_jsonl_bad_records(tmp_path):
    for body, message in {'{"text": 3}\n': r"line 1 of the input has a int 'text' field \(3\), not a string",
                          '"ok"\n{"text": null}\n': r"line 2 of the input has a NoneType 'text' field",
                          '"ok"\n"  "\n': r"line 2 of the input has an empty text",
                          '\n\n': r"the input '.*in.jsonl' is empty"}.items():
        (tmp_path / "in.jsonl").write_text(body)
        with pytest.raises(SystemExit, match=message):
            predict("--labels", "a,b", "--input", str(tmp_path / "in.jsonl"))


def test_non_utf8_input_is_an_error(tmp_path):
    (tmp_path / "in.txt").write_bytes(b"caf\xe9\n")
    with pytest.raises(SystemExit, match=r"is not UTF-8 \(byte 0xe9 at offset 3\); re-encode it as UTF-8"):
        predict("--labels", "a,b", "--input", str(tmp_path / "in.txt"))


def test_good_csv_with_bom_still_predicts(tiny_dir, tmp_path):
    (tmp_path / "in.csv").write_bytes('\ufefftext,id\n"card, late",1\n"x ""y""",2\n'.encode())
    out = tmp_path / "out.jsonl"
    assert main(["predict", "--labels", "card_arrival,exchange_rate", "--model", tiny_dir, "--input",
                 str(tmp_path / "in.csv"), "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in rows] == ["card, late", 'x "y"']


# ------------------------------------------------------------ check_distinguishable
@pytest.mark.parametrize("other, why", [
    ("cafe\u0301", r"Unicode normalization"),
    ("caf\u00e9\u200b", r"U\+200B ZERO WIDTH SPACE"),
    ("ca\u200cf\u00e9", r"U\+200C ZERO WIDTH NON-JOINER"),
    ("caf\u200d\u00e9", r"U\+200D ZERO WIDTH JOINER"),
    ("\u2060caf\u00e9", r"U\+2060 WORD JOINER"),
    ("\ufeffcaf\u00e9", r"U\+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ("ca\u00adf\u00e9", r"U\+00AD SOFT HYPHEN"),
    (" caf\u00e9 ", r"surrounding whitespace"),
    ("caf\u00e9\t", r"surrounding whitespace"),
])
def test_lookalike_labels_are_refused(other, why):
    labels = ["card_arrival", "caf\u00e9", "exchange_rate", other]
    with pytest.raises(LabelError, match=rf"Labels 1 'caf\\xe9' and 3 {__import__('re').escape(ascii(other))} "
                                         rf"both print as 'café' but are different strings \(.*{why}"):
        check_distinguishable(labels)
    with pytest.raises(LabelError, match=r"cannot tell them apart. Normalize labels with unicodedata.normalize"):
        check_distinguishable(labels)


def test_inner_whitespace_lookalikes_and_exact_duplicates():
    with pytest.raises(LabelError, match=r"Labels 0 'card arrival' and 1 'card\\xa0arrival' .*inner whitespace"):
        check_distinguishable(["card arrival", "card\u00a0arrival"])
    with pytest.raises(LabelError, match=r"Labels 0 'a' and 2 'a' are the same string"):
        check_distinguishable(["a", "b", "a"])


def test_distinct_labels_pass_and_case_or_script_is_kept_apart():
    check_distinguishable(["card_arrival", "card arrival", "Yes", "yes", "x2", "x\u00b2", "caf\u00e9", "cafe"])
    check_distinguishable([f"label_{i}" for i in range(20000)])


def test_lone_surrogate_label_is_refused():
    with pytest.raises(LabelError, match=r"Label 1 'ab\\udc80' holds a lone surrogate U\+DC80 at character 2, "
                                         r"which is not valid Unicode"):
        check_distinguishable(["ok", "ab\udc80"])
    with pytest.raises(LabelError, match=r"Label 0 is a int \(3\), not a str"):
        check_distinguishable([3, "a"])


def test_names_are_checked_too():
    check_distinguishable(["a", "b"], names=["alpha", "beta"])
    with pytest.raises(LabelError, match=r"The names shown for labels 0 \('a': 'caf\\xe9'\) and 1 "
                                         r"\('b': 'cafe\\u0301'\) both print as 'café' \(what the model is shown\)"):
        check_distinguishable(["a", "b"], names=["caf\u00e9", "cafe\u0301"])
    with pytest.raises(LabelError, match=r"names has 1 entries but there are 2 labels"):
        check_distinguishable(["a", "b"], names=["alpha"])


def test_visible_form_is_invariant_to_what_it_hides():
    base = "caf\u00e9 cr\u00e8me"
    for variant in ["cafe\u0301 cre\u0300me", " caf\u00e9  cr\u00e8me\n", "caf\u00e9\u00a0cr\u00e8me",
                    "c\u200ba\u200cf\u200d\u00e9 \u2060cr\u00e8me\ufeff", "caf\u00e9 cr\u00ad\u00e8me"]:
        assert visible_form(variant) == visible_form(base), ascii(variant)
