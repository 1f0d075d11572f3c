"""``make bench``: time calbench's main operations on generated data → results/bench/bench.json.

Each module of this package defines benchmark functions decorated with :func:`benchmark`; a
function returns a dict of the sizes involved and is timed as a whole (best of ``repeat`` runs).
Add a module here to add benchmarks; no other edit is needed.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from typing import Callable

_BENCHMARKS: list[tuple[str, Callable, int]] = []


def benchmark(name: str, repeat: int = 3):
    """Register ``function(setup_seed) -> dict``; a ``setup`` attribute may prepare data outside the timing."""

    def decorate(function):
        _BENCHMARKS.append((name, function, repeat))
        return function

    return decorate


def discover() -> list[tuple[str, Callable, int]]:
    package = importlib.import_module("calbench.perf")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name != "__main__":
            importlib.import_module(f"calbench.perf.{info.name}")
    return list(_BENCHMARKS)


def timed(prepare: Callable, run: Callable, repeat: int) -> float:
    """Best wall time of ``run(*prepare())`` over ``repeat`` runs (``prepare`` is not timed)."""
    best = float("inf")
    for _ in range(repeat):
        args = prepare()
        start = time.perf_counter()
        run(*args)
        best = min(best, time.perf_counter() - start)
    return best
