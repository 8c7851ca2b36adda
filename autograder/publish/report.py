"""The class report: one self-contained HTML page per assignment and one for the whole course, PNG figures beside.

Every figure is embedded as a base64 PNG and the few lines of JavaScript that sort the tables (click a column
heading) are inline: a page opens offline and can be mailed as one file. The figures are also written next to it.

* The course page (`autograder report`, reports/course/index.html): the student x assignment matrix (a heat map of
  scores in % and a sortable table with totals per student and per assignment; scores after late penalties, as
  nbgrader's CSV export computes them), late submissions and their penalties, submissions held for review with
  their findings, grades still waiting for a manual grade (formgrader), copied work (what `autograder similarity`
  last wrote per assignment: ranked pairs, with a link to their side-by-side page), then the figures of the whole
  course.
* An assignment page (`autograder report ASSIGNMENT`, reports/<assignment>/index.html): score distribution, pass
  rate and score distribution per grade cell, the most frequent diagnosed mistakes with one anonymised example of
  each (the message and the code of the solution cell it tests, from one submission, without the student's id),
  flagged submissions, every submission, grading time.

All of it comes from nbgrader's gradebook and our runs table (`autograder_runs`: status, held, flags, `messages`
and `mistakes` per grade cell), never from parsing messages: the mistakes are catalogue ids (`coursekit.mistakes`,
handed on by the hidden checks as data), counted as ids and shown with the catalogue's text.
"""
from __future__ import annotations

import collections
import datetime
import html
import io
import re
import textwrap
import warnings
from pathlib import Path

from autograder.course import cells as cell_kinds
from autograder.course.coursedir import course_id, default_db_url, nbgrader_config
from autograder.gradebook.queries import (grade_rows, held_notebooks, roster, run_rows, submission_results,
                                          waits_for_grader)
from autograder.gradebook.store import open_gradebook
from autograder.publish.html import img, page_end, page_head
from autograder.submissions.files import submission_limits
from autograder.submissions.submitted import read_submitted
from coursekit.api import INTENDED_CASCADES, check_of, tested_name
from coursekit.mistakes import shown_text

esc = html.escape

STYLE = ("td.num{text-align:right}tfoot td{font-weight:bold;background:#fafafa}.held{color:#b00;font-weight:bold}"
         "nav a{margin-right:1em}td.example{max-width:620px}"
         "td.example pre{max-width:600px;max-height:24em;overflow:auto}"
         "td.mistake{max-width:260px}#matrix th{max-width:9em;overflow-wrap:anywhere}")


# ------------------------------------------------------------------------------------------------------ data
def collect_data(course_dir: Path, db_url: str, assignment: str | None) -> dict:
    """Scores per submission and per grade cell, late work, pending manual grades, our runs rows: what
    `autograder.gradebook.queries` reads, arranged for the pages."""
    cells, cell_scores = collections.defaultdict(list), collections.defaultdict(list)
    lost = collections.defaultdict(dict)  # (student, assignment) -> {grade cell: points lost}
    rows = run_rows(db_url, assignment)
    held = held_notebooks(rows)
    with open_gradebook(course_dir, db_url=db_url) as gb:
        students = roster(gb)
        manual = [{**g, "max_score": g["max_score"] or 0.0}
                  for g in grade_rows(gb, [assignment] if assignment else None) if waits_for_grader(g, held)]
        max_scores, results, grades = submission_results(gb, assignment)
    submissions = [{key: r[key] for key in ("assignment", "student", "score", "final", "penalty", "max_score")}
                   for r in results]
    late = [{"assignment": r["assignment"], "student": r["student"], "timestamp": r["timestamp"],
             "duedate": r["duedate"], "hours": r["seconds_late"] / 3600.0, "penalty": r["penalty"],
             "raw": r["score"], "final": r["final"]} for r in results if r["seconds_late"] > 0]
    for grade in grades:
        score, maximum = grade["score"] or 0.0, grade["max_score"]
        if grade["cell_type"] == "code" and maximum:  # automatic points lost
            lost[(grade["student"], grade["assignment"])][grade["cell"]] = maximum - score
        key = f"{grade['assignment']}:{grade['cell']}" if not assignment else grade["cell"]
        cells[key].append(score >= (maximum or 0.0) - 1e-9)
        if maximum:
            cell_scores[key].append(100.0 * score / maximum)
    return {"assignments": list(max_scores), "submissions": submissions, "cells": dict(cells), "runs": rows,
            "cell_scores": dict(cell_scores), "late": late, "manual": manual, "max_scores": max_scores,
            "roster": students, "answer_keys": manual_answer_keys(course_dir, manual), "lost": dict(lost)}


