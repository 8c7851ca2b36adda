"""Byte units, one definition for every room."""
MiB = 1024**2
GiB = 1024**3
