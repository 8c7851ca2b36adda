"""A graded notebook made inert before the formgrader shows it (autograder.grade.inert_notebook). The browser test
through nbgrader's formgrader, with a canary, is tests/browser/test_formgrader_inert.py."""
from __future__ import annotations

import copy
import html

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell

from autograder.grade import inert_notebook as N
from autograder.sandbox import inert as I

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
BENIGN_MARKDOWN = ("Scaling by $\\sqrt{d_k}$ keeps a < b and **bold** words; `x<y` in code; "
                   "[docs](https://pytorch.org) and [up](#top).\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
                   "```python\nif a < b and c > d: pass\n```\n")
HOSTILE_MARKDOWN = {
    "script": "Answer.\n\n<script>window.__pwned = 1</script>",
    "handler": "<img src=x onerror=\"window.__pwned = 1\">",
    "javascript link": "[click](javascript:window.__pwned=1)",
    "entity link": "[click](&#106;avascript:window.__pwned=1)",
    "tab in scheme": "<a href=\"java\tscript:window.__pwned=1\">x</a>",
    "overlay": "<div style=\"position: fixed; top: 0; left: 0\">Score: 110 / 110</div>",
    "bootstrap overlay": "<div class=\"navbar navbar-fixed-top\">Score: 110 / 110</div>",
    "svg": "<svg><circle onload=\"window.__pwned = 1\"></circle></svg>",
    "iframe": "<iframe src=\"/api/contents/source\"></iframe>",
    "mathjax link": "$\\href{javascript:window.__pwned=1}{x}$",
    "mathjax link after a comment": "<!-- <code> -->$\\hr<b></b>ef{javascript:window.__pwned=1}{x}$</code>",
}


def _output(data, metadata=None):
    return new_output("display_data", data=data, metadata=metadata or {})


def _codes(flags):
    return [(f.code, f.severity) for f in flags]


def test_script_outputs_go_html_is_cleaned_and_images_stay():
    nb = new_notebook(cells=[new_code_cell("display(...)", outputs=[
        _output({"application/javascript": "window.__pwned = 1", "text/plain": "<Javascript>"}),
        _output({"text/html": "<table><tr><td>her table</td></tr></table><script>window.__pwned=1</script>",
                 "text/plain": "t"}),
        _output({"image/png": PNG, "text/plain": "<Figure>"}),
        new_output("stream", name="stdout", text="<script>printed text stays text</script>\n"),
    ])])
    flags = N.make_inert(nb)
    outputs = nb.cells[0].outputs
    assert set(outputs[0].data) == {"text/plain"}
    assert "<script" not in outputs[1].data["text/html"] and "<td>her table</td>" in outputs[1].data["text/html"]
    assert outputs[2].data["image/png"] == PNG
    assert outputs[3].text == "<script>printed text stays text</script>\n"  # escaped by every template
    assert len(flags) == 1 and _codes(flags) == [("active-content", "review")] and flags[0].cell == "cell 0"
    assert "application/javascript" in flags[0].message and "<script>" in flags[0].message


def test_image_metadata_keeps_only_numeric_sizes():
    hostile = {"image/png": {"width": "1 onload=window.__pwned=1", "height": 80.6,
                             "style": "position:fixed"},
               "image/jpeg": {"width": 10, "height": True},
               "isolated": True}
    nb = new_notebook(cells=[new_code_cell("", outputs=[_output({"image/png": PNG, "image/jpeg": PNG}, hostile)])])
    N.make_inert(nb)
    assert nb.cells[0].outputs[0].metadata == {"image/png": {"height": 80}, "image/jpeg": {"width": 10}}
    assert I.image_metadata({"image/png": {"width": -3, "height": 1e9}}) == {}


def test_svg_and_widget_outputs_are_removed_and_only_active_ones_flagged():
    nb = new_notebook(cells=[new_code_cell("", outputs=[
        _output({"image/svg+xml": "<svg><rect width='1'/></svg>"}),
        _output({"application/vnd.jupyter.widget-view+json": {"model_id": "x"}, "text/plain": "progress"}),
    ]), new_code_cell("", outputs=[_output({"image/svg+xml": "<svg onload='window.__pwned=1'></svg>"})])])
    flags = N.make_inert(nb)
    first, second = nb.cells[0].outputs
    assert set(first.data) == {"text/plain"} and "removed by the grader" in first.data["text/plain"]
    assert second.data == {"text/plain": "progress"}
    assert [f.cell for f in flags] == ["cell 1"]


