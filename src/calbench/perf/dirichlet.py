"""Benchmarks of Dirichlet calibration and matrix scaling: one ODIR fit, the authors' full
(λ, μ) grid with 5-fold CV on 100 classes (L-BFGS) and on 10 (Newton), and a 1000-class fit (the reference
package's n × k × k array cannot)."""

import time

import numpy as np
from scipy.special import softmax

from calbench.data.synthetic import sample_categorical
from calbench.methods import make
from calbench.methods.linear_maps import authors_odir_grid
from calbench.perf import benchmark, timed


def _timed_with_cpu(run, repeat):
    """(best wall seconds, CPU seconds of this process over all repeats): wall time on a shared machine
    is pessimistic, CPU time less so."""
    start = time.process_time()
    wall = timed(lambda: (), run, repeat)
    return wall, time.process_time() - start


def _overconfident(n, classes, seed=0):
    """Logits of an overconfident classifier (3 × calibrated logits) with labels drawn from the calibrated ones."""
    rng = np.random.default_rng(seed)
    k = rng.integers(classes, size=n)
    s = rng.standard_normal((n, classes))
    s[np.arange(n), k] += 4.0
    return 3.0 * s, sample_categorical(softmax(s, axis=1), rng)


@benchmark("dirichlet.dir_odir_fit", repeat=1)
def dir_odir_fit(repeat):
    n, c = 5000, 100
    logits, labels = _overconfident(n, c)
    grid = authors_odir_grid(c)
    settings = {"reg_lambda": grid["reg_lambda"][len(grid["reg_lambda"]) // 2],
                "reg_mu": grid["reg_mu"][len(grid["reg_mu"]) // 2], "grid": None}
    seconds, cpu = _timed_with_cpu(lambda: make("dir_odir", **settings).fit(logits, labels), repeat)
    return {"seconds": seconds, "cpu_seconds": cpu, "n": n, "classes": c, **settings}


def _grid_cv(classes, repeat):
    n = 5000
    logits, labels = _overconfident(n, classes)
    grid = authors_odir_grid(classes)  # the authors' grid, not the coarse default (docs/methods_parametric.md)
    seconds, cpu = _timed_with_cpu(lambda: make("dir_odir", grid=grid).fit(logits, labels), repeat)
    points = len(grid["reg_lambda"]) * len(grid["reg_mu"])
    return {"seconds": seconds, "cpu_seconds": cpu, "n": n, "classes": classes, "grid_points": points, "folds": 5}


@benchmark("dirichlet.dir_odir_grid_cv", repeat=1)
def dir_odir_grid_cv(repeat):
    return _grid_cv(100, repeat)  # L-BFGS


@benchmark("dirichlet.dir_odir_grid_cv_10_classes", repeat=1)
def dir_odir_grid_cv_10(repeat):
    return _grid_cv(10, repeat)  # Newton


@benchmark("dirichlet.dir_odir_fit_1000_classes", repeat=1)
def dir_odir_1000(repeat):
    import resource

    n, c = 5000, 1000
    logits, labels = _overconfident(n, c)
    settings = {"reg_lambda": 1e6, "reg_mu": 1e3, "grid": None, "max_iter": 20}
    seconds, cpu = _timed_with_cpu(lambda: make("dir_odir", **settings).fit(logits, labels), repeat)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": seconds, "cpu_seconds": cpu, "n": n, "classes": c, "max_iter": 20, "peak_rss_mb": round(peak_mb)}
