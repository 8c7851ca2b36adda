"""The shell every instructor page shares (the assignment and course reports, the similarity page): the
document head with one style sheet, inline images, and the script that sorts a table by a clicked column.

The pages only ever put escaped text inside this shell (`html.escape`, or markdown rendered with raw HTML
escaped); the sort script is the one script they carry.
"""
from __future__ import annotations

import base64
import html

# Base rules for every page; a page adds its own after them (`page_head(..., style=...)`).
BASE_STYLE = ("body{font-family:sans-serif;margin:2em auto;color:#222}"
              "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
              "text-align:left;vertical-align:top}th{background:#f2f2f2}img{max-width:100%}"
              "pre{background:#fafafa;border:1px solid #ddd;padding:.5em;overflow-x:auto;font-size:12px}")

# Click a column heading of a `table.sortable` to sort by it (numbers numerically, the rest as text); a second
# click reverses.
SORT_SCRIPT = """<script>
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.style.cursor = 'pointer'; th.title = 'sort';
  th.addEventListener('click', function () {
    var body = th.closest('table').tBodies[0], col = th.cellIndex;
    var asc = th.dataset.order !== 'asc'; th.dataset.order = asc ? 'asc' : 'desc';
    var key = function (row) {
      var cell = row.cells[col], text = cell ? (cell.dataset.sort || cell.textContent) : '';
      var num = parseFloat(text);
      return isNaN(num) ? text.trim().toLowerCase() : num;
    };
    var order = function (a, b) {
      var x = key(a), y = key(b);
      if (typeof x !== typeof y) { return typeof x === 'number' ? -1 : 1; }
      return x < y ? -1 : x > y ? 1 : 0;
    };
    Array.from(body.rows).sort(function (a, b) { return asc ? order(a, b) : -order(a, b); })
      .forEach(function (row) { body.appendChild(row); });
  });
});
</script>"""


def page_head(title: str, *, width_px: int, style: str = "") -> str:
    """`<!doctype html>` up to and including `<body>`: the escaped title and the shared style sheet."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{BASE_STYLE}body{{max-width:{width_px}px}}{style}</style></head><body>")


def page_end() -> str:
    """The sort script and the closing tags."""
    return SORT_SCRIPT + "</body></html>"


def img(png: bytes, alt: str) -> str:
    """A PNG inlined as a data URL (a page is one self-contained file)."""
    return f"<img alt='{html.escape(alt)}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>"
