"""coursekit.data.yelp: load_yelp over every kind of source, bad rows, stratified subsets."""
import io
import sys
import tarfile
import warnings
from collections import Counter

import pytest

from coursekit.data import yelp
from coursekit.data import YelpFormatError, YelpSkippedRowsWarning, last_skipped_rows, load_yelp
from coursekit.data.yelp import write_yelp_csv

ROWS = [  # (stars 1..5, text as a person would type it)
    (1, 'Terrible.\nNever again, they said "sorry" twice.'),
    (2, "Meh"),
    (3, "It was fine, I guess."),
    (4, "Good food, slow service."),
    (5, "Loved it!\n\nFive stars."),
]


def _write(path, rows=ROWS):
    write_yelp_csv(path, rows)
    return path


def _folder(tmp_path, train=ROWS, test=ROWS[:2]):
    _write(tmp_path / "train.csv", train)
    _write(tmp_path / "test.csv", test)
    return tmp_path


def _tarball(tmp_path, train=ROWS, test=ROWS[:2], name="yelp_review_full_csv.tgz"):
    path = tmp_path / name
    with tarfile.open(path, "w:gz") as archive:
        for split, rows in (("readme", None), ("train", train), ("test", test)):
            if rows is None:
                data = b"about this data set\n"
                member = "yelp_review_full_csv/readme.txt"
            else:
                _write(tmp_path / f"_{split}.csv", rows)
                data = (tmp_path / f"_{split}.csv").read_bytes()
                (tmp_path / f"_{split}.csv").unlink()
                member = f"yelp_review_full_csv/{split}.csv"
            info = tarfile.TarInfo(member)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_written_format_is_the_yelp_format(tmp_path):
    raw = _write(tmp_path / "x.csv").read_text(encoding="utf-8")
    first = raw.split("\n")[0]
    assert first == '"1","Terrible.\\nNever again, they said ""sorry"" twice."'
    assert raw.count("\n") == len(ROWS)  # one physical line per review


def test_folder_round_trip(tmp_path):
    texts, labels = load_yelp(_folder(tmp_path), "train")
    assert labels == [0, 1, 2, 3, 4]
    assert texts == [text for _, text in ROWS]
    assert load_yelp(tmp_path, "test") == ([ROWS[0][1], ROWS[1][1]], [0, 1])


def test_single_csv_file_and_backslash_quote_escape(tmp_path):
    path = tmp_path / "reviews.csv"
    # the real files escape some quotes as backslash + doubled quote: \"" -> (csv) \" -> (decoded) "
    path.write_bytes(b'"5","He said \\""wow\\""\\nand left"\n"2","ok"\n')
    texts, labels = load_yelp(path)
    assert texts == ['He said "wow"\nand left', "ok"] and labels == [4, 1]


def test_tarball_is_streamed_not_unpacked(tmp_path):
    tarball = _tarball(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert load_yelp(tarball, "train") == ([t for _, t in ROWS], [0, 1, 2, 3, 4])
    assert load_yelp(tarball, "test")[1] == [0, 1]
    assert load_yelp(tmp_path, "train")[1] == [0, 1, 2, 3, 4]  # a folder holding the tarball
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_tarball_errors(tmp_path):
    broken = tmp_path / "broken.tgz"
    broken.write_bytes(b"this is not gzip")
    with pytest.raises(YelpFormatError, match="broken.tgz"):
        load_yelp(broken)
    other = tmp_path / "other"
    other.mkdir()
    incomplete = other / "incomplete.tgz"
    with tarfile.open(incomplete, "w:gz") as archive:
        info = tarfile.TarInfo("yelp_review_full_csv/test.csv")
        info.size = 0
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(YelpFormatError, match="no member yelp_review_full_csv/train.csv"):
        load_yelp(incomplete, "train")


def test_bad_row_in_tarball_names_member_and_line(tmp_path):
    tarball = _tarball(tmp_path, train=ROWS[:2] + [(9, "nine stars")])
    with pytest.raises(YelpFormatError, match=r"train\.csv, line 3: label must be 1\.\.5"):
        load_yelp(tarball, "train")


def _parquet(path, labels, texts):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"label": labels, "text": texts}), path)
    return path


