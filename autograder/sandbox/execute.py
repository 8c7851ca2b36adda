"""nbgrader's Execute preprocessor with the sandbox's limits added.

- time limits in CPU seconds of the submission (clock.py): a cell may use `Limits.cell_timeout`, the notebook
  `Limits.notebook_timeout` over all its kernels, each with a wall-clock backstop `Limits.wall_factor` times larger
  (checked while waiting for the cell's reply, every POLL_SECONDS); cells left when the notebook's budget is used
  up are not run and get an error output saying so (their grade cells then score 0). Every limit reached is kept
  in `timeouts` (where, and which limit), for the worker's `timeout` flag and retry;
- a timed-out cell is interrupted (SIGINT, through the control channel); when it has not stopped after
  `Limits.interrupt_grace` CPU seconds of the submission, or `wall_factor` times as many wall seconds (a loop
  that ignores SIGINT, a hung C call), the whole submission is killed (SIGKILL of the jail and of its cgroup):
  that cell and every later cell lose, with an error output saying why. The grace too is CPU time: a kernel
  that is stopping (IPython formats the KeyboardInterrupt's traceback) on a busy machine is not killed for it;
- output cap per cell (`Limits.output_bytes`) and for the whole notebook (`Limits.notebook_output_bytes`): output
  beyond them is dropped and a note says how much. Error outputs are always kept (nbgrader scores a grade cell
  by its error output), but past the notebook's cap they are shrunk to their name and a short message;
  display updates count too. What counts is the size of the message AS IT ARRIVED: the bytes of every frame
  (header, parent header, metadata, content, binary buffers) of every output message, whatever its type and
  whatever fields it carries (`message_size`);
- a message is measured BEFORE it is decoded (the kernel client's `Session.deserialize` is wrapped,
  `bounded_deserialize`): one larger than the cell's cap (an error or a reply: than MAX_ERROR_BYTES; while the
  judge probes: than `judge.MAX_PROBE_REPLY_BYTES`), or whose content holds more JSON containers than
  `MAX_MESSAGE_ITEMS`, is never parsed: an error becomes a short error saying so, any other message is dropped
  and counted. Widget state is not kept (no comm message reaches the notebook);
- consecutive outputs of one stream (stdout, stderr) are joined into one, whatever the kernel's flush timing;
- a cell listed in `skip_cells` (it killed the kernel on an earlier attempt) is not run; it gets an error output.
The caller (`worker.run_notebook`) catches a dead kernel, adds the cell to `skip_cells` and runs again.
"""
from __future__ import annotations

import asyncio
import json
from queue import Empty

from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute

from autograder.errors import AutograderError
from autograder.sandbox.clock import Budget, SubmissionClock, cell_budget, interrupt_grace, notebook_budget

SHORT_ERROR = 500  # characters of an error's message kept once the notebook's output cap is reached
MAX_FRAME_BYTES = 64 * 1024  # a message's header, parent header or metadata (ours are a few hundred bytes)
MAX_ERROR_BYTES = 4 * 1024**2  # an error message is decoded up to this size (then shortened: it decides scores)
MAX_MESSAGE_ITEMS = 200_000  # JSON objects and arrays in one message's content, counted before it is parsed
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")
SIZE_KEY = "autograder_bytes"  # added to each message: its size in bytes as it arrived (every frame)
DROPPED_KEY = "autograder_dropped"  # added to a message that was not decoded: why
POLL_SECONDS = 0.25  # how often the time budget is read while a cell runs


def error_output(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message,
                        traceback=[f"\x1b[0;31m{ename}\x1b[0m: {message}"])


def _join_streams(outs: list) -> None:
    """One output for a run of text a cell printed to the same stream: a kernel flushes its streams when it gets
    round to it (a busy machine splits one `print` over several messages), and a graded notebook must not depend on
    that timing (what the leak scan and the feedback read is one output per run, as JupyterLab shows it)."""
    if len(outs) >= 2 and all(out.get("output_type") == "stream" for out in outs[-2:]) \
            and outs[-2].get("name") == outs[-1].get("name") \
            and isinstance(outs[-2].get("text"), str) and isinstance(outs[-1].get("text"), str):
        outs[-2]["text"] += outs.pop()["text"]


class SubmissionKilled(AutograderError, CellTimeoutError):
    """A timed-out cell did not stop when interrupted: the submission was killed."""


