"""Copied work: the students' solution cells of one assignment compared pairwise; it only reports, never grades.

`autograder similarity ASSIGNMENT` (and the similarity section of the course report) runs `copydetect`
(PyPI, the winnowing algorithm of MOSS: Schleimer, Wilkerson & Aiken, "Winnowing: local algorithms for document
fingerprinting", SIGMOD 2003) on one text per student: the code of their notebook's solution cells
(`nbgrader.solution`), in notebook order. copydetect tokenizes the code with Pygments and replaces every name
by one letter and drops comments, so renamed variables and changed comments do not hide a copy; fingerprints
are a set, so reordered functions do not either. The same comparison runs on the code's structure too
(`autograder.publish.fingerprint`: statements without effect dropped, own names canonical), so no-op statements
slipped between the copied ones do not hide it; a pair's similarity is the higher of the two.

What every student was given never counts (copydetect's boilerplate): every code cell of the released notebook
(signatures, docstrings, the `raise NotImplementedError()` stubs, imports, tests) and every provided `.py` file of
the release (e.g. `provided.py`, the earlier notebooks' components). `include_reference=True` adds the reference
solution (the source notebook's solution cells) to it, for exercises with essentially one way to write them
(and for the demo, whose students are all edits of the reference).

The grader's stand-ins of the assignment's exercises (autograder/checks/stand_ins.py: working parts it lends to a
check, issue #31) take part as one more "student", `(the grader's stand-ins)`: a submission that holds them is
reported beside it.

A pair's similarity is measured on each student's own code: the filtered characters outside every k-gram of the
starter code. The share of a student's own code that lies in fingerprints (winnowed k-grams) found in the other's
is computed for both; the pair's similarity is the higher share, and a pair is reported when it reaches
`threshold` and the two share at least `min_overlap` characters of their own code (so that two students who
both wrote the same one-line answer are not reported). Output in
`<course>/reports/<assignment>/`: `similarity.html` (ranked pairs with the matched regions side by side, a heat
map of the class, one self-contained page), `similarity.csv` (every pair with any overlap) and
`similarity.png` (the heat map).
"""
from __future__ import annotations

import csv
import html
import hashlib
import io
import itertools
import json
import logging
import multiprocessing
import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np

from autograder.course.cells import is_solution_code
from autograder.publish.html import img, page_end, page_head
from autograder.submissions.submitted import submitted_notebooks

NOISE = 25  # copydetect's noise threshold: shortest match (filtered characters) that counts
GUARANTEE = 30  # every match this long is found (window = GUARANTEE - NOISE + 1)
THRESHOLD = 0.6  # share of a student's own (non-boilerplate) code found in the other's
MIN_OVERLAP = 60  # own filtered characters two students must share to be reported at all

MAX_TABLE, MAX_DETAILS = 500, 50  # rows of the pairs table, pairs shown side by side (the CSV has every pair)

CSV_COLUMNS = ["student_a", "student_b", "similarity", "similarity_a", "similarity_b", "overlap", "reported"]


@dataclass
class Pair:
    a: str
    b: str
    similarity_a: float  # share of a's own code (filtered characters outside the starter code) found in b's
    similarity_b: float
    overlap: int  # own characters both matched: the smaller of the two counts
    slices_a: np.ndarray = field(repr=False, default=None)
    slices_b: np.ndarray = field(repr=False, default=None)
    text_similarity: float = 0.0  # the higher share measured on the text alone
    structure_similarity: float | None = 0.0  # ... on the structure (autograder.publish.fingerprint); None: not
    # measured, the text alone reports the pair

    @property
    def similarity(self) -> float:
        return max(self.similarity_a, self.similarity_b)


@dataclass
class Result:
    assignment: str
    students: list[str]
    documents: dict[str, str]
    pairs: list[Pair]  # every pair with any overlap, most similar first
    threshold: float
    min_overlap: int

    @property
    def reported(self) -> list[Pair]:
        return [p for p in self.pairs if self.is_reported(p)]

    def is_reported(self, pair: Pair) -> bool:
        return pair.similarity >= self.threshold and pair.overlap >= self.min_overlap

    def matrix(self) -> np.ndarray:
        index = {s: i for i, s in enumerate(self.students)}
        out = np.zeros((len(self.students), len(self.students)))
        for p in self.pairs:
            out[index[p.a], index[p.b]] = out[index[p.b], index[p.a]] = p.similarity
        np.fill_diagonal(out, np.nan)
        return out


