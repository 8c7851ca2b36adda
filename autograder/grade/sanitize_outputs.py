"""Make a graded notebook inert before nbgrader stores it (issue #32, doors 1 and 7).

The autograded notebook is what nbgrader's formgrader shows an instructor (Manual Grading), rendered by nbconvert's
`formgrade` template with nothing sanitised, in the instructor's logged-in session. So everything in it that a
student controls is made harmless here, once, in the worker, after scoring:

- outputs (every code cell's, locked cells included: the student's code produced them): JavaScript, SVG, widget
  and unknown types are removed; HTML goes through the course's allow-list (`autograder.publish.feedback`);
  markdown and LaTeX outputs stay only when they render to nothing active, else they become their plain text;
  a `<style>` block of an HTML output (pandas puts one in every DataFrame) is dropped without a flag;
  each output's metadata is cut down to a numeric `width`/`height` per image type (nbconvert writes those two
  unquoted into the `<img>` tag, so any other text there is an attribute of the student's choosing);
- markdown and raw cells a student wrote (every one whose text is not exactly a locked cell of the gradebook):
  kept as written when their rendering (nbconvert's own markdown renderer, as the formgrader uses it) holds
  nothing active; otherwise a markdown cell's raw HTML goes through the allow-list (shown as text) and its
  links to other schemes are removed, keeping its formatting and math, and where even that renders active (or
  for a raw cell) the cell becomes its own text, escaped, in a `<pre>` block: the instructor reads what was
  there and nothing runs;
- cell metadata: an nbgrader `grade_id` is written by the formgrade template into HTML attributes, so one that is
  not a plain identifier is dropped with the cell's nbgrader metadata (scores are already saved);
- notebook metadata: widget state (a script block of the page) is dropped.

"Active" means: an element that runs, loads, embeds or takes input (script, iframe, svg, style, object,
form...), an `on*=` handler, a `srcset`, a `style` beyond the allow-list's CSS properties (`position` above all:
a fake score laid over the page), a class of the page's own fixed layout (bootstrap's `navbar-fixed-top`,
`modal`...), a URL whose scheme is not http(s)/mailto/attachment (or, for images, data:image/png|jpeg|gif), or a
MathJax command that makes links or styles (`\\href`, `\\url`, `\\style`, `\\class`, `\\cssId`, `\\unicode`).
Removing active content returns a review flag per cell, so the instructor sees that something was there.
"""
from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from autograder.grade.tamper_scan import Flag

FLAG_CODE = "active-content"
SCRIPT_TYPES = frozenset({"application/javascript", "text/javascript", "application/x-javascript",
                          "application/ecmascript", "text/ecmascript"})
KEPT_TYPES = frozenset({"text/plain", "image/png", "image/jpeg", "image/gif", "application/json"})
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")
URL_ATTRIBUTES = frozenset({"href", "src", "action", "formaction", "xlink:href", "background", "poster", "data",
                            "lowsrc", "dynsrc", "cite", "longdesc", "usemap", "manifest", "ping"})
LINK_SCHEMES = ("http:", "https:", "mailto:", "attachment:")
IMAGE_DATA = ("data:image/png", "data:image/jpeg", "data:image/gif")
MATHJAX_ACTIVE = re.compile(r"\\(href|url|style|class|cssId|unicode|require|mmlToken)(?![A-Za-z])")
STYLE_BLOCKS = re.compile(r"<style\b[^>]*>.*?</style\s*>", re.S | re.I)
SAFE_GRADE_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")
PAGE_CLASSES = re.compile(r"fixed|modal|affix|sticky|navbar|overlay", re.I)  # the page's own (bootstrap) layout
_URL_NOISE = re.compile(r"[\x00-\x20\x7f-\x9f]")  # what browsers skip inside a URL's scheme
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")


class _ActiveFinder(HTMLParser):
    """Collects why a piece of HTML is active (empty list: inert)."""

    def __init__(self, refused_tags):
        super().__init__(convert_charrefs=True)
        self.refused_tags = refused_tags
        self.reasons: list[str] = []
        self.code_depth = 0  # inside <pre>/<code>, which MathJax leaves alone
        self.text: list[str] = []  # the text MathJax reads

    def handle_data(self, data):
        if not self.code_depth:
            self.text.append(data)

    def handle_endtag(self, tag):
        if tag in ("pre", "code") and self.code_depth:
            self.code_depth -= 1

    def handle_starttag(self, tag, attrs):
        if tag in ("pre", "code"):
            self.code_depth += 1
        if tag in self.refused_tags:
            self.reasons.append(f"<{tag}>")
        for name, value in attrs:
            name = name.lower()
            if name.startswith("on") or name in ("srcset", "formaction", "http-equiv"):
                self.reasons.append(f"{tag} {name}=")
            elif name in URL_ATTRIBUTES and not _url_ok(tag, name, value or ""):
                self.reasons.append(f"{tag} {name}={(value or '')[:40]!r}")
            elif name == "style" and not _style_ok(value or ""):
                self.reasons.append(f"{tag} style={(value or '')[:40]!r}")
            elif name == "class" and PAGE_CLASSES.search(value or ""):
                self.reasons.append(f"{tag} class={(value or '')[:40]!r}")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)


