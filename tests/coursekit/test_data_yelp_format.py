"""coursekit.data.yelp_format: the escapes and rows of the yelp_review_full format, below the generator and loader."""
from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

import coursekit.data as data
from coursekit.data.yelp_format import (SkippedRow, YelpFormatError, decode_yelp_escapes, encode_yelp_text,
                                        read_yelp_csv, write_yelp_csv)

PACKAGE = Path(data.__file__).resolve().parent


def _package_imports(module: str) -> set[str]:
    """The coursekit.data modules that `module` imports (relative imports within the package)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    return {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_layers_format_then_generator_then_loader():
    assert _package_imports("yelp_format") == set()
    assert _package_imports("synth") == {"yelp_format"}
    assert _package_imports("yelp") == {"synth", "yelp_format"}


@pytest.mark.parametrize("text", ["plain", "two\nlines", "windows\r\nline", 'a "quote" inside', "\n\n"])
def test_encode_then_decode_gives_the_text_back(text):
    encoded = encode_yelp_text(text)
    assert "\n" not in encoded
    assert decode_yelp_escapes(encoded) == text.replace("\r\n", "\n")


def test_backslash_quote_is_decoded():
    assert decode_yelp_escapes('said \\"wow\\"\\nthen left') == 'said "wow"\nthen left'


def test_written_rows_read_back_with_labels_shifted_to_zero(tmp_path):
    rows = [(1, "awful"), (5, 'great "ramen"\nwould return')]
    write_yelp_csv(tmp_path / "t.csv", rows)
    skipped: list[SkippedRow] = []
    with open(tmp_path / "t.csv", "rb") as handle:
        back = list(read_yelp_csv(handle, "t.csv", False, skipped))
    assert back == [(stars - 1, text) for stars, text in rows]
    assert skipped == []


def test_bad_label_is_an_error_or_a_skipped_row():
    stream = [b'"6","too many stars"\n', b'"2","fine"\n']
    with pytest.raises(YelpFormatError, match="mem, line 1: label must be 1..5"):
        list(read_yelp_csv(io.BytesIO(b"".join(stream)), "mem", False, []))
    skipped: list[SkippedRow] = []
    assert list(read_yelp_csv(io.BytesIO(b"".join(stream)), "mem", True, skipped)) == [(1, "fine")]
    assert skipped == [SkippedRow("mem", 1, "label must be 1..5, found '6'")]


def test_public_names_of_the_package_still_there():
    from coursekit.data.yelp import TARBALL_NAME, SPLITS, encode_yelp_text as enc, write_yelp_csv as write
    from coursekit.text import decode_yelp_escapes as text_decode

    assert (enc, write, text_decode) == (encode_yelp_text, write_yelp_csv, decode_yelp_escapes)
    assert SPLITS == ("train", "test") and TARBALL_NAME.endswith(".tgz")
    assert data.YelpFormatError is YelpFormatError and data.SkippedRow is SkippedRow
