"""The calbench version, written into every dump and saved calibrator (pyproject.toml reads it from here). A module
of the lowest layer, so that data and persist read it without importing the package root, which sits above them."""

__version__ = "0.1.0"
