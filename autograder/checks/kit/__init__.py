"""The checking framework (see docs/architecture.md)."""
