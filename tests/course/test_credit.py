"""Credit where it is due: an unfinished or wrong exercise costs its own points, not the rest of its notebook.

For every notebook and every exercise, two students do everything right (the source notebook) except that one
exercise: one leaves it as released (its stub, raising NotImplementedError), one makes a mistake of the catalogue
in it (`coursekit.mistakes`, the edits below). Each loses exactly that exercise's points: the hidden checks judge
every other exercise given working parts (`autograder/checks/_parts.py`). The only exceptions are the intended
cascades (`INTENDED_CASCADES`, said in the notebook next to the exercise), each costing at most 10 points.

All these students are graded in ONE `autograder grade` run (one Dask cluster), as an instructor would grade them.
"""
from __future__ import annotations

import re
import shutil
import time

import nbformat
import pytest

from autograder.checks._parts import INTENDED_CASCADES, MAX_CASCADE_POINTS
from coursekit.api import snake_case
from coursekit.mistakes import MISTAKES

# one grading run of 54 notebooks (07's train a classifier): far beyond the suite's default 900 s per test
pytestmark = [pytest.mark.slow, pytest.mark.notebooks, pytest.mark.pipeline, pytest.mark.timeout(5400)]

# assignment -> {solution cell's grade_id: (catalogue mistake, [(text of the notebook's solution, the mistake)])}
WRONG = {
    "01_tokens_and_embeddings": {
        "build_vocab": ("vocab.min_freq_strict", [("if count >= min_freq", "if count > min_freq")]),
        "encode": ("encode.unk_hardcoded", [('unk = vocab["<unk>"]', "unk = 1")]),
        "pad_batch": ("pad_batch.pre_padding", [("out[row, :len(seq)] =", "out[row, T - len(seq):] =")]),
        "token_embedding": ("embedding.unit_init", [("torch.randn(vocab_size, d_model) * d_model ** -0.5",
                                                     "torch.randn(vocab_size, d_model)")]),
        "embedding_matrix_from_word2vec": ("word2vec.missing_not_zero", [
            ("matrix = torch.zeros(len(vocab)", "matrix = torch.ones(len(vocab)")]),
        "attention_over_words": ("attention.missing_scale", [(" / math.sqrt(keyed_vectors.vector_size)", "")]),
    },
    "02_positional_encoding": {
        "sinusoidal_positional_encoding": ("positional.frequency_base", [("10000.0", "1000.0")]),
        "positional_encoding": ("positional.x_not_added", [("self.dropout(x + self.pe[:T])",
                                                            "self.dropout(self.pe[:T] + 0 * x)")]),
        "learned_positional_embedding": ("positional.x_not_added", [("return x + self.embedding(positions)",
                                                                     "return self.embedding(positions) + 0 * x")]),
    },
    "03_attention": {
        "make_padding_mask": ("attention.mask_inverted", [("ids != pad_id", "ids == pad_id")]),
        "make_causal_mask": ("causal_mask.upper_triangle", [(".tril()", ".triu()")]),
        "scaled_dot_product_attention": ("attention.missing_scale", [(" / math.sqrt(d_k)", "")]),
    },
    "04_multi_head_attention": {
        "split_heads": ("multi_head.split_no_transpose", [("return x.transpose(1, 2)",
                                                           "return x.reshape(B, num_heads, T, d_head)")]),
        "merge_heads": ("multi_head.merge_no_transpose", [("x = x.transpose(1, 2)", "x = x")]),
        "multi_head_attention": ("multi_head.scale_d_model", [("/ math.sqrt(q.size(-1))",
                                                               "/ math.sqrt(self.num_heads * q.size(-1))")]),
    },
    "05_encoder": {
        "positionwise_feed_forward": ("encoder.no_relu", [("torch.relu(self.linear1(x))", "self.linear1(x)")]),
        "encoder_block": ("encoder.missing_residual_ffn", [
            ("x = self.norm2(x + self.dropout2(self.ffn(x)))", "x = self.norm2(self.dropout2(self.ffn(x)))"),
            ("x = x + self.dropout2(self.ffn(self.norm2(x)))", "x = self.dropout2(self.ffn(self.norm2(x)))")]),
        "encoder": ("encoder.no_embedding_scale", [("self.embedding(src_ids) * math.sqrt(self.d_model)",
                                                    "self.embedding(src_ids)")]),
    },
    "06_decoder_and_transformer": {
        "decoder_block": ("decoder.missing_residual_cross", [
            ("x = self.norm2(x + cross_attend(x))", "x = self.norm2(cross_attend(x))"),
            ("x = x + cross_attend(self.norm2(x))", "x = cross_attend(self.norm2(x))")]),
        "decoder": ("encoder.no_embedding_scale", [("self.embedding(tgt_ids) * math.sqrt(self.d_model)",
                                                    "self.embedding(tgt_ids)")]),
        "transformer": ("transformer.no_causal_mask", [
            ("make_padding_mask(tgt_ids, self.pad_id) & make_causal_mask(T, device=tgt_ids.device)",
             "make_padding_mask(tgt_ids, self.pad_id)")]),
        "greedy_decode": ("greedy.argmax_wrong_axis", [("logits.argmax(dim=-1)", "logits.argmax(dim=0)")]),
        "cached_greedy_decode": ("greedy.keeps_bos", [("return ys[:, 1:]", "return ys")]),
    },
    "07_yelp_classifier": {
        "masked_mean_pool": ("pool.includes_padding", [("summed = (x * weights).sum(dim=1)",
                                                        "summed = x.sum(dim=1)")]),
        "TransformerClassifier": ("classifier.first_position", [("pooled = masked_mean_pool(hidden, mask[:, 0, 0])",
                                                                 "pooled = hidden[:, 0]")]),
        "train_one_epoch": ("training.returns_sum", [("return sum(batch_losses) / len(batch_losses)",
                                                      "return sum(batch_losses)")]),
        "evaluate": ("evaluate.percentage", [("return correct / total", "return 100 * correct / total")]),
    },
}
ASSIGNMENTS = sorted(WRONG)
HOW = ("unfinished", "wrong")


