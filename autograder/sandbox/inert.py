"""What a kernel printed and what a student wrote, made inert: nothing in it runs in a page an instructor or a
student opens (issue #32, doors 1 and 7).

- the allow-list of student HTML (`inert_html`: bleach, as nbconvert's `SanitizeHTML` uses it): text formatting,
  headings, lists, tables, code, links to http(s)/mailto/#anchors, images that are `data:image/png|jpeg|gif|svg+xml`;
- `active_parts`: what in a rendered page would run, load, embed or take input (see grade/inert_notebook.py);
- `inert_markdown`, `as_text_block`: an active markdown or raw cell rewritten so that it shows, and runs nothing;
- `image_metadata`: an output's metadata cut down to a numeric width/height per image type (nbconvert writes those
  two unquoted into the `<img>` tag);
- `inert_output`: one output made inert in place.

Used by the grading worker (grade/inert_notebook.py, before nbgrader stores the graded notebook that the
formgrader renders) and by the feedback pages (publish/feedback.py): one allow-list for every page.
"""
from __future__ import annotations

import functools
import html
import re
from html.parser import HTMLParser

# -------------------------------------------------------------------------------------------- the allow-list
ALLOWED_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details", "div", "dl",
    "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li",
    "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody",
    "td", "tfoot", "th", "thead", "tr", "u", "ul", "var",
})
COMMON_ATTRIBUTES = frozenset({"class", "title", "align", "style", "id"})
TAG_ATTRIBUTES = {"a": {"href"}, "img": {"src", "alt", "width", "height"}, "td": {"colspan", "rowspan"},
                  "th": {"colspan", "rowspan", "scope"}, "ol": {"start"}, "col": {"span"}, "colgroup": {"span"}}
IMAGE_PREFIXES = ("data:image/png;base64,", "data:image/jpeg;base64,", "data:image/gif;base64,",
                  "data:image/svg+xml;base64,")  # in an <img>, SVG is a picture: it never runs a script
LINK_PREFIXES = ("http://", "https://", "mailto:", "#")
CSS_PROPERTIES = ("display", "color", "background-color", "text-align", "vertical-align", "font-weight", "font-style",
                  "text-decoration", "border", "border-collapse", "padding", "margin", "width", "height")
def _attribute_allowed(tag: str, name: str, value: str) -> bool:
    if name == "src":
        return tag == "img" and value.startswith(IMAGE_PREFIXES)
    if name == "href":
        return value.strip().lower().startswith(LINK_PREFIXES)
    return name in COMMON_ATTRIBUTES or name in TAG_ATTRIBUTES.get(tag, ())


@functools.lru_cache(maxsize=1)
def _cleaner():
    from bleach.css_sanitizer import CSSSanitizer
    from bleach.sanitizer import Cleaner

    return Cleaner(tags=ALLOWED_TAGS, attributes=_attribute_allowed, protocols={"http", "https", "mailto", "data"},
                   strip=False, strip_comments=True, css_sanitizer=CSSSanitizer(allowed_css_properties=CSS_PROPERTIES))


def inert_html(text: str) -> str:
    """`text` with every tag and attribute outside the allow-list escaped (shown as text, never run)."""
    return _cleaner().clean(text)



# -------------------------------------------------------------------------------------------- active content
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
    candidate = _defang_links(inert_html(source))
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


def inert_output(output) -> list[str]:
    """Make one output inert in place; returns what was active in it."""
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
            data[mime] = inert_html(text)
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
