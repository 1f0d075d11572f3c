"""``make bench``: time calbench's main operations on generated data → results/bench/bench.json.

Each module of this package defines benchmark functions decorated with :func:`benchmark`; a
function returns a dict of the sizes involved and is timed as a whole (best of ``repeat`` runs).
Add a module here to add benchmarks; no other edit is needed.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import platform
import subprocess
import time
from pathlib import Path
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


def machine() -> str:
    """The machine in words: CPU model, cores, OS, Python."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                 platform.processor())
    return (f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def provenance(command: str) -> dict:
    """How and where a measurement was taken: ``command``, the checkout's commit (``-dirty`` with local edits),
    :func:`machine`, the UTC date and the load average at the start (other work on a shared machine)."""
    root = Path(__file__).resolve().parents[3]

    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = "-dirty" if git("status", "--porcelain", "--untracked-files=no") else ""
    return {"command": command, "commit": commit + dirty, "machine": machine(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average": round(os.getloadavg()[0], 1)}
