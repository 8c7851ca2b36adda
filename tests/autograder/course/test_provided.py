"""provided.py holds earlier topics' reference code only, is self-contained, and refuses to leak."""
from __future__ import annotations

import importlib.util
import re
import sys
import textwrap
from pathlib import Path

import pytest

from coursekit import api
import torch

import solutions
from autograder.course.provided import (
    API_NAMES, TOPICS, _defined_names, build_provided_source, covered_assignments, provided_topics, topic_of,
    withheld_names,
    write_provided_module,
)

ALL_ASSIGNMENTS = [f"{i + 1:02d}_{topic}" for i, topic in enumerate(TOPICS)]
REFERENCE_AVAILABLE = [a for a in ALL_ASSIGNMENTS
                       if all((Path(solutions.__file__).parent / f"{t}.py").is_file() for t in provided_topics(a))]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("assignment", ALL_ASSIGNMENTS[:3])
def test_first_three_notebooks_get_none(assignment, tmp_path):
    (tmp_path / "provided.py").write_text("stale = True\n")
    assert write_provided_module(assignment, tmp_path) is None
    assert not (tmp_path / "provided.py").exists(), "a stale provided.py must be removed"


@pytest.mark.parametrize("assignment", [a for a in REFERENCE_AVAILABLE if provided_topics(a)])
def test_only_earlier_components_and_all_of_them(assignment, tmp_path):
    path = write_provided_module(assignment, tmp_path)
    text = path.read_text()
    assert "GENERATED" in text.splitlines()[0]
    defined = _defined_names(text)
    assert not defined & withheld_names(assignment)
    earlier = {name for topic in provided_topics(assignment) for name in API_NAMES[topic]}
    assert earlier <= defined
    assert not re.search(r"^\s*(from|import)\s+solutions\b", text, re.M)
    own = TOPICS.index(topic_of(assignment))
    builds_on = api.notebook(topic_of(assignment)).builds_on
    assert provided_topics(assignment) == tuple(t for t in TOPICS[:own] if builds_on is None or t in builds_on)


