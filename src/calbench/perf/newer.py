"""SMS/SVS (Berta et al. 2025) and TvA (Le Coz et al. 2024) at 100 and 1,000 classes, beside the SMS authors'
package probmetrics on the same inputs (skipped where absent). Each record has calbench's wall and CPU seconds
of fit + predict and, where installed, probmetrics's (``probmetrics_seconds``, ``probmetrics_cpu``) and the
test NLL of both."""

import time

import numpy as np
from scipy.special import softmax

from calbench.data.synthetic import planted_temperature
from calbench.methods import make
from calbench.perf import benchmark

SIZES = {100: 5_000, 1000: 10_000}  # classes → calibration (and test) rows


def _data(n, classes, seed):
    data = planted_temperature(n, np.random.default_rng(seed), num_classes=classes, temperature=2.0)
    return data["logits"], data["labels"]


def _nll(p, y):
    return float(-np.mean(np.log(np.maximum(p[np.arange(y.size), y], 1e-300))))


def _clock(run):
    wall, cpu = time.perf_counter(), time.process_time()
    out = run()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _probmetrics(name, z, y, z_test, y_test):
    try:
        import torch
        from probmetrics.calibrators import get_calibrator
    except ImportError:
        return {"probmetrics": "absent"}
    torch.set_num_threads(1)
    p_cal, p_test = softmax(z, axis=1), softmax(z_test, axis=1)

    def run():
        cal = get_calibrator(name, **{f"{name}_print_init_info": False})
        return cal.fit(p_cal, y).predict_proba(p_test)

    probs, wall, cpu = _clock(run)
    return {"probmetrics_seconds": round(wall, 3), "probmetrics_cpu": round(cpu, 3),
            "probmetrics_nll": round(_nll(probs, y_test), 6)}


def _case(name, classes, reference):
    n = SIZES[classes]
    z, y = _data(n, classes, 0)
    z_test, y_test = _data(n, classes, 1)
    probs, wall, cpu = _clock(lambda: make(name, grid=None).fit(z, y).predict_proba(z_test))
    record = {"seconds": wall, "cpu": round(cpu, 3), "classes": classes, "n_cal": n, "n_test": n,
              "nll": round(_nll(probs, y_test), 6)}
    if reference:
        record |= _probmetrics(name, z, y, z_test, y_test)
    return record


for _classes in SIZES:
    for _name, _reference in (("sms", True), ("svs", True), ("tva_ts", False), ("tva_vs", False)):
        benchmark(f"newer.{_name}.k{_classes}", repeat=1)(
            lambda repeat, name=_name, classes=_classes, reference=_reference: _case(name, classes, reference))