def manual_answer_keys(course_dir: Path, manual: list[dict]) -> dict:
    """(assignment, notebook, grade_id) -> the written answer's key (question, model answer, rubric) from
    course/source, for every cell that waits for a grader (the report is for instructors only)."""
    from autograder.course.written import source_answer_keys

    keys = {}
    for assignment, notebook in sorted({(m["assignment"], m["notebook"]) for m in manual}):
        for grade_id, key in source_answer_keys(course_dir, assignment, notebook).items():
            keys[(assignment, notebook, grade_id)] = key
    return keys


def class_matrix(data: dict) -> tuple[list[str], list[str], dict]:
    """(students, assignments, {(student, assignment): final score}); a student with no submission has no entry."""
    students = sorted(set(data["roster"]) | {s["student"] for s in data["submissions"]})
    return students, list(data["assignments"]), {(s["student"], s["assignment"]): s["final"]
                                                  for s in data["submissions"]}


# --------------------------------------------------------------------------------------------------- figures
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


def matrix_png(data: dict) -> bytes | None:
    import numpy as np
    import seaborn as sns

    students, assignments, final = class_matrix(data)
    if not students or not assignments:
        return None
    values = np.full((len(students), len(assignments)), np.nan)
    for i, s in enumerate(students):
        for j, a in enumerate(assignments):
            if (s, a) in final and data["max_scores"].get(a):
                values[i, j] = 100.0 * final[(s, a)] / data["max_scores"][a]
    annotate = len(students) <= 40 and len(assignments) <= 12
    labels = students if len(students) <= 80 else False
    longest = max(len(a) for a in assignments)
    height = min(40.0, 1.5 + 0.35 * len(students) + 0.06 * longest)

    def draw(ax):
        sns.heatmap(values, vmin=0, vmax=100, cmap="RdYlGn", annot=annotate, fmt=".0f", xticklabels=assignments,
                    yticklabels=labels, ax=ax, linewidths=0.5, cbar_kws={"label": "score (% of max)"})
        ax.set_xticklabels(ax.get_xticklabels(), rotation=30, ha="right")
        ax.set(title="Score (% of max, after late penalty)")
    return _figure_png(draw, size=(max(7.0, 2.5 + 1.2 * len(assignments)), height))


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
    if data.get("cell_scores"):
        names = sorted(data["cell_scores"])
        xs = [v for n in names for v in data["cell_scores"][n]]
        ys = [n for n in names for _ in data["cell_scores"][n]]

        def draw(ax):
            warnings.filterwarnings("ignore", "vert: bool", module="seaborn")  # seaborn's own call into matplotlib
            sns.boxplot(x=xs, y=ys, order=names, ax=ax, color="#dbe9f6", fliersize=0)
            sns.stripplot(x=xs, y=ys, order=names, ax=ax, color="tab:blue", size=4, alpha=0.6, jitter=0.2)
            ax.set(xlabel="score (% of the cell's points)", xlim=(-5, 105), title="Score distribution per grade cell")
        out["cell_scores.png"] = _figure_png(draw, size=(9, 1.5 + 0.4 * len(names)))
    mistakes = top_mistakes(data["runs"])
    if mistakes:
        labels = [textwrap.shorten(f"{cell}: {shown_text(mistake)}", 70) for (cell, mistake), _ in mistakes]
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
    """The n most frequent ((grade cell, mistake id), number of submissions), from the runs' `mistakes` data."""
    counter = collections.Counter((cell, mistake) for r in runs for cell, mistake in r["mistakes"].items())
    return counter.most_common(n)