def message_size(msg: dict) -> int:
    """Bytes of a message: as it arrived (every frame) when the wrapped deserializer measured it, else the JSON of
    every field of the message (a message we built)."""
    if SIZE_KEY in msg:
        return int(msg[SIZE_KEY])
    return len(json.dumps({k: msg.get(k) for k in ("header", "parent_header", "metadata", "content")},
                          default=str))


def json_items(raw: bytes) -> int:
    """An upper bound of the JSON objects and arrays in `raw`, without parsing it (braces inside strings count
    too: the bound only ever errs on the side of refusing)."""
    return raw.count(b"{") + raw.count(b"[")


def bounded_deserialize(session, limits_now):
    """`session.deserialize`, measuring each message before anything in it is parsed.

    `limits_now()` gives (largest message in bytes, largest number of JSON containers in its content). A message
    whose header, parent header or metadata exceeds MAX_FRAME_BYTES is replaced by an empty message nobody waits
    for; one over the limits keeps its (small) header and gets an empty content and `DROPPED_KEY` saying why.
    Every message gets SIZE_KEY: the bytes of all its frames."""
    original = session.deserialize

    def deserialize(msg_list, content=True, copy=True):
        frames = [bytes(f.bytes) if hasattr(f, "bytes") else f for f in msg_list]
        size = sum(len(f) for f in frames[1:])
        if len(frames) < 5 or any(len(f) > MAX_FRAME_BYTES for f in frames[1:4]):
            return {"header": {"msg_type": "autograder_dropped"}, "msg_id": None, "msg_type": "autograder_dropped",
                    "parent_header": {}, "metadata": {}, "content": {}, "buffers": [], SIZE_KEY: size,
                    DROPPED_KEY: f"a message with a header of over {MAX_FRAME_BYTES} bytes"}
        msg = original(frames, content=False, copy=True)  # checks the signature; parses the small frames only
        max_bytes, max_items = limits_now()
        if (msg["msg_type"] == "error" or msg["msg_type"].endswith("_reply")) and max_bytes > 0:
            # an error (or the reply that repeats it) is kept, then shortened by the caps: it decides scores
            max_bytes = max(max_bytes, MAX_ERROR_BYTES)
        raw = frames[4]
        msg[SIZE_KEY] = size
        if size > max_bytes:
            msg[DROPPED_KEY] = f"{size} bytes, over the limit of {max_bytes} bytes per message"
        elif json_items(raw) > max_items:
            msg[DROPPED_KEY] = f"over {max_items} JSON values, the limit per message"
        if DROPPED_KEY in msg:
            msg["content"], msg["buffers"] = {}, []
            if msg["msg_type"].endswith("_reply"):  # the cell's own reply: it failed, with the reason
                msg["content"] = {"status": "error", "ename": "OutputTooLarge", "evalue": msg[DROPPED_KEY],
                                  "traceback": [], "execution_count": None}
        elif content:
            msg["content"] = session.unpack(raw)
        return msg

    return deserialize


