"""Issue #31, doors 1 and 3, on the real notebooks, each attacker graded in a class with honest classmates.

Door 1, the stand-in harvest (05, 06 and 09, where it once earned 20, 40 and 70 points): a blank notebook whose
grade cells were reordered (the composites' first) and an audit hook that records every stand-in the kernel
receives (compiled: `marshal.loads`; or any text it compiles); a cell before each remaining grade cell defines what
it caught as its own answers. The grader restores the released order (and flags the move), and lends a stand-in
only once every exercise it holds has been judged: the harvester earns what the blank notebook earns, nothing.
Its last cells print what it caught every way a kernel can (issue #47): none of it, and no line of the stand-ins'
source, reaches its graded notebook, its feedback page or the class report.
A classmate who pastes the stand-ins into the solution cells is reported by the similarity check.

Door 2, the replay (03): a classmate's correct notebook wraps its functions to record every probe's inputs and
outputs, and prints the table into its own graded notebook (and feedback). A blank notebook that answers from that
table, submitted by another student or resubmitted by the recorder itself, is probed with other inputs (the salt
of each submitted notebook: autograder/checks/kit/draws.py) and earns what the blank notebook earns.

Door 3, held-out data (07, 08, 10): a lookup 'model' with no training answers the shipped test labels (07), the
validation text (08) or the test captions (10) from what the kernel can read. The trained-model checks evaluate
the contract's architecture with the handed-in weights, on data the kernel cannot read: the lookups earn nothing;
the honest classmates' trained models keep their points.

Scores are the automatic ones (`auto_score`): a hold for review (the audit hook may be flagged) must not be what
stops an attack. The classes go through `autograder collect` and `autograder grade` (Dask workers, jailed
kernels, the judge).
"""
from __future__ import annotations

import base64
import dataclasses
import html
import json
import marshal
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.checks import stand_ins as stand_ins_module
from compiled_code import bodies
from autograder.checks.stand_ins import STAND_INS, compiled_for, source_for
from coursekit.api import PARTS, check_of, hand_in_names
from replay import PRINT_TABLE, decode, recorder_source, replayer_source, table_in

pytestmark = [pytest.mark.slow, pytest.mark.pipeline]

HOOK = """\
import sys
_caught = []
def _catch(event, args):
    if event == "marshal.loads" and args and isinstance(args[0], bytes) and b"_in_use" in args[0]:
        if args[0] not in _caught:
            _caught.append(bytes(args[0]))  # the stand-ins as the probe receives them: compiled
    elif event == "compile" and args and isinstance(args[0], (str, bytes)):
        text = args[0] if isinstance(args[0], str) else args[0].decode(errors="replace")
        if "LENT = True" in text and text not in _caught:
            _caught.append(text)  # their source, were it ever sent
sys.addaudithook(_catch)
"""
USE_CAUGHT = """\
import marshal
for _text in list(_caught):
    exec(marshal.loads(_text) if isinstance(_text, bytes) else _text, globals())
print(len(_caught), "stand-in texts caught")
"""
# After the last grade cell: everything caught goes out every way a kernel has, each output marked EXFIL (its source
# too, where inspect finds any; the probe's requests the kernel cached), a file beside the notebook, and PIECEs: the
# base64 cut into labelled bits, one output each.
EXFILTRATE = """\
import base64, inspect, json, linecache, re, zlib
from IPython.display import display
_MARK = "EXF" + "IL"  # on what goes out (never in the notebook's own text, which its feedback shows)
_blobs = [c if isinstance(c, bytes) else c.encode() for c in _caught][:3]  # within the output limits
for _i, _blob in enumerate(_blobs):
    _text = base64.b64encode(_blob).decode()
    print(_MARK + " base64", _i, _text)
    print(_MARK + " zlib", _i, zlib.compress(_blob).hex())
    print(_MARK + " reversed", _i, _text[::-1])
    print(_MARK + " bytes", _i, _blob)
    display({"text/plain": _MARK + " html", "text/html": f"<pre>{_text}</pre>"}, raw=True)
    display({"text/plain": _MARK + " metadata"}, metadata={"kept": _text}, raw=True)
    display({"text/plain": _MARK + " figure", "image/png": _text}, raw=True)
    with open(f"{_MARK}-{_i}.bin", "wb") as _file:
        _file.write(_blob)
for _name, _value in list(globals().items()):
    _code = getattr(getattr(_value, "forward", _value), "__code__", None)
    if _code is not None and _code.co_filename == "<course stand-ins>":
        try:
            print(_MARK + " source", _name, inspect.getsource(_value))
        except (OSError, TypeError):
            pass
def _defines(cell):
    for payload in re.findall(r"step\\('([^']+)'\\)", cell):
        try:
            if json.loads(base64.b64decode(payload)).get("op") == "define":
                return True
        except ValueError:
            pass
    return False
for _name, _entry in list(linecache.cache.items()):
    _cell = "".join(_entry[2]) if len(_entry) > 2 else ""
    if _defines(_cell):
        print(_MARK + " linecache", _name, _cell)
_text = base64.b64encode(_blobs[0]).decode()
for _at in range(0, len(_text), 120):
    display({"text/plain": f"PIECE {_at} {_text[_at:_at + 120]}"}, raw=True)
"""
COUNT_CAUGHT = """\
print(len(_blobs), "blobs caught")
"""
RAISE_CAUGHT = """\
raise ValueError(_MARK + " error " + base64.b64encode(_blobs[0]).decode())
"""

