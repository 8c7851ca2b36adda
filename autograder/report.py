"""The class report: one self-contained HTML page per assignment (or the whole course), PNG figures beside it.

Content: score distribution, pass rate per grade cell, the most frequent diagnosed mistakes (from the checks'
"Likely mistake: ..." messages), flagged submissions, grading time per submission. Figures are embedded as
base64 PNG (the page opens offline, no CDN) and also written next to it.
"""
from __future__ import annotations

import base64
import collections
import datetime
import html
import io
import textwrap
from pathlib import Path

from nbgrader.api import Gradebook

from autograder.coursedir import course_id, default_db_url
from autograder.grade.gradebook import RunsTable


def collect_data(course_dir: Path, db_url: str, assignment: str | None) -> dict:
    """Scores per submission and per grade cell, plus our runs rows, for one assignment or all."""
    submissions, cells, names = [], collections.defaultdict(list), []
    with Gradebook(db_url, course_id(course_dir)) as gb:
        for a in gb.assignments:
            if assignment and a.name != assignment:
                continue
            names.append(a.name)
            for sub in a.submissions:
                submissions.append({"assignment": a.name, "student": sub.student.id, "score": sub.score,
                                    "max_score": a.max_score})
                for nb in sub.notebooks:
                    for grade in nb.grades:
                        cells[f"{a.name}:{grade.name}" if not assignment else grade.name].append(
                            (grade.score or 0.0) >= (grade.max_score or 0.0) - 1e-9)
    runs = RunsTable(db_url)
    try:
        rows = runs.all(assignment)
    finally:
        runs.dispose()
    return {"assignments": names, "submissions": submissions, "cells": dict(cells), "runs": rows}


COUNT_LABELS = ("submissions", "notebooks")


def _figure_png(draw, size=(7, 3.6)) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=size)
    draw(ax)
    for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
        if label in COUNT_LABELS:  # counts of submissions or notebooks: whole numbers on the axis
            axis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def figures(data: dict) -> dict[str, bytes]:
    import seaborn as sns

    out = {}
    scores = [100.0 * s["score"] / s["max_score"] for s in data["submissions"] if s["max_score"]]
    if scores:
        out["scores.png"] = _figure_png(lambda ax: (sns.histplot(scores, bins=10, binrange=(0, 100), ax=ax),
                                                    ax.set(xlabel="score (% of max)", ylabel="submissions",
                                                           title="Score distribution")))
    if data["cells"]:
        names = sorted(data["cells"])
        rates = [100.0 * sum(data["cells"][n]) / len(data["cells"][n]) for n in names]
        out["pass_rate.png"] = _figure_png(lambda ax: (sns.barplot(x=rates, y=names, ax=ax, color="tab:blue"),
                                                       ax.set(xlabel="full marks (% of submissions)", xlim=(0, 100),
                                                              title="Pass rate per grade cell")),
                                           size=(9, 1.5 + 0.3 * len(names)))
    mistakes = top_mistakes(data["runs"])
    if mistakes:
        labels = [textwrap.shorten(f"{cell}: {text}", 70) for (cell, text), _ in mistakes]
        counts = [count for _, count in mistakes]
        out["mistakes.png"] = _figure_png(lambda ax: (sns.barplot(x=counts, y=labels, ax=ax, color="tab:red"),
                                                      ax.set(xlabel="submissions", title="Most frequent mistakes")),
                                          size=(11, 1.5 + 0.4 * len(labels)))
    seconds = [r["seconds"] for r in data["runs"] if r["seconds"] is not None]
    if seconds:
        out["grading_time.png"] = _figure_png(lambda ax: (sns.histplot(seconds, bins=15, ax=ax),
                                                          ax.set(xlabel="seconds", ylabel="notebooks",
                                                                 title="Grading time per notebook")))
    return out


def top_mistakes(runs: list[dict], n: int = 10):
    counter = collections.Counter((cell, text) for r in runs for cell, text in r["mistakes"].items())
    return counter.most_common(n)


