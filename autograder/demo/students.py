"""The demo's class of students, built by code from a real assignment (`autograder demo`).

`demo_students(source_nb, release_nb)` returns the reference, the blank release, three students who each make
some mistakes of the catalogue (`coursekit.mistakes`, see STUDENT_MISTAKES: the code edits that make them are in
CODE_EDITS) and a hostile one. `demo_class` is the whole class the demo grades, declared here once: those students,
with one pair of copied solutions (`with_copied_pair`) and everyone's written answers (`with_written_answers`).
The tests' tiny synthetic course lives in tests/fixtures/synthetic_course.py.
"""
from __future__ import annotations

import re

import nbformat
from nbformat.v4 import new_code_cell

from autograder.course.cells import grade_id, is_solution_code, is_written
from coursekit.mistakes import MISTAKES


# The demo's mistaken students, each making some mistakes of the catalogue (`coursekit.mistakes`).
STUDENT_MISTAKES = {
    "mistake_scale": ("attention.missing_scale", "positional.frequency_base", "sample.temperature_after_softmax",
                      "rms_norm.eps_outside_root", "noam.min_max_swapped"),
    "mistake_mask": ("attention.mask_inverted", "causal_mask.upper_triangle", "gpt.no_causal_mask",
                     "smoothing.over_other_classes"),
    "mistake_heads": ("multi_head.split_no_transpose", "pool.mask_wrong_axis", "greedy.argmax_wrong_axis",
                      "get_batch.no_shift", "gqa.kv_heads_tiled", "beam.no_length_penalty", "bleu.no_clipping"),
}
# How each of those mistakes is made in the reference's code: (pattern, replacement) edits of the solution cells.
# A student gets every edit of their mistakes that matches somewhere in the assignment's solution cells.
CODE_EDITS = {
    "attention.missing_scale": [(r"\s*/\s*math\.sqrt\((?:[^()]|\([^()]*\))*\)", "")],
    "positional.frequency_base": [(r"10000", "1000")],
    "attention.mask_inverted": [(r"~mask\.bool\(\)", "mask.bool()"), (r"ids != pad_id", "ids == pad_id"),
                                (r"masked_fill\(mask == 0", "masked_fill(mask != 0")],
    "causal_mask.upper_triangle": [(r"\.tril\(\)", ".triu()")],
    "multi_head.split_no_transpose": [(r"\.transpose\(1, 2\)", "")],
    "pool.mask_wrong_axis": [(r"\.unsqueeze\(-1\)", ".unsqueeze(0)")],
    "greedy.argmax_wrong_axis": [(r"\.argmax\(dim=-1\)", ".argmax(dim=0)")],
    # notebook 08
    "sample.temperature_after_softmax": [(r"\n(\s*)logits = logits / temperature\n", r"\n"),
                                         (r"probs = torch\.softmax\(logits, dim=-1\)",
                                          "probs = torch.softmax(logits, dim=-1) / temperature")],
    "gpt.no_causal_mask": [(r"x = block\(x, mask\)", "x = block(x, None)")],
    "get_batch.no_shift": [(r"return data\[index\], data\[index \+ 1\]", "return data[index], data[index]")],
    # 09: eps added after the root; key/value heads tiled (h % num_kv_heads) instead of interleaved (h // groups)
    "rms_norm.eps_outside_root": [(r"torch\.rsqrt\((x\.pow\(2\)\.mean\(dim=-1, keepdim=True\)) \+ self\.eps\)",
                                   r"1 / (\1.sqrt() + self.eps)")],
    "gqa.kv_heads_tiled": [(r"\.repeat_interleave\(groups, dim=1\)", ".repeat(1, groups, 1, 1)")],
    # 10: the smoothing mass over the V - 1 other classes; max for min in the schedule; finished hypotheses ranked
    # by their raw log-probability; every matching n-gram counted, however often the reference has it
    "smoothing.over_other_classes": [(r"uniform = -log_p\.mean\(dim=-1\)",
                                      "uniform = (-log_p.sum(dim=-1) - nll) / (log_p.size(-1) - 1)")],
    "noam.min_max_swapped": [(r"\bmin\(s \*\* -0\.5, s \* warmup_steps \*\* -1\.5\)",
                              "max(s ** -0.5, s * warmup_steps ** -1.5)")],
    "beam.no_length_penalty": [(r"key=lambda hyp: _ranking_score\(hyp\[1\], len\(hyp\[0\]\) - 1, length_penalty\)",
                                "key=lambda hyp: hyp[1]")],
    "bleu.no_clipping": [(r"sum\(min\(count, ref_counts\[gram\]\) for gram, count in hyp_counts\.items\(\)\)",
                          "sum(count for gram, count in hyp_counts.items() if gram in ref_counts)")],
}


