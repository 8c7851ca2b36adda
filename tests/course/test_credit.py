"""Credit where it is due: an unfinished or wrong exercise costs its own points, not the rest of its notebook.

For every notebook, students do everything right (the source notebook) except a few exercises: each of those is
either left as released (its stub, raising NotImplementedError) or made wrong with a mistake of the catalogue
(`coursekit.mistakes`, the edits below). A student breaks at most MAX_BROKEN exercises at once, no two of them
dependent on each other (`independent`, worked out from `PARTS`, `INTENDED_CASCADES` and the global names each
cell's code reads), so that what a broken exercise could cascade into is always an exercise the student got right,
and is seen to keep its points: the hidden checks judge every other exercise given working parts
(`autograder/checks/kit/parts.py`). Across the students every exercise is broken both ways; each student loses exactly
the points of the exercises it broke. The only exceptions are the intended cascades (`INTENDED_CASCADES`, said in
the notebook next to the exercise), each costing at most 10 points. (Breaking several independent exercises at
once checks the same thing as one student per exercise and way, with 47 notebooks to grade instead of 98: one
grading of 07-10 takes about 40 s, as they train a model.)

All these students are graded in ONE `autograder grade` run (one Dask cluster), as an instructor would grade them.
"""
from __future__ import annotations

import ast
import itertools
import re
import shutil
import symtable
import time
from pathlib import Path

import nbformat
import pytest

from autograder.checks.kit.criteria import SHARES
from autograder.checks.kit.parts import MAX_CASCADE_POINTS
from coursekit.api import INTENDED_CASCADES, PARTS, check_of, grade_id as grade_id_of
from coursekit.api import tested_name as exercise_of_grade_id  # not `test*`: pytest would collect it
from coursekit.criteria import CRITERIA
from coursekit.mistakes import MISTAKES

REPO = Path(__file__).resolve().parents[2]

# one grading run of 47 notebooks (07-10 train a model): far beyond the suite's default 900 s per test
pytestmark = [pytest.mark.slow, pytest.mark.notebooks, pytest.mark.pipeline, pytest.mark.timeout(5400)]