# ------------------------------------------------------------------------------------------------- fingerprints
def stable_kgram_hashes(string: str, k: int) -> np.ndarray:
    """The hash of every k-gram of `string` (as copydetect's `utils.hashed_kgrams`), the same in every process.

    copydetect hashes k-grams with Python's `hash()`, which is salted per process (PYTHONHASHSEED): the same class
    gave 120-124 shared characters over four runs and pairs moved across the threshold. Similarity is a report an
    instructor acts on, and a regrade must not change it: these hashes are the first 8 bytes of BLAKE2b."""
    digest = hashlib.blake2b
    return np.array([int.from_bytes(digest(string[i:i + k].encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                    "little", signed=True) for i in range(len(string) - k + 1)], dtype=np.int64)


def _copydetect_with_stable_hashes():
    """copydetect, its k-gram hash replaced by `stable_kgram_hashes` (its fingerprinting looks the function up in
    `copydetect.utils` at each call, so this is the one place to set it)."""
    import copydetect.utils

    copydetect.utils.hashed_kgrams = stable_kgram_hashes
    return copydetect


def _fingerprint(text: str, window: int, noise: int = NOISE, boilerplate: set | None = None):
    """copydetect's CodeFingerprint of `text`, plus `own`: which filtered characters are the student's own (not
    inside any k-gram of the boilerplate). Fingerprints of the boilerplate are dropped."""
    CodeFingerprint = _copydetect_with_stable_hashes().CodeFingerprint
    hashed_kgrams = stable_kgram_hashes

    logging.getLogger().disabled, was = True, logging.getLogger().disabled  # "not tokenized" chatter on empty text
    try:
        fp = CodeFingerprint("solution.py", noise, window, filter=True, language="python", fp=io.StringIO(text))
    finally:
        logging.getLogger().disabled = was
    size = len(fp.filtered_code)
    fp.own = np.ones(size, dtype=bool)
    if boilerplate:
        # removed here rather than by copydetect's np.intersect1d(assume_unique=True), which also drops a
        # fingerprint that merely repeats inside the student's own code
        fp.hashes = {h for h in fp.hashes if h not in boilerplate}
        fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h not in boilerplate}
        if size >= noise:
            grams = hashed_kgrams(fp.filtered_code, noise)
            given = np.fromiter((h in boilerplate for h in grams.tolist()), dtype=bool, count=len(grams))
            fp.own = ~_covered(np.nonzero(given)[0], noise, size)
    return fp


def _covered(starts, k: int, size: int) -> np.ndarray:
    """Characters covered by the k-grams starting at `starts`."""
    starts = np.asarray(starts, dtype=np.int64)
    marks = np.bincount(starts, minlength=size + 1) - np.bincount(np.minimum(starts + k, size), minlength=size + 1)
    return np.cumsum(marks)[:size] > 0


