"""Threads for numpy-heavy work (BLAS products, ufuncs and partial sorts release the GIL), and the BLAS threads
calbench's computations run on. The policy never oversubscribes the cores:

* **Worker threads** (:func:`thread_map`): at most one per core this process may use (its CPU affinity, or the
  cores granted by :func:`share_cores` or :func:`use_cores`), each with BLAS on one thread.
* **BLAS elsewhere** (a fit, a prediction, an item of a :func:`thread_map` left to run alone): **one thread by
  default**. A process cannot tell whether other work runs beside it (a browser, a notebook, a training run, the
  other jobs of a workflow), and multi-threaded BLAS beside other work costs more than it gives: OpenBLAS's threads
  wait for each other by spinning, so a 100-class ``dir_odir`` fit beside two CPU-bound processes on two cores took
  longer with its last fold's BLAS on both cores than pinned to one core. More BLAS threads only where the user
  declares that the process has the cores to itself: :func:`use_cores` (or ``CALBENCH_THREADS=N`` in the
  environment, which reaches ``calbench fit`` and every other command).
* **A workflow job** (:func:`share_cores`): the threads Snakemake granted, BLAS on one thread throughout, whatever
  :func:`use_cores` or the environment say.

BLAS on one thread also makes results independent of the core count: float32 products on several BLAS threads
round differently from one thread, so only :func:`use_cores` with more than one core may change the last digits.
The limits are set with threadpoolctl for the duration of calbench's own calls (:func:`blas_region`, which
:meth:`calbench.methods.Calibrator.fit` and ``predict_proba`` enter) and restored on return: numpy work of the
caller's own keeps the caller's setting.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable, Iterable, TypeVar

from threadpoolctl import ThreadpoolController

T = TypeVar("T")
R = TypeVar("R")
#: The environment variable that declares the cores this process has to itself (:func:`use_cores`).
THREADS_ENV = "CALBENCH_THREADS"
_worker = threading.local()  # .active: this thread runs an item of thread_map
_granted_threads: int | None = None  # set by share_cores: the threads a workflow job was granted
_own_cores: int | None = None  # set by use_cores: the cores the user declared this process has to itself
_one_blas_thread = None  # share_cores's BLAS limit, held for the life of the process
_region = threading.Lock()
_region_depth = 0  # nesting of blas_region across the process's threads
_region_limit = None  # the limit blas_region set on entry, restored on the last exit
_controller: tuple[int, ThreadpoolController] | None = None  # (len(sys.modules) when scanned, the controller)


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


def use_cores(cores: int | None) -> None:
    """Declare that this process has ``cores`` cores to itself (nothing else runs on them): :func:`thread_map`
    runs on up to that many workers, and BLAS uses all of them where one item runs alone (a fit or prediction
    outside the workers, the last item of a :func:`thread_map` alone in its round). ``None`` returns to the
    default: workers on the CPU affinity, BLAS on one thread. ``CALBENCH_THREADS=N`` in the environment declares
    the same for a whole process (a ``calbench`` command); a workflow job's :func:`share_cores` overrides both."""
    global _own_cores
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise ValueError(f"use_cores: expected a number of cores >= 1 or None, got {cores!r}")
    _own_cores = cores


def own_cores() -> int | None:
    """The cores declared as this process's own (:func:`use_cores`, else ``CALBENCH_THREADS``), at most its CPU
    affinity, or None; None in a workflow job (:func:`share_cores`)."""
    if _granted_threads is not None:
        return None
    declared = _own_cores
    if declared is None:
        text = os.environ.get(THREADS_ENV, "").strip()
        if not text:
            return None
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{THREADS_ENV}={text!r} in the environment: expected the number of cores this process "
                             f"has to itself (an integer >= 1), or unset it for the default (BLAS on one thread)")
        declared = int(text)
    return min(declared, available_cores())


def _blas() -> ThreadpoolController:
    """A threadpoolctl controller of the BLAS libraries loaded now, scanned again once modules were imported
    since (a new BLAS arrives with an import, e.g. scipy.linalg's)."""
    global _controller
    if _controller is None or _controller[0] != len(sys.modules):
        _controller = (len(sys.modules), ThreadpoolController().select(user_api="blas"))
    return _controller[1]


@contextmanager
def blas_region():
    """BLAS on the threads the policy allows (the module's docstring) while calbench computes: one, or the cores of
    :func:`use_cores`; the caller's setting is restored when the outermost region of the process ends. Nested and
    concurrent regions (fits in the user's own threads) share the first one's limit."""
    global _region_depth, _region_limit
    with _region:
        if _region_depth == 0:
            _region_limit = _blas().limit(limits=own_cores() or 1)
        _region_depth += 1
    try:
        yield
    finally:
        with _region:
            _region_depth -= 1
            if _region_depth == 0 and _region_limit is not None:
                _region_limit.restore_original_limits()
                _region_limit = None


def thread_map(function: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``[function(i) for i in items]`` on up to :func:`available_cores` threads (at most the threads granted
    by :func:`share_cores` or declared by :func:`use_cores`), results in item order; in the calling thread where
    one worker would do or where the caller is itself a worker of this function (the cores are taken).

    The workers run BLAS on one thread each, and so does the calling thread by default (:func:`blas_region`).
    Where the user declared the cores as the process's own (:func:`use_cores`) and the items would end in a round
    of one (five CV folds on two cores), the last item runs after the others, in the calling thread, with BLAS on
    those cores. Which item does is fixed by the count, not by timing: float32 products on several BLAS threads
    round differently from one thread, and a rerun must repeat the results bit for bit."""
    items = list(items)
    own = own_cores()
    cores = min(available_cores(), _granted_threads or own or available_cores())
    workers = min(len(items), cores)
    if workers <= 1 or getattr(_worker, "active", False):
        with blas_region():
            return [function(item) for item in items]
    alone = own is not None and len(items) % workers == 1

    def run(item):
        _worker.active = True
        return function(item)

    with blas_region():
        if own is None:  # the region's BLAS is on one thread already
            with ThreadPoolExecutor(max_workers=workers) as pool:
                return list(pool.map(run, items))
        with _blas().limit(limits=1), ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run, items[:-1] if alone else items))
        if alone:
            results.append(function(items[-1]))  # back in the region: BLAS on the declared cores
    return results
