"""The trusted step of grading: hidden checks judge a submission from OUTSIDE its kernel.

A hidden grade cell of the course contains only

    from coursekit.probe import hand_in
    hand_in("multi_head_attention", MultiHeadAttention)

`JudgedExecute` runs every cell as nbgrader's Execute does (the worker has put the grade cells back in the released
notebook's order first) (through `SandboxedExecute`: jail, limits, timeouts).
When it reaches a grade cell whose source (restored from the gradebook by nbgrader's OverwriteCells, so the
instructor's, never the student's) calls `hand_in`, it runs the matching check of `autograder.checks` here, in
the grader's process. The check probes the handed-in objects through a `KernelChannel`: each probe is one small
snippet executed in the same kernel (`coursekit.probe.step`), whose reply comes back as one display output of
type `coursekit.probe.MIME`. The check compares the replies with the reference, diagnoses the mistake and
returns a verdict; the cell's outputs are then REPLACED by the verdict: nothing, or one error output with the
check's message (what was tested, what differs, the likely mistake, the hint, the student's own lines). nbgrader's
SaveAutoGrades scores the cell from those outputs, as for any grade cell. The diagnosed mistake's catalogue id
(`coursekit.mistakes`) stays on the executor (`JudgedExecute.mistakes`), where the worker takes it as data.

So the student's process holds no check, no reference and no expected value, and nothing it does to itself
(patching, hooks, exception handlers, frame walking, grading detection, printing) reaches the verdict or the
feedback: it can only change the data it hands back. Grade cells without `hand_in` (none in this course) keep
nbgrader's usual in-kernel verdict.
"""
from __future__ import annotations

import ast
import os
import traceback
import base64
import json
import logging
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from autograder.checks.kit.criteria import PartialCredit
from autograder.checks.kit.remote import Channel, ProbeBroken, RemoteObject
from autograder.course.cells import grade_id, is_grade, is_tests, points
from autograder.sandbox.clock import Budget, cell_budget
from autograder.sandbox.execute import (DROPPED_KEY, SandboxedExecute, error_output,
                                       message_size)
from coursekit.probe import MIME

log = logging.getLogger(__name__)

MAX_PROBE_OUTPUT_BYTES = 64 * 1024**2  # everything one probe may print or display (replies included), as it arrived
MAX_PROBE_REPLY_BYTES = 32 * 1024**2  # one message while probing, measured before it is decoded (replies: ~2 MB)
MAX_PROBE_REPLY_ITEMS = 200_000  # JSON objects and arrays in one such message, counted before it is decoded


