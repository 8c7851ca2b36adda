"""The feedback page made inert, and its offline math (autograder.publish.feedback), without a browser (the browser
test with a canary is tests/browser/test_instructor_pages.py)."""
from __future__ import annotations

import re

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.publish import feedback
from autograder.sandbox import inert


def test_the_allow_list_escapes_scripts_handlers_and_javascript_links_and_keeps_formatting():
    html = inert.inert_html(
        "<script>alert(1)</script><img src=x onerror=alert(2)><a href='javascript:alert(3)'>x</a>"
        "<a href='JaVaScRiPt:alert(4)'>y</a><iframe src=//evil></iframe><svg onload=alert(5)></svg>"
        "<table><tr><td style='color: red; position: fixed'>cell</td></tr></table><b>bold</b>"
        "<img src='data:image/png;base64,iVBORw0KGgo=' alt='fig'><a href='https://example.org'>ok</a>")
    assert "<script" not in html and "<iframe" not in html and "<svg" not in html  # escaped: shown as text
    assert "<img>x" not in html and "<img><a>x</a><a>y</a>" in html  # the handler and both javascript: links gone
    assert 'href="javascript' not in html.lower()
    assert '<td style="color: red;">cell</td>' in html and "<b>bold</b>" in html  # position: not allowed
    assert '<img src="data:image/png;base64,iVBORw0KGgo=" alt="fig">' in html
    assert '<a href="https://example.org">ok</a>' in html


def test_math_is_drawn_offline_and_markdown_links_are_made_inert_after_rendering():
    image = feedback.math_image(r"\sqrt{d_k}")
    assert image.startswith('<img class="math" src="data:image/svg+xml;base64,') and 'alt="\\sqrt{d_k}"' in image
    assert feedback.math_image(r"\begin{bogus}") is None  # mathtext cannot: the TeX source stays
    render = feedback._markdown2html()
    html = render({"cell": {}}, "Scale by $\\sqrt{d_k}$. [x](javascript:alert(1)) <b onclick='a()'>b</b>")
    assert 'class="math"' in html and "$\\sqrt" not in html
    assert "javascript" not in html and "onclick" not in html and "<b>b</b>" in html


def test_outputs_go_through_nbconverts_sanitize_html_with_the_allow_list():
    from traitlets.config import Config

    config = Config()
    feedback.configure(config)
    preprocessor = config.GenerateFeedback.preprocessors[-1](config=config)
    nb = new_notebook(cells=[new_markdown_cell("<script>x()</script>"), new_code_cell("", outputs=[
        new_output("display_data", data={"text/html": "<table><tr><td>t</td></tr></table><script>x()</script>",
                                          "application/javascript": "x()", "image/svg+xml": "<svg onload=x()>",
                                          "image/png": "iVBORw0KGgo=", "text/plain": "p"})])])
    nb, _ = preprocessor(nb, {})
    data = nb.cells[1].outputs[0].data
    assert set(data) == {"text/html", "image/png", "text/plain"}
    assert data["text/html"] == "<table><tbody><tr><td>t</td></tr></tbody></table>&lt;script&gt;x()&lt;/script&gt;"
    # a markdown cell is cleaned once, after rendering (markdown2html): its script is escaped there
    assert nb.cells[0].source == "<script>x()</script>"
    assert "<script" not in feedback._markdown2html()({"cell": {}}, nb.cells[0].source)


def test_a_special_token_in_a_code_span_shows_as_written():
    """`<unk>` in a markdown code span reaches the page escaped once (it read "&lt;unk&gt;" when the source was
    cleaned before rendering as well as after)."""
    from traitlets.config import Config

    config = Config()
    feedback.configure(config)
    preprocessor = config.GenerateFeedback.preprocessors[-1](config=config)
    nb, _ = preprocessor(new_notebook(cells=[new_markdown_cell("Every other word becomes `<unk>` (id 1).")]), {})
    html = feedback._markdown2html()({"cell": {}}, nb.cells[0].source)
    assert "<code>&lt;unk&gt;</code>" in html and "&amp;lt;" not in html


