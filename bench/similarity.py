"""Similarity benchmark: `autograder similarity` on a class of N students of one assignment (goal: 300 in < 60 s).

    python bench/similarity.py                      # 300 students of 04_multi_head_attention
    python bench/similarity.py --students 60        # a quick run

The class: the assignment is released into a temporary copy of the course (nbgrader generate_assignment, not
timed), then N notebooks are written straight into submitted/<student>/<assignment>/. Each student fills the
solution cells with one of the correct answers the hidden checks accept (tests/autograder/checks/variants.py and
the reference), with variables renamed at random and a line of their own; every 25th student copies an earlier
one (renamed, other comments). Timed: the whole command, as an instructor runs it (read the notebooks, fingerprint,
compare every pair, in two forked processes on two cores, write the HTML page, the heat map and the CSV), wall
clock and CPU time (this process and its workers: less sensitive to a busy machine). Prints a markdown report.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "autograder" / "checks"))
sys.path.insert(0, str(ROOT))

WORDS = ["x", "y", "z", "tmp", "val", "res", "acc", "buf", "arr", "vec", "mat", "tensor_", "out_", "part_"]


def _load_test_helpers():
    """The class builders of tests/autograder/publish/test_similarity.py (same answers, same filling of the cells)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("similarity_tests", ROOT / "tests/autograder/publish/test_similarity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_class(root: Path, assignment: str, count: int, seed: int = 0) -> Path:
    import nbformat

    import variants as V
    from autograder.demo.run import prepare_course
    from autograder.publish.release import release
    from autograder.publish.similarity import solution_code

    helpers = _load_test_helpers()
    course = prepare_course(root / "demo", [assignment])
    release([assignment], course_root=course, exercises_dir=root / "demo" / "exercises")
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    released = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    cells = {"reference": solution_code(source), **{c.metadata["nbgrader"]["grade_id"]: c.source
                                                    for c in source.cells
                                                    if c.metadata.get("nbgrader", {}).get("solution")}}
    answers = [helpers.student(cells, s, m, c)
               for s in (V.split_heads_stack, V.split_heads_permute)
               for m in (V.merge_heads_cat, V.merge_heads_permute)
               for c in (V.MultiHeadAttentionLoop, V.MultiHeadAttentionTorchSDPA)] + [cells["reference"]]
    rng = random.Random(seed)
    texts = []
    for index in range(count):
        if index % 25 == 24:
            text = helpers.disguise(texts[rng.randrange(len(texts))])
        else:
            text = rng.choice(answers)
            for name in ("scores", "weights", "heads", "outputs"):
                text = re.sub(rf"\b{name}\b", rng.choice(WORDS) + str(index), text)
            text += f"\n# student {index}\nseen_{index} = {rng.random():.6f}\n"
        texts.append(text)
    for index, text in enumerate(texts):
        nb = nbformat.from_dict(released)
        blocks = iter(re.split(r"\n\n(?=def |class )", text))
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = next(blocks, cell.source)
        path = course / "submitted" / f"student{index:03d}" / assignment / f"{assignment}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, path)
    return course


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (the comparison workers)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--assignment", default="04_multi_head_attention")
    args = parser.parse_args(argv)

    from autograder.publish.similarity import write_similarity

    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        course = build_class(Path(tmp), args.assignment, args.students)
        built = time.perf_counter() - started
        started, cpu = time.perf_counter(), _cpu_seconds()
        out = write_similarity(course, args.assignment)
        seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
        result = out["result"]
        size = out["html"].stat().st_size
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"## similarity, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU(s), {platform.python_implementation()} "
          f"{platform.python_version()}, load {load:.1f}")
    print()
    print("| students | pairs compared | pairs with overlap | reported | time | CPU time | page |")
    print("|---|---|---|---|---|---|---|")
    n = len(result.students)
    print(f"| {n} | {n * (n - 1) // 2} | {len(result.pairs)} | {len(result.reported)} | **{seconds:.1f} s** | "
          f"{cpu:.1f} s | {size / 1e6:.1f} MB |")
    print()
    print(f"(building the class, not timed: {built:.0f} s) goal: 300 students in < 60 s: "
          f"{'met' if seconds < 60 or n < 300 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
