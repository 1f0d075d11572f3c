"""The calbench version, written into every dump and saved calibrator (pyproject.toml reads it from here). A module
of the lowest layer, so that data and persist read it without importing the package root, which sits above them.
When to bump which part: docs/developing.md, "Versions"."""

__version__ = "0.2.4"