# ---------------------------------------------------------------------------------- anonymised mistake examples
def _tested_solution(nb, grade_id: str) -> str | None:
    """The solution cell a grade cell tests: `test_<name>` tests `<name>` (`coursekit.api.tested_name`), else the
    nearest solution cell above."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    by_id = {cell_kinds.grade_id(c): c for c in code if cell_kinds.is_solution(c)}
    tested = tested_name(grade_id)
    if tested is not None and tested in by_id:
        return by_id[tested].source
    position = next((i for i, c in enumerate(code) if cell_kinds.grade_id(c) == grade_id), None)
    if position is None:
        return None
    return next((code[i].source for i in range(position - 1, -1, -1) if cell_kinds.is_solution(code[i])), None)


def anonymise(text: str, student: str) -> str:
    return re.sub(re.escape(student), "<student>", text) if student else text


def mistake_examples(course_dir: Path, runs: list[dict], mistakes) -> dict:
    """(cell, mistake id) -> {"message", "code"} from one submission with that mistake (the first by student id);
    its notebook is read as submissions are read (`submissions.submitted.read_submitted`)."""
    examples = {}
    limit = submission_limits(nbgrader_config(course_dir)).notebook_bytes
    for (cell, mistake), _ in mistakes:
        for run in sorted(runs, key=lambda r: (r["student"], r["notebook"])):
            if run["mistakes"].get(cell) != mistake:
                continue
            code = None
            for folder in ("submitted", "autograded"):
                path = course_dir / folder / run["student"] / run["assignment"] / f"{run['notebook']}.ipynb"
                if path.exists():
                    nb = read_submitted(path, limit)  # as submissions are read: no link, no oversized file
                    code = _tested_solution(nb, cell) if nb is not None else None  # unreadable: no example code
                    break
            message = run["messages"].get(cell) or shown_text(mistake)
            examples[(cell, mistake)] = {"message": anonymise(message, run["student"]),
                                      "code": anonymise(code, run["student"]) if code else None}
            break
    return examples


# ------------------------------------------------------------------------------------------------------ HTML
def _page_head(title: str) -> list[str]:
    return [page_head(title, width_px=1100, style=STYLE), f"<h1>{esc(title)}</h1>",
            f"<p>Generated {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}.</p>"]


def _score(value: float) -> str:
    return f"{value:.4g}"


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else ""


def matrix_table(data: dict) -> str:
    students, assignments, final = class_matrix(data)
    maxima = data["max_scores"]
    total_max = sum(maxima.get(a, 0.0) for a in assignments)
    head = "".join(f"<th>{esc(a)} (/{_score(maxima.get(a, 0.0))})</th>" for a in assignments)
    rows = [f"<table class='sortable' id='matrix'><thead><tr><th>student</th>{head}<th>total (/{_score(total_max)})"
            "</th><th>%</th></tr></thead><tbody>"]
    for s in students:
        cells = []
        for a in assignments:
            cells.append(f"<td class='num'>{_score(final[(s, a)])}</td>" if (s, a) in final
                         else "<td class='num' data-sort='-1'>&ndash;</td>")
        total = sum(final.get((s, a), 0.0) for a in assignments)
        percent = 100.0 * total / total_max if total_max else 0.0
        rows.append(f"<tr><td>{esc(s)}</td>{''.join(cells)}<td class='num'>{_score(total)}</td>"
                    f"<td class='num'>{percent:.1f}</td></tr>")
    rows.append("</tbody><tfoot><tr><td>mean (submitted)</td>")
    for a in assignments:
        got = [final[(s, a)] for s in students if (s, a) in final]
        rows.append(f"<td class='num'>{_score(sum(got) / len(got)) if got else '&ndash;'}"
                    f"<br><small>{len(got)} submitted</small></td>")
    totals = [sum(final.get((s, a), 0.0) for a in assignments) for s in students]
    mean_total = sum(totals) / len(totals) if totals else 0.0
    rows.append(f"<td class='num'>{_score(mean_total)}</td>"
                f"<td class='num'>{100.0 * mean_total / total_max if total_max else 0.0:.1f}</td></tr></tfoot></table>")
    return "\n".join(rows)


def late_table(data: dict) -> str:
    if not data["late"]:
        return "<p>None.</p>"
    rows = ["<table class='sortable'><thead><tr><th>student</th><th>assignment</th><th>submitted</th><th>due</th>"
            "<th>hours late</th><th>raw score</th><th>penalty</th><th>final</th></tr></thead><tbody>"]
    for item in sorted(data["late"], key=lambda r: (r["assignment"], r["student"])):
        rows.append(f"<tr><td>{esc(item['student'])}</td><td>{esc(item['assignment'])}</td>"
                    f"<td>{_when(item['timestamp'])}</td><td>{_when(item['duedate'])}</td>"
                    f"<td class='num'>{item['hours']:.1f}</td><td class='num'>{_score(item['raw'])}</td>"
                    f"<td class='num'>{_score(item['penalty'])}</td>"
                    f"<td class='num'>{_score(item['final'])}</td></tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)


def flagged_section(runs: list[dict], only_held: bool = False) -> str:
    flagged = [r for r in runs if (r["held"] if only_held else r["flags"])]
    title = "Held for review" if only_held else "Flagged submissions"
    parts = [f"<h2>{title} ({len(flagged)})</h2>"]
    if not flagged:
        parts.append("<p>None.</p>")
        return "\n".join(parts)
    parts.append("<table class='sortable'><thead><tr><th>student</th><th>notebook</th><th>status</th>"
                 "<th>findings</th></tr></thead><tbody>")
    for r in sorted(flagged, key=lambda r: (not r["held"], r["student"])):
        findings = "<br>".join(esc(f"[{f['severity']}] {f['code']} in {f['cell']}: {f['message']}")
                               for f in r["flags"])
        status = f"<span class='held'>{esc(r['status'])}</span>" if r["held"] else esc(r["status"])
        parts.append(f"<tr><td>{esc(r['student'])}</td><td>{esc(r['assignment'])}/{esc(r['notebook'])}</td>"
                     f"<td>{status}</td><td>{findings}</td></tr>")
    parts.append("</tbody></table><p>Held submissions score 0 (manual score) until reviewed in formgrader.</p>")
    return "\n".join(parts)


def manual_section(data: dict) -> str:
    """The cells still waiting for a grader (held notebooks are under "Held for review" instead), then the model
    answer and rubric of each written answer among them, from course/source."""
    waiting = data["manual"]
    keys = data.get("answer_keys", {})
    parts = [f"<h2>Waiting for manual grading ({len(waiting)})</h2>"]
    if not waiting:
        parts.append("<p>Nothing: every grade cell has its score.</p>")
        return "\n".join(parts)
    notebooks = {(m["assignment"], m["notebook"], m["student"]) for m in waiting}
    parts.append(f"<p>{len(waiting)} answer(s) in {len(notebooks)} notebook(s). Until a grader gives them a score, "
                 "they count 0 in the scores above (an answer left as released scored 0 already and is not "
                 "listed).</p>")
    parts.append("<table class='sortable'><thead><tr><th>student</th><th>notebook</th><th>grade cell</th>"
                 "<th>points</th><th>automatic score</th></tr></thead><tbody>")
    for m in sorted(waiting, key=lambda m: (m["assignment"], m["student"], m["cell"])):
        auto = "" if m["auto_score"] is None else _score(m["auto_score"])
        cell = esc(m["cell"])
        if (m["assignment"], m["notebook"], m["cell"]) in keys:
            cell = f"<a href='#{esc(_rubric_anchor(m['assignment'], m['notebook'], m['cell']))}'>{cell}</a>"
        parts.append(f"<tr><td>{esc(m['student'])}</td><td>{esc(m['assignment'])}/{esc(m['notebook'])}</td>"
                     f"<td>{cell}</td><td class='num'>{_score(m['max_score'])}</td>"
                     f"<td class='num'>{auto}</td></tr>")
    parts.append("</tbody></table><p>Give these scores in formgrader (Manual Grading); the report and "
                 "`autograder export` show them once given.</p>")
    counts = collections.Counter((m["assignment"], m["notebook"], m["cell"]) for m in waiting)
    shown = [(where, keys[where]) for where in sorted(counts) if where in keys]
    if shown:
        parts.append("<h3>Rubrics of the written answers that wait</h3>")
    for (assignment, notebook, grade_id), key in shown:
        parts.append(f"<div class='rubric' id='{esc(_rubric_anchor(assignment, notebook, grade_id))}'>"
                     f"<h4>{esc(assignment)}/{esc(grade_id)} ({_score(key.points)} points; "
                     f"{counts[(assignment, notebook, grade_id)]} waiting)</h4>"
                     f"{_markdown('Question.', key.question)}{_markdown('Model answer.', key.model_answer)}"
                     f"{_markdown('Rubric.', key.rubric)}</div>")
    return "\n".join(parts)


def _markdown(label: str, text: str) -> str:
    """The source notebook's markdown as HTML (bold, lists, code spans); any raw HTML in the text is escaped."""
    import mistune  # nbconvert's markdown renderer

    return mistune.create_markdown(escape=True)(f"**{label}** {text}")


