"""First code a grading kernel runs (IPKernelApp.exec_lines), before any student cell.

The kernel's working directory must stay importable (`from provided import ...`), but a file the notebook
writes there (`autograder.py`, `solutions.py`, `torch.py`...) must never replace an installed package. Two
measures: the working directory moves to the end of sys.path, and the packages the grading relies on are
resolved now, while the directory holds only files we put there, and pinned by a finder placed first on
sys.meta_path. (Editable installs resolve through a meta-path finder that runs AFTER the path finder, so
moving sys.path entries alone is not enough.)
"""
import importlib.util as _util
import sys as _sys

PROTECTED = ("autograder", "solutions", "coursekit", "torch", "numpy", "nbgrader")

_sys.path[:] = [p for p in _sys.path if p not in ("", ".")]
_specs = {}
for _name in PROTECTED:
    try:
        _specs[_name] = _util.find_spec(_name)
    except (ImportError, ValueError):
        _specs[_name] = None
_sys.path.append("")


class ProtectedPackageFinder:
    """Resolves the protected top-level names to the installed packages found at kernel start."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        spec = _specs.get(name)
        if spec is None:
            return None
        return _util.spec_from_file_location(name, spec.origin,
                                             submodule_search_locations=spec.submodule_search_locations) \
            if spec.origin else spec


_sys.meta_path.insert(0, ProtectedPackageFinder())