# assignment -> {solution cell's grade_id: (catalogue mistake, [(text of the notebook's solution, the mistake)][,
#                the criterion it breaks when the mistake lies in an argument with teeth, not in the core])}
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
    "08_gpt_language_model": {
        "train_bpe": ("bpe.new_id", [("ids = merge_pair(ids, pair, 256 + k)", "ids = merge_pair(ids, pair, 257 + k)")]),
        "bpe_encode": ("bpe.encode_order", [("for k, pair in enumerate(merges):",
                                             "for k, pair in reversed(list(enumerate(merges))):")]),
        "bpe_decode": ("bpe.decode_latin1", [('.decode("utf-8", errors="replace")', '.decode("latin-1")')]),
        "gpt": ("gpt.no_final_norm", [("return self.lm_head(self.norm(x))", "return self.lm_head(x)")]),
        "get_batch": ("get_batch.no_shift", [("return data[index], data[index + 1]",
                                              "return data[index], data[index]")]),
        "lm_loss": ("lm_loss.sum", [("F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))",
                                     'F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="sum")')]),
        "estimate_loss": ("estimate_loss.mode_not_restored", [("model.train(was_training)", "pass")]),
        "lr_at": ("lr_at.warmup_off_by_one", [("return max_lr * (step + 1) / warmup_steps",
                                               "return max_lr * step / warmup_steps")]),
        "train_step": ("train_step.no_zero_grad", [("    optimizer.zero_grad(set_to_none=True)\n", "")]),
        "sample_next_token": ("sample.temperature_after_softmax", [
            ("    logits = logits / temperature\n", ""),
            ("probs = torch.softmax(logits, dim=-1)", "probs = torch.softmax(logits, dim=-1) / temperature")],
            "sample_next_token.temperature"),  # right at the default temperature: it costs that argument's share
        "generate": ("generate.first_position", [("logits = model(context)[:, -1, :]",
                                                  "logits = model(context)[:, 0, :]")]),
    },
    "09_modern_block": {
        "rmsnorm": ("rms_norm.no_weight", [("+ self.eps) * self.weight", "+ self.eps)")]),
        "rotary_cos_sin": ("rotary.cos_sin_swapped", [("return torch.cos(angle).float(), torch.sin(angle).float()",
                                                       "return torch.sin(angle).float(), torch.cos(angle).float()")]),
        "apply_rotary": ("rotary.wrong_direction", [("[even * cos - odd * sin, even * sin + odd * cos]",
                                                     "[even * cos + odd * sin, odd * cos - even * sin]")]),
        "swi_glu": ("swiglu.relu", [("F.silu(self.w_gate(x))", "F.relu(self.w_gate(x))")]),
        "grouped_query_attention": ("gqa.kv_heads_tiled", [("k = k.repeat_interleave(groups, dim=1)",
                                                            "k = k.repeat(1, groups, 1, 1)"),
                                                           ("v = v.repeat_interleave(groups, dim=1)",
                                                            "v = v.repeat(1, groups, 1, 1)")]),
        "llama_block": ("llama.missing_residual", [("return x + self.ffn(self.norm2(x))",
                                                    "return self.ffn(self.norm2(x))")]),
        "modern_gpt": ("modern_gpt.no_final_norm", [("return self.lm_head(self.norm(x))", "return self.lm_head(x)")]),
    },
    "10_translation": {
        "label_smoothed_cross_entropy": ("smoothing.over_other_classes", [
            ("uniform = -log_p.mean(dim=-1)", "uniform = (-log_p.sum(dim=-1) - nll) / (log_p.size(-1) - 1)")]),
        "noam_lr": ("noam.min_max_swapped", [("min(s ** -0.5, s * warmup_steps ** -1.5)",
                                              "max(s ** -0.5, s * warmup_steps ** -1.5)")]),
        "beam_search": ("beam.no_length_penalty", [
            ("key=lambda hyp: _ranking_score(hyp[1], len(hyp[0]) - 1, length_penalty))", "key=lambda hyp: hyp[1])")]),
        "corpus_bleu": ("bleu.no_clipping", [
            ("sum(min(count, ref_counts[gram]) for gram, count in hyp_counts.items())",
             "sum(count for gram, count in hyp_counts.items() if gram in ref_counts)")]),
    },
    "11_pretrained": {
        "dequantize_q4_1": ("q4_1.high_nibble_unshifted", [("qs >> 4], axis=1)", "qs & 0xF0], axis=1)")]),
        "llama_state_dict": ("state_dict.untied_head", [('state["lm_head.weight"] = tensor', "pass")]),
        "cached_forward": ("kv.no_rotary_offset", [
            ("cos, sin = attn.cos[T_past:T_past + T], attn.sin[T_past:T_past + T]", "cos, sin = attn.cos[:T], attn.sin[:T]")]),
        "cached_generate": ("kv_generate.returns_prompt", [("return new_tokens", "return prompt_ids + new_tokens")]),
        "lora_linear": ("lora.scaling_alpha", [("self.scaling = alpha / rank", "self.scaling = alpha")]),  # wrong at the defaults too
        "add_lora": ("add_lora.rank_not_passed", [("LoRALinear(getattr(attn, name), rank, alpha)",
                                                   "LoRALinear(getattr(attn, name), alpha=alpha)")], "add_lora.rank"),
        "final_hidden": ("final_hidden.no_final_norm", [("return model.norm(x)", "return x")]),
    },
}
MAX_BROKEN = 4  # exercises one student breaks at most


def expected_loss(assignment: str, exercise: str, how: str, points: float) -> float:
    """What breaking `exercise` costs: all its points when it is left unfinished or its core is wrong; a mistake in
    one criterion only (WRONG's third item: an argument with teeth) costs that criterion's share, split evenly
    among the criteria of its kind that the exercise's check tries (all of the catalogue's, test_criteria.py)."""
    entry = WRONG[assignment][exercise]
    if how == "unfinished" or len(entry) < 3:
        return points
    criterion = CRITERIA[entry[2]]
    same_kind = [c for c in CRITERIA.values() if c.api == criterion.api and c.kind == criterion.kind]
    return points * SHARES[criterion.kind] / len(same_kind)
HOW = ("unfinished", "wrong")


def _exercise_cells(nb) -> dict[str, nbformat.NotebookNode]:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def _student_notebook(assignment: str, source, release, broken: dict[str, str]):
    """The source notebook with each exercise of `broken` ({exercise: how}) left as released or made wrong."""
    nb = nbformat.from_dict(source)
    for exercise, how in broken.items():
        cell = _exercise_cells(nb)[exercise]
        if how == "unfinished":
            cell.source = _exercise_cells(release)[exercise].source
            continue
        for old, new in WRONG[assignment][exercise][1]:
            solutions = re.findall(r"### BEGIN SOLUTION.*?### END SOLUTION", cell.source, flags=re.S)
            assert any(old in s for s in solutions), f"{exercise}: {old!r} is not in its solution"
            cell.source = cell.source.replace(old, new)
    return nb