@pytest.mark.parametrize("assignment", [a for a in REFERENCE_AVAILABLE if provided_topics(a)])
def test_provided_module_runs_without_solutions_and_matches_it(assignment, tmp_path, monkeypatch):
    path = write_provided_module(assignment, tmp_path)
    # a student machine has no `solutions` package: make importing it fail while the module loads
    monkeypatch.setitem(sys.modules, "solutions", None)
    provided = _load(path, f"provided_{assignment}")
    monkeypatch.undo()
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)
    ours = provided.scaled_dot_product_attention(q, k, v)
    theirs = solutions.scaled_dot_product_attention(q, k, v)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def _fake_solutions(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "fake_solutions"
    folder.mkdir()
    for topic in TOPICS:
        (folder / f"{topic}.py").write_text(textwrap.dedent(files.get(topic, f'"""{topic}."""\n')))
    return folder


def test_leak_of_own_exercise_is_refused(tmp_path):
    fake = _fake_solutions(tmp_path, {"attention": '''
        """03 with a stray helper that belongs to 04."""
        def split_heads(x, num_heads):
            return x
        '''})
    with pytest.raises(ValueError, match="split_heads"):
        build_provided_source("04_multi_head_attention", solutions_dir=fake)


def test_import_of_a_later_topic_is_refused(tmp_path):
    fake = _fake_solutions(tmp_path, {"embeddings": '''
        """01 importing 05."""
        from solutions.encoder import Encoder
        '''})
    with pytest.raises(ValueError, match="not an earlier topic"):
        build_provided_source("04_multi_head_attention", solutions_dir=fake)


def test_imports_between_earlier_topics_are_inlined(tmp_path):
    fake = _fake_solutions(tmp_path, {
        "embeddings": '"""01."""\nfrom __future__ import annotations\nSIZE = 3\n',
        "attention": '"""03."""\nfrom __future__ import annotations\nfrom solutions.embeddings import SIZE\n'
                     'def double():\n    return 2 * SIZE\n',
    })
    text = build_provided_source("04_multi_head_attention", solutions_dir=fake)
    assert text.count("from __future__ import annotations") == 1
    assert "solutions" not in text.replace("solutions/", "")
    namespace: dict = {}
    exec(compile(text, "provided.py", "exec"), namespace)
    assert namespace["double"]() == 6


def test_missing_reference_module_is_a_clear_error(tmp_path):
    fake = _fake_solutions(tmp_path, {})
    (fake / "positional.py").unlink()
    with pytest.raises(FileNotFoundError, match="positional.py"):
        build_provided_source("05_encoder", solutions_dir=fake)


@pytest.mark.parametrize("name", ["intro", "00_zero", f"{len(TOPICS) + 1:02d}_extra", "4_multi_head"])
def test_unknown_assignment_names_are_rejected(name, tmp_path):
    with pytest.raises(ValueError, match="not a course assignment"):
        write_provided_module(name, tmp_path)


def test_missing_destination_loses_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_provided_module("05_encoder", tmp_path / "absent")
    assert not (tmp_path / "absent").exists()


def test_covered_assignments_name_the_course_folders():
    names = ["01_tokens_and_embeddings", "02_positional_encoding", "03_attention", "04_multi_head_attention"]
    assert covered_assignments("04_multi_head_attention", names) == names[:3]
    assert covered_assignments("03_attention", names) == []
    assert covered_assignments("05_encoder", ["03_my_attention"]) == [
        "01_tokens_and_embeddings", "02_positional_encoding", "03_my_attention", "04_multi_head_attention"]


def test_reference_detector_ignores_stubs_and_finds_copies():
    from autograder.course.provided import reference_found_in

    stub = "def scaled_dot_product_attention(q, k, v, mask=None):\n    raise NotImplementedError()\n"
    assert reference_found_in(stub) == []
    source = (Path(solutions.__file__).parent / "attention.py").read_text()
    assert "solutions/attention.py:scaled_dot_product_attention" in reference_found_in(source)


def test_09_gets_08s_gpt_and_its_training_tools_but_nothing_of_its_own(tmp_path, monkeypatch):
    """Notebook 09 builds on 08: its provided.py holds 08's GPT and training functions (and 01-07), never 09's."""
    path = write_provided_module("09_modern_block", tmp_path)
    assert covered_assignments("09_modern_block")[-1] == "08_gpt_language_model"
    monkeypatch.setitem(sys.modules, "solutions", None)
    provided = _load(path, "provided_09")
    monkeypatch.undo()
    for name in ("GPT", "get_batch", "lm_loss", "estimate_loss", "lr_at", "generate", "MultiHeadAttention",
                 "PositionwiseFeedForward", "TokenEmbedding", "split_heads", "merge_heads"):
        assert callable(getattr(provided, name)), name
    assert not _defined_names(path.read_text()) & set(API_NAMES["modern"])
    torch.manual_seed(0)
    ids = torch.randint(0, 11, (2, 5))
    ours, reference = provided.GPT(11, 16, 2, 32, 1, 8), solutions.GPT(11, 16, 2, 32, 1, 8)
    reference.load_state_dict(ours.state_dict())
    assert torch.equal(ours.eval()(ids), reference.eval()(ids))


def test_10_gets_06s_transformer_and_01s_vocabulary_but_nothing_of_its_own(tmp_path, monkeypatch):
    """Notebook 10 trains 06's Transformer on vocabularies built with 01's functions: its provided.py holds 01-06
    (what they are built from), never 07-09 (its builds_on in the course API: releasing 10 reveals nothing of them,
    and waits for nothing of them) nor 10's own exercises."""
    path = write_provided_module("10_translation", tmp_path)
    assert covered_assignments("10_translation") == list(api.ASSIGNMENTS[:6])
    monkeypatch.setitem(sys.modules, "solutions", None)
    provided = _load(path, "provided_10")
    monkeypatch.undo()
    for name in ("Transformer", "greedy_decode", "build_vocab", "encode", "pad_batch", "make_padding_mask",
                 "make_causal_mask"):
        assert callable(getattr(provided, name)), name
    defined = _defined_names(path.read_text())
    assert not defined & set(API_NAMES["translation"])
    for later in ("classifier", "gpt", "modern"):
        assert not defined & set(API_NAMES[later]), later
    assert provided.build_vocab([["b", "a", "b"]], min_freq=2) == solutions.build_vocab([["b", "a", "b"]], min_freq=2)
    torch.manual_seed(0)
    src, tgt = torch.randint(1, 11, (2, 5)), torch.randint(1, 13, (2, 4))
    ours, reference = provided.Transformer(11, 13, 16, 2, 32, 1, 8), solutions.Transformer(11, 13, 16, 2, 32, 1, 8)
    reference.load_state_dict(ours.state_dict())
    assert torch.equal(ours.eval()(src, tgt), reference.eval()(src, tgt))
    assert torch.equal(provided.greedy_decode(ours, src, 6), solutions.greedy_decode(reference, src, 6))
