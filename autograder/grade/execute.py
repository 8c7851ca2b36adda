"""nbgrader's Execute preprocessor with the sandbox's limits added.

- per-cell timeout, shrunk so no cell runs past the whole-notebook deadline; cells left when the deadline has
  passed are not run and get an error output saying so (their grade cells then score 0);
- output cap per cell: output beyond `Limits.output_bytes` is dropped and a note says how much;
- a cell listed in `skip_cells` (it killed the kernel on an earlier attempt) is not run; it gets an error output.
The caller (`worker.run_notebook`) catches a dead kernel, adds the cell to `skip_cells` and runs again.
"""
from __future__ import annotations

import json
import math
import time

from nbclient.exceptions import CellTimeoutError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute


def error_output(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message,
                        traceback=[f"\x1b[0;31m{ename}\x1b[0m: {message}"])


class SandboxedExecute(Execute):
    """Execute with a notebook deadline, an output cap and cells to skip."""

    def __init__(self, *, limits, deadline: float, skip_cells: set[int], **kwargs):
        super().__init__(timeout=max(1, int(limits.cell_timeout)), startup_timeout=int(limits.startup_timeout),
                         interrupt_on_timeout=True, allow_errors=True, raise_on_iopub_timeout=False,
                         **kwargs)
        self.limits = limits
        self.deadline = deadline
        self.skip_cells = skip_cells
        self.current_index: int | None = None
        self.notes: list[str] = []
        self._output_bytes: dict[int, int] = {}
        self._dropped_bytes: dict[int, int] = {}

    def preprocess_cell(self, cell, resources, index):
        self.current_index = index
        if cell.cell_type != "code":
            return cell, resources
        if index in self.skip_cells:
            cell.outputs = [error_output(
                "KernelDied", "This cell stopped the Python kernel (crash, os._exit or out of memory), so it was "
                              "skipped and the notebook was run again without it.")]
            return cell, resources
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            cell.outputs = [error_output(
                "NotebookTimeout", f"Not run: the whole notebook may run for at most "
                                   f"{self.limits.notebook_timeout:g} s and that time was used up.")]
            return cell, resources
        self.timeout = max(1, math.ceil(min(self.limits.cell_timeout, remaining)))  # never stops short of the deadline
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except CellTimeoutError as exc:  # no reply at all (the interrupt did not help): the cell loses, we go on
            cell.outputs.append(error_output("CellTimeoutError", str(exc).splitlines()[0]))
        dropped = self._dropped_bytes.get(index, 0)
        if dropped:
            cell.outputs.append(NotebookNode(
                output_type="stream", name="stderr",
                text=f"\n[output truncated by the grader: {dropped} more bytes were not kept; "
                     f"the limit is {self.limits.output_bytes} bytes per cell]\n"))
            self.notes.append(f"cell {index}: output truncated ({dropped} bytes dropped)")
        return cell, resources

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = len(content["text"]) if "text" in content else len(json.dumps(content.get("data", {})))
        used = self._output_bytes.get(cell_index, 0)
        if used + size > self.limits.output_bytes and msg.get("msg_type") != "error":
            self._dropped_bytes[cell_index] = self._dropped_bytes.get(cell_index, 0) + size
            return None
        self._output_bytes[cell_index] = used + size
        return super().output(outs, msg, display_id, cell_index)
