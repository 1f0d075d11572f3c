"""calbench.parallel: worker threads run with one BLAS thread each (threadpoolctl), and so does everything else of
calbench's unless the user declares the cores the process's own (use_cores, CALBENCH_THREADS), so that calbench never
oversubscribes the cores."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import calbench.parallel
from calbench.methods import make
from calbench.methods.base import Calibrator


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_workers_use_one_blas_thread_and_the_caller_keeps_its_own(library):
    """A notebook without OMP_NUM_THREADS: BLAS at 2 threads outside, 1 inside the worker threads."""
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        inside = calbench.parallel.thread_map(lambda _: _blas_threads(), range(4))
        assert inside == [{1}] * 4
        assert _blas_threads() == {2}


@pytest.fixture
def library(monkeypatch):
    """A library call on two cores: no share_cores, no use_cores, no CALBENCH_THREADS."""
    monkeypatch.setattr(calbench.parallel, "available_cores", lambda: 2)
    monkeypatch.setattr(calbench.parallel, "_granted_threads", None)
    monkeypatch.setattr(calbench.parallel, "_own_cores", None)
    monkeypatch.delenv(calbench.parallel.THREADS_ENV, raising=False)


class _Probe(Calibrator):
    """Records the BLAS threads its fit and prediction run with."""

    def _fit(self, scores, y):
        self.fit_blas_ = _blas_threads()

    def _predict_proba(self, scores):
        self.predict_blas_ = _blas_threads()
        return np.full((scores.n, scores.num_classes), 1 / scores.num_classes)


def test_by_default_blas_runs_on_one_thread_everywhere(library):
    """Nothing declared: five folds on two cores run on the two workers, none in the calling thread, BLAS on one
    thread in the workers and in a fit or prediction outside them, and the caller's setting is back afterwards."""
    caller = threading.get_ident()
    z, y = 2.0 * np.eye(3)[[0, 1, 2, 0]], np.array([0, 1, 2, 0])
    for outside in (1, 2):
        with threadpool_limits(limits=outside, user_api="blas"):
            seen = calbench.parallel.thread_map(lambda _: (_blas_threads(), threading.get_ident() == caller),
                                                range(5))
            assert seen == [({1}, False)] * 5
            probe = _Probe().fit(z, y)
            probe.predict_proba(z)
            assert (probe.fit_blas_, probe.predict_blas_) == ({1}, {1})
            assert _blas_threads() == {outside}


def test_declared_cores_let_an_item_alone_use_them(library, monkeypatch):
    """use_cores(2): four folds on the workers with one BLAS thread each, then the fifth in the calling thread
    with two (else a third round ran with one core idle), and a fit outside the workers with two. Which item runs
    alone depends on the count only."""
    caller = threading.get_ident()
    calbench.parallel.use_cores(2)
    with threadpool_limits(limits=1, user_api="blas"):
        seen = calbench.parallel.thread_map(lambda _: (_blas_threads(), threading.get_ident() == caller), range(5))
        assert seen == [({1}, False)] * 4 + [({2}, True)]
        assert _Probe().fit(2.0 * np.eye(2), [0, 1]).fit_blas_ == {2}
        assert _blas_threads() == {1}


def test_the_environment_declares_the_cores_and_a_bad_value_is_refused(library, monkeypatch):
    monkeypatch.setenv(calbench.parallel.THREADS_ENV, "8")
    assert calbench.parallel.own_cores() == 2  # at most the CPU affinity
    monkeypatch.setenv(calbench.parallel.THREADS_ENV, "two")
    with pytest.raises(ValueError, match="CALBENCH_THREADS='two'.*integer >= 1"):
        calbench.parallel.own_cores()
    with pytest.raises(ValueError, match="use_cores: expected a number of cores >= 1"):
        calbench.parallel.use_cores(0)


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
