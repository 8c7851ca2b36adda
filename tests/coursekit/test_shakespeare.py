"""coursekit.shakespeare: notebook 08's text, its 90/10 split and the character vocabulary."""
from __future__ import annotations

import hashlib
import math

import pytest

from coursekit import shakespeare
from coursekit.shakespeare import CharVocabulary, bits_per_char, load_shakespeare, shakespeare_path, split_text

SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"  # the char-rnn file


def test_the_shipped_file_is_the_char_rnn_file():
    path = shakespeare_path()
    assert path.parts[-3:] == ("data", "tinyshakespeare", "input.txt")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256
    text = load_shakespeare()
    assert len(text) == shakespeare.SHAKESPEARE_CHARS == 1_115_394
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")


def test_the_split_is_ninety_ten_by_characters():
    text = load_shakespeare()
    train, val = split_text(text)
    assert len(train) == int(0.9 * len(text)) == 1_003_854 and train + val == text
    assert split_text("abcdefghij") == ("abcdefghi", "j")
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError):
            split_text("abc", bad)


def test_the_character_vocabulary():
    vocabulary = CharVocabulary(load_shakespeare())
    assert len(vocabulary) == vocabulary.vocab_size == 65
    assert vocabulary.chars[0] == "\n" and vocabulary.chars[1] == " " and vocabulary.chars == sorted(vocabulary.chars)
    line = "O Romeo, Romeo! wherefore art thou Romeo?"
    assert vocabulary.decode(vocabulary.encode(line)) == line
    assert CharVocabulary("bca").encode("abc") == [0, 1, 2]
    with pytest.raises(KeyError, match="'é' is not in the vocabulary"):
        vocabulary.encode("café")
    with pytest.raises(ValueError):
        CharVocabulary("")


def test_bits_per_char_converts_nats_per_token():
    assert bits_per_char(math.log(2), 10, 10) == pytest.approx(1.0)
    assert bits_per_char(2.0, 50, 100) == pytest.approx(1.0 / math.log(2))   # a token covers 2 characters
    with pytest.raises(ValueError):
        bits_per_char(1.0, 1, 0)


def test_course_data_dir_overrides_and_a_missing_file_says_where(tmp_path, monkeypatch):
    (tmp_path / "tinyshakespeare").mkdir()
    (tmp_path / "tinyshakespeare" / "input.txt").write_text("Hello, world\n", encoding="utf-8")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert load_shakespeare() == "Hello, world\n"
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setattr(shakespeare, "__file__", str(tmp_path / "pkg" / "shakespeare.py"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="COURSE_DATA_DIR"):
        load_shakespeare()
    # a student's copy: the notebook's folder sits below the course folder that holds data/
    (tmp_path / "course" / "data" / "tinyshakespeare").mkdir(parents=True)
    (tmp_path / "course" / "data" / "tinyshakespeare" / "input.txt").write_text("Hi\n", encoding="utf-8")
    (tmp_path / "course" / "exercises" / "08_gpt_language_model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "course" / "exercises" / "08_gpt_language_model")
    assert load_shakespeare() == "Hi\n"
