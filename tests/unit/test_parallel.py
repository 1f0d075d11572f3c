"""calbench.parallel: worker threads run with one BLAS thread each (threadpoolctl), so that they do not
oversubscribe the cores."""

from __future__ import annotations

import threading

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import calbench.parallel
from calbench.methods import make


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_workers_use_one_blas_thread_and_the_caller_keeps_its_own(monkeypatch):
    """A notebook without OMP_NUM_THREADS: BLAS at 2 threads outside, 1 inside the worker threads."""
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 2)
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        inside = calbench.parallel.thread_map(lambda _: _blas_threads(), range(4))
        assert inside == [{1}] * 4
        assert _blas_threads() == {2}


def test_an_item_left_alone_runs_last_with_every_core(monkeypatch):
    """Five folds on two cores: four on the workers with one BLAS thread each, then the fifth in the calling
    thread with two (else a third round ran with one core idle). Which item it is depends on the count only."""
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 2)
    monkeypatch.setattr(calbench.parallel, "_granted_threads", None)  # a library call: no share_cores
    caller = threading.get_ident()
    for outside in (1, 2):
        with threadpool_limits(limits=outside, user_api="blas"):
            seen = calbench.parallel.thread_map(lambda _: (_blas_threads(), threading.get_ident() == caller),
                                                range(5))
            assert seen == [({1}, False)] * 4 + [({2}, True)]
            assert _blas_threads() == {outside}


def test_a_job_runs_on_its_granted_threads_with_one_blas_thread_throughout(monkeypatch):
    """A Snakemake job granted two of four cores (share_cores): its five folds run on two workers, none in the
    calling thread, and BLAS runs on one thread in the workers and in the caller, whatever the grant."""
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 4)
    monkeypatch.setattr(calbench.parallel, "_granted_threads", None)
    monkeypatch.setattr(calbench.parallel, "_one_blas_thread", None)
    caller = threading.get_ident()
    with threadpool_limits(limits=2, user_api="blas"):
        calbench.parallel.share_cores(2)
        seen = calbench.parallel.thread_map(lambda _: (_blas_threads(), threading.get_ident()), range(5))
        assert _blas_threads() == {1}
    assert [blas for blas, _ in seen] == [{1}] * 5
    assert caller not in {ident for _, ident in seen} and len({ident for _, ident in seen}) <= 2


def _four_class_task():
    """Scores, labels and a 2 × 2 ODIR grid: a grid search small enough to run several times."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 400)
    z = rng.normal(size=(400, 4)) + 2.0 * np.eye(4)[y]
    return z, y, {"reg_lambda": [1e-3, 1e-1], "reg_mu": [1e-3, 1e-1]}


def test_grid_search_results_do_not_depend_on_the_granted_threads(monkeypatch):
    z, y, grid = _four_class_task()
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 3)
    monkeypatch.setattr(calbench.parallel, "_one_blas_thread", None)
    fits = []
    with threadpool_limits(limits=3, user_api="blas"):
        for threads in (1, 2, 3):
            monkeypatch.setattr(calbench.parallel, "_granted_threads", None)
            calbench.parallel.share_cores(threads)
            fits.append(make("dir_odir", grid=grid).fit(z, y))
    for fit in fits[1:]:
        np.testing.assert_array_equal(fit.cv_losses_, fits[0].cv_losses_)
        np.testing.assert_array_equal(fit.predict_proba(z), fits[0].predict_proba(z))


def test_grid_search_results_are_identical_with_limited_and_free_blas(monkeypatch):
    z, y, grid = _four_class_task()
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 2)
    threaded = make("dir_odir", grid=grid).fit(z, y)
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 1)
    with threadpool_limits(limits=2, user_api="blas"):  # serial folds, BLAS free to use 2 threads
        serial = make("dir_odir", grid=grid).fit(z, y)
    np.testing.assert_array_equal(threaded.cv_losses_, serial.cv_losses_)
    np.testing.assert_array_equal(threaded.predict_proba(z), serial.predict_proba(z))


def test_one_vs_rest_maps_fitted_in_threads_equal_the_serial_fits(monkeypatch):
    """OneVsRest fits the classes' maps in threads: the same maps and outputs as one after the other."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 5, 300)
    z = rng.normal(size=(300, 5)) + 2.5 * np.eye(5)[y]
    for method in ("pl3_ovr", "platt", "irova"):
        settings = {"max_pieces": 3} if method == "pl3_ovr" else {}
        monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 2)
        threaded = make(method, **settings).fit(z, y).predict_proba(z)
        monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 1)
        serial = make(method, **settings).fit(z, y).predict_proba(z)
        np.testing.assert_array_equal(threaded, serial)


def test_a_map_inside_a_worker_runs_in_that_worker(monkeypatch):
    """Nested maps (a fold's own blocks) do not start threads of their own: the outer workers have the cores."""
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 2)

    def outer(_):
        me = threading.get_ident()
        return {ident == me for ident in calbench.parallel.thread_map(lambda _: threading.get_ident(), range(4))}

    assert calbench.parallel.thread_map(outer, range(4)) == [{True}] * 4
