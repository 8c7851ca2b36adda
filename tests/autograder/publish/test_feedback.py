"""The feedback page's sanitiser and offline math (autograder.publish.feedback), without a browser (the browser test with
a canary is tests/browser/test_instructor_pages.py)."""
from __future__ import annotations

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.publish import feedback


def test_the_allow_list_escapes_scripts_handlers_and_javascript_links_and_keeps_formatting():
    html = feedback.clean_html(
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


def test_math_is_drawn_offline_and_markdown_links_are_sanitised_after_rendering():
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
    sanitizer = config.GenerateFeedback.preprocessors[-1](config=config)
    nb = new_notebook(cells=[new_markdown_cell("<script>x()</script>"), new_code_cell("", outputs=[
        new_output("display_data", data={"text/html": "<table><tr><td>t</td></tr></table><script>x()</script>",
                                          "application/javascript": "x()", "image/svg+xml": "<svg onload=x()>",
                                          "image/png": "iVBORw0KGgo=", "text/plain": "p"})])])
    nb, _ = sanitizer(nb, {})
    data = nb.cells[1].outputs[0].data
    assert set(data) == {"text/html", "image/png", "text/plain"}
    assert data["text/html"] == "<table><tbody><tr><td>t</td></tr></tbody></table>&lt;script&gt;x()&lt;/script&gt;"
    assert nb.cells[0].source == "&lt;script&gt;x()&lt;/script&gt;"