# --------------------------------------------------------------------------------------------- the grade cell
def handed_in(source: str) -> list[tuple[str, list[int], list[str]]]:
    """The `hand_in(...)` calls of a grade cell: [(check name, positional indices, keyword names)]."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "hand_in" \
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            calls.append((node.args[0].value, list(range(len(node.args) - 1)),
                          [k.arg for k in node.keywords if k.arg]))
    return calls


def check_function(name: str):
    """autograder.checks.check_<name>, or None when the course has no such check."""
    import autograder.checks as checks

    try:
        return getattr(checks, f"check_{name}")
    except AttributeError:
        return None


def verdict(channel: Channel, calls) -> tuple[str | None, str | None, float]:
    """Run each handed-in check: (None, None, 1.0) when all pass, else the first failure's message for the student,
    the catalogue id of the mistake it diagnosed (`coursekit.mistakes`; None when it named none) and the fraction
    of the points it keeps (0.0, or more when only arguments or stated edge cases failed: `checks/criteria.py`).
    Whether each check's answer works as a part (its core passed and no argument failed) goes into
    `channel.verdicts` (when it has them), which later checks of the notebook read to judge their exercise given
    working parts (`autograder/checks/kit/parts.py`)."""
    verdicts = getattr(channel, "verdicts", {})
    first = [name for name, *_ in calls if name not in verdicts]  # a recorded verdict is final: never judged again
    for name in first:
        verdicts[name] = False  # until its check has passed
    message, mistake, fraction, works = _verdict(channel, calls)
    if works:
        for name in first:
            verdicts[name] = True
    return message, mistake, fraction


def _verdict(channel: Channel, calls) -> tuple[str | None, str | None, float, bool]:
    """(message, mistake id, fraction kept, whether the answer works as a part of later exercises)."""
    partial: tuple[str, str | None, float] | None = None
    works = True
    for name, positions, keywords in calls:
        check = check_function(name)
        if check is None:
            return f"The grader has no check named {name!r}: tell your instructor.", None, 0.0, False
        objects = [RemoteObject(channel, {"subject": name, "index": i}) for i in positions]
        named = {k: RemoteObject(channel, {"subject": name, "key": k}) for k in keywords}
        try:
            check(*objects, **named)
        except PartialCredit as failure:  # the core passed, some arguments or stated edge cases did not
            works = works and failure.works_as_a_part
            if partial is None or failure.fraction < partial[2]:
                partial = (str(failure), failure.mistake_id, failure.fraction)
        except AssertionError as failure:
            return str(failure) or "The check failed.", getattr(failure, "mistake_id", None), 0.0, False
        except ProbeBroken as broken:
            return f"Your code could not be checked: {broken}.", None, 0.0, False
        except DeadKernelError:
            raise  # the student's code killed the kernel: the worker skips this cell and runs the notebook again
        except Exception as exc:  # noqa: BLE001 -- a bug of ours must not look like the student's fault, nor crash
            # the batch. Logged without its message: it may quote what the student's code returned
            where = traceback.extract_tb(exc.__traceback__)[-1]
            log.error("check %s failed with an internal error: %s at %s:%s", name, type(exc).__name__,
                      os.path.basename(where.filename), where.lineno)
            return ("The grader could not finish this check because of an internal error (not a problem in your "
                    "answer): your instructor has been told."), None, 0.0, False
    return (*partial, works) if partial is not None else (None, None, 1.0, True)


PARTIAL_METADATA = {"autograder": "partial-credit"}  # marks the judge's own outputs of a partly passed cell


def verdict_outputs(message: str | None, fraction: float = 0.0, points: float = 0.0) -> list:
    """The grade cell's outputs: none when the checks passed; one error output with the message when they failed;
    for partial credit the message (plain text) and the score as the cell's result, which nbgrader reads as the
    cell's grade (`nbgrader.utils.determine_grade`: a number as the result is partial credit)."""
    if message is None:
        return []
    if fraction <= 0:
        output = error_output("AssertionError", message)
        output.traceback = ["AssertionError: " + message.splitlines()[0], *message.splitlines()[1:]]
        return [output]
    score = round(float(points) * fraction, 2)
    return [nbformat.v4.new_output("display_data", data={"text/plain": message}, metadata=dict(PARTIAL_METADATA)),
            nbformat.v4.new_output("execute_result", data={"text/plain": repr(score)},
                                   metadata=dict(PARTIAL_METADATA), execution_count=None)]


# ---------------------------------------------------------------------------------------------- the channel
class KernelChannel(Channel):
    """Requests to coursekit.probe in the kernel that runs the submission, one snippet each."""

    def __init__(self, executor: "JudgedExecute", index: int, budget: Budget):
        self.executor = executor
        self.verdicts = executor.verdicts  # the notebook's checks so far: {check name: passed}
        self.judged_here = executor.judged_here  # every check a grade cell of this notebook hands in
        self.index = index
        self.budget = budget  # the check's time: CPU seconds of the kernel and of this process (clock.py)

    def request(self, request: dict) -> dict:
        over = self.budget.exceeded()
        if over is not None:
            self.executor.timeouts.append(f"cell {self.index} (hidden check): {over}")
            raise ProbeBroken(f"the time for this check ran out ({over})")
        payload = base64.b64encode(json.dumps(request).encode()).decode("ascii")
        cell = probe_cell(f"__import__('coursekit.probe', fromlist=['step']).step('{payload}')")
        return self.executor.probe(cell, self.index, self.budget, request.get("id"))


# A probe's cell and outputs are the grader's own and never reach a notebook, so they are built without nbformat's
# schema validation (`new_code_cell` and nbclient's `output_from_msg` validate each: about 1 ms per probe, and a
# notebook of 06 sends ~250 probes). `probe` reads only the outputs kept here: displays (the reply) and errors,
# each checked for the shape it reads; a malformed one is dropped, as nbclient drops one that fails validation.
def probe_cell(source: str) -> nbformat.NotebookNode:
    return nbformat.NotebookNode(cell_type="code", execution_count=None, metadata=nbformat.NotebookNode(),
                                 outputs=[], source=source)


def probe_output(msg: dict) -> nbformat.NotebookNode | None:
    content = msg.get("content")
    if not isinstance(content, dict):
        return None
    if msg.get("msg_type") == "display_data" and isinstance(content.get("data"), dict):
        metadata = content.get("metadata")
        return nbformat.NotebookNode(output_type="display_data", data=content["data"],
                                     metadata=metadata if isinstance(metadata, dict) else {})
    traceback = content.get("traceback")
    if msg.get("msg_type") == "error" and isinstance(content.get("ename"), str) \
            and isinstance(content.get("evalue"), str) and isinstance(traceback, list) \
            and all(isinstance(line, str) for line in traceback):
        return nbformat.NotebookNode(output_type="error", ename=content["ename"], evalue=content["evalue"],
                                     traceback=traceback)
    return None