class SandboxedExecute(Execute):
    """Execute with CPU-time budgets, output caps, a hard stop for cells that ignore interrupts, and cells to
    skip. Subclasses (the judge) run extra code in the same kernel through `self.kc`. `clock` counts the
    submission's CPU time over every attempt of the notebook (the kernel manager attaches each kernel's cgroup to
    it); `notebook` is the notebook's budget, shared by its attempts."""

    def __init__(self, *, limits, skip_cells: set[int], clock: SubmissionClock | None = None,
                 notebook: Budget | None = None, **kwargs):
        # shutdown "immediate": the kernel is killed when the notebook is done, not asked to exit (a graceful exit
        # takes ~1.3 s of torch's teardown per notebook, and the submission's cgroup is killed after it anyway)
        super().__init__(timeout=max(1, int(limits.cell_timeout)), startup_timeout=int(limits.startup_timeout),
                         interrupt_on_timeout=True, allow_errors=True, raise_on_iopub_timeout=False,
                         shutdown_kernel="immediate", **kwargs)
        self.limits = limits
        self.clock = clock or SubmissionClock()
        self.notebook_budget = notebook or notebook_budget(self.clock, limits)
        self.budget: Budget | None = None  # the running cell's (or hidden check's)
        self.timeouts: list[str] = []  # each limit reached: "cell 7: 60 s of CPU time"
        self.skip_cells = skip_cells
        self.current_index: int | None = None
        self.notes: list[str] = []
        self.killed: str | None = None  # why the submission was killed, once it was
        self._output_bytes: dict[int, int] = {}
        self._dropped_bytes: dict[int, int] = {}
        self._total_bytes = 0
        self._notebook_cap_hit = False
        self.store_widget_state = False  # widget state would be kept in the notebook's metadata, uncounted

    # -- cells --------------------------------------------------------------------------------------------------

    def preprocess_cell(self, cell, resources, index):
        self.current_index = index
        if cell.cell_type != "code":
            return cell, resources
        if self.killed is not None:
            cell.outputs = [error_output("SubmissionKilled", f"Not run: {self.killed}")]
            return cell, resources
        if index in self.skip_cells:
            cell.outputs = [error_output(
                "KernelDied", "This cell stopped the Python kernel (crash, os._exit or out of memory), so it was "
                              "skipped and the notebook was run again without it.")]
            return cell, resources
        used_up = self.notebook_budget.exceeded()
        if used_up:
            cell.outputs = [error_output(
                "NotebookTimeout", f"Not run: the whole notebook may use at most {used_up} and that time was used up.")]
            if not self.timeouts or "the notebook's" not in self.timeouts[-1]:
                self.timeouts.append(f"cell {index}: the notebook's {used_up}")
            return cell, resources
        self.budget = cell_budget(self.clock, self.limits, self.notebook_budget)
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except SubmissionKilled as exc:
            cell.outputs.append(error_output("CellTimeoutError", str(exc)))
            self.notes.append(f"cell {index}: {exc}")
        except CellTimeoutError as exc:  # no reply at all (the interrupt did not help): the cell loses, we go on
            cell.outputs.append(error_output("CellTimeoutError", str(exc).splitlines()[0]))
        dropped = self._dropped_bytes.get(index, 0)
        if dropped:
            cell.outputs.append(NotebookNode(
                output_type="stream", name="stderr",
                text=f"\n[output truncated by the grader: {dropped} more bytes were not kept; the limits are "
                     f"{self.limits.output_bytes} bytes per cell and {self.limits.notebook_output_bytes} bytes "
                     f"for the whole notebook]\n"))
            self.notes.append(f"cell {index}: output truncated ({dropped} bytes dropped)")
        return cell, resources

    # -- timeouts -----------------------------------------------------------------------------------------------

    async def _async_poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg, task_poll_kernel_alive):
        """nbclient's wait for the cell's reply, with `self.budget` (CPU time, wall backstop) read every
        POLL_SECONDS in place of nbclient's wall-clock `timeout` (which is ignored)."""
        timed_out = None
        while True:
            if timed_out is not None:
                msg = {**timed_out, "parent_header": {"msg_id": msg_id}}
            else:
                try:
                    msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=POLL_SECONDS))
                except Empty:
                    over = self.budget.exceeded() if self.budget is not None else None
                    if over is None:
                        continue
                    task_poll_kernel_alive.cancel()
                    await self._async_check_alive()
                    self.timeouts.append(f"cell {self.current_index}: {over}")
                    timed_out = await self._async_handle_timeout(over, cell)
                    continue
            if msg["parent_header"].get("msg_id") == msg_id:
                try:
                    await asyncio.wait_for(task_poll_output_msg, self.iopub_timeout)
                except (asyncio.TimeoutError, Empty):
                    self.log.warning("Timeout waiting for IOPub output")
                task_poll_kernel_alive.cancel()
                return msg

    async def _async_handle_timeout(self, timeout, cell: NotebookNode | None = None):
        """Interrupt; if no reply comes within the grace period, kill the whole submission. `timeout`: the limit
        reached, in words (clock.Budget.exceeded)."""
        self.log.error("Time limit reached (%s); interrupting the kernel", timeout)
        try:
            await ensure_async(self.km.interrupt_kernel())
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot even be interrupted is killed below
            self.log.error("interrupt failed: %s", exc)
        grace = interrupt_grace(self.clock, self.limits)
        while grace.exceeded() is None:
            if await ensure_async(self.kc.shell_channel.msg_ready()):
                said = f"This cell reached its time limit ({timeout}) and was interrupted."
                return {"content": {**self.error_on_timeout, "evalue": said, "status": "error",  # the cell loses
                                    "traceback": [f"\x1b[0;31mCellTimeoutError\x1b[0m: {said}"]}}
            await asyncio.sleep(0.05)
        self.killed = (f"a cell ran past the time limit ({timeout}) and did not stop when interrupted, so the "
                       f"submission was stopped (SIGKILL) and the cells after it were not run")
        self.log.error("the kernel ignored the interrupt: killing the submission")
        await self.kill_submission()
        raise SubmissionKilled(f"This cell ran past the time limit ({timeout}) and did not stop when "
                               f"interrupted, so the submission was stopped (SIGKILL).")

    async def kill_submission(self) -> None:
        """SIGKILL the kernel's jail and everything in its cgroup, now."""
        kill = getattr(self.km, "kill_submission", None)
        if kill is not None:
            kill()
        try:
            await ensure_async(self.km.shutdown_kernel(now=True))
        except Exception as exc:  # noqa: BLE001 - already dead is fine
            self.log.debug("shutdown after kill: %s", exc)

    # -- output caps --------------------------------------------------------------------------------------------

    async def async_start_new_kernel_client(self):
        kc = await super().async_start_new_kernel_client()
        kc.session.deserialize = bounded_deserialize(kc.session, self.message_limits)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # what nbclient's setup_kernel calls

    def on_comm_open_jupyter_widget(self, msg):
        return None  # no output-widget emulation: every output goes through `output`, and is counted there

    def message_limits(self) -> tuple[int, int]:
        """(bytes, JSON containers) one message from the kernel may have to be decoded at all."""
        return max(int(self.limits.output_bytes), MAX_FRAME_BYTES), MAX_MESSAGE_ITEMS

    def process_message(self, msg, cell, cell_index):
        if DROPPED_KEY in msg:
            return self._refused(msg, cell, cell_index)
        return super().process_message(msg, cell, cell_index)

    def _refused(self, msg, cell, cell_index):
        """A message that was not decoded (too large): counted as dropped output; an error stays an error."""
        if msg.get("parent_header", {}).get("msg_id") is None:
            return None
        if msg["msg_type"] == "error":
            return self.output(cell.outputs, {**msg, "content": {
                "ename": "OutputTooLarge", "evalue": f"an error output was not kept: {msg[DROPPED_KEY]}",
                "traceback": [f"OutputTooLarge: an error output was not kept: {msg[DROPPED_KEY]}"]}}, None,
                cell_index)
        if msg["msg_type"] in ("stream", "display_data", "execute_result", "update_display_data"):
            self._drop(cell_index, msg[SIZE_KEY])
        if msg["msg_type"] == "status":  # never: ours are tiny; a forged one must not end the cell
            return None
        return None

    def _drop(self, cell_index: int, size: int) -> None:
        self._dropped_bytes[cell_index] = self._dropped_bytes.get(cell_index, 0) + size

    def output(self, outs, msg, display_id, cell_index):
        content = msg.get("content", {})
        size = message_size(msg)
        if msg.get("msg_type") not in OUTPUT_TYPES:  # nbclient would log its (student-chosen) type name
            self._drop(cell_index, size)
            return None
        used = self._output_bytes.get(cell_index, 0)
        over_cell = used + size > self.limits.output_bytes
        over_notebook = self._total_bytes + size > self.limits.notebook_output_bytes
        if msg.get("msg_type") == "error":
            if over_notebook or over_cell:  # kept (it decides the score), but short
                evalue = str(content.get("evalue", ""))
                content["evalue"] = evalue[:SHORT_ERROR]
                content["traceback"] = [f"{content.get('ename', 'Error')}: {content['evalue']}"]
                self._drop(cell_index, max(0, size - len(json.dumps(content))))
                size = len(json.dumps(content))
        elif over_cell or over_notebook:
            self._drop(cell_index, size)
            return None
        self._output_bytes[cell_index] = used + size
        self._total_bytes += size
        out = super().output(outs, msg, display_id, cell_index)
        _join_streams(outs)
        return out

    def _update_display_id(self, display_id, msg):
        size = message_size(msg)
        index = self.current_index if self.current_index is not None else -1
        if self._total_bytes + size > self.limits.notebook_output_bytes or size > self.limits.output_bytes:
            self._drop(index, size)
            return None
        self._total_bytes += size
        return super()._update_display_id(display_id, msg)
