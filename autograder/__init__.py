"""Hidden checks and the instructor's grading pipeline (instructors only)."""