def _several_id(number: int) -> str:
    return f"several_{number}"


# -------------------------------------------------------------------------- which exercises use which (generated)
def _global_reads(source: str) -> set[str]:
    """The global names a cell's code reads: at its top level, and inside its functions, classes and comprehensions
    (their parameters and local variables are not global)."""
    names: set[str] = set()

    def visit(table, top: bool):
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (top or symbol.is_global()):
                names.add(symbol.get_name())
        for child in table.get_children():
            visit(child, False)

    visit(symtable.symtable(source, "<cell>", "exec"), True)
    return names


def _definitions(source: str) -> dict[str, bool]:
    """{name a cell defines at its top level: whether it is the exercise's own code (a definition holding the
    solution markers), not code the cell gives}."""
    defined: dict[str, bool] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = "### BEGIN SOLUTION" in (ast.get_source_segment(source, node) or "")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update({(alias.asname or alias.name).split(".")[0]: False for alias in node.names})
        else:
            defined.update({n.id: False for n in ast.walk(node) if isinstance(n, ast.Name)
                            and isinstance(n.ctx, ast.Store)})
    return defined


def uses_of(nb) -> dict[str, set[str]]:
    """{grade_id of a solution or grade cell: the exercises (grade_ids of solution cells) whose own code it runs},
    through the global names its code reads, transitively through every cell before it, in the notebook's order.
    A name a cell both defines and reads is its own (`from coursekit.probe import hand_in` in every grade cell)."""
    reaches: dict[str, set[str]] = {}   # global name -> the exercises its latest definition runs
    uses: dict[str, set[str]] = {}
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        meta = cell.metadata.get("nbgrader", {})
        defined = _definitions(cell.source)
        reached = set().union(*(reaches.get(name, set()) for name in _global_reads(cell.source) - set(defined)))
        own = meta.get("grade_id") if meta.get("solution") else None
        for name, is_exercise in defined.items():
            reaches[name] = reached | ({own} if own and is_exercise else set())
        if meta.get("grade_id"):
            uses[meta["grade_id"]] = reached - {own}
    return uses


def _source(assignment: str):
    return nbformat.read(REPO / "course" / "source" / assignment / f"{assignment}.ipynb", as_version=4)


def dependencies(nb) -> dict[str, set[str]]:
    """{exercise: the exercises it uses (its parts, what its code reads) or whose own work it needs (an intended
    cascade)}, by grade_id."""
    exercises = list(_exercise_cells(nb))
    by_check = {check_of(e): e for e in exercises}
    uses = uses_of(nb)
    return {e: uses[e] | {by_check[p.check] for p in PARTS.get(check_of(e), ()) if p.check in by_check}
            | {by_check[c] for c in INTENDED_CASCADES.get(check_of(e), ()) if c in by_check} for e in exercises}


def independent(a: str, b: str, deps: dict[str, set[str]]) -> bool:
    return a != b and a not in deps[b] and b not in deps[a]