def _raw_slices(mask: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Runs of True in the filtered code -> (2, N) start/end positions in the raw code (copydetect's mapping)."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    slices = np.array([np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]], dtype=np.int64)
    if len(offsets) and slices.shape[1]:
        slices = slices + offsets[:, 1][np.clip(np.searchsorted(offsets[:, 0], slices), 0, offsets.shape[0] - 1)]
    return slices


def compare_pair(fa, fb):
    """(share of a's own code found in b, share of b's in a, shared own characters, slices a, slices b) or None."""
    from copydetect.utils import find_fingerprint_overlap

    idx_a, idx_b = find_fingerprint_overlap(fa.hashes, fb.hashes, fa.hash_idx, fb.hash_idx)
    if len(idx_a) == 0:
        return None
    matched_a = _covered(idx_a, fa.k, len(fa.filtered_code)) & fa.own
    matched_b = _covered(idx_b, fb.k, len(fb.filtered_code)) & fb.own
    own_a, own_b = int(fa.own.sum()), int(fb.own.sum())
    got_a, got_b = int(matched_a.sum()), int(matched_b.sum())
    if not got_a or not got_b:
        return None
    return (got_a / own_a, got_b / own_b, min(got_a, got_b), _raw_slices(matched_a, fa.offsets),
            _raw_slices(matched_b, fb.offsets))


_PRINTS: list = []  # the fingerprints, inherited by forked comparison workers


def _compare_chunk(chunk):
    return [(i, j, found) for i, j in chunk if (found := compare_pair(_PRINTS[i], _PRINTS[j]))]


def _compare_all(prints: list, candidates: list, workers: int | None):
    """compare_pair over the candidate pairs: in this process, or split over forked processes (the fingerprints'
    hashes use Python's per-process salted hash(), so workers must be forks of this process)."""
    global _PRINTS
    workers = workers or os.cpu_count() or 1
    _PRINTS = prints
    try:
        if workers < 2 or len(candidates) < 5000 or "fork" not in multiprocessing.get_all_start_methods():
            return _compare_chunk(candidates)
        size = -(-len(candidates) // (4 * workers))
        chunks = [candidates[k:k + size] for k in range(0, len(candidates), size)]
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            return [item for part in pool.map(_compare_chunk, chunks) for item in part]
    finally:
        _PRINTS = []


def boilerplate_hashes(texts, noise: int = NOISE) -> set:
    """Every k-gram of the given code (window 1, as copydetect does for boilerplate)."""
    hashes = set()
    for text in dict.fromkeys(texts):  # once each (provided.py is in release/ and source/)
        if text.strip():
            hashes |= _fingerprint(text, 1, noise).hashes
    return hashes


def _matches(documents: dict[str, str], boilerplate, noise: int, guarantee: int, workers: int | None,
             skip=frozenset()) -> dict:
    """(student a, student b) -> compare_pair's result, for every pair of `documents` sharing own code (but the
    pairs in `skip`)."""
    window = guarantee - noise + 1
    ignored = boilerplate_hashes(boilerplate, noise)
    students = sorted(documents)
    prints = {s: _fingerprint(documents[s], window, noise, ignored) for s in students}
    # an inverted index finds the pairs sharing any fingerprint; only those are compared in full
    owners: dict[int, list[int]] = {}
    for i, s in enumerate(students):
        for h in prints[s].hashes:
            owners.setdefault(h, []).append(i)
    candidates = sorted({pair for group in owners.values() if len(group) > 1
                         for pair in itertools.combinations(group, 2)
                         if (students[pair[0]], students[pair[1]]) not in skip})
    return {(students[i], students[j]): found for i, j, found in _compare_all(
        [prints[s] for s in students], candidates, workers)}


def compare_documents(documents: dict[str, str], boilerplate=(), *, assignment: str = "", threshold: float = THRESHOLD,
                      min_overlap: int = MIN_OVERLAP, noise: int = NOISE, guarantee: int = GUARANTEE,
                      workers: int | None = None) -> Result:
    """Every pair of `documents` (student -> code) compared, `boilerplate` (code texts) ignored.

    Twice: on the text, and on its structure (`autograder.publish.fingerprint.normalised`: statements without
    effect dropped, the code's own names canonical), each against the same form of the boilerplate; a pair's
    shares and overlap are those of the form where it is more similar (the highlighted regions are the text's).
    A pair the text alone already reports is not compared again (its `structure_similarity` is None).
    `workers`: processes comparing the pairs (default: the CPU cores, when there are enough pairs to be worth it).
    """
    from autograder.publish.fingerprint import normalised

    text = _matches(documents, boilerplate, noise, guarantee, workers)
    reported = {key for key, found in text.items() if max(found[:2]) >= threshold and found[2] >= min_overlap}
    structure = _matches({s: normalised(code) for s, code in documents.items()},
                         [normalised(code) for code in dict.fromkeys(boilerplate)], noise, guarantee, workers,
                         skip=reported)
    pairs = []
    for key in sorted(text.keys() | structure.keys()):
        by_text, by_structure = text.get(key), structure.get(key)
        text_share = max(by_text[:2]) if by_text else 0.0
        structure_share = max(by_structure[:2]) if by_structure else 0.0
        best = by_text if text_share >= structure_share else by_structure
        slices = by_text[3:5] if by_text else (None, None)
        pairs.append(Pair(*key, *best[:3], *slices, text_similarity=text_share,
                          structure_similarity=None if key in reported else structure_share))
    pairs.sort(key=lambda p: (-p.similarity, -p.overlap, p.a, p.b))
    return Result(assignment, sorted(documents), dict(documents), pairs, threshold, min_overlap)


# ------------------------------------------------------------------------------------------- notebooks -> texts
def solution_code(nb) -> str:
    """The code of a notebook's solution cells, in notebook order."""
    return "\n\n".join(cell.source for cell in nb.cells if is_solution_code(cell))


def _read(path: Path):
    try:
        return nbformat.read(path, as_version=4)
    except Exception:  # a broken notebook has no code to compare
        return None


def student_documents(course_dir: Path, assignment: str) -> dict[str, str]:
    """student -> their solution code (every notebook of the assignment) from submitted/ (what they handed in),
    each notebook read as submissions are read (`autograder.submissions.submitted`)."""
    return {student: "\n\n".join(t for t in (solution_code(nb) for nb in notebooks) if t)
            for student, notebooks in submitted_notebooks(course_dir, assignment).items()}


def starter_code(course_dir: Path, assignment: str, include_reference: bool = False) -> list[str]:
    """What every student was given: the release's code cells and provided .py files (+ the reference)."""
    course_dir = Path(course_dir)
    texts = []
    for folder in (course_dir / "release" / assignment, course_dir / "source" / assignment):
        if not folder.is_dir():
            continue
        texts += [p.read_text(errors="replace") for p in sorted(folder.rglob("*.py")) if ".ipynb_checkpoints" not in
                  p.parts]
    released = course_dir / "release" / assignment
    for path in sorted(released.glob("*.ipynb")) if released.is_dir() else []:
        nb = _read(path)
        if nb is not None:  # each code cell, and the solution cells joined as a student's text joins them
            texts += [c.source for c in nb.cells if c.cell_type == "code"] + [solution_code(nb)]
    if include_reference:
        for path in sorted((course_dir / "source" / assignment).glob("*.ipynb")):
            nb = _read(path)
            if nb is not None:
                texts.append(solution_code(nb))
    return texts


def similarity(course_dir, assignment: str, *, threshold: float = THRESHOLD, min_overlap: int = MIN_OVERLAP,
               include_reference: bool = False, lent_code: str = "") -> Result:
    """Every pair of the assignment's submissions compared. `lent_code`: the source of what the grader lends to its
    checks (autograder/checks/stand_ins.py `code_for`, passed in by the CLI and the demo), compared like one more
    student: a submission holding the grader's stand-ins is reported next to it."""
    course_dir = Path(course_dir).resolve()
    if not (course_dir / "release" / assignment).is_dir():
        raise FileNotFoundError(f"no release of {assignment} in {course_dir / 'release'}: run autograder release")
    documents = student_documents(course_dir, assignment)
    lent = lent_code
    if lent and documents:  # compared like a student: a submission holding the grader's stand-ins is reported
        documents[STAND_INS] = lent
    return compare_documents(documents, starter_code(course_dir, assignment, include_reference),
                             assignment=assignment, threshold=threshold, min_overlap=min_overlap)


STAND_INS = "(the grader's stand-ins)"  # not a student id: nbgrader ids have no spaces or parentheses


# --------------------------------------------------------------------------------------------------- outputs
def heatmap_png(result: Result) -> bytes | None:
    if len(result.students) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    n = len(result.students)
    side = min(14.0, 3.0 + 0.35 * n)
    fig, ax = plt.subplots(figsize=(side + 1.5, side))
    labels = result.students if n <= 60 else False
    sns.heatmap(100 * result.matrix(), vmin=0, vmax=100, cmap="rocket_r", square=True, ax=ax,
                xticklabels=labels, yticklabels=labels, cbar_kws={"label": "similarity (%)"})
    ax.set_title(f"Similarity of solution code: {result.assignment} ({n} students)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=80)
    plt.close(fig)
    return buffer.getvalue()


def _highlighted(text: str, slices) -> str:
    from copydetect.utils import highlight_overlap

    if slices is None or len(slices) == 0 or slices.shape[-1] == 0:
        return html.escape(text)
    marked, _ = highlight_overlap(text, slices, "<mark>", "</mark>", escape_html=True)
    return marked


def write_csv(result: Result, path: Path) -> Path:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for p in result.pairs:
            writer.writerow([p.a, p.b, f"{p.similarity:.3f}", f"{p.similarity_a:.3f}", f"{p.similarity_b:.3f}",
                             p.overlap, result.is_reported(p)])
    return Path(path)


PAGE_STYLE = ".side{display:flex;gap:1em}.side>div{flex:1;min-width:0}mark{background:#ffd27a}"


def pairs_table(result: Result, link: str = "") -> str:
    """The reported pairs as an HTML table (`link`: the similarity page, for anchors from another page)."""
    esc = html.escape
    reported = result.reported
    if not reported:
        return (f"<p>No pair above {100 * result.threshold:.0f}% among {len(result.students)} students "
                f"(highest: {100 * result.pairs[0].similarity:.0f}%).</p>" if result.pairs else
                f"<p>No shared code among {len(result.students)} students.</p>")
    rows = [] if len(reported) <= MAX_TABLE else [
        f"<p>The {MAX_TABLE} most similar of {len(reported)} pairs; similarity.csv lists them all.</p>"]
    rows += ["<table class='sortable'><thead><tr><th>#</th><th>student A</th><th>student B</th>"
            "<th>similarity</th><th>A in B</th><th>B in A</th><th>shared own characters</th></tr></thead><tbody>"]
    for rank, p in enumerate(reported[:MAX_TABLE], 1):
        number = f"<a href='{esc(link)}#pair-{rank}'>{rank}</a>" if rank <= MAX_DETAILS else str(rank)
        rows.append(f"<tr><td>{number}</td><td>{esc(p.a)}</td><td>{esc(p.b)}</td>"
                    f"<td>{100 * p.similarity:.0f}%</td><td>{100 * p.similarity_a:.0f}%</td>"
                    f"<td>{100 * p.similarity_b:.0f}%</td><td>{p.overlap}</td></tr>")
    rows.append("</tbody></table>")
    return "\n".join(rows)


def render(result: Result, png: bytes | None) -> str:
    esc = html.escape
    parts = [page_head(f"Similarity: {result.assignment}", width_px=1200, style=PAGE_STYLE),
             f"<h1>Similarity of solution code: {esc(result.assignment)}</h1>",
             f"<p>{len(result.students)} students compared pairwise on their solution cells with copydetect "
             f"(winnowing fingerprints); the released notebook and provided code are ignored. Reported: pairs "
             f"where at least {100 * result.threshold:.0f}% of one student's own code (what was not given) is found in "
             f"the other's "
             f"(sharing {result.min_overlap}+ characters of their own code, names and comments left out). Matched own "
             f"code is highlighted. This page only reports: grades are unchanged.</p>",
             f"<h2>Pairs above the threshold ({len(result.reported)})</h2>", pairs_table(result)]
    if png:
        parts.append("<h2>The class</h2>" + img(png, "Similarity heat map"))
    if len(result.reported) > MAX_DETAILS:
        parts.append(f"<p>Matched regions of the {MAX_DETAILS} most similar pairs:</p>")
    for rank, p in enumerate(result.reported[:MAX_DETAILS], 1):
        parts.append(f"<h3 id='pair-{rank}'>{rank}. {esc(p.a)} and {esc(p.b)}: {100 * p.similarity:.0f}%</h3>"
                     "<div class='side'>"
                     f"<div><b>{esc(p.a)}</b> ({100 * p.similarity_a:.0f}% of it matched)"
                     f"<pre>{_highlighted(result.documents[p.a], p.slices_a)}</pre></div>"
                     f"<div><b>{esc(p.b)}</b> ({100 * p.similarity_b:.0f}% of it matched)"
                     f"<pre>{_highlighted(result.documents[p.b], p.slices_b)}</pre></div></div>")
    parts.append(page_end())
    return "\n".join(parts)


def write_similarity(course_dir, assignment: str, *, threshold: float = THRESHOLD, min_overlap: int = MIN_OVERLAP,
                     include_reference: bool = False, result: Result | None = None,
                     lent_code: str = "") -> dict[str, Path]:
    """Compare, then write reports/<assignment>/similarity.{html,csv,png}; returns their paths and the result."""
    course_dir = Path(course_dir).resolve()
    result = result or similarity(course_dir, assignment, threshold=threshold, min_overlap=min_overlap,
                                  include_reference=include_reference, lent_code=lent_code)
    folder = course_dir / "reports" / assignment
    folder.mkdir(parents=True, exist_ok=True)
    png = heatmap_png(result)
    if png:
        (folder / "similarity.png").write_bytes(png)
    page = folder / "similarity.html"
    page.write_text(render(result, png))
    saved = write_summary(result, folder / SUMMARY, include_reference)
    return {"html": page, "csv": write_csv(result, folder / "similarity.csv"), "summary": saved, "result": result}


SUMMARY = "similarity.json"  # beside the page: what the course report shows of it


def write_summary(result: Result, path: Path, include_reference: bool) -> Path:
    """The comparison's outcome without the students' code: students, settings and every pair's numbers."""
    path.write_text(json.dumps({
        "assignment": result.assignment, "students": result.students, "threshold": result.threshold,
        "min_overlap": result.min_overlap, "include_reference": include_reference,
        "pairs": [[p.a, p.b, p.similarity_a, p.similarity_b, p.overlap] for p in result.pairs]}, indent=1))
    return path


def saved_similarity(course_dir, assignment: str) -> tuple[Result, bool] | None:
    """(the result `autograder similarity` last wrote for `assignment`, without the code; whether it ignored the
    reference solution), or None when it has not run (or its summary does not read)."""
    path = Path(course_dir) / "reports" / assignment / SUMMARY
    try:
        data = json.loads(path.read_text())
        pairs = [Pair(a, b, float(sa), float(sb), int(overlap)) for a, b, sa, sb, overlap in data["pairs"]]
        result = Result(str(data["assignment"]), [str(s) for s in data["students"]], {}, pairs,
                        float(data["threshold"]), int(data["min_overlap"]))
        return result, bool(data["include_reference"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


__all__ = ["compare_documents", "similarity", "write_similarity", "Result", "Pair", "THRESHOLD"]
