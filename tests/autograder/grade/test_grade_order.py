"""The grader owns the order of the checks (issue #31, door 1): grade cells run in the released notebook's order,
a recorded verdict is final, and a stand-in reaches the kernel only once every exercise it holds can no longer earn
a point in this run. tests/autograder/pipeline/test_harvest_attacks.py runs the attack on real, jailed kernels."""
from __future__ import annotations

import base64
import inspect
import marshal
import sys
import types
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

import solutions.modern
from autograder.checks.kit.remote import LoopbackChannel
from autograder.grade import judge
from autograder.grade.worker import grade_cells_in_source_order
from coursekit import probe
from coursekit.api import ASSIGNMENTS, hand_in_names

SOURCE = Path(__file__).resolve().parents[3] / "course" / "source"


def _grade_checks(nb) -> list[str]:
    return [name for cell in nb.cells if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")
            for name, *_ in judge.handed_in(cell.source)]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_source_notebook_hands_in_in_the_apis_order(assignment):
    """The worker restores the API's order (coursekit.api.hand_in_names): it must be the source notebook's."""
    nb = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    found = _grade_checks(nb)
    assert found == [name for name in hand_in_names(assignment) if name in found]
    assert found  # every course notebook hands something in


def test_moved_grade_cells_are_put_back_and_named():
    assignment = "09_modern_block"
    nb = nbformat.read(SOURCE / assignment / f"{assignment}.ipynb", as_version=4)
    honest = _grade_checks(nb)
    grade_cells = [c for c in nb.cells if judge.handed_in(c.source) and c.metadata.get("nbgrader", {}).get("grade")]
    composite = next(c for c in grade_cells if judge.handed_in(c.source)[0][0] == "modern_gpt")
    nb.cells.remove(composite)
    nb.cells.insert(0, composite)                                  # the composite's grade cell first
    hook = new_code_cell("import sys\nsys.addaudithook(lambda event, args: None)")
    nb.cells.insert(1, hook)
    assert _grade_checks(nb) != honest
    assert grade_cells_in_source_order(nb, assignment)             # some grade ids moved
    assert _grade_checks(nb) == honest
    assert nb.cells[1] is hook                                     # the student's cells stay where they were
    assert grade_cells_in_source_order(nb, assignment) == []       # in order: nothing moves
    assert grade_cells_in_source_order(nb, "ps1") == []            # not a course notebook: left alone


class RecordingChannel(LoopbackChannel):
    """The judge's view of a notebook (its recorded verdicts, the checks its grade cells hand in) over an
    in-process kernel side, remembering the names each stand-in module it sent defines (sent compiled)."""

    def __init__(self, verdicts: dict[str, bool], judged_here):
        self.verdicts = verdicts
        self.judged_here = frozenset(judged_here)
        self.sent: list[set[str]] = []

    def request(self, request: dict) -> dict:
        if request.get("op") == "define":
            self.sent.append(set(marshal.loads(base64.b64decode(request["code"])).co_names))
        return super().request(request)


def _unfinished(*args, **kwargs):
    raise NotImplementedError()


def _blank_09():
    """solutions.modern as a student's namespace with LlamaBlock left unfinished."""
    namespace = types.ModuleType("student_09_blank")
    sys.modules[namespace.__name__] = namespace
    exec(compile(inspect.getsource(solutions.modern), namespace.__name__, "exec"), namespace.__dict__)
    original = namespace.LlamaBlock
    namespace.LlamaBlock = type("LlamaBlock", (original,), {"__init__": _unfinished, "forward": _unfinished})
    return namespace


def _judge(channel, check: str, obj):
    probe.ProbeState.subjects[check] = ((obj,), {})
    return judge.verdict(channel, [(check, [0], [])])[:2]


NINE = hand_in_names("09_modern_block")


def test_a_composite_judged_before_its_parts_gets_no_stand_in():
    """The harvest: LlamaBlock's cell and then ModernGPT's cell first. Lending LlamaBlock would send RMSNorm,
    GroupedQueryAttention, SwiGLU and the rotary functions too, none of them judged yet: nothing is sent."""
    namespace = _blank_09()
    channel = RecordingChannel({}, NINE)
    message, _ = _judge(channel, "llama_block", namespace.LlamaBlock)
    assert message is not None and channel.verdicts == {"llama_block": False}
    message, _ = _judge(channel, "modern_gpt", namespace.ModernGPT)
    assert message is not None                                     # judged as it is: its block is unfinished
    assert channel.sent == []


def test_in_the_source_order_the_composite_is_judged_given_working_parts():
    namespace = _blank_09()
    verdicts = {name: True for name in ("rmsnorm", "rotary_cos_sin", "apply_rotary", "swi_glu",
                                        "grouped_query_attention")}
    channel = RecordingChannel({**verdicts, "llama_block": False}, NINE)
    assert _judge(channel, "modern_gpt", namespace.ModernGPT) == (None, None)
    assert len(channel.sent) == 1 and {"LlamaBlock", "RMSNorm"} <= channel.sent[0]


def test_a_recorded_verdict_is_final():
    namespace = _blank_09()
    channel = RecordingChannel({}, NINE)
    assert _judge(channel, "rmsnorm", _unfinished)[0] is not None
    assert _judge(channel, "rmsnorm", namespace.RMSNorm) == (None, None)   # a second cell passes...
    assert channel.verdicts == {"rmsnorm": False}                           # ...but the first verdict stands


def test_in_the_released_order_every_lending_is_allowed():
    """Follow-through credit keeps working for honest notebooks: whatever a composite's check may lend (its parts and
    all they need) is an exercise of an earlier notebook or one judged before the composite in its own."""
    from autograder.checks.kit.parts import PARTS
    from autograder.checks.stand_ins import with_needs
    from coursekit.api import API, snake_case

    notebook_of = {entry.snake_name: entry.notebook for entry in API}
    late = []
    for composite, parts in PARTS.items():
        order = hand_in_names(notebook_of[composite])
        for name in with_needs({part.name for part in parts}):
            check = snake_case(name)
            if not name.startswith("_") and check in order and order.index(check) >= order.index(composite):
                late.append((composite, name))
    assert late == []
