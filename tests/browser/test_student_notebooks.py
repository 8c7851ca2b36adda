"""A student's first hour, in JupyterLab of the student environment, in Chromium.

For each exercise (one browser page per notebook): open it, Run All on the stubs (the first self-check fails with its
short hint), fill the stubs with the source solutions, Run All again (no error, no warning, every figure of a drawing
cell rendered as an image, 07 shows a progress bar), press Validate (the dialog says only the public checks ran).
Screenshots of every step go to build/browser-screenshots/ (git-ignored).
"""
from __future__ import annotations

import importlib.util
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest


def _helpers():
    name = "_course_student_env"  # the module tests/browser/conftest.py loads (student_env.py)
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("student_env.py"))
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


H = _helpers()

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RUN_TIMEOUT_S = 900

# JavaScript run in the page; `window.jupyterapp` is exposed by the server (LabApp.expose_app_in_browser).
JS_READY = """() => {
  const app = window.jupyterapp; const w = app && app.shell.currentWidget;
  if (!w || !w.sessionContext || !w.content) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return w.context.isReady && !!k && k.status === 'idle';
}"""
JS_IDLE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  if (!k || k.status !== 'idle') return false;
  return !Array.from(w.content.node.querySelectorAll('.jp-InputArea-prompt')).some(p => p.textContent.includes('*'));
}"""
JS_CELLS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return w.content.widgets.map(cell => {
    const node = cell.node;
    const images = Array.from(node.querySelectorAll('.jp-OutputArea-output img'));
    return {
      images: images.filter(img => img.complete && img.naturalWidth > 50 && img.naturalHeight > 50).length,
      stderr: Array.from(node.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
              .map(e => e.innerText),
      progress: node.querySelectorAll('.widget-hprogress, .widget-progress, progress').length,
    };
  });
}"""


def _wait_run_all(page, label: str) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    time.sleep(2)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        page.wait_for_function(JS_IDLE, timeout=RUN_TIMEOUT_S * 1000, polling=1000)
        time.sleep(2)  # idle twice in a row: no cell started in between
        if page.evaluate(JS_IDLE):
            return
    raise AssertionError(f"{label}: Run All did not finish within {RUN_TIMEOUT_S} s")


def _shot(page, screenshot_dir, name: str, locator=None) -> None:
    path = screenshot_dir / f"{name}.png"
    if locator is not None:  # the notebook scrolls inside its panel: bring the whole cell into the panel first
        locator.evaluate("e => e.scrollIntoView({block: e.offsetHeight > innerHeight * 0.8 ? 'start' : 'center'})")
        page.wait_for_timeout(300)
    (locator or page).screenshot(path=str(path))


JS_DIRTY = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"
JS_OUTPUT_WIDTH = """() => Math.round(document.querySelector('.jp-Notebook .jp-CodeCell .jp-InputArea-editor')
                                      .getBoundingClientRect().width)"""


def _written_questions(notebook) -> list[str]:
    """The text of each written question of a released notebook: the markdown cell above an answer cell."""
    questions = []
    for before, cell in zip(notebook.cells, notebook.cells[1:]):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("solution") and meta.get("grade"):
            questions.append(" ".join(before.source.replace("**", "").split()))
    return questions


def test_released_notebooks_open_unmodified_and_validate_names_the_question(browser, student_env, start_lab,
                                                                            tmp_path, screenshot_dir):
    """Open each released notebook as handed out (1280x800, a laptop): once its kernel is up, JupyterLab must not
    mark it modified (the release stores the kernel's language_info), so closing it asks nothing. Then Validate one
    with unanswered written questions: the dialog names a question, not only "YOUR ANSWER HERE".

    Its own JupyterLab: `student_lab` tells Validate to ignore checksums (for the other tests' edits of locked
    cells), and without checksums nbgrader cannot tell an unanswered question."""
    from figure_layout import NOTEBOOK_WIDTH_PX

    home, released = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    released.mkdir()
    with start_lab(student_env.bin, released, env=H.student_process_env(home),
                   log=screenshot_dir / "as-released-jupyter-lab.log") as lab:
        _open_released_and_validate(browser, lab, released, screenshot_dir, NOTEBOOK_WIDTH_PX)


