# The two commands of the README:  make demo  (the main job)  and  make test  (the whole suite).
# Both create .venv when it is missing and install the instructor profile from constraints.txt;
# a second run installs nothing (the stamp file is newer than its inputs).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PIP    := $(PY) -m pip --disable-pip-version-check

.PHONY: demo test install release lock bench clean-course

demo: $(STAMP)
	$(PY) -m autograder demo

test: $(STAMP)
	$(PY) -m pytest

install: $(STAMP)

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt pip setuptools
	$(PIP) install -q -c constraints.txt --no-build-isolation -e ".[instructor]"
	touch $(STAMP)

# Regenerate exercises/ (the student release) from course/source.
release: $(STAMP)
	$(PY) -m autograder release --all

# Re-resolve the pinned stack (run by hand, then commit constraints.txt and update environment.yml).
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install -q --no-build-isolation setuptools && .venv-lock/bin/pip install -q -e ".[instructor]"
	.venv-lock/bin/pip freeze --exclude-editable | sed 's/+cpu$$//' > constraints.txt.new
	@echo "wrote constraints.txt.new: review, then move it over constraints.txt"

bench: $(STAMP)
	$(PY) bench/decode.py
	$(PY) bench/grading.py
	$(PY) bench/yelp.py

clean-course:
	rm -rf course/gradebook.db course/submitted course/autograded course/feedback course/reports course/release