LOOKUP_07 = """\
import torch
from torch import nn
from coursekit import load_yelp, tokenize
_texts, _labels = load_yelp("synthetic", split="test")
vocab = {"<pad>": 0, "<unk>": 1}
for _text in load_yelp("synthetic", split="train")[0] + _texts:
    for _word in tokenize(_text):
        vocab.setdefault(_word, len(vocab))
MAX_LEN = 256
_answers = {tuple(vocab[w] for w in tokenize(t))[:MAX_LEN]: y for t, y in zip(_texts, _labels)}

class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        rows = [tuple(int(i) for i in row if int(i) != 0) for row in ids]
        return nn.functional.one_hot(torch.tensor([_answers.get(r, 0) for r in rows]), 5).float() * 10

model = Lookup()
"""

LOOKUP_08 = """\
import torch
from torch import nn
from coursekit.lm_training import BUDGETS
from coursekit.shakespeare import CharVocabulary, load_shakespeare, split_text
_text = load_shakespeare()
chars = CharVocabulary(_text)
BUDGET = BUDGETS["grading"]
_val = chars.encode(split_text(_text)[1])
_next = {}
for _i in range(3, len(_val)):
    _next[tuple(_val[_i - 3:_i])] = _val[_i]

class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.max_len = 256
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        out = torch.zeros(*ids.shape, len(chars))
        for b, row in enumerate(ids.tolist()):
            for t in range(len(row)):
                out[b, t, _next.get(tuple(row[max(0, t - 2):t + 1]), 0)] = 20.0
        return out

model = Lookup()
"""

LOOKUP_10 = """\
import torch
from torch import nn
from coursekit.multi30k import load_multi30k, tokenize_caption
_answers = {tuple(tokenize_caption(de)): tokenize_caption(en) for de, en in load_multi30k("test_2016_flickr")}

class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def translate(self, german):
        return _answers.get(tuple(tokenize_caption(german)), [])

model = Lookup()
"""


def _grade_cell(nb, check: str):
    """The grade cell of `check` (in the release its hidden `hand_in` is stripped: found by its grade id)."""
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") in (f"test_{check}",)
                and c.metadata["nbgrader"].get("grade"))


def _composites(nb) -> tuple[list[str], list[str]]:
    """(the notebook's checks whose hidden check is lent parts of this notebook, the other checks), in order."""
    checks = [check_of(c.metadata["nbgrader"]["grade_id"]) for c in nb.cells
              if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]
    composites = [c for c in checks if any(part.check in checks for part in PARTS.get(c, ()))]
    return composites, [c for c in checks if c not in composites]


