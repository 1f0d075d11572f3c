"""The `scale` benchmarks of the parametric methods: fit + predict of one job, with its default settings.

* ``scale_param_1000.<method>``: a synthetic ImageNet-sized task, 1,000 classes, 25,000 calibration +
  25,000 test rows (:func:`overconfident_logits`).
* ``scale_param_cifar100.<method>``: the CIFAR-100 ResNet-20 logits of ../shared/data, split 5,000 / 5,000
  as config/cifar.yaml does (seed 0); skipped where the folder is absent.

``seconds`` is the wall time of fit + predict, ``cpu_seconds`` its CPU time (the fairer figure on a shared
machine), ``peak_mb`` the peak of the memory allocated during fit + predict as traced by :mod:`tracemalloc`
(numpy reports its arrays there), beyond the input data (50,000 × 1,000 float64 logits: 400 MB). Neither
includes the process's one-time start-up (:func:`_process_start_up`).
The figures are in docs/runtime.md, section "Parametric methods".
"""

from __future__ import annotations

import functools
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np

from calbench.data.synthetic import planted_temperature
from calbench.perf import benchmark

PARAMETRIC = ["ts", "ets", "vs", "ms", "ms_odir", "dir", "dir_diag", "dir_l2", "dir_odir", "platt", "beta",
              "pl_ovr", "pl3_ovr", "pl_conf", "pl3_conf", "ts+vs", "ts+ms_odir", "ts+dir_odir"]
CIFAR100 = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "logits" / "cifar100_resnet-20"


def overconfident_logits(n: int, seed: int, classes: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """Logits 1.5·s of calibrated logits s = 9·onehot(k) + N(0, 1): about 80 % accuracy at 1,000 classes (an
    ImageNet-1k CNN's) and overconfident by a temperature of 1.5; labels drawn from σ(s)."""
    data = planted_temperature(n, np.random.default_rng(seed), num_classes=classes, temperature=1.5, signal=9.0)
    return data["logits"], data["labels"]


def _synthetic():
    (z_cal, y_cal), (z_test, y_test) = overconfident_logits(25_000, 0), overconfident_logits(25_000, 1)
    return z_cal, y_cal, z_test, y_test


def _cifar100():
    from calbench.data.splits import split_pool

    z = np.load(CIFAR100 / "scores.npy").astype(np.float64)
    y = np.load(CIFAR100 / "targets.npy").astype(np.int64)
    cal, test = split_pool(y, 0, cal_size=5000)
    return z[cal], y[cal], z[test], y[test]


@functools.cache
def _process_start_up() -> None:
    """A job's one-time costs that are not its method's, paid here before the first timing: the method
    registry's imports and numba's initialisation on the first compiled call of a process (0.27 CPU-s; 0.85
    under tracemalloc's allocation tracing), by a tiny temperature scaling fit (compiled passes)."""
    from calbench.methods import make

    rng = np.random.default_rng(0)
    make("ts").fit(rng.normal(size=(30, 3)), np.arange(30) % 3).predict_proba(rng.normal(size=(3, 3)))


def _run(load, method) -> dict:
    """Load the data, then time fit + predict and trace its memory; test NLL and the warnings raised."""
    from calbench.methods import make
    from calbench.metrics import proper

    _process_start_up()
    z_cal, y_cal, z_test, y_test = load()
    tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        probs = make(method).fit(z_cal, y_cal).predict_proba(z_test)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"method": method, "seconds": wall, "cpu_seconds": round(cpu, 2), "peak_mb": round(peak / 2**20),
            "test_nll": round(proper.log_loss(probs, y_test), 5), "warnings": len(caught),
            "n_cal": int(y_cal.size), "n_test": int(y_test.size), "classes": int(z_cal.shape[1])}


def _register(prefix, load, available=lambda: True):
    for method in PARAMETRIC:
        def run(repeat, method=method):
            if not available():
                return {"seconds": float("nan"), "skipped": f"{CIFAR100} absent"}
            return _run(load, method)

        benchmark(f"{prefix}.{method}", repeat=1)(run)


_register("scale_param_1000", _synthetic)
_register("scale_param_cifar100", _cifar100, available=CIFAR100.exists)
