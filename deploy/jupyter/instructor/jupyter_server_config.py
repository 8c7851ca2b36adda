"""Jupyter server settings for the course service (formgrader) and instructor servers.

Content-Security-Policy. nbgrader's formgrader shows a student's autograded notebook to an instructor in the
instructor's logged-in session (Manual Grading), so this server sends a policy that limits what a script that got
into a page could do: scripts, styles and fonts only from this server (MathJax included, see below), images only
from this server or inline, no plugins, no `<base>` or form posting elsewhere, and no request to another origin
(`connect-src 'self'`: nothing read can be sent away).
It allows `'unsafe-eval'`: JupyterLab and Notebook 7 (the course service's /lab, and /tree where the formgrader's folder
links lead) validate their settings with code compiled at run time and show a blank page without it; with inline
script allowed (next paragraph) it gives a script that got into a page nothing more.
It cannot forbid inline script: nbgrader's own formgrader pages are built on inline scripts (each submission page
writes its ids into one) and `onclick=` handlers, and stop working without 'unsafe-inline'. That part is done
before nbgrader stores a notebook: the grading worker makes the autograded notebook inert
(autograder/grade/inert_notebook.py), and the formgrader's exporter does the same again as it renders a page
(`HTMLExporter.preprocessors` below: so a notebook autograded elsewhere, by plain `nbgrader autograde`, is shown
inert too), with nbconvert's `sanitize_html` on top for HTML and markdown outputs (see docs/threat-model.md).

Frames. The formgrader tab of JupyterLab shows the formgrader page in an iframe. Since JupyterHub 4.1 every
single-user server sends `frame-ancestors 'none'`, so that iframe stays blank (nbgrader issue #1870). The safe
default here keeps that; instructors open the formgrader as a full page at /services/<course>/formgrader. Where
the hub runs with per-user subdomains (JupyterHub.subdomain_host), each server is its own origin and
`frame-ancestors 'self'` is safe again: set FORMGRADER_FRAME_SELF=1 in the service's environment (the hub config
does so when subdomains are on).

MathJax, offline. The Jupyter Server extension `jupyter_server_mathjax` (enabled in jupyter_server_config.json next
to this file, pinned in constraints.txt) serves MathJax 2.7 at <base>/static/jupyter_server_mathjax/. nbgrader's
formgrade template ignores the server's `mathjax_url` and loads MathJax from a CDN, which an offline machine cannot
reach and the policy above refuses: the folder share/ next to this file, put first on JUPYTER_PATH here, holds
nbconvert's `mathjax` macro for the formgrade template, loading the local copy (share/nbconvert/templates/formgrade/
mathjax.html.j2). The variable reaches this server's own nbconvert exporters, and its terminals and kernels.

Folder links. The Jupyter Server extension `formgrader_links` (formgrader_links.py next to this file, enabled in
jupyter_server_config.json; this folder is put on sys.path here) makes the links of the formgrader's Manage Assignments
page go below this server's base URL (/services/<course>/tree/...), not to the hub's root (issue #33).
"""
import os
import sys

c = get_config()  # noqa: F821

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # makes formgrader_links.py (next to this file) importable as a server extension
    sys.path.insert(0, HERE)
TEMPLATES_DATA = os.path.join(HERE, "share")  # a Jupyter data folder: nbconvert/templates/formgrade/mathjax.html.j2
_jupyter_path = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p and p != TEMPLATES_DATA]
os.environ["JUPYTER_PATH"] = os.pathsep.join([TEMPLATES_DATA, *_jupyter_path])

FRAME_ANCESTORS = "'self'" if os.environ.get("FORMGRADER_FRAME_SELF") == "1" else "'none'"
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
    "style-src 'self' 'unsafe-inline'",
    "font-src 'self' data:",
    "img-src 'self' data: blob:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    f"frame-ancestors {FRAME_ANCESTORS}",
])

c.ServerApp.tornado_settings = {"headers": {"Content-Security-Policy": CONTENT_SECURITY_POLICY}}
# The formgrader's exporter: every notebook made inert as it is rendered (a second time for the worker's, the first
# for one autograded elsewhere), and HTML/markdown outputs through nbconvert's own bleach on top.
c.HTMLExporter.preprocessors = ["autograder.grade.inert_notebook.MakeInert"]
c.HTMLExporter.sanitize_html = True