def test_parquet_folder_and_file(tmp_path):
    folder = tmp_path / "yelp_review_full"
    folder.mkdir()
    _parquet(folder / "train-00000-of-00001.parquet", [4, 0, 2], ["great\\nplace", "bad", "fine"])
    _parquet(folder / "test-00000-of-00001.parquet", [1], ["meh"])
    assert load_yelp(folder, "train") == (["great\nplace", "bad", "fine"], [4, 0, 2])
    assert load_yelp(folder, "test") == (["meh"], [1])
    assert load_yelp(folder / "test-00000-of-00001.parquet") == (["meh"], [1])


def test_parquet_bad_rows(tmp_path):
    bad_label = _parquet(tmp_path / "a.parquet", [0, 5], ["x", "y"])
    with pytest.raises(YelpFormatError, match=r"a\.parquet, line 2: label must be 0\.\.4"):
        load_yelp(bad_label)
    empty_text = _parquet(tmp_path / "b.parquet", [0, 1], ["x", None])
    with pytest.raises(YelpFormatError, match="line 2: empty"):
        load_yelp(empty_text)
    with pytest.warns(YelpSkippedRowsWarning):
        assert load_yelp(empty_text, skip_bad_rows=True) == (["x"], [0])


def test_parquet_without_pyarrow_says_so(tmp_path, monkeypatch):
    path = tmp_path / "train-0.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import now fails as if not installed
    with pytest.raises(ImportError, match="pyarrow"):
        load_yelp(path)


BAD_ROWS = [
    (b'"0","zero stars"\n', "label must be 1..5"),
    (b'"6","six stars"\n', "label must be 1..5"),
    (b'"five","words"\n', "label must be 1..5"),
    (b'"3"\n', "expected 2 fields"),
    (b'"3","a","b"\n', "expected 2 fields"),
    (b'"3",""\n', "empty review text"),
    (b'"3","  \\n  "\n', "empty review text"),
    (b'"3","caf\xe9 latin-1"\n', "invalid UTF-8"),
    (b'"3","unclosed quote" trailing"\n', "broken CSV quoting"),
]


@pytest.mark.parametrize("bad, problem", BAD_ROWS)
def test_bad_row_raises_with_file_and_line(tmp_path, bad, problem):
    path = tmp_path / "train.csv"
    path.write_bytes(b'"1","fine row"\n"2","another fine row"\n' + bad + b'"5","after"\n')
    with pytest.raises(YelpFormatError) as caught:
        load_yelp(path)
    assert isinstance(caught.value, ValueError)
    assert str(path) in str(caught.value) and "line 3" in str(caught.value) and problem in str(caught.value)
    assert caught.value.line == 3


@pytest.mark.parametrize("bad, problem", BAD_ROWS)
def test_skip_bad_rows_reports_the_count(tmp_path, bad, problem):
    path = tmp_path / "train.csv"
    path.write_bytes(b'"1","fine row"\n' + bad + b'"2","middle"\n' + bad + b'"5","after"\n')
    with pytest.warns(YelpSkippedRowsWarning, match="skipped 2 bad row") as record:
        texts, labels = load_yelp(path, skip_bad_rows=True)
    assert (texts, labels) == (["fine row", "middle", "after"], [0, 1, 4])
    warning = record[0].message
    assert warning.count == 2 and [row.line for row in warning.rows] == [2, 4]
    assert problem in warning.rows[0].problem
    assert [row.line for row in last_skipped_rows()] == [2, 4]


def test_unclosed_quote_names_the_line_where_the_record_starts(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b'"1","ok"\n"2","never closed\n"3","swallowed"\n"4","after"\n')
    with pytest.raises(YelpFormatError, match=r"line 2: broken CSV quoting.*lines 2-3"):
        load_yelp(path)
    with pytest.warns(YelpSkippedRowsWarning):
        assert load_yelp(path, skip_bad_rows=True) == (["ok", "after"], [0, 3])