# --------------------------------------------------------------------------------------------- the executor
class JudgedExecute(SandboxedExecute):
    """SandboxedExecute whose hand_in grade cells are judged by the hidden checks in this process."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._probing = False
        self._probe_bytes = 0
        self._probe_refused: str | None = None  # why a message of the current probe was not decoded
        self.verdicts: dict[str, bool] = {}  # {check name: passed}, in notebook order (see verdict)
        self.mistakes: dict[str, str] = {}  # {grade_id: catalogue id of the mistake its check diagnosed}
        self.judged_here: frozenset[str] = frozenset()  # the checks this notebook's grade cells hand in (preprocess)

    def preprocess(self, nb, resources=None, km=None):
        self.judged_here = frozenset(name for cell in nb.cells if cell.cell_type == "code"
                                     and is_grade(cell)
                                     for name, *_ in handed_in(cell.source))
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if not is_tests(cell):
            return cell, resources
        calls = handed_in(cell.source)
        if not calls:
            return cell, resources
        if any(o.get("ename") in ("KernelDied", "NotebookTimeout", "SubmissionKilled") for o in cell.outputs):
            self.verdicts.update({name: False for name, *_ in calls})
            return cell, resources  # the cell did not run: it keeps the note saying why
        budget = cell_budget(self.clock, self.limits, self.notebook_budget, extra_cpu=time.process_time)
        message, mistake, fraction = verdict(KernelChannel(self, index, budget), calls)
        cell.outputs = verdict_outputs(message, fraction, points(cell))
        if mistake:
            self.mistakes[grade_id(cell)] = mistake
        return cell, resources

    def probe(self, cell, index: int, budget: Budget, request_id) -> dict:
        """Execute one probe snippet within the check's `budget`; returns the reply it displayed (the one answering
        `request_id`)."""
        saved_budget, graded_cell, limits_reached = self.budget, self.nb.cells[index], len(self.timeouts)
        self.budget = budget
        self._probing, self._probe_bytes, self._probe_refused = True, 0, None
        try:
            NotebookClient.execute_cell(self, cell, index, store_history=False)
        except CellTimeoutError:
            raise ProbeBroken(f"it did not finish within the time of the check ({budget.exceeded()})") from None
        finally:
            self._probing = False
            self.budget = saved_budget
            self.nb.cells[index] = graded_cell  # nbclient stores the executed cell at `index`: put the grade cell back
        if len(self.timeouts) > limits_reached:
            raise ProbeBroken(f"the time for this check ran out ({self.timeouts[-1].split(': ', 1)[-1]})")
        for output in cell.outputs:
            if output.get("output_type") != "display_data":
                continue
            reply = output.get("data", {}).get(MIME)
            if isinstance(reply, dict) and reply.get("id") == request_id:
                return reply
        if self._probe_refused:
            raise ProbeBroken(f"its answer was too large to be read ({self._probe_refused})")
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if errors:
            raise ProbeBroken(f"the kernel stopped it ({errors[-1].get('ename', 'an error')})")
        raise ProbeBroken("it returned no answer")

    def message_limits(self) -> tuple[int, int]:
        """While probing: one reply may be up to MAX_PROBE_REPLY_BYTES and MAX_PROBE_REPLY_ITEMS, and everything
        the probe sends at most MAX_PROBE_OUTPUT_BYTES; all measured before decoding (execute.bounded_deserialize)."""
        if not self._probing:
            return super().message_limits()
        if self._probe_bytes > MAX_PROBE_OUTPUT_BYTES:
            return 0, 0
        return MAX_PROBE_REPLY_BYTES, MAX_PROBE_REPLY_ITEMS

    def process_message(self, msg, cell, cell_index):
        if not self._probing:
            return super().process_message(msg, cell, cell_index)
        if msg.get("msg_type") in ("stream", "display_data", "execute_result", "update_display_data", "error"):
            self._probe_bytes += message_size(msg)
        if DROPPED_KEY in msg:
            if msg.get("msg_type") in ("display_data", "execute_result"):
                self._probe_refused = (f"{msg[DROPPED_KEY]}" if self._probe_bytes <= MAX_PROBE_OUTPUT_BYTES else
                                       f"over {MAX_PROBE_OUTPUT_BYTES} bytes in all, the limit of one probe")
            return None
        return NotebookClient.process_message(self, msg, cell, cell_index)

    def output(self, outs, msg, display_id, cell_index):
        if not self._probing:
            return super().output(outs, msg, display_id, cell_index)
        if self._probe_bytes > MAX_PROBE_OUTPUT_BYTES:
            return None  # a flood while probing: dropped (the reply is then missing and the check fails)
        out = probe_output(msg)
        if out is not None:
            outs.append(out)
        return out