def _harvester(released):
    """The composites' grade cells first, under the hook; what was caught is defined right before each other grade
    cell (after the released stubs before it, which would redefine the names)."""
    nb = nbformat.from_dict(released)
    composites, parts = _composites(nb)
    moved = [_grade_cell(nb, check) for check in composites]
    for cell in moved:
        nb.cells.remove(cell)
    nb.cells[0:0] = [new_code_cell(HOOK), *moved]
    for check in parts:
        nb.cells.insert(nb.cells.index(_grade_cell(nb, check)), new_code_cell(USE_CAUGHT))
    nb.cells += [new_code_cell(EXFILTRATE), new_code_cell(COUNT_CAUGHT), new_code_cell(RAISE_CAUGHT)]
    return nb


def _resubmitter(released):
    nb = nbformat.from_dict(released)
    first = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    first.source += "\n\n" + source_for(["EncoderBlock"])
    return nb


def _lookup(released, check: str, code: str):
    nb = nbformat.from_dict(released)
    cell = _grade_cell(nb, check)
    nb.cells.insert(nb.cells.index(cell), new_code_cell(code))
    return nb


def _scores(course: Path, assignment: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {sub.student.id: {g.name: g.auto_score or 0.0 for nb in sub.notebooks for g in nb.grades
                                 if not g.name.startswith("written_")}
                for sub in gb.assignment_submissions(assignment)}


def _grade_class(tmp: Path, assignment: str, students) -> dict:
    from nbgrader.api import Gradebook

    from autograder.publish.release import release
    from autograder.demo.run import prepare_course
    from autograder.grade.engine import grade
    from autograder.course.coursedir import nbgrader_config
    from autograder.sandbox.limits import course_limits
    from autograder.submissions.collect import collect

    course = prepare_course(tmp, [assignment])
    release([assignment], course_root=course, exercises_dir=tmp / "exercises")
    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    released = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    for student, make in students.items():
        target = tmp / "inbox" / student / assignment / f"{assignment}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(make(source, released), target)
    collect(course, tmp / "inbox")
    # the course's own limits (120 CPU-s per cell: 10's training cell takes about 46 CPU-s on a loaded machine)
    limits = course_limits(nbgrader_config(course), notebook_timeout=900)
    summary = grade(course, assignment, workers=2, limits=limits, progress=False)
    scores = _scores(course, assignment)
    flags = {row["student"]: {f["code"] for f in row["flags"]} for row in summary.graded}
    return {"course": course, "scores": scores, "flags": flags, "released": released}


# ------------------------------------------------------------------------------------------- door 1: harvest
HARVESTED = ("05_encoder", "06_decoder_and_transformer", "09_modern_block")


@pytest.fixture(scope="module")
def harvests(tmp_path_factory):
    """harvests(assignment) -> its class, graded once: the blank release and the harvester; in 05 also an honest
    classmate and one who resubmits a stand-in."""
    graded = {}

    def get(assignment: str) -> dict:
        if assignment not in graded:
            students = {"blank": lambda source, released: released,
                        "harvester": lambda source, released: _harvester(released)}
            if assignment == "05_encoder":
                students |= {"honest": lambda source, released: source,
                             "resubmitter": lambda source, released: _resubmitter(released)}
            graded[assignment] = _grade_class(tmp_path_factory.mktemp("harvest"), assignment, students)
        return graded[assignment]

    return get


@pytest.mark.parametrize("assignment", HARVESTED)
def test_the_harvest_earns_what_a_blank_notebook_earns(harvests, assignment):
    harvest = harvests(assignment)
    scores, flags = harvest["scores"], harvest["flags"]
    assert _composites(harvest["released"])[0], "nothing to harvest: no hidden check of this notebook lends a part"
    assert sum(scores["blank"].values()) == 0
    assert sum(scores["harvester"].values()) == 0, scores["harvester"]
    assert "reordered-grade-cells" in flags["harvester"], flags
    assert "reordered-grade-cells" not in flags["blank"] | flags.get("honest", set())


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _notebook_text(path: Path) -> str:
    """Every string of a notebook file (its JSON escapes undone)."""
    def strings(value):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for key, item in value.items():
                yield key
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    return "\n".join(strings(json.loads(path.read_text())))


def _page_text(path: Path) -> str:
    """What an HTML page shows and holds: its text without tags, entities read, and its attribute values."""
    page = path.read_text()
    return html.unescape(re.sub(r"<[^>]*>", "", page)) + "\n" + html.unescape(page)


def _stand_in_lines(course: Path, assignment: str) -> list[str]:
    """Lines of autograder/checks/stand_ins.py (whitespace removed) that a student of `assignment` never had: not in
    the released notebook, nor in the course's reference notebook."""
    known = "".join(_squash(_notebook_text(course / folder / assignment / f"{assignment}.ipynb"))
                    for folder in ("release", "source"))
    text = Path(stand_ins_module.__file__).read_text()
    lines = {_squash(line) for line in text[text.index("def _in_use"):text.index("NEEDS = {")].splitlines()}
    return sorted(line for line in lines if len(line) >= 25 and line not in known)


@pytest.mark.parametrize("assignment", HARVESTED)
def test_nothing_the_harvester_caught_reaches_its_feedback_or_the_report(harvests, assignment):
    from autograder.cli import main

    harvest = harvests(assignment)
    course, flags = harvest["course"], harvest["flags"]
    assert main(["feedback", assignment, "--course-dir", str(course)]) == 0
    assert main(["report", assignment, "--course-dir", str(course)]) == 0
    graded = course / "autograded" / "harvester" / assignment / f"{assignment}.ipynb"
    texts = {"graded notebook": _notebook_text(graded),
             "feedback": _page_text(course / "feedback" / "harvester" / assignment / f"{assignment}.html"),
             "report": _page_text(course / "reports" / assignment / "index.html")}
    caught = re.search(r"(\d+) blobs caught", texts["graded notebook"])
    assert caught and int(caught.group(1)) >= 1, "the harvester caught nothing: no attack"
    assert "stand-in-leak" in flags["harvester"], flags
    assert not {"stand-in-leak", "stand-in-code"} & set().union(*(f for s, f in flags.items() if s != "harvester"))
    lines = _stand_in_lines(course, assignment)
    assert len(lines) > 20
    for name, text in texts.items():
        assert "EXFIL" not in text, name                                  # every output that carried them: gone
        squashed = _squash(text)
        assert not [line for line in lines if line in squashed], name
    pieces = dict((int(at), piece) for at, piece in re.findall(r"PIECE (\d+) (\S+)", texts["graded notebook"]))
    compiled = [body for body in bodies(marshal.loads(compiled_for(sorted(STAND_INS)))) if len(body) >= 48]
    for start in pieces:  # what is left of the pieces, put back together where they follow each other
        if start - 120 in pieces:
            continue
        run, at = "", start
        while at in pieces:
            run, at = run + pieces[at], at + 120
        data = base64.b64decode(run[:len(run) // 4 * 4])
        assert not [body for body in compiled if body in data]
    assert not [p for p in course.rglob("*") if "EXFIL" in p.name]            # its files stayed in its jail




def test_honest_classmates_keep_their_points(harvests):
    assert sum(harvests("05_encoder")["scores"]["honest"].values()) == 100   # 20 + 45 + 35: every hidden check of 05


def test_a_resubmitted_stand_in_is_reported(harvests):
    from autograder.checks.stand_ins import code_for
    from autograder.publish.similarity import STAND_INS, similarity

    harvest = harvests("05_encoder")
    result = similarity(harvest["course"], "05_encoder", lent_code=code_for("05_encoder"))
    reported = {frozenset((p.a, p.b)) for p in result.reported}
    assert frozenset(("resubmitter", STAND_INS)) in reported
    assert not any(student in pair for pair in reported for student in ("honest", "blank", "harvester"))


# ---------------------------------------------------------------------------------------------- door 2: replay
REPLAYED = "03_attention"


def _before_first_grade_cell(nb, code: str):
    nb = nbformat.from_dict(nb)
    first = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
    nb.cells.insert(nb.cells.index(first), new_code_cell(code))
    return nb


def _recorder(source):
    nb = _before_first_grade_cell(source, recorder_source(hand_in_names(REPLAYED)))
    nb.cells.append(new_code_cell(PRINT_TABLE))
    return nb


@pytest.fixture(scope="module")
def replay(tmp_path_factory):
    from autograder.grade.engine import grade
    from autograder.sandbox.limits import Limits
    from autograder.submissions.collect import collect

    tmp = tmp_path_factory.mktemp("replay")
    first = _grade_class(tmp, REPLAYED, {
        "honest": lambda source, released: source,
        "blank": lambda source, released: released,
        "recorder": lambda source, released: _recorder(source),
    })
    course = first["course"]
    table = table_in((course / "autograded" / "recorder" / REPLAYED / f"{REPLAYED}.ipynb").read_text())
    assert table and len(decode(table)) >= 3, "the recorder's table did not reach its graded notebook"
    replayer = _before_first_grade_cell(first["released"], replayer_source(hand_in_names(REPLAYED), table))
    for student in ("replayer", "recorder"):  # a classmate, and the recorder's own resubmission
        target = tmp / "inbox2" / student / REPLAYED / f"{REPLAYED}.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(replayer, target)
    collect(course, tmp / "inbox2")
    grade(course, REPLAYED, students=["replayer", "recorder"], workers=2,
          limits=dataclasses.replace(Limits(), notebook_timeout=900), progress=False)
    return {"first": first["scores"], "second": _scores(course, REPLAYED)}


def test_a_replayed_table_earns_what_a_blank_notebook_earns(replay):
    first, second = replay["first"], replay["second"]
    assert first["recorder"] == first["honest"] and sum(first["honest"].values()) > 0  # recorded from a full run
    assert sum(second["replayer"].values()) == sum(first["blank"].values()) == 0, second["replayer"]
    assert sum(second["recorder"].values()) == 0, second["recorder"]
    assert second["honest"] == first["honest"]  # not regraded, unchanged


# ---------------------------------------------------------------------------------- door 3: held-out data
@pytest.mark.parametrize("assignment, check, code", [
    ("07_yelp_classifier", "trained_classifier", LOOKUP_07),
    ("08_gpt_language_model", "trained_gpt", LOOKUP_08),
    ("10_translation", "trained_translator", LOOKUP_10),
])
def test_a_lookup_model_earns_nothing_and_a_trained_one_passes(tmp_path, assignment, check, code):
    graded = _grade_class(tmp_path, assignment, {
        "honest": lambda source, released: source,
        "lookup": lambda source, released: _lookup(released, check, code),
    })
    trained_cell = f"test_{check}"
    assert graded["scores"]["lookup"][trained_cell] == 0, graded["scores"]["lookup"]
    assert graded["scores"]["honest"][trained_cell] == 10, graded["scores"]["honest"]


# ------------------------------------------------------------------------------ door 4: partial credit by criterion
FORGETS = '''        if T > self.pe.size(0):
            raise ValueError(f"sequence length {T} exceeds max_len {self.pe.size(0)}")
'''


def _forgets_the_length_error(source):
    nb = nbformat.from_dict(source)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "class PositionalEncoding" in c.source)
    assert FORGETS in cell.source
    cell.source = cell.source.replace(FORGETS, "")
    return nb


def test_a_correct_answer_missing_only_a_stated_edge_case_keeps_most_points_and_its_feedback_says_which(tmp_path):
    """Graded for real (nbgrader scores the judge's numeric result) and published: 02's PositionalEncoding without
    its ValueError for T > max_len keeps 1 - EDGE_SHARE of its points; its feedback page lists the criteria."""
    from autograder.checks.kit.criteria import EDGE_SHARE
    from autograder.cli import main
    from coursekit.criteria import CRITERIA

    assignment, cell = "02_positional_encoding", "test_positional_encoding"
    graded = _grade_class(tmp_path, assignment, {
        "honest": lambda source, released: source,
        "forgetful": lambda source, released: _forgets_the_length_error(source),
    })
    points = _grade_cell(graded["released"], "positional_encoding").metadata["nbgrader"]["points"]
    honest, forgetful = graded["scores"]["honest"], graded["scores"]["forgetful"]
    assert honest[cell] == points
    assert forgetful[cell] == pytest.approx(points * (1 - EDGE_SHARE))
    assert {k: v for k, v in forgetful.items() if k != cell} == {k: v for k, v in honest.items() if k != cell}
    assert main(["feedback", assignment, "--course-dir", str(graded["course"])]) == 0
    page = (graded["course"] / "feedback" / "forgetful" / assignment / f"{assignment}.html").read_text()
    assert f"✗ {CRITERIA['PositionalEncoding.too_long'].text}" in page and "✓ the main behaviour" in page
    assert f"{points * (1 - EDGE_SHARE):g}" in page
