"""The course's data as the student wheel carries it.

`make student` (in the course repository and in the student repository) copies the repository's `data/` into the
wheel as `coursekit/_bundled_data/`, so the notebooks find tinyshakespeare, the synthetic reviews and the recorded
comparison wherever the student keeps the exercises. An editable instructor install has no such folder and reads
the repository's `data/` instead; the lookups of coursekit.shakespeare, coursekit.data.yelp, coursekit.real_data and
coursekit.modern_comparison try this folder right after $COURSE_DATA_DIR.
"""
from pathlib import Path

BUNDLED_DATA = Path(__file__).resolve().parent / "_bundled_data"
