"""Threads for numpy-heavy work: BLAS products, ufuncs and partial sorts release the GIL."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity (what SLURM or ``taskset`` granted), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def thread_map(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[function(i) for i in items]`` on up to :func:`available_cores` threads, results in order."""
    items = list(items)
    workers = min(len(items), available_cores())
    if workers <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, items))
