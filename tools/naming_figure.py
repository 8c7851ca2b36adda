"""Print issue 35's naming figure: how many of the typical mistakes tried by the hidden checks' tests are named.

    python tools/naming_figure.py      # runs tests/autograder/checks (not slow), then prints the figure

The counting lives in tests/autograder/checks/naming.py; tests/autograder/checks/test_zz_naming_figure.py holds the
suite to at least 95 %.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "tests" / "autograder" / "checks"


def main() -> int:
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-m", "not slow", str(FOLDER)])
    if code != 0:
        print("the check tests failed: the figure would mean nothing", file=sys.stderr)
        return int(code)
    sys.path.insert(0, str(FOLDER))
    import variants
    from naming import figure

    print(figure(variants.TRIED))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
