"""Tests of judge.datasets: official sizes on the real files, splits, sampling, errors.

The real data is looked up at $JUDGE_DATA_DIR, else at ../shared/datasets next to
the repository; tests that need it are skipped (with the path tried) when it is
absent. Error cases use small files written to tmp_path. Nothing touches the network.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import judge.datasets as jd
from judge.datasets import LabeledTexts, _common, load

_REPO_DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets"
DATA_DIR = Path(os.environ.get("JUDGE_DATA_DIR") or _REPO_DATA)

needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(),
    reason=f"benchmark data not found at {DATA_DIR} (set JUDGE_DATA_DIR to the folder holding banking77/, clinc150/, massive/, trec/)",
)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    """Each test starts without JUDGE_DATA_DIR; tests that need it set it."""
    monkeypatch.delenv("JUDGE_DATA_DIR", raising=False)


def _load(name, split, **options):
    return load(name, split, data_dir=DATA_DIR, **options)


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


# ---- public surface ------------------------------------------------------------------


def test_public_names():
    assert sorted(jd.__all__) == sorted(
        ["DATASETS", "LabeledTexts", "VALIDATION_FRACTION", "VALIDATION_SEED", "display_names", "load"]
    )
    assert jd.DATASETS == ("banking77", "clinc150", "massive", "trec", "icd10cm")
    assert (jd.VALIDATION_FRACTION, jd.VALIDATION_SEED) == (0.1, 0)


def test_import_does_not_import_heavy_modules():
    code = (
        "import sys, judge; before = set(sys.modules); import judge.datasets; "
        "print(sorted({'pandas', 'datasets', 'numpy'} & (set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == "[]"


# ---- official sizes on the real files --------------------------------------------------

SIZES = [
    ("banking77", {}, {"train": 9003, "validation": 1000, "test": 3080}, 77, 77),
    ("clinc150", {}, {"train": 15000, "validation": 3000, "test": 4500}, 150, 150),
    (
        "clinc150",
        {"include_oos": True},
        {"train": 15100, "validation": 3100, "test": 5500},
        151,
        151,
    ),
    ("trec", {}, {"train": 4907, "validation": 545, "test": 500}, 6, 6),
    ("trec", {"granularity": "fine"}, {"train": 4907, "validation": 545, "test": 500}, 50, None),
    ("massive", {}, {"train": 11514, "validation": 2033, "test": 2974}, 60, None),
]


@needs_data
@pytest.mark.parametrize(("name", "options", "sizes", "n_names", "n_present"), SIZES)
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_official_sizes(name, options, sizes, n_names, n_present, split):
    data = _load(name, split, **options)
    assert isinstance(data, LabeledTexts)
    assert (data.name, data.split) == (name, split)
    assert len(data) == len(data.texts) == len(data.labels) == sizes[split]
    assert len(data.label_names) == n_names
    assert set(data.labels) <= set(data.label_names)
    if n_present is not None:
        assert len(set(data.labels)) == n_present
    assert all(isinstance(t, str) and t for t in data.texts)


@needs_data
def test_carved_train_plus_validation_is_the_official_train():
    assert len(_load("banking77", "train")) + len(_load("banking77", "validation")) == 10_003
    assert len(_load("trec", "train")) + len(_load("trec", "validation")) == 5_452


@needs_data
def test_clinc_oos_counts():
    for split, (in_scope, oos) in {
        "train": (15000, 100),
        "validation": (3000, 100),
        "test": (4500, 1000),
    }.items():
        data = _load("clinc150", split, include_oos=True)
        counts = Counter(data.labels)
        assert counts["oos"] == oos
        assert len(data) - counts["oos"] == in_scope
        assert data.label_names[-1] == "oos"
        assert data.labels[:in_scope] == _load("clinc150", split).labels


@needs_data
def test_label_names_canonical_order():
    banking = _load("banking77", "test")
    categories = json.loads((DATA_DIR / "banking77" / "categories.json").read_text())
    assert banking.label_names == tuple(categories)
    assert banking.label_names[0] == "card_arrival"
    domains = json.loads((DATA_DIR / "clinc150" / "domains.json").read_text())
    clinc = _load("clinc150", "test")
    assert clinc.label_names == tuple(i for intents in domains.values() for i in intents)
    assert _load("trec", "test").label_names == ("ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM")
    fine = _load("trec", "test", granularity="fine")
    assert fine.label_names[:3] == ("ABBR:abb", "ABBR:exp", "ENTY:animal")
    assert "NUM:date" in fine.label_names
    assert len(set(fine.labels)) == 42
    massive = _load("massive", "test")
    assert massive.label_names[:2] == ("datetime_query", "iot_hue_lightchange")


@needs_data
def test_massive_label_names_match_the_file_ids():
    ids = {}
    with (DATA_DIR / "massive" / "train.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            ids[row["label"]] = row["label_text"]
    assert tuple(ids[i] for i in range(60)) == _load("massive", "train").label_names
    assert set(_load("massive", "train").label_names) - set(
        _load("massive", "validation").labels
    ) == {"audio_volume_other"}
    assert set(_load("massive", "train").label_names) - set(_load("massive", "test").labels) == {
        "cooking_query"
    }


@needs_data
def test_trec_texts_labels_and_encoding():
    test = _load("trec", "test")
    assert test.texts[0] == "How far is it from Denver to Aspen ?"
    assert test.labels[0] == "NUM"
    assert _load("trec", "test", granularity="fine").labels[0] == "NUM:dist"
    fine = _load("trec", "train", granularity="fine")
    coarse = _load("trec", "train")
    assert fine.texts == coarse.texts
    assert tuple(label.split(":")[0] for label in fine.labels) == coarse.labels
    both = _load("trec", "train").texts + _load("trec", "validation").texts
    non_ascii = [t for t in both if not t.isascii()]
    assert non_ascii == [
        "Which city has the oldest relationship as a sister\xf0city with Los Angeles ?"
    ]


@needs_data
def test_val_alias_and_case_insensitive_name():
    assert load("CLINC150", "val", data_dir=DATA_DIR) == _load("clinc150", "validation")
    assert load("Banking77", "val", data_dir=str(DATA_DIR)).split == "validation"


# ---- carved validation splits --------------------------------------------------------


def _file_rows(name):
    if name == "banking77":
        with (DATA_DIR / "banking77" / "train.csv").open(encoding="utf-8", newline="") as handle:
            return Counter((r["text"], r["category"]) for r in csv.DictReader(handle))
    lines = (DATA_DIR / "trec" / "train_5500.label").read_text(encoding="latin-1").splitlines()
    return Counter((line.split(" ", 1)[1], line.split(" ", 1)[0]) for line in lines)


@needs_data
@pytest.mark.parametrize("name", ["banking77", "trec"])
def test_carved_validation_is_disjoint_deterministic_and_stratified(name):
    options = {"granularity": "fine"} if name == "trec" else {}
    train = _load(name, "train", **options)
    val = _load(name, "validation", **options)
    assert val == _load(name, "validation", **options)  # deterministic
    rows_train = Counter(zip(train.texts, train.labels, strict=True))
    rows_val = Counter(zip(val.texts, val.labels, strict=True))
    assert rows_train + rows_val == _file_rows(name)  # a partition of the train file
    full = Counter(train.labels) + Counter(val.labels)
    n_val = round(0.1 * sum(full.values()))
    assert len(val) == n_val
    for label, count in full.items():  # proportional: within one row of the exact share
        assert abs(Counter(val.labels)[label] - n_val * count / sum(full.values())) < 1
    if name == "banking77":
        assert set(val.labels) == set(train.labels) == set(train.label_names)


@needs_data
def test_trec_validation_rows_do_not_depend_on_granularity():
    coarse = _load("trec", "validation")
    fine = _load("trec", "validation", granularity="fine")
    assert coarse.texts == fine.texts


def test_carve_matches_a_hand_count():
    train, val = _common.carve_validation(["a"] * 10 + ["b"] * 20 + ["c"] * 5)
    assert len(val) == 4  # round(3.5) -> 4 (banker's rounding to even)
    labels = ["a"] * 10 + ["b"] * 20 + ["c"] * 5
    assert Counter(labels[i] for i in val) in (
        Counter({"a": 1, "b": 2, "c": 1}),
        Counter({"a": 1, "b": 3}),
        Counter({"a": 2, "b": 2}),
    )
    assert sorted(train + val) == list(range(35))


# ---- LabeledTexts and sample() -------------------------------------------------------


def _toy(labels, names=None):
    names = tuple(dict.fromkeys(labels)) if names is None else names
    return LabeledTexts(
        texts=tuple(f"text {i}" for i in range(len(labels))),
        labels=tuple(labels),
        label_names=names,
        name="toy",
        split="test",
    )


def test_labeled_texts_basics():
    data = _toy(["b", "a", "b"], names=("a", "b", "c"))
    assert len(data) == 3
    assert data.indices == (0, 1, 2)
    assert repr(data) == "LabeledTexts(name='toy', split='test', n_samples=3, n_labels=3)"
    frame = data.to_pandas()
    assert list(frame.columns) == ["text", "label"]
    assert list(frame["label"]) == ["b", "a", "b"]
    assert frame.index.name == "index"
    with pytest.raises(AttributeError):
        data.texts = ()  # frozen
    import pickle

    assert pickle.loads(pickle.dumps(data)) == data
    from_lists = LabeledTexts(["x"], ["a"], ["a"], "toy", "test")
    assert from_lists.texts == ("x",) and from_lists.label_names == ("a",)


def test_labeled_texts_rejects_inconsistent_fields():
    with pytest.raises(ValueError, match=r"got 2 texts, 1 labels and 2 indices"):
        LabeledTexts(("x", "y"), ("a",), ("a",), "toy", "test")
    with pytest.raises(ValueError, match=r"labels \['z'\] are not in label_names"):
        LabeledTexts(("x",), ("z",), ("a",), "toy", "test")
    with pytest.raises(ValueError, match=r"must be unique, got duplicates \['a'\]"):
        LabeledTexts(("x",), ("a",), ("a", "a"), "toy", "test")


def test_sample_is_deterministic_and_maps_back():
    data = _toy(["a"] * 50 + ["b"] * 30 + ["c"] * 15 + ["d"] * 5)
    first, again, other = data.sample(20), data.sample(20, seed=0), data.sample(20, seed=1)
    assert first == again
    assert first.indices != other.indices
    assert len(first) == 20 == len(set(first.indices))
    assert list(first.indices) == sorted(first.indices)
    assert first.texts == tuple(data.texts[i] for i in first.indices)
    assert first.labels == tuple(data.labels[i] for i in first.indices)
    assert first.label_names == data.label_names
    assert Counter(first.labels) == Counter({"a": 10, "b": 6, "c": 3, "d": 1})
    # a sample of a sample still points at the original rows
    smaller = first.sample(8, seed=3)
    assert set(smaller.indices) <= set(first.indices)
    assert smaller.texts == tuple(data.texts[i] for i in smaller.indices)


def test_sample_with_fewer_rows_than_labels_takes_distinct_labels():
    data = _toy([label for label in "abcdefghij" for _ in range(4)])
    small = data.sample(3, seed=5)
    assert len(set(small.labels)) == 3
    assert data.sample(len(data)).indices == data.indices


@needs_data
def test_sample_covers_labels_on_real_test_sets():
    banking = _load("banking77", "test")  # sorted by label: the first 100 rows cover 3 labels
    assert len(set(banking.labels[:100])) == 3
    sample = banking.sample(100, seed=0)
    assert len(set(sample.labels)) == 77
    assert sample == banking.sample(100, seed=0)
    assert set(Counter(sample.labels).values()) <= {1, 2}
    clinc = _load("clinc150", "test", include_oos=True)
    sample = clinc.sample(300)
    assert len(set(sample.labels)) == 151
    assert Counter(sample.labels)["oos"] > Counter(sample.labels)["alarm_set"]  # 1000 vs 30 rows
    assert sample.texts == tuple(clinc.texts[i] for i in sample.indices)


@settings(max_examples=100, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=12),
    data=st.data(),
)
def test_sample_allocation_is_proportional(counts, data):
    labels = [f"l{k}" for k, c in enumerate(counts) for _ in range(c)]
    total, n_labels = len(labels), len(counts)
    n = data.draw(st.integers(min_value=1, max_value=total))
    seed = data.draw(st.integers(min_value=0, max_value=2**32))
    sample = _toy(labels).sample(n, seed=seed)
    got = [Counter(sample.labels)[f"l{k}"] for k in range(n_labels)]
    assert len(sample) == n == len(set(sample.indices)) == sum(got)
    quotas = [n * count / total for count in counts]
    for have, count, quota in zip(got, counts, quotas, strict=True):
        assert have <= count
        if n >= n_labels:
            assert 1 <= have < max(quota, 1) + 1
        else:
            assert abs(have - quota) < 1
    # a larger label never gets fewer rows than a smaller one (up to rounding: one row)
    for i in range(n_labels):
        for j in range(n_labels):
            if counts[i] > counts[j]:
                assert got[i] >= got[j] - 1


def test_allocation_matches_hand_counts():
    assert _common._allocate([50, 30, 15, 5], 20, [0, 0, 0, 0], True) == [10, 6, 3, 1]
    # quotas 18.2, 0.9, 0.9 -> the two small labels are lifted to one, the big one gets 18
    assert _common._allocate([200, 10, 10], 20, [0, 0, 0], True) == [18, 1, 1]
    # without the minimum the small labels may get nothing
    assert _common._allocate([200, 5, 5], 20, [0, 0.5, 0.1], False) == [19, 0, 1]
    assert _common._allocate([200, 5, 5], 2, [0, 0.5, 0.1], True) == [2, 0, 0]


@pytest.mark.parametrize("n", [0, -1, 11, 2.5, True, "3"])
def test_sample_rejects_bad_n(n):
    with pytest.raises(ValueError, match=r"integer n between 1 and 10 .*got n="):
        _toy(["a"] * 10).sample(n)


def test_sample_rejects_bad_seed():
    with pytest.raises(ValueError, match=r"integer seed, got seed='x'"):
        _toy(["a"] * 10).sample(2, seed="x")


# ---- directory resolution ------------------------------------------------------------

TINY_TREC = b"NUM:date When was Ozzy Osbourne born ?\nHUM:ind Who wrote Hamlet ?\n"


def test_env_var_is_used_when_data_dir_is_not_given(tmp_path, monkeypatch):
    _write(tmp_path / "trec" / "TREC_10.label", TINY_TREC)
    monkeypatch.setenv("JUDGE_DATA_DIR", str(tmp_path))
    data = load("trec")
    assert data.texts == ("When was Ozzy Osbourne born ?", "Who wrote Hamlet ?")
    assert data.labels == ("NUM", "HUM")


def test_data_dir_wins_over_env_var(tmp_path, monkeypatch):
    _write(tmp_path / "a" / "trec" / "TREC_10.label", TINY_TREC)
    _write(tmp_path / "b" / "trec" / "TREC_10.label", b"LOC:city What city is this ?\n")
    monkeypatch.setenv("JUDGE_DATA_DIR", str(tmp_path / "a"))
    assert load("trec", data_dir=tmp_path / "b").labels == ("LOC",)
    assert load("trec").labels == ("NUM", "HUM")


@needs_data
def test_env_var_pointing_at_the_real_data(monkeypatch):
    monkeypatch.setenv("JUDGE_DATA_DIR", str(DATA_DIR))
    assert len(load("massive", "validation")) == 2033


def test_without_data_dir_or_env_the_hub_fallback_error_says_how_to_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # "datasets" not installed
    with pytest.raises(
        FileNotFoundError, match=r"No local copy of banking77.*pass data_dir= or set JUDGE_DATA_DIR"
    ):
        load("banking77")


def test_hub_failure_is_reported_with_the_fix(monkeypatch):
    class Offline:
        @staticmethod
        def load_dataset(*args, **kwargs):
            raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", Offline)
    with pytest.raises(
        FileNotFoundError,
        match=r"loading 'clinc_oos' \(config 'plus', split 'test'\).*ConnectionError: no network.*JUDGE_DATA_DIR",
    ):
        load("clinc150")


def test_hub_rows_are_converted(monkeypatch):
    class Names:
        def __init__(self, names):
            self.names = names

    class Split(dict):
        features = {
            "coarse_label": Names(["ABBR", "NUM"]),
            "fine_label": Names(["abb", "NUM:date"]),
        }

    class Hub:
        @staticmethod
        def load_dataset(hub_id, config, split):
            assert (hub_id, config, split) == ("CogComp/trec", None, "test")
            return Split(text=["What is NASA ?", "When ?"], coarse_label=[0, 1], fine_label=[0, 1])

    monkeypatch.setitem(sys.modules, "datasets", Hub)
    data = load("trec", granularity="fine")
    assert data.labels == ("ABBR:abb", "NUM:date")
    assert data.texts == ("What is NASA ?", "When ?")


# ---- errors --------------------------------------------------------------------------


def test_unknown_dataset():
    with pytest.raises(
        ValueError,
        match=r"Unknown dataset 'imdb'; expected one of 'banking77', 'clinc150', 'massive', 'trec'",
    ):
        load("imdb")


@pytest.mark.parametrize("name", ["banking77", "clinc150", "massive", "trec"])
def test_unknown_split(name, tmp_path):
    with pytest.raises(
        ValueError,
        match=rf"Unknown split 'dev' for {name}; expected one of 'train', 'validation', 'test' \('val' is accepted",
    ):
        load(name, "dev", data_dir=tmp_path)


def test_unknown_option():
    with pytest.raises(
        TypeError, match=r"Unknown option\(s\) granularity for banking77; its options are: none"
    ):
        load("banking77", granularity="fine")
    with pytest.raises(
        TypeError, match=r"Unknown option\(s\) oos for clinc150; its options are: include_oos"
    ):
        load("clinc150", oos=True)


def test_bad_option_values(tmp_path):
    with pytest.raises(
        ValueError, match=r"Unknown granularity 'medium' for trec; expected 'coarse'.*or 'fine'"
    ):
        load("trec", granularity="medium", data_dir=tmp_path)
    with pytest.raises(ValueError, match=r"include_oos must be True or False, got 'yes'"):
        load("clinc150", include_oos="yes", data_dir=tmp_path)


def test_missing_data_dir(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(
        FileNotFoundError,
        match=r"Dataset directory '.*nowhere' \(from data_dir='.*nowhere'\) does not exist.*set JUDGE_DATA_DIR",
    ):
        load("banking77", data_dir=missing)


def test_missing_env_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("JUDGE_DATA_DIR", str(tmp_path / "gone"))
    with pytest.raises(FileNotFoundError, match=r"\(from JUDGE_DATA_DIR='.*gone'\) does not exist"):
        load("massive")


def test_missing_dataset_folder(tmp_path):
    with pytest.raises(
        FileNotFoundError,
        match=r"No clinc150 folder in .*: expected '.*clinc150'; pass data_dir= or set JUDGE_DATA_DIR .*not to a dataset folder itself",
    ):
        load("clinc150", data_dir=tmp_path)


@pytest.mark.parametrize(
    ("name", "split", "present", "missing"),
    [
        ("banking77", "test", {"categories.json": '["a"]'}, "test.csv"),
        ("banking77", "validation", {"categories.json": '["a"]'}, "train.csv"),
        ("banking77", "test", {"test.csv": "text,category\n"}, "categories.json"),
        ("clinc150", "test", {"domains.json": '{"d": ["a"]}'}, "data_full.json"),
        ("massive", "validation", {"train.jsonl": ""}, "validation.jsonl"),
        ("trec", "train", {"TREC_10.label": ""}, "train_5500.label"),
    ],
)
def test_missing_file(tmp_path, name, split, present, missing):
    for filename, content in present.items():
        _write(tmp_path / name / filename, content)
    with pytest.raises(
        FileNotFoundError,
        match=rf"Missing file '.*{name}.{missing}': the {name} loader expects '{missing}'.*point data_dir \(or JUDGE_DATA_DIR\)",
    ):
        load(name, split, data_dir=tmp_path)


def test_banking77_csv_without_expected_columns(tmp_path):
    _write(tmp_path / "banking77" / "categories.json", '["card_arrival"]')
    _write(tmp_path / "banking77" / "test.csv", "query,intent\nWhere is my card?,card_arrival\n")
    with pytest.raises(
        ValueError,
        match=r"Malformed test.csv \(.*\) at line 1: expected a CSV header with columns 'text' and 'category', got \['query', 'intent'\]",
    ):
        load("banking77", data_dir=tmp_path)


def test_banking77_bad_rows(tmp_path):
    _write(tmp_path / "banking77" / "categories.json", '["card_arrival"]')
    path = _write(tmp_path / "banking77" / "test.csv", "text,category\nok,card_arrival\nno label\n")
    with pytest.raises(
        ValueError, match=r"test.csv .* at line 3: expected 2 fields \(text, category\), got 1"
    ):
        load("banking77", data_dir=tmp_path)
    path.write_text("text,category\nok,card_arrival\nhi,greeting\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"at line 3: category 'greeting' is not one of the 1 in categories.json"
    ):
        load("banking77", data_dir=tmp_path)
    path.write_text("text,category\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"header but no rows"):
        load("banking77", data_dir=tmp_path)


def test_bad_json(tmp_path):
    _write(tmp_path / "banking77" / "categories.json", '["card_arrival",\n  oops]')
    with pytest.raises(
        ValueError,
        match=r"Malformed JSON in '.*categories.json' at line 2, column 3: .*unmodified upstream copy",
    ):
        load("banking77", data_dir=tmp_path)
    _write(tmp_path / "banking77" / "categories.json", '{"a": 1}')
    with pytest.raises(
        ValueError, match=r"expected a non-empty JSON list of label strings, got dict"
    ):
        load("banking77", data_dir=tmp_path)


def test_clinc150_malformed(tmp_path):
    folder = tmp_path / "clinc150"
    _write(folder / "domains.json", json.dumps({"utility": ["timer"]}))
    path = _write(folder / "data_full.json", "[1, 2")
    with pytest.raises(ValueError, match=r"Malformed JSON in '.*data_full.json' at line 1"):
        load("clinc150", data_dir=tmp_path)
    path.write_text(json.dumps({"train": []}))
    with pytest.raises(
        ValueError, match=r"data_full.json .* at top level: no 'test' key \(found \['train'\]\)"
    ):
        load("clinc150", data_dir=tmp_path)
    path.write_text(json.dumps({"test": [["set a timer", "timer"], ["hello"]]}))
    with pytest.raises(
        ValueError,
        match=r"at entry 'test'\[1\]: expected a \[text, label\] pair of strings, got \['hello'\]",
    ):
        load("clinc150", data_dir=tmp_path)
    path.write_text(json.dumps({"test": [["hi", "greet"]]}))
    with pytest.raises(
        ValueError,
        match=r"entry 'test'\[0\]: label 'greet' is not one of the intents in domains.json",
    ):
        load("clinc150", data_dir=tmp_path)
    path.write_text(json.dumps({"test": [["hi", "timer"]], "oos_test": [["x", "timer"]]}))
    with pytest.raises(ValueError, match=r"entry 'oos_test'\[0\]: label 'timer' is not 'oos'"):
        load("clinc150", data_dir=tmp_path, include_oos=True)
    _write(folder / "domains.json", json.dumps(["timer"]))
    with pytest.raises(
        ValueError,
        match=r"domains.json .* at top level: expected a JSON object mapping each domain",
    ):
        load("clinc150", data_dir=tmp_path)


def test_trec_line_without_label_shape(tmp_path):
    _write(tmp_path / "trec" / "TREC_10.label", b"NUM:date When ?\nWho wrote Hamlet ?\n")
    with pytest.raises(
        ValueError,
        match=r"Malformed TREC_10.label \('.*TREC_10.label'\) at line 2: expected 'COARSE:fine question text'.*got 'Who wrote Hamlet \?'",
    ):
        load("trec", data_dir=tmp_path)
    _write(tmp_path / "trec" / "TREC_10.label", b"NUM:date When ?\nNUM:year When ?\n")
    with pytest.raises(
        ValueError, match=r"at line 2: label 'NUM:year' is not one of the 50 TREC fine labels"
    ):
        load("trec", data_dir=tmp_path)


def test_trec_reads_latin1(tmp_path):
    _write(
        tmp_path / "trec" / "TREC_10.label", b"LOC:city Which sister\xf0city ?\r\n\nHUM:ind Who ?\n"
    )
    data = load("trec", data_dir=tmp_path, granularity="fine")
    assert data.texts == ("Which sister\xf0city ?", "Who ?")
    assert data.labels == ("LOC:city", "HUM:ind")


def test_massive_malformed(tmp_path):
    good = '{"id":"0","label":48,"text":"wake me up","label_text":"alarm_set"}\n'
    path = _write(tmp_path / "massive" / "test.jsonl", good + '{"id": "1", "text": \n')
    with pytest.raises(ValueError, match=r"Malformed test.jsonl \(.*\) at line 2: not valid JSON"):
        load("massive", data_dir=tmp_path)
    path.write_text(good + '{"id":"1","label":0,"text":"hi","label_text":"greet"}\n')
    with pytest.raises(
        ValueError, match=r"at line 2: label_text 'greet' is not one of the 60 MASSIVE intents"
    ):
        load("massive", data_dir=tmp_path)
    path.write_text(good + '{"id":"1","label":3,"text":"hi","label_text":"alarm_set"}\n')
    with pytest.raises(
        ValueError,
        match=r"at line 2: label id 3 does not match label_text 'alarm_set' \(official id 48\)",
    ):
        load("massive", data_dir=tmp_path)
    path.write_text('["wake me up", "alarm_set"]\n')
    with pytest.raises(
        ValueError, match=r"at line 1: expected an object with string 'text' and 'label_text'"
    ):
        load("massive", data_dir=tmp_path)


def test_display_names():
    assert jd.display_names("trec", ["NUM:dist", "ABBR"]) == {"NUM:dist": "number: distance", "ABBR": "abbreviation"}
    assert jd.display_names("massive", ["alarm_set"]) == {}


# ---- ICD-10-CM (from the installed simple-icd-10-cm package) -----------------------------


@pytest.fixture(scope="module")
def icd():
    pytest.importorskip("simple_icd_10_cm", reason="ICD-10-CM data comes with simple-icd-10-cm ([icd] extra)")
    from judge.datasets import icd10cm

    return icd10cm


def test_icd10cm_codes_titles_and_terms_from_the_real_files(icd):
    t = icd.titles()
    assert len(t) == 74719  # billable codes of the April 2026 code list
    assert t["A00.0"] == "Cholera due to Vibrio cholerae 01, biovar cholerae"
    # a code that takes a 7th character: the parent's title and the character's meaning
    assert t["S72.001A"] == ("Fracture of unspecified part of neck of right femur, initial encounter for "
                             "closed fracture")
    assert "S72.001" not in t and "A00" not in t  # not billable: they have children
    assert "S06.6X7A" in t and "S06.6X7S" not in t  # the code list restricts some 7th characters
    val, test = jd.load("icd10cm", "validation"), jd.load("icd10cm", "val")
    assert val.texts == test.texts  # 'val' means 'validation'
    test = jd.load("icd10cm", "test")
    assert set(val.texts).isdisjoint(test.texts) and 8000 < len(val) + len(test) < 9000
    rows = dict(zip(val.texts + test.texts, val.labels + test.labels))
    assert rows["Classical cholera"] == "A00.0" and rows["Cholera eltor"] == "A00.1"
    for text, code in rows.items():  # no term equals its own code's title
        assert text.lower() != t[code].lower()
    assert val.label_names == tuple(t) and len(set(val.label_names)) == len(val.label_names)
    assert jd.display_names("icd10cm", ["A00.1", "nope"]) == {"A00.1": t["A00.1"]}
    with pytest.raises(ValueError, match="Unknown split 'train' for icd10cm"):
        jd.load("icd10cm", "train")
