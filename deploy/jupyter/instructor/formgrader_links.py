"""Jupyter Server extension: the formgrader's folder links stay below this server's base URL (issue #33).

nbgrader 0.9.6 builds the links of *Manage Assignments* (an assignment's source folder, the preview of its release)
with `linkTo` in formgrader/static/js/utils.js: outside an iframe it writes `/tree/<path>` at the origin's root and
ignores the server's base URL. Behind JupyterHub the course service lives at /services/<course>/, so the link reaches
the hub, which answers 404. The page knows the base URL (`var base_url` of nbgrader's base.tpl).

This extension serves nbgrader's own utils.js at the URL the formgrader loads it from, with a few lines appended that
wrap nbgrader's `linkTo` and put `base_url` in front of the href it writes: /services/<course>/tree/<path>, which
notebook 7 (a dependency of nbgrader) answers with the folder's listing, to those who may open the course service only.
Inside JupyterLab's Formgrader tab (an iframe) nbgrader sends the path to JupyterLab instead; that stays as it is.

Order: Jupyter Server loads its extensions sorted by name and Tornado takes the first handler that matches, so this
module (`formgrader_links`) answers before nbgrader's static handler (`nbgrader.server_extensions.formgrader`).
Enabled in jupyter_server_config.json next to this file; jupyter_server_config.py puts this folder on sys.path.
tests/deploy/test_journey.py (test_formgrader_links_answer) follows the links in Chromium.
"""
import re
from pathlib import Path

from jupyter_server.utils import url_path_join
from tornado import web

LINKS_WITH_BASE_URL = """
// transformers101 (deploy/jupyter/instructor/formgrader_links.py): nbgrader's links below the server's base URL
linkTo = (function (nbgraderLinkTo) {
    return function (type, path) {
        var link = nbgraderLinkTo(type, path);
        if (window !== window.top) {
            return link;  // JupyterLab's Formgrader tab: nbgrader opens the path in JupyterLab, no URL
        }
        return function (index, element) {
            var a = link(index, element);
            a.setAttribute("href", base_url + a.getAttribute("href"));
            return a;
        };
    };
})(linkTo);
"""


def nbgrader_utils_js() -> Path:
    from nbgrader.server_extensions.formgrader import handlers

    return Path(handlers.static_path) / "js" / "utils.js"


def patched_utils_js() -> str | None:
    """nbgrader's utils.js with the wrapper appended; None when nbgrader's file has no `linkTo` to wrap."""
    source = nbgrader_utils_js().read_text(encoding="utf-8")
    if not re.search(r"^var linkTo = function", source, re.MULTILINE):
        return None
    return source + LINKS_WITH_BASE_URL


class UtilsJsHandler(web.RequestHandler):
    """nbgrader serves its static files with a plain tornado StaticFileHandler, without login; so does this one."""

    def initialize(self, text: str):
        self.text = text

    def get(self):
        self.set_header("Content-Type", "application/javascript; charset=UTF-8")
        self.set_header("Cache-Control", "no-cache")
        self.write(self.text)


def _jupyter_server_extension_points():
    return [{"module": "formgrader_links"}]


def _load_jupyter_server_extension(serverapp):
    text = patched_utils_js()
    if text is None:
        serverapp.log.warning("formgrader_links: nbgrader's utils.js has no linkTo (another nbgrader version?); "
                              "the formgrader's folder links are left as nbgrader makes them")
        return
    web_app = serverapp.web_app
    pattern = re.escape(url_path_join(web_app.settings["base_url"], "/formgrader/static/js/utils.js"))
    web_app.add_handlers(".*$", [(pattern, UtilsJsHandler, {"text": text})])
    serverapp.log.info("formgrader_links: the formgrader's folder links go below %s", web_app.settings["base_url"])
