"""Threads for numpy-heavy work: BLAS products, ufuncs and partial sorts release the GIL.

While worker threads run, BLAS is limited to one thread each (threadpoolctl): the workers already use
the cores, and BLAS's own threads on top of them oversubscribe the machine (issue 17: a dir_odir grid
search took 72 s with OpenBLAS's default threads and 3 s with ``OMP_NUM_THREADS=1`` on 2 cores). An item
left to run alone gets every core for its BLAS calls: five CV folds on two cores ran in three rounds, the last
with one core idle (issue 12).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

from threadpoolctl import ThreadpoolController

T = TypeVar("T")
R = TypeVar("R")
_worker = threading.local()  # .active: this thread runs an item of thread_map
_granted_threads: int | None = None  # set by share_cores: the threads this process was granted


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity (what SLURM or ``taskset`` granted), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def share_cores(threads: int) -> None:
    """Declare that this process shares its cores with other jobs and was granted ``threads`` of them (a
    Snakemake job's ``threads``): an item left to run alone by :func:`thread_map` then takes at most that many
    BLAS threads. In config/scale.yaml's run, whose 1,000-class Dirichlet jobs run two at a time on two cores,
    giving each one's fifth fold two BLAS threads cost them 0–12 % more CPU time, and the run 41 min 47 s
    against 39 min 32 s."""
    global _granted_threads
    _granted_threads = max(1, int(threads))


def thread_map(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[function(i) for i in items]`` on up to :func:`available_cores` threads, results in order; in the
    calling thread, BLAS as configured, where one worker would do or where the caller is itself a worker of
    this function (the cores are taken).

    The workers run BLAS on one thread each. Where the items would end in a round of one (five CV folds on
    two cores), the last item runs after the others, in the calling thread, with BLAS on every core (at most
    the threads granted by :func:`share_cores`; with one, it runs on a worker as the others do). Which
    item does is fixed by the count, not by timing: float32 products on several BLAS threads round
    differently from one thread, and a rerun must repeat the results bit for bit. The caller's BLAS setting
    is restored on return."""
    items = list(items)
    cores = available_cores()
    workers = min(len(items), cores)
    if workers <= 1 or getattr(_worker, "active", False):
        return [function(item) for item in items]
    alone_threads = cores if _granted_threads is None else min(cores, _granted_threads)
    alone = len(items) % workers == 1 and alone_threads > 1
    controller = ThreadpoolController()

    def run(item):
        _worker.active = True
        return function(item)

    with controller.limit(limits=1), ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(run, items[:-1] if alone else items))
    if alone:
        with controller.limit(limits=alone_threads):
            results.append(function(items[-1]))
    return results