def test_benign_markdown_stays_exactly_as_written():
    nb = new_notebook(cells=[new_markdown_cell(BENIGN_MARKDOWN)])
    assert N.make_inert(nb) == []
    assert nb.cells[0].source == BENIGN_MARKDOWN


@pytest.mark.parametrize("name", sorted(HOSTILE_MARKDOWN))
def test_active_markdown_becomes_its_own_text_and_is_flagged(name):
    source = HOSTILE_MARKDOWN[name]
    assert I.active_parts(I.render_markdown(source)), "the renderer the formgrader uses makes it active"
    nb = new_notebook(cells=[new_markdown_cell(source, metadata={"nbgrader": {"grade_id": "answer_1",
                                                                               "solution": True}})])
    flags = N.make_inert(nb)
    assert len(flags) == 1 and flags[0].cell == "answer_1"
    rendered = I.render_markdown(nb.cells[0].source)
    assert I.active_parts(rendered) == []
    if rendered.startswith("<pre>"):  # nothing better: her whole text, as text
        assert source in html.unescape(rendered)


def test_formatting_and_math_survive_where_only_html_and_links_were_active():
    source = ("My answer: scaling by $\\sqrt{d_k}$ keeps **the logits** small.\n\n"
              "<script>window.__pwned = 1</script>\n<img src=x onerror=\"window.__pwned = 2\">\n"
              "[a link](javascript:window.__pwned=3) and [ok](https://pytorch.org) and [e](&#106;avascript:x)\n\n"
              "[ref]: javascript:window.__pwned=4\n\n| kept | table |\n|---|---|\n| 1 | 2 |\n")
    nb = new_notebook(cells=[new_markdown_cell(source)])
    assert len(N.make_inert(nb)) == 1
    rendered = I.render_markdown(nb.cells[0].source)
    assert I.active_parts(rendered) == [] and not rendered.startswith("<pre>")
    assert "<strong>the logits</strong>" in rendered and "$\\sqrt{d_k}$" in rendered and "<th>kept</th>" in rendered
    assert '<a href="https://pytorch.org">ok</a>' in rendered and rendered.count('href="#removed-link"') == 2
    assert "&lt;script&gt;" in rendered and "onerror" not in rendered and "javascript" not in rendered.lower()


def test_the_instructors_locked_text_is_trusted_but_a_copy_elsewhere_changes_nothing():
    instructor = "Read this: <span style=\"position: fixed\">pinned by the instructor</span>"
    nb = new_notebook(cells=[new_markdown_cell(instructor), new_markdown_cell(instructor + " (copied)")])
    flags = N.make_inert(nb, trusted_sources=[instructor])
    assert nb.cells[0].source == instructor
    assert "fixed" not in nb.cells[1].source and [f.cell for f in flags] == ["cell 1"]


def test_raw_cells_lose_their_html_format_and_active_ones_are_escaped():
    nb = new_notebook(cells=[new_raw_cell("<script>window.__pwned=1</script>", metadata={"format": "text/html"}),
                             new_raw_cell("plain raw text", metadata={"raw_mimetype": "text/html"})])
    flags = N.make_inert(nb)
    assert nb.cells[0].source == "<pre>&lt;script&gt;window.__pwned=1&lt;/script&gt;</pre>"
    assert nb.cells[1].source == "plain raw text"
    assert all("format" not in c.metadata and "raw_mimetype" not in c.metadata for c in nb.cells)
    assert [f.cell for f in flags] == ["cell 0"]