def test_image_metadata_reaches_the_page_as_numbers_only():
    from traitlets.config import Config

    config = Config()
    feedback.configure(config)
    preprocessor = config.GenerateFeedback.preprocessors[-1](config=config)
    nb = new_notebook(cells=[new_code_cell("", outputs=[new_output(
        "display_data", data={"image/png": "iVBORw0KGgo="},
        metadata={"image/png": {"width": "1 onload=alert(1) style=position:fixed", "height": 40}})])])
    nb, _ = preprocessor(nb, {})
    assert nb.cells[0].outputs[0].metadata == {"image/png": {"height": 40}}


def test_a_pending_score_prints_as_not_graded_yet_through_the_templates_filters():
    from jinja2 import Environment

    env = Environment()
    env.filters["float"] = feedback._float_filter
    template = env.from_string("Score: {{ s | float | round(2) }} / {{ p | float | round(2) }}")
    assert template.render(s=feedback.Pending(), p=5) == "Score: not graded yet / 5.0"
    assert template.render(s=feedback.Pending(7.0, 2), p=12) == \
        "Score: 7.0 so far; 2 answer(s) not graded yet / 12.0"
    assert template.render(s=2.5, p="x") == "Score: 2.5 / 0.0"  # everything else as Jinja's own `float`


# ------------------------------------------------------- issue #33: a written answer waiting for a grader
def _load_written_course_helpers():
    """The written-answer course of the manual grading tests (test_manual_grading.py, next to this file)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_manual_grading_helpers",
                                                  Path(__file__).with_name("test_manual_grading.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


written = _load_written_course_helpers()


@pytest.fixture(scope="module")
def waiting_course(tmp_path_factory):
    """The synthetic course with one written answer (5 points); ann answered it, bob left it as released; graded
    for real."""
    from autograder.grade.engine import grade
    from synthetic_course import synthetic_submission

    course = written.written_course(tmp_path_factory.mktemp("waiting") / "course")
    solution = synthetic_submission(course, "solution")
    for student, text in {"ann": written._answered(solution, written.ANSWERS["ann"]), "bob": solution}.items():
        folder = course / "submitted" / student / written.PS1
        folder.mkdir(parents=True)
        (folder / f"{written.PS1}.ipynb").write_text(text)
    summary = grade(course, written.PS1, workers=1, limits=written.LIMITS, progress=False)
    assert not summary.failed, summary.failed
    return course


def _page(course, student) -> str:
    return (course / "feedback" / student / written.PS1 / f"{written.PS1}.html").read_text()


@pytest.mark.pipeline
def test_a_waiting_answer_says_not_graded_yet_and_feedback_warns(waiting_course, capsys):
    from nbgrader.api import Gradebook

    from autograder.cli import main
    from autograder.course.coursedir import course_id, default_db_url

    course, answer = waiting_course, written.ANSWER_ID
    assert main(["feedback", written.PS1, "--course-dir", str(course)]) == 0
    err = capsys.readouterr().err
    assert "warning: 1 answer(s) in 1 notebook(s) wait for a grader" in err and "not graded yet" in err
    ann, bob = _page(course, "ann"), _page(course, "bob")
    assert re.search(rf'href="#{answer}">Written response</a> \(Score: not graded yet / 5\.0\)', ann)
    assert re.search(r"\(Score: 7\.0 so far; 1 answer\(s\) not graded yet / 12\.0\)", ann)
    assert "not graded yet" not in bob  # left as released: 0 on its own, nothing waits
    assert re.search(rf'href="#{answer}">Written response</a> \(Score: 0\.0 / 5\.0\)', bob)

    with Gradebook(default_db_url(course), course_id(course)) as gb:  # as formgrader's grade API saves a score
        grade = gb.find_grade(answer, written.PS1, written.PS1, "ann")
        grade.manual_score, grade.needs_manual_grade = 4.0, False
        gb.db.commit()
    assert main(["feedback", written.PS1, "--course-dir", str(course)]) == 0
    assert "warning" not in capsys.readouterr().err
    ann = _page(course, "ann")
    assert "not graded yet" not in ann and re.search(r"\(Score: 11\.0 / 12\.0\)", ann)
    assert re.search(rf'href="#{answer}">Written response</a> \(Score: 4\.0 / 5\.0\)', ann)
