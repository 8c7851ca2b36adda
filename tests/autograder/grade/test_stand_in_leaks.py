"""What a harvesting notebook prints of the stand-ins is taken out of its graded notebook (stand_in_leaks.py).

The leaks are made here the way a kernel would make them, from what the kernel receives (`compiled_for`: the
stand-ins' code, marshalled) or from their source (as a student who rebuilt it would print it); what must not
survive is checked against the stand-ins' own code objects and lines, read here from what the grader sends.
Pipeline: tests/autograder/pipeline/test_harvest_attacks.py (a real harvester, its feedback and the class report).
"""
from __future__ import annotations

import base64
import bz2
import gzip
import io
import json
import lzma
import marshal
import re
import zlib

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.checks.stand_ins import compiled_for, source_for
from autograder.grade.stand_in_leaks import NOTE, remove_leaks
from compiled_code import bodies

NAMES = ["Transformer"]  # notebook 06's composite: every stand-in it needs comes with it
CODE = compiled_for(NAMES)
SOURCE = source_for(NAMES)




BODIES = [body for body in bodies(marshal.loads(CODE)) if len(body) >= 64]
LINES = [line.strip() for line in SOURCE.splitlines() if len(line.strip()) >= 30]


def _stream(text: str):
    return new_output("stream", name="stdout", text=text)


def _graded(*cells):
    return new_notebook(cells=list(cells))


def _texts(nb) -> str:
    return nbformat.writes(nb)


def _carries(text: str) -> bool:
    """Whether any stand-in line, or base64/hex of a body, is in `text` (a check independent of the module's)."""
    return any(line in text for line in LINES) or any(
        base64.b64encode(body).decode()[8:80] in text or body.hex()[8:80] in text for body in BODIES)


ENCODINGS = {
    "base64": lambda: base64.b64encode(CODE).decode(),
    "urlsafe base64": lambda: base64.urlsafe_b64encode(CODE).decode(),
    "hex": lambda: CODE.hex(),
    "printed bytes": lambda: repr(CODE),
    "byte values": lambda: str(list(CODE)),
    "reversed base64": lambda: base64.b64encode(CODE).decode()[::-1],
    "zlib": lambda: base64.b64encode(zlib.compress(CODE)).decode(),
    "gzip": lambda: base64.b64encode(gzip.compress(CODE)).decode(),
    "bz2": lambda: base64.b64encode(bz2.compress(CODE)).decode(),
    "xz": lambda: lzma.compress(CODE).hex(),
    "the probe's request": lambda: base64.b64encode(json.dumps(
        {"op": "define", "code": base64.b64encode(CODE).decode()}).encode()).decode(),
    "source": lambda: SOURCE,
    "reversed source": lambda: SOURCE[::-1],
    "source, one character a line": lambda: "\n".join(SOURCE),
    "base64 source": lambda: base64.b64encode(SOURCE.encode()).decode(),
    "compressed source": lambda: base64.b64encode(zlib.compress(SOURCE.encode())).decode(),
}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_printed_stand_in_is_replaced_by_a_note_and_flagged(encoding):
    nb = _graded(new_code_cell("print(caught)", outputs=[_stream("caught:\n" + ENCODINGS[encoding]() + "\n")]))
    flags = remove_leaks(nb)
    assert nb.cells[0].outputs == [_stream(NOTE + "\n")]
    assert [(f.code, f.severity, f.cell) for f in flags] == [("stand-in-leak", "review", "cell 0")]


def test_every_field_a_kernel_writes_is_searched():
    payload = base64.b64encode(CODE).decode()
    outputs = [
        new_output("display_data", data={"text/plain": "x", "text/html": f"<p>{payload}</p>"}),
        new_output("display_data", data={"text/plain": "x", "application/json": {"a": [payload]}}),
        new_output("display_data", data={"text/plain": "x", "image/png": payload}),      # a "figure"
        new_output("display_data", data={"text/plain": "x"}, metadata={"kept": payload}),
        new_output("display_data", data={"text/plain": "x", f"application/x-{CODE[:4000].hex()}": "y"}),
        new_output("execute_result", data={"text/plain": repr(CODE)}, execution_count=3),
        new_output("error", ename="ValueError", evalue=f"see {payload}", traceback=["ValueError: ..."]),
        new_output("error", ename="KeyError", evalue="k", traceback=["...", SOURCE]),
    ]
    nb = _graded(new_code_cell("x", outputs=outputs))
    remove_leaks(nb)
    kept = nb.cells[0].outputs
    assert [o.output_type for o in kept] == ["stream"] * 6 + ["error", "error"]
    assert [o.ename for o in kept[6:]] == ["ValueError", "KeyError"]       # an error stays one: a grade cell keeps 0
    assert all(NOTE in (o.get("text") or o.get("evalue")) for o in kept)
    assert not _carries(_texts(nb))