def test_markdown_and_latex_outputs_fall_back_to_text_when_active():
    nb = new_notebook(cells=[new_code_cell("", outputs=[
        _output({"text/markdown": "**fine**"}),
        _output({"text/markdown": "[x](javascript:window.__pwned=1)"}),
        _output({"text/latex": "$\\href{javascript:window.__pwned=1}{x}$"}),
        _output({"text/latex": "$\\frac{1}{2}$"}),
    ])])
    flags = N.make_inert(nb)
    data = [o.data for o in nb.cells[0].outputs]
    assert data[0] == {"text/markdown": "**fine**"} and data[3] == {"text/latex": "$\\frac{1}{2}$"}
    assert data[1] == {"text/plain": "[x](javascript:window.__pwned=1)"}
    assert set(data[2]) == {"text/plain"}
    assert len(flags) == 1 and "markdown output" in flags[0].message and "LaTeX output" in flags[0].message


def test_odd_grade_ids_and_widget_state_are_dropped():
    bad = "x\" onmouseover=\"window.__pwned=1"
    nb = new_notebook(cells=[new_code_cell("", metadata={"nbgrader": {"grade_id": bad, "grade": True}}),
                             new_code_cell("", metadata={"nbgrader": {"grade_id": "fine_id-2", "grade": True}})],
                      metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {"</script>": 1}}})
    flags = N.make_inert(nb)
    assert "nbgrader" not in nb.cells[0].metadata and nb.cells[1].metadata.nbgrader.grade_id == "fine_id-2"
    assert "widgets" not in nb.metadata and [f.cell for f in flags] == ["cell 0"]


def test_inert_is_a_fixed_point_and_the_notebook_stays_valid():
    nb = new_notebook(cells=[new_markdown_cell(s) for s in HOSTILE_MARKDOWN.values()] + [new_code_cell("", outputs=[
        _output({"text/html": "<b onclick='x()'>b</b>", "application/javascript": "x()"},
                {"image/png": {"width": "1 onload=x()"}})])])
    N.make_inert(nb)
    nbformat.validate(nb)
    again = copy.deepcopy(nb)
    assert N.make_inert(again) == [] and again == nb


def test_a_dataframe_keeps_its_table_and_loses_its_style_block_without_a_flag():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"stars": [1, 5], "text": ["bad", "good"]})
    nb = new_notebook(cells=[new_code_cell("", outputs=[_output({"text/html": frame._repr_html_(),
                                                                  "text/plain": repr(frame)})])])
    assert "<style" in frame._repr_html_()
    assert N.make_inert(nb) == []
    cleaned = nb.cells[0].outputs[0].data["text/html"]
    assert "<table" in cleaned and "<td>good</td>" in cleaned and "<style" not in cleaned and "scoped" not in cleaned


def test_the_courses_own_notebooks_are_inert_as_written():
    """Cells without nbgrader metadata are not in the gradebook, so the worker judges them like a student's: the
    course's texts (a `<pad>` token in prose included) must pass unchanged."""
    from autograder.course.coursedir import REPO_ROOT

    paths = sorted((REPO_ROOT / "course" / "source").glob("*/*.ipynb"))
    assert len(paths) >= 9
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        before = copy.deepcopy(nb)
        assert N.make_inert(nb) == [], path.name
        assert [c.source for c in nb.cells] == [c.source for c in before.cells], path.name


def test_the_formgrader_s_exporter_names_the_preprocessor_that_makes_notebooks_inert(monkeypatch):
    """deploy/jupyter/instructor/jupyter_server_config.py names `MakeInert` by its dotted path: that path imports."""
    import importlib

    from traitlets.config.loader import PyFileConfigLoader

    from autograder.course.coursedir import REPO_ROOT

    monkeypatch.setenv("JUPYTER_PATH", "")  # restored afterwards: the config prepends its template folder
    folder = REPO_ROOT / "deploy" / "jupyter" / "instructor"
    cfg = PyFileConfigLoader("jupyter_server_config.py", path=str(folder)).load_config()
    (dotted,) = cfg.HTMLExporter.preprocessors
    module, name = dotted.rsplit(".", 1)
    preprocessor = getattr(importlib.import_module(module), name)
    nb = new_notebook(cells=[new_code_cell("", outputs=[_output({"application/javascript": "1", "text/plain": "j"})])])
    nb, _ = preprocessor()(nb, {})
    assert set(nb.cells[0].outputs[0].data) == {"text/plain"}