def _rubric_anchor(assignment: str, notebook: str, grade_id: str) -> str:
    return "rubric-" + re.sub(r"[^\w-]", "-", f"{assignment}-{notebook}-{grade_id}")


def mistakes_section(data: dict, examples: dict | None) -> str:
    mistakes = top_mistakes(data["runs"])
    if not mistakes:
        return ""
    parts = ["<h2>Most common mistakes" + (", with an example" if examples is not None else "") + "</h2>",
             "<table class='sortable'><thead><tr><th>grade cell</th><th>diagnosed mistake</th><th>submissions</th>"
             + ("<th>example (anonymised)</th>" if examples is not None else "") + "</tr></thead><tbody>"]
    for (cell, mistake), n in mistakes:
        example = ""
        if examples is not None:
            ex = examples.get((cell, mistake))
            shown = ""
            if ex:
                shown = f"<small>{esc(ex['message'])}</small>" + (f"<pre>{esc(ex['code'])}</pre>" if ex["code"] else "")
            example = f"<td class='example'>{shown}</td>"
        parts.append(f"<tr><td>{esc(cell)}</td><td class='mistake'>{esc(shown_text(mistake))}</td>"
                     f"<td class='num'>{n}</td>"
                     f"{example}</tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


def lost_points(cells: dict[str, float]) -> tuple[dict[str, float], dict[str, tuple[float, list[str]]]]:
    """One submission's lost automatic points ({grade cell: points}), split: (lost in the exercise itself,
    {cell: (points, [the parts that failed])} lost only through a part). Each hidden check judges its exercise
    given working parts (`autograder/checks/kit/parts.py`), so points are lost through a part only in the intended
    cascades (`INTENDED_CASCADES`, e.g. 07's trained classifier needs the student's own model), when a part they
    need lost points too."""
    by_check = {check_of(cell): cell for cell in cells}
    itself, through = {}, {}
    for cell, points in cells.items():
        if points <= 1e-9:
            continue
        parts = [by_check[p] for p in INTENDED_CASCADES.get(check_of(cell), ()) if cells.get(by_check.get(p), 0) > 1e-9]
        if parts:
            through[cell] = (points, parts)
        else:
            itself[cell] = points
    return itself, through


def lost_points_section(data: dict) -> str:
    """Per student and assignment: the automatic points lost in the exercises themselves, and those lost only
    through a part they need (which the student should fix first)."""
    rows = []
    for (student, assignment), cells in sorted(data.get("lost", {}).items()):
        itself, through = lost_points(cells)
        if not itself and not through:
            continue
        own = ", ".join(f"{esc(c)} (&minus;{_score(p)})" for c, p in sorted(itself.items()))
        via = ", ".join(f"{esc(c)} (&minus;{_score(p)}; needs {esc(', '.join(parts))})"
                        for c, (p, parts) in sorted(through.items()))
        rows.append(f"<tr><td>{esc(student)}</td><td>{esc(assignment)}</td>"
                    f"<td class='num'>{_score(sum(itself.values()))}</td><td>{own or '&ndash;'}</td>"
                    f"<td class='num'>{_score(sum(p for p, _ in through.values()))}</td><td>{via or '&ndash;'}</td></tr>")
    if not rows:
        return "<h2 id='lost'>Points lost</h2><p>No automatic points lost.</p>"
    return ("<h2 id='lost'>Points lost: in the exercise itself, or only through a part</h2>"
            "<p>Each exercise is graded on its own: where it uses another exercise of its notebook that failed, the "
            "grader lends a working one. Only the results that need the student's own parts (said in the notebook "
            "next to them) can lose points through a part.</p>"
            "<table class='sortable'><thead><tr><th>student</th><th>assignment</th><th>lost in the exercises</th>"
            "<th>grade cells</th><th>lost through a part</th><th>grade cells (the part that failed)</th></tr></thead>"
            "<tbody>" + "\n".join(rows) + "</tbody></table>")


def submissions_table(runs: list[dict]) -> str:
    parts = ["<h2>Submissions</h2><table class='sortable'><thead><tr><th>student</th><th>notebook</th><th>score</th>"
             "<th>status</th><th>seconds</th><th>notes</th></tr></thead><tbody>"]
    for r in sorted(runs, key=lambda r: (r["assignment"], r["student"], r["notebook"])):
        parts.append(f"<tr><td>{esc(r['student'])}</td><td>{esc(r['assignment'])}/{esc(r['notebook'])}</td>"
                     f"<td class='num' data-sort='{r['score']:g}'>{r['score']:g} / {r['max_score']:g}</td>"
                     f"<td>{esc(r['status'])}</td><td class='num'>{(r['seconds'] or 0):.1f}</td>"
                     f"<td>{esc('; '.join(r['notes'])[:300])}</td></tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


FIGURES = (("scores.png", "Score distribution"), ("pass_rate.png", "Pass rate per grade cell"),
           ("cell_scores.png", "Score distribution per grade cell"),
           ("mistakes.png", "Most frequent diagnosed mistakes"), ("grading_time.png", "Grading time"))


def render(data: dict, pngs: dict[str, bytes], title: str, examples: dict | None = None,
           similarity_html: str = "", links: str = "") -> str:
    """An assignment page (or, with `similarity_html` and the matrix figure, the body of the course page)."""
    parts = _page_head(title)
    parts.append(f"<p>{len(data['submissions'])} submission(s); assignments: "
                 f"{esc(', '.join(data['assignments']))}.</p>")
    if data["submissions"]:
        scores = [s["score"] / s["max_score"] for s in data["submissions"] if s["max_score"]]
        if scores:
            parts.append(f"<p>Mean score {100 * sum(scores) / len(scores):.1f}% "
                         f"(min {100 * min(scores):.0f}%, max {100 * max(scores):.0f}%).</p>")
    parts.append(links)
    if "matrix.png" in pngs or similarity_html:
        parts.append("<nav><a href='#matrix-section'>Class matrix</a><a href='#late'>Late work</a>"
                     "<a href='#held'>Held for review</a><a href='#manual'>Manual grading</a>"
                     "<a href='#similarity'>Copied work</a><a href='#figures'>Figures</a></nav>")
        parts.append("<h2 id='matrix-section'>The class</h2>")
        if "matrix.png" in pngs:
            parts.append(img(pngs["matrix.png"], "Scores per student and assignment"))
            parts.append("<p>Scores in % of the maximum after late penalties; blank: nothing submitted.</p>")
        parts.append(matrix_table(data))
        parts.append(f"<h2 id='late'>Late submissions ({len(data['late'])})</h2>" + late_table(data))
        parts.append(f"<div id='held'>{flagged_section(data['runs'], only_held=True)}</div>")
        parts.append(f"<div id='manual'>{manual_section(data)}</div>")
        parts.append(f"<h2 id='similarity'>Copied work</h2>{similarity_html}")
        parts.append("<h2 id='figures'>The whole course</h2>")
    for name, caption in FIGURES:
        if name in pngs:
            parts.append(f"<h2>{caption}</h2>{img(pngs[name], caption)}")
    parts.append(mistakes_section(data, examples))
    if "matrix.png" not in pngs and not similarity_html:
        parts.append(manual_section(data))
    parts.append(flagged_section(data["runs"]))
    parts.append(lost_points_section(data))
    parts.append(submissions_table(data["runs"]))
    parts.append(page_end())
    return "\n".join(parts)


def similarity_sections(course_dir: Path, assignments: list[str]) -> str:
    """The course page's section: per released assignment, what `autograder similarity` last found (its summary),
    with links to its page; an assignment not compared yet says how to compare it."""
    from autograder.publish import similarity as sim

    saved = {a: sim.saved_similarity(course_dir, a) for a in assignments if (course_dir / "release" / a).is_dir()}
    found = [s for s in saved.values() if s is not None]
    include_reference = bool(found) and all(reference for _, reference in found)
    parts = ["<p>Solution cells compared pairwise per assignment (copydetect winnowing; released and provided "
             "code ignored"
             + ("; the reference solution ignored too" if include_reference else "")
             + "). This only reports: grades are unchanged.</p>"]
    for assignment, summary in saved.items():
        if summary is None:
            parts.append(f"<h3>{esc(assignment)}: not compared yet</h3><p>Run <code>autograder similarity "
                         f"{esc(assignment)}</code>, then this report again.</p>")
            continue
        result = summary[0]
        link = f"../{assignment}/similarity.html"
        parts.append(f"<h3>{esc(assignment)}: {len(result.reported)} pair(s) above "
                     f"{100 * result.threshold:.0f}% <small>(<a href='{esc(link)}'>matched code side by side</a>, "
                     f"<a href='../{esc(assignment)}/similarity.csv'>CSV</a>)</small></h3>")
        parts.append(sim.pairs_table(result, link=link))
    return "\n".join(parts)


def write_report(course_dir, assignment: str | None = None, db_url: str | None = None) -> Path:
    """Write reports/<assignment or course>/index.html (+ PNGs); returns the HTML path.

    Copied work is what `autograder similarity` wrote beside the assignment pages: the course page shows its
    summaries and an assignment page links to its page, whichever report is written first.
    """
    course_dir = Path(course_dir).resolve()
    data = collect_data(course_dir, db_url or default_db_url(course_dir), assignment)
    folder = course_dir / "reports" / (assignment or "course")
    folder.mkdir(parents=True, exist_ok=True)
    pngs = figures(data)
    similarity_html = ""
    if assignment is None:
        matrix = matrix_png(data)
        if matrix:
            pngs["matrix.png"] = matrix
        similarity_html = similarity_sections(course_dir, data["assignments"])
    for name, png in pngs.items():
        (folder / name).write_bytes(png)
    examples = mistake_examples(course_dir, data["runs"], top_mistakes(data["runs"]))
    title = f"Grading report: {assignment}" if assignment else f"Grading report: course {course_id(course_dir)}"
    page = folder / "index.html"
    links = ("<p>Copied work: <a href='similarity.html'>similarity of the solution cells</a> "
             "(<code>autograder similarity</code>).</p>" if assignment and (folder / "similarity.html").exists() else "")
    page.write_text(render(data, pngs, title, examples, similarity_html, links))
    return page
