"""Jupyter server settings for the course service (formgrader) and instructor servers.

The formgrader tab of JupyterLab shows the formgrader page in an iframe. Since JupyterHub 4.1 every
single-user server sends `Content-Security-Policy: frame-ancestors 'none'`, so that iframe stays blank
(nbgrader issue #1870). The safe default here keeps that policy; instructors open the formgrader as a
full page at /services/<course>/formgrader. Where the hub runs with per-user subdomains
(JupyterHub.subdomain_host), each server is its own origin and `frame-ancestors 'self'` is safe again:
set FORMGRADER_FRAME_SELF=1 in the service's environment (the hub config does so when subdomains are on).
"""
import os

c = get_config()  # noqa: F821

if os.environ.get("FORMGRADER_FRAME_SELF") == "1":
    c.ServerApp.tornado_settings = {"headers": {"Content-Security-Policy": "frame-ancestors 'self'"}}
