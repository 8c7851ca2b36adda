"""coursekit/multi30k.py: the shipped Multi30k files, their reader and the contract's tokenizer."""
from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path

import pytest

from coursekit.multi30k import (SPLIT_SIZES, SPLITS, load_multi30k, multi30k_dir, tokenize_caption,
                                tokenized_multi30k)

REPO = Path(__file__).resolve().parents[2]
STEERING = REPO.parent / "shared" / "data" / "multi30k"


def test_the_repository_copy_is_found_and_holds_the_six_files():
    folder = multi30k_dir()
    assert folder == REPO / "data" / "multi30k"
    assert sorted(p.name for p in folder.glob("*.gz")) == sorted(f"{s}.{l}.gz" for s in SPLITS for l in ("de", "en"))


def test_each_file_matches_the_sha256_its_readme_states():
    readme = (REPO / "data" / "multi30k" / "README.md").read_text(encoding="utf-8")
    stated = dict(re.findall(r"\| (\S+\.gz) \| ([0-9a-f]{64}) \|", readme))
    assert len(stated) == 6
    for name, digest in stated.items():
        assert hashlib.sha256((REPO / "data" / "multi30k" / name).read_bytes()).hexdigest() == digest, name


def test_byte_for_byte_the_steering_copy_when_present():
    if not STEERING.is_dir():
        pytest.skip("no steering copy of the data beside this clone")
    for source in STEERING.iterdir():
        assert (REPO / "data" / "multi30k" / source.name).read_bytes() == source.read_bytes(), source.name


@pytest.mark.parametrize("split", SPLITS)
def test_each_split_is_parallel_and_of_the_stated_size(split):
    pairs = load_multi30k(split)
    assert len(pairs) == SPLIT_SIZES[split]
    assert all(de.strip() and en.strip() for de, en in pairs)


def test_the_first_training_pair_is_the_files_first_lines():
    folder = multi30k_dir()
    first = [gzip.open(folder / f"train.{l}.gz", "rt", encoding="utf-8").readline().rstrip("\n") for l in ("de", "en")]
    assert load_multi30k("train")[0] == tuple(first)


def test_tokenizer_lower_cases_and_splits_punctuation():
    assert tokenize_caption("Ein Mädchen, im Park.") == ["ein", "mädchen", ",", "im", "park", "."]
    assert tokenize_caption("Two young, White males!") == ["two", "young", ",", "white", "males", "!"]
    assert tokenize_caption("  ") == []
    line = "Ein Hund (braun) läuft 3-mal über's Gras."
    assert tokenize_caption(line) == re.findall(r"\w+|[^\w\s]", line.lower())


def test_tokenized_splits_keep_line_alignment():
    src, tgt = tokenized_multi30k("val")
    pairs = load_multi30k("val")
    assert len(src) == len(tgt) == len(pairs)
    assert src[5] == tokenize_caption(pairs[5][0]) and tgt[5] == tokenize_caption(pairs[5][1])


def test_unknown_split_and_missing_folder_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown Multi30k split 'test'"):
        load_multi30k("test")
    import coursekit.multi30k as module

    monkeypatch.setattr(module, "BUNDLED_DATA", tmp_path / "none")
    monkeypatch.setattr(module, "__file__", str(tmp_path / "pkg" / "coursekit" / "multi30k.py"))
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="Multi30k is not here.*COURSE_DATA_DIR"):
        multi30k_dir()


def test_a_file_pair_of_different_lengths_is_refused(tmp_path):
    for lang, lines in (("de", "a\nb\n"), ("en", "a\n")):
        with gzip.open(tmp_path / f"val.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write(lines)
    with pytest.raises(ValueError, match="not a parallel pair"):
        load_multi30k("val", tmp_path)