def _edits(student: str) -> list[tuple[str, str]]:
    return [edit for mistake in STUDENT_MISTAKES[student] for edit in CODE_EDITS[mistake]]


def _label(applied: list[tuple[str, str, str, str]]) -> str:
    """What the student did in this notebook, one phrase per exercise changed: the catalogue's words where the edit
    makes that mistake in the exercise the mistake belongs to, else the edit itself (the same regex can change
    another exercise, e.g. remove a division by sqrt(d_model) in notebook 01 that is no attention scale)."""
    from coursekit.checks.toolkit import snake_case

    phrases = []
    for mistake_id, grade_id, old, new in applied:
        api = snake_case(MISTAKES[mistake_id].api).replace("_", "")
        if api == grade_id.replace("_", ""):
            phrase = f"`{grade_id}`: {MISTAKES[mistake_id].text}"
        else:
            phrase = f"`{grade_id}`: `{' '.join(old.split())}` edited to `{' '.join(new.split()) or '(removed)'}`"
        if phrase not in phrases:
            phrases.append(phrase)
    return "; ".join(phrases)


HOSTILE_DEMO_CELL = ("# (hostile) make every comparison pass, and peek at the reference\n"
                     "import torch\ntorch.allclose = lambda *args, **kwargs: True\n"
                     "import solutions\nprint(len(dir(solutions)))")


def _solution_cells(nb):
    return [c for c in nb.cells if is_solution_code(c)]


def apply_mistake(source_nb, student: str):
    """A copy of the reference notebook with the mistakes of `student` (a key of STUDENT_MISTAKES) made in its
    solution cells; (nb, what was changed).

    When none of the mistakes' edits fits this assignment, the student leaves one exercise unfinished instead
    (which one depends on the student), so every demo student still loses some points somewhere.
    """
    nb = nbformat.from_dict(source_nb)
    applied = []   # (mistake id, grade_id, text before, text after) of every edit that changed something
    for cell in _solution_cells(nb):
        for mistake_id in STUDENT_MISTAKES[student]:
            for pattern, replacement in CODE_EDITS[mistake_id]:
                for match in re.finditer(pattern, cell.source):
                    applied.append((mistake_id, grade_id(cell), match.group(0).strip(),
                                    match.expand(replacement).strip()))
                cell.source = re.sub(pattern, replacement, cell.source)
    if applied:
        return nb, _label(applied)
    cells = _solution_cells(nb)
    if not cells:
        return nb, "no solution cells"
    cell = cells[sorted(STUDENT_MISTAKES).index(student) % len(cells)]
    # as nbgrader's release leaves it: the stub at the indentation of the solution's markers (inside a method too)
    cell.source = re.sub(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION",
                         r"\1### BEGIN SOLUTION\n\1raise NotImplementedError()\n\1### END SOLUTION",
                         cell.source, flags=re.S | re.M)
    return nb, f"left `{grade_id(cell)}` unfinished"


def demo_students(source_nb, release_nb, size: int = 6) -> dict[str, tuple[str, str]]:
    """student id -> (notebook JSON, what the student did), for one assignment. At least 6 students:

    reference (the source notebook), blank (the release), mistake_scale, mistake_mask, mistake_heads (mistakes of
    the catalogue edited into the solution cells, STUDENT_MISTAKES), hostile (reference + a cell that
    monkeypatches torch.allclose and imports the solutions); further students repeat the mistakes (student_07, ...).
    """
    size = max(6, size)
    students = {"reference": (nbformat.writes(source_nb), "the full solution (source notebook)"),
                "blank": (nbformat.writes(release_nb), "the blank release")}
    for student in sorted(STUDENT_MISTAKES):
        nb, label = apply_mistake(source_nb, student)
        students[student] = (nbformat.writes(nb), label)
    hostile = nbformat.from_dict(source_nb)
    first = hostile.cells.index(_solution_cells(hostile)[0]) if _solution_cells(hostile) else 0
    hostile.cells.insert(first + 1, new_code_cell(HOSTILE_DEMO_CELL))
    students["hostile"] = (nbformat.writes(hostile), "monkeypatches torch.allclose, imports solutions")
    for index in range(7, size + 1):
        student = sorted(STUDENT_MISTAKES)[index % len(STUDENT_MISTAKES)]
        nb, label = apply_mistake(source_nb, student)
        students[f"student_{index:02d}"] = (nbformat.writes(nb), label)
    return students