def test_byte_order_mark_is_ignored(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b'\xef\xbb\xbf"3","saved by a spreadsheet"\n')
    assert load_yelp(path) == (["saved by a spreadsheet"], [2])


def test_blank_lines_are_not_rows(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b'"3","one"\n\n"4","two"\n\n')
    assert load_yelp(path) == (["one", "two"], [2, 3])


def test_source_must_be_a_path():
    with pytest.raises(TypeError, match="source"):
        load_yelp(None)


def test_clean_load_reports_nothing_skipped(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_yelp(_folder(tmp_path), skip_bad_rows=True)
    assert last_skipped_rows() == []


def test_limit_is_balanced_deterministic_and_a_subset(tmp_path):
    rows = [(1 + i % 5, f"review number {i}") for i in range(500)]
    _folder(tmp_path, train=rows)
    all_texts, _ = load_yelp(tmp_path)
    texts, labels = load_yelp(tmp_path, limit=52, seed=1)
    assert len(texts) == 52
    assert sorted(Counter(labels).values()) == [10, 10, 10, 11, 11]
    assert set(texts) <= set(all_texts)
    assert [all_texts.index(t) for t in texts] == sorted(all_texts.index(t) for t in texts)  # file order kept
    assert load_yelp(tmp_path, limit=52, seed=1) == (texts, labels)
    assert load_yelp(tmp_path, limit=52, seed=2)[0] != texts
    for text, label in zip(texts, labels):
        assert int(text.split()[-1]) % 5 == label


def test_limit_with_unequal_classes_fills_from_the_others(tmp_path):
    rows = [(1, "rare a"), (1, "rare b")] + [(stars, f"{stars}-{i}") for stars in range(2, 6) for i in range(10)]
    _folder(tmp_path, train=rows)
    _, labels = load_yelp(tmp_path, limit=20)
    assert [Counter(labels)[c] for c in range(5)] == [2, 5, 5, 4, 4]
    assert len(load_yelp(tmp_path, limit=1000)[0]) == len(rows)


@pytest.mark.parametrize("kwargs, error", [
    (dict(split="validation"), ValueError), (dict(limit=0), ValueError), (dict(limit=2.5), ValueError),
    (dict(source="/no/such/folder"), FileNotFoundError),
])
def test_bad_arguments(kwargs, error):
    with pytest.raises(error):
        load_yelp(**kwargs)


def test_folder_without_data_and_wrong_file_type(tmp_path):
    with pytest.raises(FileNotFoundError, match="train.csv"):
        load_yelp(tmp_path)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(ValueError, match="expected a .csv"):
        load_yelp(other)


def test_synthetic_set_loads():
    texts, labels = load_yelp("synthetic")
    assert len(texts) == 8000 and set(labels) == {0, 1, 2, 3, 4}
    assert all(text.strip() for text in texts)
    assert not any("\\n" in text for text in texts) and any("\n" in text for text in texts)


def test_synthetic_without_the_data_folder_regenerates_the_same_set(monkeypatch):
    shipped = load_yelp("synthetic", "test")
    monkeypatch.setattr(yelp, "synthetic_dir", lambda: None)
    assert load_yelp("synthetic", "test") == shipped


def test_course_data_dir_overrides_where_synthetic_lives(tmp_path, monkeypatch):
    (tmp_path / "yelp_synthetic").mkdir()
    _folder(tmp_path / "yelp_synthetic")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert load_yelp("synthetic")[1] == [0, 1, 2, 3, 4]


from hypothesis import given, settings, strategies as st  # noqa: E402

_review_text = st.text(st.characters(blacklist_characters="\\", blacklist_categories=("Cs",)), min_size=1,
                       max_size=60).filter(lambda text: text.strip() and "\r" not in text)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 5), _review_text), min_size=1, max_size=8))
def test_any_text_survives_a_write_read_round_trip(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("roundtrip") / "train.csv"
    write_yelp_csv(path, rows)
    texts, labels = load_yelp(path)
    assert labels == [stars - 1 for stars, _ in rows]
    assert texts == [text for _, text in rows]