def several_at_once(nb) -> list[dict[str, str]]:
    """Students ({exercise: how}) who together break every exercise both ways, each at most MAX_BROKEN mutually
    independent exercises: as few students as the slots need to start with, filled evenly (the most constrained
    exercises first, unfinished and wrong ones mixed), and one more whenever an exercise fits none."""
    exercises = list(_exercise_cells(nb))
    deps = dependencies(nb)
    conflicts = {e: sum(not independent(e, f, deps) for f in exercises if f != e) for e in exercises}
    slots = sorted(itertools.product(exercises, HOW), key=lambda slot: -conflicts[slot[0]])
    students: list[dict[str, str]] = [{} for _ in range(-(-len(slots) // MAX_BROKEN))]
    for exercise, how in slots:
        fits = [s for s in students if len(s) < MAX_BROKEN and all(independent(exercise, e, deps) for e in s)]
        if not fits:
            students.append({})
            fits = students[-1:]
        min(fits, key=lambda s: (len(s), how in s.values()))[exercise] = how
    return [s for s in students if s]


@pytest.fixture(scope="session")
def credit_graded(course_copy, request):
    """{(assignment, student): {grade cell: (score, max score)}}: every student of the selected tests graded in
    one `autograder grade` run."""
    from nbgrader.api import Gradebook

    from autograder.submissions.collect import collect
    from autograder.grade.engine import grade_many

    wanted = sorted({item.callspec.params["assignment"] for item in request.session.items
                     if "credit_graded" in getattr(item, "fixturenames", ()) and hasattr(item, "callspec")})
    inbox = course_copy / "credit_inbox"
    shutil.rmtree(inbox, ignore_errors=True)
    students = {}
    for assignment in wanted:
        source = nbformat.read(course_copy / "source" / assignment / f"{assignment}.ipynb", as_version=4)
        release = nbformat.read(course_copy / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        for student, broken in {_several_id(n): b for n, b in enumerate(several_at_once(source), 1)}.items():
            nb = _student_notebook(assignment, source, release, broken)
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
    for assignment, exercises in WRONG.items():
        nb = _source(assignment)
        assert set(exercises) == set(_exercise_cells(nb)), assignment
        assert all(entry[0] in MISTAKES for entry in exercises.values())
        assert all(CRITERIA[entry[2]].kind == "argument" for entry in exercises.values() if len(entry) > 2)


@pytest.mark.parametrize("assignment", sorted(WRONG))
def test_parts_and_intended_cascades_are_what_the_code_uses(assignment):
    """PARTS names every exercise of the notebook that a graded exercise's code uses by the global names it reads
    (transitively; parts handed in with it aside), and INTENDED_CASCADES every exercise that a graded result which
    is no exercise (a trained model) needs."""
    nb = _source(assignment)
    exercises = set(_exercise_cells(nb))
    for grade_id, used in uses_of(nb).items():
        check, used = check_of(grade_id), {check_of(e) for e in used}
        if grade_id in exercises:
            by_name = {p.check for p in PARTS.get(check, ()) if p.into == 0 and p.replaces is None}
            assert used == by_name, grade_id
        elif exercise_of_grade_id(grade_id) is not None and exercise_of_grade_id(grade_id) not in exercises:
            assert used == set(INTENDED_CASCADES.get(check, ())), grade_id
            assert check not in INTENDED_CASCADES or used, grade_id


def test_each_intended_cascade_is_said_next_to_its_grade_cell():
    """The prose right before an intended cascade's grade cell names every exercise whose own work it needs."""
    said = 0
    for assignment in sorted(WRONG):
        nb = _source(assignment)
        names = {check_of(e): [n for n, own in _definitions(c.source).items() if own]
                 for e, c in _exercise_cells(nb).items()}
        for i, cell in enumerate(nb.cells):
            check = check_of(cell.metadata.get("nbgrader", {}).get("grade_id", ""))
            if cell.cell_type != "code" or check not in INTENDED_CASCADES:
                continue
            prose = nb.cells[i - 1].source
            assert nb.cells[i - 1].cell_type == "markdown" and "own parts" in prose, assignment
            for part in INTENDED_CASCADES[check]:
                assert names[part] and all(f"`{name}`" in prose for name in names[part]), (assignment, part)
            said += 1
    assert said == len(INTENDED_CASCADES)


@pytest.mark.parametrize("assignment", sorted(WRONG))
def test_several_at_once_breaks_every_exercise_both_ways_and_never_two_dependent_ones(assignment):
    nb = _source(assignment)
    deps, students = dependencies(nb), several_at_once(nb)
    assert {(e, how) for s in students for e, how in s.items()} == set(itertools.product(_exercise_cells(nb), HOW))
    for broken in students:
        assert len(broken) <= MAX_BROKEN
        assert all(independent(a, b, deps) for a, b in itertools.combinations(broken, 2)), broken
    print(f"{assignment}: {len(students)} students: {students}")


@pytest.mark.parametrize("assignment", sorted(WRONG))
def test_several_exercises_cost_their_own_points(assignment, credit_graded):
    problems = []
    for number, broken in enumerate(several_at_once(_source(assignment)), 1):
        grades = credit_graded[(assignment, _several_id(number))]
        own = {grade_id_of(exercise) for exercise in broken}
        lost = {cell: maximum - score for cell, (score, maximum) in grades.items() if maximum - score > 1e-9}
        for exercise, how in broken.items():
            cell = grade_id_of(exercise)
            expected = expected_loss(assignment, exercise, how, grades[cell][1])
            if abs(lost.get(cell, 0.0) - expected) > 0.01:
                problems.append(f"{broken}: lost {lost.get(cell, 0.0)} of the {grades[cell][1]} points of {cell}, "
                                f"not {expected}")
        for cell, points in lost.items():
            cascade = any(check_of(e) in INTENDED_CASCADES.get(check_of(cell), ()) for e in broken)
            if cell not in own and (not cascade or points > MAX_CASCADE_POINTS):
                problems.append(f"{broken}: also lost {points} points of {cell}")
    assert not problems, "\n".join(problems)