def _exercise_cells(nb) -> dict[str, nbformat.NotebookNode]:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def _student_notebook(assignment: str, source, release, exercise: str, how: str):
    """The source notebook with `exercise` left as released or made wrong."""
    nb = nbformat.from_dict(source)
    cell = _exercise_cells(nb)[exercise]
    if how == "unfinished":
        cell.source = _exercise_cells(release)[exercise].source
        return nb
    for old, new in WRONG[assignment][exercise][1]:
        solutions = re.findall(r"### BEGIN SOLUTION.*?### END SOLUTION", cell.source, flags=re.S)
        assert any(old in s for s in solutions), f"{exercise}: {old!r} is not in its solution"
        cell.source = cell.source.replace(old, new)
    return nb


def _student_id(exercise: str, how: str) -> str:
    return f"{how}_{exercise.lower()}"


@pytest.fixture(scope="session")
def credit_graded(course_copy, request):
    """{(assignment, student): {grade cell: (score, max score)}}: every student of the selected tests graded in
    one `autograder grade` run."""
    from nbgrader.api import Gradebook

    from autograder.collect import collect
    from autograder.grade.engine import grade_many

    wanted = sorted({item.callspec.params["assignment"] for item in request.session.items
                     if "credit_graded" in getattr(item, "fixturenames", ()) and hasattr(item, "callspec")})
    inbox = course_copy / "credit_inbox"
    shutil.rmtree(inbox, ignore_errors=True)
    students = {}
    for assignment in wanted:
        source = nbformat.read(course_copy / "source" / assignment / f"{assignment}.ipynb", as_version=4)
        release = nbformat.read(course_copy / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        for exercise in WRONG[assignment]:
            for how in HOW:
                student = _student_id(exercise, how)
                nb = _student_notebook(assignment, source, release, exercise, how)
                target = inbox / student / assignment
                target.mkdir(parents=True)
                nbformat.write(nb, target / f"{assignment}.ipynb")
                students[(assignment, student)] = None
    collect(course_copy, inbox)
    start = time.perf_counter()
    grade_many(course_copy, wanted, workers=2, force=True, progress=False)
    print(f"graded {len(students)} credit students of {wanted} in {time.perf_counter() - start:.0f} s")
    with Gradebook(f"sqlite:///{course_copy / 'gradebook.db'}") as gradebook:
        for assignment, student in students:
            submission = gradebook.find_submission(assignment, student)
            students[(assignment, student)] = {
                g.name: (g.score or 0.0, g.max_score) for nb in submission.notebooks for g in nb.grades
                if g.cell.cell_type == "code"}
    return students


def test_every_exercise_has_a_catalogue_mistake():
    import json
    from pathlib import Path

    for assignment, exercises in WRONG.items():
        path = Path(__file__).resolve().parents[2] / "course" / "source" / assignment / f"{assignment}.ipynb"
        nb = nbformat.reads(json.dumps(json.loads(path.read_text())), as_version=4)
        assert set(exercises) == set(_exercise_cells(nb)), assignment
        assert all(mistake in MISTAKES for mistake, _ in exercises.values())


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_an_exercise_costs_its_own_points(assignment, how, credit_graded):
    problems = []
    for exercise in WRONG[assignment]:
        grades = credit_graded[(assignment, _student_id(exercise, how))]
        own = f"test_{exercise}"
        lost = {cell: maximum - score for cell, (score, maximum) in grades.items() if maximum - score > 1e-9}
        if lost.get(own, 0.0) != grades[own][1]:
            problems.append(f"{exercise} {how}: lost {lost.get(own, 0.0)} of its own {grades[own][1]} points")
        for cell, points in lost.items():
            if cell == own:
                continue
            cascade = snake_case(exercise) in INTENDED_CASCADES.get(snake_case(cell.removeprefix("test_")), ())
            if not cascade or points > MAX_CASCADE_POINTS:
                problems.append(f"{exercise} {how}: also lost {points} points of {cell}")
    assert not problems, "\n".join(problems)
