"""Benchmarks of LECE (issue targets; the paper's Appendix A.3 reports 34.2 s for the predict case)."""

import time
import tracemalloc

import numpy as np

from calbench.data.synthetic import planted_temperature
from calbench.methods import make
from calbench.methods.lece import BLOCK_ENTRIES
from calbench.perf import benchmark, timed


def _planted(n, classes, seed=0):
    data = planted_temperature(n, np.random.default_rng(seed), num_classes=classes, temperature=2.0)
    return data["logits"], data["labels"]


@benchmark("lece.predict")
def lece_predict(repeat):
    """Calibrate 10,000 test points against 5,000 calibration points, 100 classes (target < 0.5 s)."""
    n_cal, n_test, c = 5_000, 10_000, 100
    z, y = _planted(n_cal, c)
    z_test, _ = _planted(n_test, c, seed=1)
    model = make("lece", q=0.01, t=0.0, grid=None).fit(z, y)
    seconds = timed(lambda: (z_test,), model.predict_proba, repeat)
    return {"seconds": seconds, "n_cal": n_cal, "n_test": n_test, "classes": c, "k": model.k_}


@benchmark("ts+lece.fit_cv_grid", repeat=1)
def ts_lece_cv(repeat):
    """TS, then LECE's full 10-fold CV over the paper's 10 × 10 (q, t) grid, 5,000 × 100 (target < 20 s)."""
    n, c = 5_000, 100
    z, y = _planted(n, c)
    seconds = timed(lambda: (z, y), lambda a, b: make("ts+lece").fit(a, b), repeat)
    return {"seconds": seconds, "n_cal": n, "classes": c, "grid_points": 100, "folds": 10}


@benchmark("lece.predict_memory", repeat=1)
def lece_memory(repeat):
    """Peak memory of predicting 50,000 test points (5,000 × 100 pool) beyond the input and the output."""
    n_cal, n_test, c = 5_000, 50_000, 100
    z, y = _planted(n_cal, c)
    z_test, _ = _planted(n_test, c, seed=1)
    model = make("lece", q=0.01, t=0.0, grid=None).fit(z, y)
    tracemalloc.start()
    start = time.perf_counter()
    model.predict_proba(z_test)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    output_mib = n_test * c * 8 / 2**20
    return {"seconds": seconds, "n_test": n_test, "peak_mib": round(peak / 2**20, 1),
            "output_mib": round(output_mib, 1), "block_entries": BLOCK_ENTRIES}