@pytest.mark.parametrize("size", [40, 120, 1000])
def test_pieces_across_cells_leave_nothing_that_works(size):
    """The base64 printed in labelled pieces, one cell each: what is left cannot be put back together into any
    function or class of the stand-ins."""
    text = base64.b64encode(CODE).decode()
    pieces = [text[at:at + size] for at in range(0, len(text), size)]
    nb = _graded(*[new_code_cell(f"print(part[{i}])", outputs=[_stream(f"part {i}: {piece}\n")])
                   for i, piece in enumerate(pieces)])
    assert remove_leaks(nb)
    left = {}
    for cell in nb.cells:
        match = re.fullmatch(r"part (\d+): (\S+)\n", cell.outputs[0].text)
        if match:
            left[int(match.group(1))] = match.group(2)
    assert len(left) < len(pieces)
    runs, run = [], ""
    for index in range(len(pieces)):  # the longest stretches of consecutive surviving pieces
        run = run + left[index] if index in left else (runs.append(run) or "")
    runs.append(run)
    for run in runs:
        for offset in range(4):
            data = base64.b64decode(run[offset:][:len(run[offset:]) // 4 * 4] or "")
            assert not any(body in data for body in BODIES)


def test_lines_spread_over_cells_are_found_together():
    lines = SOURCE.splitlines()
    nb = _graded(*[new_code_cell("print(next(it))", outputs=[_stream(line + "\n")]) for line in lines if line])
    assert remove_leaks(nb)
    assert not _carries(_texts(nb))


def test_an_honest_traceback_quoting_the_students_own_lines_is_kept():
    """A student's own EncoderBlock may share lines with the stand-in; its traceback quotes them: not a leak."""
    own = "\n".join(line for line in source_for(["EncoderBlock"]).splitlines() if "class EncoderBlock" in line
                    or "self.ffn" in line or "self.attn" in line or "self.norm" in line)
    assert len(own.splitlines()) >= 3
    error = new_output("error", ename="RuntimeError", evalue="shapes", traceback=["Traceback", own, "RuntimeError"])
    nb = _graded(new_code_cell(own, outputs=[error]))
    assert remove_leaks(nb) == [] and nb.cells[0].outputs == [error]
    elsewhere = _graded(new_code_cell("import provided", outputs=[error]))    # the same lines, not the student's
    assert [f.code for f in remove_leaks(elsewhere)] == ["stand-in-leak"]


def test_figures_text_and_binary_of_an_honest_notebook_are_kept():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, ax = plt.subplots()
    ax.plot(np.arange(100) ** 0.5)
    png = io.BytesIO()
    figure.savefig(png, format="png")
    plt.close(figure)
    outputs = [new_output("display_data", data={"image/png": base64.b64encode(png.getvalue()).decode(),
                                                "text/plain": "<Figure size 640x480 with 1 Axes>"}),
               _stream("loss 2.31 -> 0.12\n" + np.random.default_rng(0).bytes(3000).hex() + "\n"),
               _stream(repr(np.random.default_rng(1).bytes(500)) + "\n" + base64.b64encode(png.getvalue()).decode())]
    nb = _graded(new_markdown_cell("# 06"), new_code_cell("plot()", outputs=outputs))
    before = nbformat.writes(nb)
    assert remove_leaks(nb) == [] and nbformat.writes(nb) == before


def test_a_submission_that_hands_in_compiled_stand_ins_is_flagged_for_tamper():
    code = "exec(marshal.loads(base64.b64decode(" + repr(base64.b64encode(CODE).decode()) + ")))"
    nb = _graded(new_code_cell("import base64, marshal"), new_code_cell(code))
    assert [(f.code, f.severity, f.cell) for f in remove_leaks(nb)] == [("stand-in-code", "tamper", "cell 1")]
    pasted = _graded(new_code_cell(SOURCE))  # pasted source: the similarity check's to report, not a leak
    assert remove_leaks(pasted) == []


@pytest.mark.parametrize("encoding", ["base64", "reversed base64", "hex"])
def test_the_outputs_around_a_printed_stand_in_keep_theirs(encoding):
    """Outputs are searched joined (for pieces), yet only the one holding the code goes, not its neighbours whose
    letters and digits run on into it."""
    before, after = _stream("epoch3loss017"), new_output("display_data", data={"text/plain": "3blobscaught"})
    nb = _graded(new_code_cell("x", outputs=[before, _stream(ENCODINGS[encoding]()), after]))
    remove_leaks(nb)
    assert nb.cells[0].outputs == [before, _stream(NOTE + "\n"), after]
