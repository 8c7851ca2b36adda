"""`autograder similarity`: a disguised copy is found, independent correct solutions are not, starter code never counts.

Disguises: renamed variables, other comments, reordered functions (copydetect's text fingerprints see through
them), and one unique no-op statement (`_v17 = 17`) before every statement (issue #32, door 6: it broke every
k-gram of the text; the structure fingerprint, autograder.publish.fingerprint, drops the no-ops).

The classes are built from 04_multi_head_attention: the reference (the source notebook's solution cells) and
independent correct solutions taken from tests/autograder/checks/variants.py (loops over heads with einsum,
F.scaled_dot_product_attention, stack/cat instead of view/transpose: answers the hidden checks accept), each
written into the released cells the way a student fills them in.
"""
from __future__ import annotations

import ast
import csv
import inspect
import re
import textwrap

import nbformat
import pytest
import variants as V  # tests/autograder/checks (pythonpath)

from autograder.cli import main
from autograder.course.coursedir import default_course_dir
from synthetic_course import synthetic_course
from autograder.publish.similarity import THRESHOLD, compare_documents, solution_code

ASSIGNMENT = "04_multi_head_attention"
REGION = re.compile(r"### BEGIN SOLUTION\n.*?### END SOLUTION", re.S)


@pytest.fixture(scope="module")
def cells():
    path = default_course_dir() / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    if not path.exists():
        pytest.skip(f"{path} is not written yet")
    nb = nbformat.read(path, as_version=4)
    return {"reference": solution_code(nb),
            **{c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("solution")}}


def _stub(source: str) -> str:
    """The released cell: each solution region becomes nbgrader's stub."""
    def stub(match):
        indent = source[source.rfind("\n", 0, match.start()) + 1:match.start()]
        return f"# YOUR CODE HERE\n{indent}raise NotImplementedError()"
    return REGION.sub(stub, source)


def _body(function) -> str:
    lines = inspect.getsource(function).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def ")) + 1
    body = textwrap.dedent("\n".join(lines[start:]))
    return body.replace("super().__init__()\n", "")  # already in the released cell


def _fill(source: str, bodies) -> str:
    bodies = iter(bodies)

    def fill(match):
        indent = source[source.rfind("\n", 0, match.start()) + 1:match.start()]
        return textwrap.indent(next(bodies), indent).lstrip()
    return REGION.sub(fill, source)


def student(cells, split, merge, mha) -> str:
    return "\n\n".join([_fill(cells["split_heads"], [_body(split)]), _fill(cells["merge_heads"], [_body(merge)]),
                        _fill(cells["multi_head_attention"], [_body(mha.__init__), _body(mha.forward)])])


def starter(cells) -> list[str]:
    released = [_stub(cells[name]) for name in ("split_heads", "merge_heads", "multi_head_attention")]
    return released + ["\n\n".join(released)]  # as autograder.publish.similarity.starter_code gives them


RENAMES = {"outputs": "per_head", "maps": "attention_maps", "part": "columns", "scores": "logits", "d_head": "width",
           "w": "probs", "d": "head_dim", "num_heads": "n_heads", "h": "head"}


def disguise(text: str) -> str:
    """Renamed variables, other comments, the functions in another order (the class first)."""
    for old, new in RENAMES.items():
        text = re.sub(rf"\b{old}\b", new, text)
    text = re.sub(r"#[^\n]*", "# computed below", text)
    blocks = re.split(r"\n\n(?=def |class )", text)
    return "\n\n".join(blocks[::-1])


def noop_disguise(text: str) -> str:
    """One unique statement without effect (`_v1 = 1`, `_v2 = 2`, ...) before every statement, at its indent."""
    starts = {}
    for node in ast.walk(ast.parse(text)):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            for statement in block if isinstance(block, list) else []:
                line = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
                starts[line] = statement.col_offset
    lines = text.splitlines()
    for number, line in enumerate(sorted(starts, reverse=True), 1):
        lines.insert(line - 1, " " * starts[line] + f"_v{number} = {number}")
    return "\n".join(lines)


def independent_class(cells) -> dict[str, str]:
    return {
        "reference": cells["reference"],
        "loops_einsum": student(cells, V.split_heads_stack, V.merge_heads_cat, V.MultiHeadAttentionLoop),
        "torch_sdpa": student(cells, V.split_heads_permute, V.merge_heads_permute, V.MultiHeadAttentionTorchSDPA),
        "mixed": student(cells, V.split_heads_permute, V.merge_heads_cat, V.MultiHeadAttentionLoop),
    }