def _open_released_and_validate(browser, lab, released, screenshot_dir, notebook_width_px) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.set_default_timeout(120_000)
    try:
        for assignment in H.ASSIGNMENTS:
            H.prepare_assignment(assignment, released, filled=False)
            page.goto(lab.page_url(f"lab/tree/{assignment}/{assignment}.ipynb?reset"))
            page.wait_for_function(JS_READY, timeout=180_000, polling=500)
            page.wait_for_timeout(3000)  # the kernel's info has arrived and been applied
            _shot(page, screenshot_dir, f"{assignment}-0-opened")
            assert page.evaluate(JS_DIRTY) is False, f"{assignment} opens marked as modified"
            if assignment == H.ASSIGNMENTS[0]:  # the width figures are checked at (tests/fixtures/figure_layout.py)
                width = page.evaluate(JS_OUTPUT_WIDTH)
                print(f"notebook output width at 1280x800: {width} px")
                assert abs(width - notebook_width_px) <= 40, width

        assignment = next(a for a in H.ASSIGNMENTS
                          if _written_questions(nbformat.read(H.EXERCISES / a / f"{a}.ipynb", as_version=4)))
        questions = _written_questions(nbformat.read(H.EXERCISES / assignment / f"{assignment}.ipynb", as_version=4))
        page.goto(lab.page_url(f"lab/tree/{assignment}/{assignment}.ipynb?reset"))
        page.wait_for_function(JS_READY, timeout=180_000, polling=500)
        page.locator(".jp-Toolbar").get_by_text("Validate", exact=True).first.click()
        dialog = page.locator(".jp-Dialog")
        dialog.get_by_text("Validation Results").wait_for(timeout=RUN_TIMEOUT_S * 1000)
        _shot(page, screenshot_dir, f"{assignment}-5-validate-unanswered")
        message = " ".join(dialog.inner_text().split())
        assert "did not answer the written question" in message, message
        assert any(question[:60] in message for question in questions), (questions, message)
        dialog.locator(".jp-mod-accept").click()
    finally:
        page.close()


@pytest.mark.parametrize("assignment", H.ASSIGNMENTS)
def test_student_first_hour(assignment, browser, student_lab, screenshot_dir):
    folder = H.prepare_assignment(assignment, student_lab.root, filled=False)
    path = f"{assignment}/{assignment}.ipynb"
    filled = H.filled_notebook(assignment)
    drawing = H.drawing_cells(filled)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(120_000)
    try:
        page.goto(student_lab.page_url(f"lab/tree/{path}?reset"))
        page.wait_for_function(JS_READY, timeout=180_000, polling=500)
        # no instructor tools on the page: no Nbgrader menu (formgrader, course list), no create-assignment toolbar
        assert page.locator("#jp-mainmenu-nbgrader").count() == 0
        assert page.get_by_text("Formgrader", exact=True).count() == 0

        # 1. Run All on the stubs: the first self-check fails, and what shows is the hint and the student's line
        _wait_run_all(page, f"{assignment} stubs")
        errors = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
        assert errors.count() >= 1, "the stubs ran without a failing self-check"
        first = errors.first
        _shot(page, screenshot_dir, f"{assignment}-1-stub-failure", page.locator(".jp-Cell", has=first).first)
        text = first.inner_text().strip()
        lines = [line for line in text.splitlines() if line.strip()]
        assert lines[0].startswith("Self-check failed:") and "not implemented yet" in lines[0], text
        assert any(line.startswith("HINT:") for line in lines[1:3]), text
        assert len(lines) <= 8 and "site-packages" not in text and "Traceback" not in text, text
        # lines are wrapped between words: no line is wider than the output area (it would break mid-word)
        assert all(len(line) <= 100 for line in lines), text

        # 2. fill the stubs with the source solutions (on disk, as a student's edits), reload, restart, Run All
        nbformat.write(filled, folder / f"{assignment}.ipynb")
        page.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
                                        await w.context.revert(); await w.sessionContext.restartKernel(); }""")
        page.wait_for_function(JS_READY, timeout=180_000, polling=500)
        _wait_run_all(page, f"{assignment} filled")
        cells = page.evaluate(JS_CELLS)
        assert len(cells) == len(filled.cells)
        problems = [f"cell {i} shows no image:\n{filled.cells[i].source}" for i in drawing if cells[i]["images"] < 1]
        problems += [f"cell {i} shows an error or stderr:\n{out[:1500]}"
                     for i, cell in enumerate(cells) for out in cell["stderr"]]
        for i in drawing:
            cell = page.locator(".jp-Notebook .jp-Cell").nth(i)
            _shot(page, screenshot_dir, f"{assignment}-2-cell{i:02d}-figure", cell)
        if assignment == "07_yelp_classifier":
            (training,) = [i for i, c in enumerate(filled.cells) if "history = fit(model)" in c.source]
            if not cells[training]["progress"]:
                problems.append("07's training cell shows no progress bar")
            cell = page.locator(".jp-Notebook .jp-Cell").nth(training)
            _shot(page, screenshot_dir, f"{assignment}-3-training", cell)
        assert not problems, "\n\n".join(problems)
        assert page.get_by_text("official Jupyter news").count() == 0, "the news pop-up covers the notebook"

        # 3. Validate: nbgrader runs the notebook again; the dialog must not promise full marks
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.locator(".jp-Toolbar").get_by_text("Validate", exact=True).first.click()
        dialog = page.locator(".jp-Dialog")
        dialog.get_by_text("Validation Results").wait_for(timeout=RUN_TIMEOUT_S * 1000)
        _shot(page, screenshot_dir, f"{assignment}-4-validate")
        message = dialog.inner_text()
        assert "public self-checks" in message and "hidden tests" in message, message
        assert "passes all the tests" not in message and "failed" not in message.lower(), message
        dialog.locator(".jp-mod-accept").click()
    finally:
        page.close()
