"""`import coursekit`: the re-exported names, and no heavy imports at import time."""
import subprocess
import sys

import coursekit


def test_reexports_the_student_helpers():
    for name in ("set_seed", "get_device", "grading_mode", "tokenize", "load_yelp"):
        assert callable(getattr(coursekit, name)), name
        assert name in coursekit.__all__


def test_import_stays_light():
    code = ("import sys, coursekit; heavy = [m for m in ('gensim', 'seaborn', 'matplotlib', 'nltk', 'pandas', "
            "'sklearn') if m in sys.modules]; print(','.join(heavy))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