def _style_ok(style: str) -> bool:
    """Only the allow-list's CSS properties (no `position`: an overlay over the page is a forgery)."""
    from autograder.publish.feedback import CSS_PROPERTIES

    lowered = style.lower()
    if "url(" in lowered or "expression(" in lowered or "\\" in lowered or "/*" in lowered:
        return False
    names = [part.split(":", 1)[0].strip() for part in lowered.split(";") if part.strip()]
    return all(name in CSS_PROPERTIES for name in names)


def _url_ok(tag: str, name: str, value: str) -> bool:
    url = _URL_NOISE.sub("", value).lower()
    match = _SCHEME.match(url)
    if match is None:
        return True  # relative: this origin's own pages and files
    if tag == "img" and name == "src" and url.startswith(IMAGE_DATA):
        return True
    return name in ("href", "src") and url.startswith(LINK_SCHEMES)


# Elements that run, load or embed something, take input, or change how the page is read; any other tag (a word in
# angle brackets such as `<pad>` in a course text, which the browser makes an empty unknown element) is judged by
# its attributes only.
ACTIVE_TAGS = frozenset({"script", "iframe", "frame", "frameset", "object", "embed", "applet", "svg", "math", "style",
                         "link", "meta", "base", "form", "input", "button", "textarea", "select", "option",
                         "template", "noscript", "portal", "video", "audio", "source", "track", "canvas", "dialog",
                         "marquee", "xmp", "plaintext", "noembed", "noframes", "title", "head", "body", "html",
                         "slot", "param", "picture", "map", "area", "image", "isindex", "keygen", "xml", "import"})
SVG_ACTIVE_TAGS = frozenset({"script", "foreignobject", "iframe", "object", "embed", "use", "animate", "set",
                             "handler", "listener"})


def active_parts(html_text: str, svg: bool = False) -> list[str]:
    """Why `html_text` would run something or restyle the page once in a browser (empty: it would not).
    `svg`: an SVG picture, where drawing elements are fine and only scripting ones count."""
    finder = _ActiveFinder(SVG_ACTIVE_TAGS if svg else ACTIVE_TAGS)
    finder.feed(html_text)
    finder.close()
    reasons = finder.reasons
    reasons += [f"MathJax \\{m.group(1)}" for m in MATHJAX_ACTIVE.finditer("".join(finder.text))]
    return reasons