def test_disguised_copy_is_found(cells):
    documents = independent_class(cells)
    documents.pop("mixed")  # it shares two of three answers with loops_einsum: tested below on its own
    documents["copier"] = disguise(documents["loops_einsum"])
    assert documents["copier"] != documents["loops_einsum"] and "n_heads" in documents["copier"]
    assert documents["copier"].index("class MultiHeadAttention") < documents["copier"].index("def split_heads")
    result = compare_documents(documents, starter(cells), assignment=ASSIGNMENT)
    assert [(p.a, p.b) for p in result.reported] == [("copier", "loops_einsum")]
    assert result.reported[0].similarity > 0.9
    assert result.reported[0].structure_similarity is None  # the text alone reports it: not compared twice


def test_no_op_disguise_is_found(cells):
    """Issue #32, door 6: the no-op statements break the text's fingerprints (its similarity falls below the
    threshold) but not the structure's; the honest classmates stay below it."""
    documents = independent_class(cells)
    documents.pop("mixed")
    documents["copier"] = noop_disguise(documents["loops_einsum"])
    assert documents["copier"].count("_v") > 20
    ast.parse(documents["copier"])  # still a program
    result = compare_documents(documents, starter(cells), assignment=ASSIGNMENT)
    assert [(p.a, p.b) for p in result.reported] == [("copier", "loops_einsum")]
    pair = result.reported[0]
    assert pair.text_similarity < THRESHOLD  # the door: the text alone misses it
    assert pair.structure_similarity > 0.9 and pair.similarity == pair.structure_similarity


def test_no_op_and_renamed_copy_of_the_reference_is_found(cells):
    documents = independent_class(cells)
    documents.pop("mixed")
    documents["copier"] = noop_disguise(disguise(cells["reference"]))
    result = compare_documents(documents, starter(cells), assignment=ASSIGNMENT)
    found = {(p.a, p.b): p for p in result.pairs}
    assert ("copier", "reference") in [(p.a, p.b) for p in result.reported]
    assert found[("copier", "reference")].text_similarity < THRESHOLD
    assert [p for p in result.reported if "copier" not in (p.a, p.b)] == []


def test_copy_of_the_reference_is_found(cells):
    documents = independent_class(cells)
    documents["copier"] = disguise(cells["reference"])
    result = compare_documents(documents, starter(cells), assignment=ASSIGNMENT)
    assert ("copier", "reference") in [(p.a, p.b) for p in result.reported]


def test_independent_solutions_stay_below_the_threshold(cells):
    documents = independent_class(cells)
    documents.pop("mixed")
    result = compare_documents(documents, starter(cells), assignment=ASSIGNMENT)
    assert result.reported == []
    assert max((p.similarity for p in result.pairs), default=0) < THRESHOLD
    assert max((p.structure_similarity or 0 for p in result.pairs), default=0) < THRESHOLD


def test_starter_code_never_counts(cells):
    """Blank notebooks, and students who paste the same provided helpers, share nothing that counts."""
    provided = (default_course_dir() / "source" / ASSIGNMENT / "provided.py")
    helpers = provided.read_text() if provided.exists() else "\n\n".join(starter(cells))
    blank = starter(cells)[-1]
    documents = {"blank_1": blank, "blank_2": blank,
                 "pasted_1": helpers + "\n\n" + student(cells, V.split_heads_stack, V.merge_heads_cat,
                                                       V.MultiHeadAttentionLoop),
                 "pasted_2": helpers + "\n\n" + student(cells, V.split_heads_permute, V.merge_heads_permute,
                                                       V.MultiHeadAttentionTorchSDPA)}
    result = compare_documents(documents, starter(cells) + [helpers], assignment=ASSIGNMENT)
    assert result.reported == []
    assert not [p for p in result.pairs if {p.a, p.b} == {"blank_1", "blank_2"}]


def test_partial_copy_reports_the_share(cells):
    """Copying one answer of three is reported for what it is: both shares are below 100%."""
    documents = independent_class(cells)
    result = compare_documents({k: documents[k] for k in ("loops_einsum", "mixed")}, starter(cells))
    pair = result.pairs[0]
    assert 0 < pair.similarity_a < 1 and 0 < pair.similarity_b < 1


# --------------------------------------------------------------------------------------- the command, end to end
LONG_SOLUTION = '''
    total = 0.0
    for value in x:
        total = total + value
    if total == 0:
        raise ValueError("cannot normalize a vector that sums to zero")
    result = []
    for value in x:
        result.append(value / total)
    return np.array(result)'''


