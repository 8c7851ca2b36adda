"""`provided.py`: the working parts of the earlier notebooks, which a notebook from 04 on imports.

A notebook that builds on earlier ones (04 uses 03's attention, 05 uses 01-04's parts...) imports them from
`provided.py`, a file in its own folder, generated from the course's reference code, so that a student whose
earlier answers had a bug can still do it. The instructor hands it out with the assignment, once the deadlines of
the notebooks it covers have passed. Until then `from provided import ...` would end in a bare "No module named
'provided'": the notebook's first cell calls `require_provided()` right before that import, and the error says
what the file is and what to do.
"""
from __future__ import annotations

import importlib.util

MODULE = "provided"

MISSING = (
    "provided.py is not next to this notebook yet. It holds working versions of the parts you wrote in the "
    "earlier notebooks (the course's own code), so that this notebook works even if one of yours had a bug. Your "
    "instructor hands it out with this assignment once the deadlines of those notebooks have passed: put it in "
    "this notebook's folder and run this cell again.")


def require_provided() -> None:
    """Raise ModuleNotFoundError saying what provided.py is and what to do, when `import provided` would not find
    it (it is looked for as that import looks: on `sys.path`, whose first entry is the notebook's folder)."""
    if importlib.util.find_spec(MODULE) is None:
        raise ModuleNotFoundError(MISSING, name=MODULE)