def render_markdown(source: str, attachments=None) -> str:
    """`source` as nbconvert's HTMLExporter renders a markdown cell (the formgrader's renderer)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(escape=False, attachments=attachments or {}, embed_images=False, path="",
                               anchor_link_text="¶", exclude_anchor_links=False)
    return MarkdownWithMath(renderer=renderer).render(source)


def as_text_block(source: str) -> str:
    """Markdown that shows `source` as it was written, as text (an HTML block: nothing in it is parsed)."""
    return f"<pre>{html.escape(source, quote=True)}</pre>"


_LINK_TARGET = re.compile(r"(\]\(\s*)(<[^>\n]*>|[^\s)]+)")
_REFERENCE_TARGET = re.compile(r"(?m)(^[ ]{0,3}\[[^\]\n]+\]:[ \t]*)(<[^>\n]*>|\S+)")


def _defang_links(source: str) -> str:
    """Markdown link and image targets whose scheme is not allowed (entities decoded) point to `#removed-link`."""
    def fix(match):
        target = html.unescape(match.group(2)).strip("<>")
        return match.group(1) + (match.group(2) if _url_ok("img", "src", target) else "#removed-link")

    return _REFERENCE_TARGET.sub(fix, _LINK_TARGET.sub(fix, source))


def inert_markdown(source: str) -> str:
    """An active markdown cell made inert, its formatting kept where possible: raw HTML through the allow-list
    (escaped as text), link targets with another scheme removed; when its rendering is still active after that,
    its own text, escaped, in a `<pre>` block."""
    from autograder.publish.feedback import clean_html

    candidate = _defang_links(clean_html(source))
    return candidate if not active_parts(render_markdown(candidate)) else as_text_block(source)


def image_metadata(metadata) -> dict:
    """Only a numeric width/height per image type survive (what nbconvert writes unquoted into `<img>`)."""
    kept = {}
    for mime in IMAGE_TYPES:
        sizes = metadata.get(mime) if isinstance(metadata, dict) else None
        if not isinstance(sizes, dict):
            continue
        numeric = {}
        for key in ("width", "height"):
            value = sizes.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 100_000:
                numeric[key] = int(value)
        if numeric:
            kept[mime] = numeric
    return kept


def _clean_output(output) -> list[str]:
    """Make one output inert in place; returns what was active in it."""
    from autograder.publish.feedback import clean_html

    if output.get("output_type") not in ("display_data", "execute_result", "update_display_data"):
        return []  # stream and error outputs are text, escaped by every template
    output["metadata"] = image_metadata(output.get("metadata") or {})
    data = output.get("data") or {}
    found = []
    for mime in list(data):
        value = data[mime]
        text = value if isinstance(value, str) else "".join(value) if isinstance(value, list) else ""
        if mime in KEPT_TYPES:
            continue
        if mime == "text/html":
            text = STYLE_BLOCKS.sub("", text)  # a DataFrame's own <style scoped>: dropped, not worth a flag
            found += [f"HTML output: {r}" for r in active_parts(text)]
            data[mime] = clean_html(text)
        elif mime == "text/markdown":
            reasons = active_parts(render_markdown(text))
            if reasons:
                found += [f"markdown output: {r}" for r in reasons]
                data["text/plain"] = text  # what it said, as text
                del data[mime]
        elif mime == "text/latex":
            reasons = [f"MathJax \\{m.group(1)}" for m in MATHJAX_ACTIVE.finditer(text)]
            if reasons:
                found += [f"LaTeX output: {r}" for r in reasons]
                data["text/plain"] = text
                del data[mime]
        else:
            if mime in SCRIPT_TYPES:
                found.append(f"{mime} output")
            elif mime == "image/svg+xml":
                found += [f"SVG output: {r}" for r in active_parts(text, svg=True)]
            del data[mime]
    if not data:
        data["text/plain"] = "[output removed by the grader: it was not text or an image]"
    output["data"] = data
    return found


def make_inert(nb, trusted_sources=()) -> list[Flag]:
    """Make `nb` (a graded notebook) inert in place, as the module doc says. `trusted_sources`: the texts of the
    gradebook's locked cells (the instructor's own text, shown as written). Returns one review flag per cell
    where active content was removed."""
    trusted = {str(s).strip() for s in trusted_sources}
    flags = []
    nb.metadata.pop("widgets", None)
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {})
        nbgrader = meta.get("nbgrader")
        found = []
        if isinstance(nbgrader, dict) and "grade_id" in nbgrader and not SAFE_GRADE_ID.match(str(nbgrader["grade_id"])):
            found.append("nbgrader grade_id that is not an identifier")
            del meta["nbgrader"]
        where = (meta.get("nbgrader") or {}).get("grade_id") or f"cell {index}"
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                found += _clean_output(output)
        elif cell.cell_type in ("markdown", "raw") and cell.source.strip() not in trusted:
            rendered = render_markdown(cell.source, cell.get("attachments")) if cell.cell_type == "markdown" \
                else cell.source
            reasons = active_parts(rendered)
            if reasons:
                found += [f"{cell.cell_type} cell: {r}" for r in reasons]
                cell.source = inert_markdown(cell.source) if cell.cell_type == "markdown" \
                    else as_text_block(cell.source)
                cell.pop("attachments", None)
            if cell.cell_type == "raw":
                meta.pop("format", None)
                meta.pop("raw_mimetype", None)
        if found:
            shown = "; ".join(dict.fromkeys(found))
            flags.append(Flag(FLAG_CODE, "review", where,
                              f"active content removed before the formgrader shows it (script, handler or "
                              f"style of the page): {shown[:300]}"))
    return flags


def _preprocessor_class():
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Bool

    class MakeInert(Preprocessor):
        """`make_inert` as an nbconvert preprocessor, for an exporter that renders notebooks nobody made inert
        before (the formgrader's, through deploy/jupyter/instructor/jupyter_server_config.py). No text is trusted
        there: an instructor's cell is only rewritten when it renders active."""

        enabled = Bool(True, help="make the notebook inert before rendering it").tag(config=True)

        def preprocess(self, nb, resources):
            make_inert(nb)
            return nb, resources

    return MakeInert


def __getattr__(name):  # `autograder.grade.sanitize_outputs.MakeInert` without importing nbconvert at import time
    if name == "MakeInert":
        return _preprocessor_class()
    raise AttributeError(name)
