"""The course as a student gets it: the student repository (`make student-repo`), the environment its README's
`make student` builds, and every notebook's stubs run in it.

The environment is the real one (a wheel of coursekit and the course data alone, its pinned dependencies, the student
JupyterLab configuration), built by `make student` in a copy of the student repository outside the course repository
and cached between sessions (tests/browser/student_env.py). Each notebook is copied out of that student repository
into a folder of the student's own (no data/ anywhere above it) and its released stubs are executed by a kernel of
that environment: the first self-check must fail with its short hint. The same notebooks with their stubs filled
with the source solutions run top to bottom in JupyterLab of this environment, in Chromium
(tests/browser/test_student_notebooks.py): no error, no stderr, a picture in every drawing cell.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow


def load_helpers():
    name = "_course_student_env"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "browser" / "student_env.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


H = load_helpers()
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def student():
    return H.cached_student_env()


@pytest.fixture(scope="module")
def kernel_specs(student, tmp_path_factory):
    """A kernel spec named `student` that starts the student environment's Python, in a fresh home."""
    root = tmp_path_factory.mktemp("student-kernels")
    spec_dir = root / "kernels" / "student"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [str(student.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (student)", "language": "python"}))
    home = root / "home"
    home.mkdir()
    return root / "kernels", H.student_process_env(home)


def _execute_until_an_error(notebook, folder: Path, kernel_specs, timeout: int = 600):
    """Run the cells in order in a kernel of the student environment; stop after the first cell with an error."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    kernel_dir, env = kernel_specs
    manager = KernelManager(kernel_name="student", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    client = NotebookClient(notebook, km=manager, timeout=timeout, allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    with client.setup_kernel(env=env, cwd=str(folder)):
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
            if any(o.output_type == "error" for o in cell.get("outputs", [])):
                break
    return notebook


# ------------------------------------------------------------------------------------------ the environment
def test_student_wheel_and_env_hold_no_reference(student, tmp_path):
    names = zipfile.ZipFile(student.wheel).namelist()
    packages = {n.split("/")[0] for n in names if not n.startswith("transformers101-")}
    assert packages == {"coursekit"}, packages
    assert not [n for n in names if n.endswith("provided.py") or n.endswith(".ipynb")], names
    probe = ("import importlib.util as u, json, coursekit; print(json.dumps({'found': [n for n in "
             "('solutions', 'autograder') if u.find_spec(n)], 'coursekit': coursekit.__file__}))")
    result = subprocess.run([student.python, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                            env=H.student_process_env(), timeout=120, check=True)
    found = json.loads(result.stdout)
    assert found["found"] == []
    assert "site-packages" in found["coursekit"] and str(H.REPO / "coursekit") not in found["coursekit"]
    # the student extra brings what the notebooks import: 07's TF-IDF baseline and tqdm's widget progress bars
    check = "import sklearn, ipywidgets, gensim, nltk, seaborn, nbgrader, jupyterlab"
    subprocess.run([student.python, "-c", check], cwd=tmp_path, env=H.student_process_env(), timeout=120, check=True)


def test_student_jupyter_has_no_instructor_tools(student, tmp_path):
    env = H.student_process_env(tmp_path)
    servers, labs = (subprocess.Popen([student.bin / "jupyter", *what, "list"], cwd=tmp_path, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                     for what in (("server", "extension"), ("labextension",)))  # side by side: each takes a while
    listing, lab_listing = (ANSI.sub("", process.communicate(timeout=600)[0]) for process in (servers, labs))
    states = dict(re.findall(r"(nbgrader\.server_extensions\.\w+) (enabled|disabled)", listing))
    assert states == {
        "nbgrader.server_extensions.formgrader": "disabled",
        "nbgrader.server_extensions.course_list": "disabled",
        "nbgrader.server_extensions.assignment_list": "disabled",  # a laptop has no exchange to list
        "nbgrader.server_extensions.validate_assignment": "enabled",
    }, listing
    assert re.search(r"coursekit\.jupyter_setup\s.*enabled", listing), listing  # Validate names written questions
    disabled = lab_listing.split("Disabled extensions:")[-1]
    for plugin in ("formgrader", "course-list", "create-assignment", "assignment-list"):
        assert f"@jupyter/nbgrader:{plugin}" in disabled, lab_listing
    assert "@jupyter/nbgrader:validate-assignment" not in disabled
    bundles = (student.venv / "share/jupyter/labextensions/@jupyter/nbgrader/static").glob("*.js")
    text = "".join(b.read_text(encoding="utf-8") for b in bundles)
    assert "passes all the tests" not in text and "public self-checks" in text


def test_student_wheel_carries_the_course_data(student):
    """The wheel holds the student repository's data/ byte for byte (what the notebooks read), and nothing else of
    data/ (never a downloaded real set)."""
    repo = H.student_repo()
    wheel = zipfile.ZipFile(student.wheel)
    prefix = "coursekit/_bundled_data/"
    carried = {n[len(prefix):]: wheel.read(n) for n in wheel.namelist() if n.startswith(prefix)}
    shipped = {p.relative_to(repo / "data").as_posix(): p.read_bytes() for p in (repo / "data").rglob("*") if p.is_file()}
    assert set(carried) == set(shipped), (sorted(carried), sorted(shipped))
    assert carried == shipped
    assert {"tinyshakespeare/input.txt", "yelp_synthetic/train.csv", "modern_vs_gpt.json", "multi30k/train.de.gz",
            "multi30k/README.md", "pretrained_runs.json"} <= set(carried)


def test_data_found_from_the_students_own_folder(student, tmp_path):
    """From a folder with no data/ above it and no COURSE_DATA_DIR, coursekit finds every shipped data file in its
    wheel; with COURSE_DATA_DIR set, that folder still wins."""
    probe = ("import json; from coursekit.shakespeare import shakespeare_path; "
             "from coursekit.modern_comparison import results_path; from coursekit.data.yelp import synthetic_dir; "
             "print(json.dumps([str(shakespeare_path()), str(results_path()), str(synthetic_dir())]))")
    work = tmp_path / "my-work" / "08_gpt_language_model"
    work.mkdir(parents=True)
    assert not [f for f in (work, *work.parents) if (f / "data").exists()]
    env = H.student_process_env(tmp_path / "home")
    found = json.loads(subprocess.run([student.python, "-c", probe], cwd=work, env=env, capture_output=True,
                                      text=True, timeout=120, check=True).stdout)
    bundled = student.venv.resolve()
    for path in map(Path, found):
        assert bundled in path.parents and "_bundled_data" in path.parts, found
    own = tmp_path / "own-data"
    shutil.copytree(H.student_repo() / "data", own)
    found = json.loads(subprocess.run([student.python, "-c", probe], cwd=work, env={**env, "COURSE_DATA_DIR": str(own)},
                                      capture_output=True, text=True, timeout=120, check=True).stdout)
    assert all(Path(path).is_relative_to(own) for path in found), found


# ------------------------------------------------------------------------------------------ the notebooks
@pytest.mark.parametrize("assignment", H.ASSIGNMENTS)
def test_stubs_fail_first_with_a_short_hint(assignment, kernel_specs, tmp_path):
    folder = H.prepare_assignment(assignment, tmp_path, filled=False)
    notebook = nbformat.read(folder / f"{assignment}.ipynb", as_version=4)
    _execute_until_an_error(notebook, folder, kernel_specs)
    errors = [(i, o) for i, c in enumerate(notebook.cells) for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors, "the stubs ran without a failing self-check"
    index, error = errors[0]
    assert notebook.cells[index].metadata.get("nbgrader", {}).get("grade_id", "").startswith("selfcheck_"), (
        f"the first failure is in cell {index}, not in a self-check:\n{notebook.cells[index].source}")
    lines = ANSI.sub("", "\n".join(error.traceback)).splitlines()
    text = "\n".join(lines)
    assert lines[0].startswith("Self-check failed:") and "not implemented yet" in lines[0], text
    assert any(line.startswith("HINT:") for line in lines[1:3]), text  # the problem may wrap onto a second line
    assert len(lines) <= 8 and "site-packages" not in text and "During handling" not in text, text


# ------------------------------------------------------------------------------------------ threads where students run
def test_student_deployments_use_one_cpu_thread():
    """Shared student servers: one torch/BLAS thread each (docs/benchmarks.md, "Student training threads")."""
    import yaml

    deploy = H.REPO / "deploy"
    dockerfile = (deploy / "docker" / "Dockerfile.student").read_text()
    assert re.search(r"^\s+OMP_NUM_THREADS=1\s*$", dockerfile, re.M), "Dockerfile.student ENV lacks OMP_NUM_THREADS=1"
    assert "python -m coursekit.jupyter_setup --hub" in dockerfile
    values = yaml.safe_load((deploy / "k8s" / "values.yaml").read_text())
    assert values["singleuser"]["extraEnv"]["OMP_NUM_THREADS"] == "1"
    hub = (deploy / "jupyterhub" / "jupyterhub_config.py").read_text()
    (line,) = [line for line in hub.splitlines() if line.startswith("c.Spawner.environment = ")]
    assert '"OMP_NUM_THREADS": "1"' in line


def test_readme_student_steps_are_the_tested_ones():
    """The course README sends students to the student repository, whose README has the two commands these tests
    run (its Makefile's `make student`, then JupyterLab of .venv-student on exercises/)."""
    readme = (H.REPO / "README.md").read_text()
    section = readme[readme.index("## For students"):readme.index("## For instructors")]
    assert "make student-repo" in section and "student repository" in section
    assert "COURSE_PROFILE=student pip install" not in section  # the old instructor-install-in-disguise
    assert "git clone <the course repository>" not in section  # the course repository holds solutions/
    repo = H.student_repo()
    student_readme = (repo / "README.md").read_text()
    commands = re.search(r"```bash\n(.*?)```", student_readme, re.S).group(1)
    assert [line.split("#")[0].strip() for line in commands.strip().splitlines()] == [
        "make student", ".venv-student/bin/jupyter lab exercises/"]
    makefile = (repo / "Makefile").read_text()
    assert "\nstudent:" in makefile and "coursekit.jupyter_setup" in makefile
    dry = subprocess.run(["make", "-n", "student"], cwd=repo, capture_output=True, text=True, timeout=60, check=True)
    assert "COURSE_PROFILE=student" in dry.stdout and "_bundled_data" in dry.stdout
