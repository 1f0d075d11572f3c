"""Threads for numpy-heavy work: BLAS products, ufuncs and partial sorts release the GIL.

While worker threads run, BLAS is limited to one thread each (threadpoolctl): the workers already use
the cores, and BLAS's own threads on top of them oversubscribe the machine (issue 17: a dir_odir grid
search took 72 s with OpenBLAS's default threads and 3 s with ``OMP_NUM_THREADS=1`` on 2 cores).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

from threadpoolctl import threadpool_limits

T = TypeVar("T")
R = TypeVar("R")


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity (what SLURM or ``taskset`` granted), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def thread_map(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[function(i) for i in items]`` on up to :func:`available_cores` threads (one BLAS thread each),
    results in order; with one worker, in the calling thread and BLAS as configured."""
    items = list(items)
    workers = min(len(items), available_cores())
    if workers <= 1:
        return [function(item) for item in items]
    with threadpool_limits(limits=1), ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, items))
