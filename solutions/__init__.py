"""Reference implementation of every name in the course API (instructors only)."""