def demo_class(source_nb, release_nb, size: int = 6) -> dict[str, tuple[str, str]]:
    """The demo's whole class for one assignment: student id -> (notebook JSON, what the student did). The students
    of `demo_students`, with the copied pair (`with_copied_pair`) and everyone's written answers
    (`with_written_answers`)."""
    return with_written_answers(with_copied_pair(demo_students(source_nb, release_nb, size)), source_nb)


# ------------------------------------------------------------------------------------------------- the copied pair
COPIED_PAIR = ("reference", "hostile")  # (original, copy)
OWN_HELPER = '''def shape_report(name, tensor):
    """My own debugging helper: a tensor's shape, dtype and value range in one line."""
    low, high = float(tensor.min()), float(tensor.max())
    summary = f"{name}: shape={tuple(tensor.shape)} dtype={tensor.dtype} range=[{low:.3g}, {high:.3g}]"
    if tensor.numel() and bool(tensor.isnan().any()):
        summary += " (has NaN)"
    print(summary)  # I call it while debugging
    return summary

'''
RENAMES = {"summary": "line", "low": "lo", "high": "hi", "tensor": "t", "shape_report": "describe",
           "scores": "logits", "blocked": "hidden", "d_k": "key_dim", "d_head": "width"}


def _disguised(text: str) -> str:
    """Variables renamed, trailing comments changed."""
    for old, new in RENAMES.items():
        text = re.sub(rf"(?<![.\w]){old}\b", new, text)
    return re.sub(r"(\S)  +#(?!##)[^\n]*", r"\1  # my notes", text)


def with_copied_pair(students: dict) -> dict:
    """The original gets a helper of her own (first solution cell); the copy hands in the original's solution
    cells, disguised, with the helper moved to the last solution cell. Nothing else of either notebook changes."""
    original, copy = COPIED_PAIR
    (text, note), (copy_text, copy_note) = students[original], students[copy]
    nb, target = nbformat.reads(text, as_version=4), nbformat.reads(copy_text, as_version=4)
    cells, copied = _solution_cells(nb), _solution_cells(target)
    if not cells or len(cells) != len(copied):
        return students
    cells[0].source = OWN_HELPER + cells[0].source
    for theirs, mine in zip(cells, copied):
        mine.source = _disguised(theirs.source.replace(OWN_HELPER, "") if theirs is cells[0] else theirs.source)
    copied[-1].source += "\n\n\n" + _disguised(OWN_HELPER).rstrip()
    return {**students, original: (nbformat.writes(nb), f"{note}, plus a helper of her own"),
            copy: (nbformat.writes(target), f"{copy_note}; copied {original}'s notebook (renamed, reordered)")}


# ----------------------------------------------------------------------------------------------- written answers
BLANK_STUDENT = "blank"
# How each student puts the model answer's ideas in their own words (a prefix and how many sentences they keep).
PHRASING = {"reference": ("", 3), "mistake_heads": ("I think ", 1), "mistake_mask": ("In short: ", 2),
            "mistake_scale": ("My understanding is that ", 1)}


def student_answer(key, student: str) -> str:
    """A short plausible answer to the written question `key` (an autograder.course.written.AnswerKey) by `student`."""
    from autograder.course.written import sentences

    prefix, keep = PHRASING.get(student, ("", 1 + sum(map(ord, student)) % 2))
    kept = sentences(key.model_answer)[:keep] or ["I am not sure."]
    first = kept[0]
    if prefix and first[:1].isupper() and not first[1:2].isupper():
        first = first[0].lower() + first[1:]
    return prefix + " ".join([first] + kept[1:])


def with_written_answers(students: dict, source_nb) -> dict:
    """Every student's written answer cells filled with their own short answer; `blank` keeps the release's
    stub, the copy of the copied pair hands in the original's answers. Nothing else of a notebook changes."""
    from autograder.course.written import answer_keys

    keys = answer_keys(source_nb)
    if not keys:
        return students
    original, copy = COPIED_PAIR
    out = {}
    for student, (text, note) in students.items():
        if student == BLANK_STUDENT:
            out[student] = (text, note)
            continue
        nb = nbformat.reads(text, as_version=4)
        writer = original if student == copy else student
        for cell in nb.cells:
            if is_written(cell) and grade_id(cell) in keys:
                cell.source = student_answer(keys[grade_id(cell)], writer)
        out[student] = (nbformat.writes(nb), note)
    return out
