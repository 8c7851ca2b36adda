"""Chooses the packages of the build from the install profile (see pyproject.toml).

COURSE_PROFILE=student  -> coursekit only (what students get on JupyterHub)
COURSE_PROFILE=instructor (default) -> coursekit, solutions, autograder
"""
import os

from setuptools import find_packages, setup

PROFILES = {
    "student": ["coursekit"],
    "instructor": ["coursekit", "solutions", "autograder"],
}

profile = os.environ.get("COURSE_PROFILE", "instructor")
if profile not in PROFILES:
    raise SystemExit(f"COURSE_PROFILE must be one of {sorted(PROFILES)}, not {profile!r}")

top = PROFILES[profile]
packages = find_packages(include=top + [name + ".*" for name in top])

setup(
    packages=packages,
    # the course's data/ as `make student` copies it into the wheel's sources (coursekit/bundled_data.py);
    # an instructor checkout has no such folder, so nothing is added there
    package_data={"coursekit": ["_bundled_data/**/*"]},
    # one build folder per profile: a leftover instructor build must never end up in a student wheel
    options={"build": {"build_base": f"build/{profile}"}},
    # the `autograder` command ships only with the autograder package
    entry_points={"console_scripts": ["autograder = autograder.__main__:main"]} if "autograder" in top else {},
)
