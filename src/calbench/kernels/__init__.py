"""Compiled (numba) kernels. Each module compiles with ``cache=True`` into the ``__pycache__`` beside it and has a
``warm_up()`` that compiles its signatures there; :func:`modules` lists them for ``calbench compile``."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def modules() -> list[ModuleType]:
    """Every kernel module of this package, by name."""
    return [importlib.import_module(f"{__name__}.{info.name}") for info in pkgutil.iter_modules(__path__)]
