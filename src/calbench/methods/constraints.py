"""Declared ranges of method settings, checked before any fit (as scikit-learn's ``_parameter_constraints``).

A calibrator class declares ``_parameter_constraints = {"q": [Interval("real", 0, 1, closed="right")]}``:
each setting (every keyword argument of its ``__init__``: ``tests/contract/test_settings_declared.py`` checks every
registered method) maps to a list of allowed forms (an :class:`Interval`, :class:`Options`, :class:`Pattern`,
:class:`IncreasingPair`, or ``None`` for "may be None"); a value must fit one of them. :func:`check_settings`
raises :class:`InvalidSetting`, one line naming the setting, the value and what is allowed. ``make`` (hence
``config.load``, ``validate`` and ``snakemake -n``) and ``fit`` run the same checks, so that a value ``fit`` would
refuse is refused before any job runs, with the same message; a ``grid`` is checked by :func:`check_grid`.
"""

from __future__ import annotations

import math
import re
from numbers import Integral, Real


class InvalidSetting(ValueError):
    """A setting outside its declared range; ``key`` names it (``q``, or ``grid.q`` for a grid value)."""

    def __init__(self, key: str, detail: str):
        super().__init__(f"{key}: {detail}")
        self.key, self.detail = key, detail


class Interval:
    """Numbers of ``kind`` ``"real"`` or ``"int"`` between ``low`` and ``high`` (``None``: unbounded);
    ``closed`` is ``"both"``, ``"left"``, ``"right"`` or ``"neither"``."""

    def __init__(self, kind: str, low=None, high=None, closed: str = "both"):
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def __contains__(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, Integral if self.kind == "int" else Real):
            return False
        if not math.isfinite(value):
            return False
        low_open, high_open = self.closed in ("right", "neither"), self.closed in ("left", "neither")
        if self.low is not None and (value < self.low or (value == self.low and low_open)):
            return False
        return self.high is None or not (value > self.high or (value == self.high and high_open))

    def __str__(self) -> str:
        what = "an integer" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            left = "[" if self.closed in ("both", "left") else "("
            right = "]" if self.closed in ("both", "right") else ")"
            return f"{what} in {left}{self.low}, {self.high}{right}"
        if self.low is not None:
            return f"{what} {'>=' if self.closed in ('both', 'left') else '>'} {self.low}"
        if self.high is not None:
            return f"{what} {'<=' if self.closed in ('both', 'right') else '<'} {self.high}"
        return what


class Options:
    """One of the listed values."""

    def __init__(self, *values):
        self.values = values

    def __contains__(self, value) -> bool:
        return any(value == v and type(value) is type(v) for v in self.values)

    def __str__(self) -> str:
        return "one of " + ", ".join(map(repr, self.values))


class Pattern:
    """Strings that match the regular expression ``regex`` in full; ``what`` says which in words."""

    def __init__(self, regex: str, what: str):
        self.regex, self.what = re.compile(regex), what

    def __contains__(self, value) -> bool:
        return isinstance(value, str) and self.regex.fullmatch(value) is not None

    def __str__(self) -> str:
        return self.what


class IncreasingPair:
    """Two values ``[low, high]`` of ``interval`` with ``low < high`` (a list in YAML, a tuple in Python)."""

    def __init__(self, interval: Interval):
        self.interval = interval

    def __contains__(self, value) -> bool:
        return (isinstance(value, (list, tuple)) and len(value) == 2 and all(v in self.interval for v in value)
                and value[0] < value[1])

    def __str__(self) -> str:
        return f"[low, high] with low < high, each {self.interval}"


def _allows(form, value) -> bool:
    return value is None if form is None else value in form


def check_settings(constraints: dict, settings: dict, prefix: str = "") -> None:
    """Raise :class:`InvalidSetting` for the first setting that fits none of its declared forms; the
    message starts with the setting's name (after ``prefix``, e.g. ``grid.``)."""
    for key, value in settings.items():
        forms = constraints.get(key)
        if forms is not None and not any(_allows(form, value) for form in forms):
            allowed = " or ".join("None" if form is None else str(form) for form in forms)
            raise InvalidSetting(prefix + key, f"{value!r} is not allowed; expected {allowed}")


def check_grid(cls: type, grid) -> None:
    """Raise :class:`InvalidSetting` unless ``grid`` is None or maps settings of ``cls`` to non-empty lists of
    values that each fit the setting's declared forms (``grid.q``)."""
    if grid is None:
        return
    if not isinstance(grid, dict):
        raise InvalidSetting("grid", f"{grid!r} is not allowed; expected a mapping of settings to lists of values "
                                     "(or null: no search)")
    allowed = cls._get_param_names()
    for key, values in grid.items():
        if key not in allowed:
            raise InvalidSetting(f"grid.{key}", f"not a setting of {getattr(cls, 'method_name', cls.__name__)}; "
                                                f"its settings: {', '.join(allowed) or 'none'}")
        if not isinstance(values, (list, tuple)) or not values:
            raise InvalidSetting(f"grid.{key}", f"expected a non-empty list of values, got {values!r}")
        for value in values:
            check_settings(cls._parameter_constraints, {key: value}, prefix="grid.")