def test_cli_writes_page_csv_and_heat_map(tmp_path, capsys):
    """Three students of the synthetic course: ann and bob hand in the same code (renamed), cid writes her own."""
    course = synthetic_course(tmp_path / "course")
    released = nbformat.read(course / "release" / "ps1" / "ps1.ipynb", as_version=4)
    bodies = {"ann": LONG_SOLUTION, "bob": re.sub(r"\btotal\b", "s", re.sub(r"\bresult\b", "out", LONG_SOLUTION)),
              "cid": "\n    return x / np.sum(x)"}
    inbox = tmp_path / "inbox"
    for name, body in bodies.items():
        nb = nbformat.from_dict(released)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "normalize":
                cell.source = re.sub(r"# YOUR CODE HERE\n\s*raise NotImplementedError\(\)", body.strip(),
                                     cell.source)
        (inbox / name / "ps1").mkdir(parents=True)
        nbformat.write(nb, inbox / name / "ps1" / "ps1.ipynb")
    assert main(["collect", str(inbox), "--course-dir", str(course)]) == 0
    assert main(["similarity", "ps1", "--course-dir", str(course)]) == 0
    printed = capsys.readouterr().out
    assert "1 pair(s) of 3 students" in printed and "grades unchanged" in printed
    folder = course / "reports" / "ps1"
    rows = list(csv.DictReader((folder / "similarity.csv").open()))
    assert [(r["student_a"], r["student_b"], r["reported"]) for r in rows if r["reported"] == "True"] == \
        [("ann", "bob", "True")]
    page = (folder / "similarity.html").read_text()
    assert "data:image/png;base64," in page and "<mark>" in page and "ann and bob" in page
    assert (folder / "similarity.png").stat().st_size > 1000


def test_empty_and_broken_submissions(tmp_path):
    """An empty notebook, a broken file or a tiny answer never stops the check; identical long code is reported."""
    from autograder.publish.similarity import student_documents

    for student, text in (("empty", nbformat.writes(nbformat.v4.new_notebook())), ("broken", "{not json")):
        (tmp_path / "submitted" / student / "ps1").mkdir(parents=True)
        (tmp_path / "submitted" / student / "ps1" / "ps1.ipynb").write_text(text)
    documents = student_documents(tmp_path, "ps1")
    assert documents == {"broken": "", "empty": ""}
    code = "def f(values):\n    total = 0\n    for v in values:\n        total += v * v\n    return total\n" * 3
    result = compare_documents({**documents, "tiny": "x = 1", "one": code, "two": code}, ["x = 1"])
    assert [(p.a, p.b) for p in result.reported] == [("one", "two")]


def test_submitted_notebooks_are_read_as_submissions_are(tmp_path):
    """A link (to a classmate's notebook, or a student folder that is a link) is never followed, and a notebook over
    the course's size limit is not read: such a student has no code to compare, the others are compared."""
    from autograder.publish.similarity import student_documents

    code = "def f(values):\n    total = 0\n    for v in values:\n        total += v * v\n    return total\n"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code, metadata={"nbgrader": {
        "solution": True, "grade": False, "grade_id": "f", "locked": False}})])
    submitted = tmp_path / "submitted"
    (submitted / "ann" / "ps1").mkdir(parents=True)
    nbformat.write(nb, submitted / "ann" / "ps1" / "ps1.ipynb")
    (submitted / "ben" / "ps1").mkdir(parents=True)
    (submitted / "ben" / "ps1" / "ps1.ipynb").symlink_to(submitted / "ann" / "ps1" / "ps1.ipynb")
    (submitted / "cid").symlink_to(submitted / "ann")  # a whole student folder that is a link
    (submitted / "dan" / "ps1").mkdir(parents=True)
    big = nbformat.from_dict(nb)
    big.cells[0].source += "# " + "x" * 2048  # a valid notebook, over the limit below
    nbformat.write(big, submitted / "dan" / "ps1" / "ps1.ipynb")
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.SubmissionLimits.notebook_bytes = 1024\n")
    documents = student_documents(tmp_path, "ps1")
    assert documents == {"ann": code, "ben": "", "dan": ""}


def test_the_same_class_gives_the_same_numbers_in_every_process():
    """copydetect's own k-gram hash is Python's salted hash(): the report moved between runs. Ours is stable."""
    import subprocess
    import sys

    code = ("from autograder.publish.similarity import compare_documents as c\n"
            "a = 'def f(x):\\n    total = 0\\n    for i in range(x):\\n        total += i * i - 3\\n    return total\\n'\n"
            "b = a.replace('total', 'acc') + 'def g(y):\\n    return [f(v) for v in range(y) if v % 2]\\n'\n"
            "r = c({'ann': a * 3, 'bob': b * 3, 'cat': 'print(1)\\n' * 40})\n"
            "print([(p.a, p.b, p.overlap, round(p.similarity, 9)) for p in r.pairs])")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)}).stdout
               for seed in (1, 2, 3)}
    assert len(outputs) == 1 and "ann" in outputs.pop()