def render(data: dict, pngs: dict[str, bytes], title: str) -> str:
    esc = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title><style>"
             "body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
             "text-align:left;vertical-align:top}th{background:#f2f2f2}.held{color:#b00;font-weight:bold}"
             "</style></head><body>",
             f"<h1>{esc(title)}</h1>",
             f"<p>Generated {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}. "
             f"{len(data['submissions'])} submission(s); assignments: {esc(', '.join(data['assignments']))}.</p>"]
    if data["submissions"]:
        scores = [s["score"] / s["max_score"] for s in data["submissions"] if s["max_score"]]
        if scores:
            parts.append(f"<p>Mean score {100 * sum(scores) / len(scores):.1f}% "
                         f"(min {100 * min(scores):.0f}%, max {100 * max(scores):.0f}%).</p>")
    for name, caption in (("scores.png", "Score distribution"), ("pass_rate.png", "Pass rate per grade cell"),
                          ("mistakes.png", "Most frequent diagnosed mistakes"),
                          ("grading_time.png", "Grading time")):
        if name in pngs:
            data_uri = base64.b64encode(pngs[name]).decode()
            parts.append(f"<h2>{caption}</h2><img alt='{caption}' src='data:image/png;base64,{data_uri}'>")
    mistakes = top_mistakes(data["runs"])
    if mistakes:
        parts.append("<table><tr><th>grade cell</th><th>diagnosed mistake</th><th>submissions</th></tr>")
        parts += [f"<tr><td>{esc(c)}</td><td>{esc(t)}</td><td>{n}</td></tr>" for (c, t), n in mistakes]
        parts.append("</table>")
    flagged = [r for r in data["runs"] if r["flags"]]
    parts.append(f"<h2>Flagged submissions ({len(flagged)})</h2>")
    if flagged:
        parts.append("<table><tr><th>student</th><th>notebook</th><th>status</th><th>findings</th></tr>")
        for r in sorted(flagged, key=lambda r: (not r["held"], r["student"])):
            findings = "<br>".join(esc(f"[{f['severity']}] {f['code']} in {f['cell']}: {f['message']}")
                                   for f in r["flags"])
            status = f"<span class='held'>{esc(r['status'])}</span>" if r["held"] else esc(r["status"])
            parts.append(f"<tr><td>{esc(r['student'])}</td><td>{esc(r['assignment'])}/{esc(r['notebook'])}</td>"
                         f"<td>{status}</td><td>{findings}</td></tr>")
        parts.append("</table><p>Held submissions score 0 (manual score) until reviewed in formgrader.</p>")
    else:
        parts.append("<p>None.</p>")
    parts.append("<h2>Submissions</h2><table><tr><th>student</th><th>notebook</th><th>score</th><th>status</th>"
                 "<th>seconds</th><th>notes</th></tr>")
    for r in sorted(data["runs"], key=lambda r: (r["assignment"], r["student"], r["notebook"])):
        parts.append(f"<tr><td>{esc(r['student'])}</td><td>{esc(r['assignment'])}/{esc(r['notebook'])}</td>"
                     f"<td>{r['score']:g} / {r['max_score']:g}</td><td>{esc(r['status'])}</td>"
                     f"<td>{(r['seconds'] or 0):.1f}</td><td>{esc('; '.join(r['notes'])[:300])}</td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)


def write_report(course_dir, assignment: str | None = None, db_url: str | None = None) -> Path:
    """Write reports/<assignment or course>/index.html (+ PNGs); returns the HTML path."""
    course_dir = Path(course_dir).resolve()
    data = collect_data(course_dir, db_url or default_db_url(course_dir), assignment)
    folder = course_dir / "reports" / (assignment or "course")
    folder.mkdir(parents=True, exist_ok=True)
    pngs = figures(data)
    for name, png in pngs.items():
        (folder / name).write_bytes(png)
    title = f"Grading report: {assignment}" if assignment else f"Grading report: course {course_id(course_dir)}"
    page = folder / "index.html"
    page.write_text(render(data, pngs, title))
    return page
