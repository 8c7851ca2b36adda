"""Yelp review data: the loader, the synthetic set and the downloader (`python -m coursekit.data --help`)."""
from .yelp import (
    SkippedRow,
    YelpFormatError,
    YelpSkippedRowsWarning,
    last_skipped_rows,
    load_yelp,
    synthetic_dir,
)

__all__ = ["load_yelp", "YelpFormatError", "YelpSkippedRowsWarning", "SkippedRow", "last_skipped_rows",
           "synthetic_dir"]
