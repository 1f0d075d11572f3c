"""Threads for numpy-heavy work: BLAS products, ufuncs and partial sorts release the GIL.

While worker threads run, BLAS is limited to one thread each (threadpoolctl): the workers already use
the cores, and BLAS's own threads on top of them oversubscribe the machine (a dir_odir grid search took 72 s
with OpenBLAS's default threads and 3 s with ``OMP_NUM_THREADS=1`` on 2 cores). In a library call, an item
left to run alone gets every core for its BLAS calls (five CV folds on two cores would otherwise run in three
rounds, the last with one core idle). A workflow job instead declares its threads (:func:`share_cores`) and
runs on exactly that many, BLAS on one thread throughout, so that its results do not depend on the count.
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
_one_blas_thread = None  # share_cores's BLAS limit, held for the life of the process


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity (what SLURM or ``taskset`` granted), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def share_cores(threads: int) -> None:
    """Declare that this process shares the machine with other jobs and was granted ``threads`` cores (a
    Snakemake job's ``threads``, which SLURM grants as CPUs): :func:`thread_map` then runs on at most that many
    workers, and BLAS runs on one thread everywhere (workers and the calling thread alike), so that float32
    products round the same whatever the count and a job's results are identical for any ``threads``. The
    workers' results are combined in item order, never in order of completion."""
    global _granted_threads, _one_blas_thread
    _granted_threads = max(1, int(threads))
    _one_blas_thread = ThreadpoolController().limit(limits=1)


def thread_map(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[function(i) for i in items]`` on up to :func:`available_cores` threads (at most the threads granted
    by :func:`share_cores`), results in item order; in the calling thread, BLAS as configured, where one worker
    would do or where the caller is itself a worker of this function (the cores are taken).

    The workers run BLAS on one thread each. In a library call (no :func:`share_cores`), where the items
    would end in a round of one (five CV folds on two cores), the last item runs after the others, in the
    calling thread, with BLAS on every core. Which item does is fixed by the count, not by timing: float32
    products on several BLAS threads round differently from one thread, and a rerun must repeat the results
    bit for bit. The caller's BLAS setting is restored on return."""
    items = list(items)
    cores = available_cores() if _granted_threads is None else min(available_cores(), _granted_threads)
    workers = min(len(items), cores)
    if workers <= 1 or getattr(_worker, "active", False):
        return [function(item) for item in items]
    alone = _granted_threads is None and len(items) % workers == 1
    controller = ThreadpoolController()

    def run(item):
        _worker.active = True
        return function(item)

    with controller.limit(limits=1), ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(run, items[:-1] if alone else items))
    if alone:
        with controller.limit(limits=cores):
            results.append(function(items[-1]))
    return results
