"""Benchmarks of the paired bootstrap's fallback (calbench.stats): the estimators without a
row-weighted form on some outputs (CV-chosen bins; KS beyond its budget) recomputed on the same resamples, within
the budget of a source, beside the row-weighted forms of tied outputs (equal-mass bins of rounded probabilities).

* ``fallback.cifar.<network>``: the four CIFAR networks of ../shared/data, uncal and TS (fitted on a seeded
  5,000-row calibration split) on the other 5,000 rows, 2 seeds, the tables' resamples; skipped where the folder
  is absent.
* ``fallback.1000_classes``: 25,000 test rows of 1,000 classes (ImageNet-sized), uncal, TS at the planted
  temperature and uncal's probabilities rounded to 3 decimals (tied confidences), one seed, ``recommend``'s
  resamples.

Each reports the wall and CPU seconds of :func:`~calbench.stats.draws.source_draws`, the method ×
seed × metric cells recomputed and the metrics left out (beyond the budget).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from scipy.special import softmax

from calbench.perf import benchmark, timed

LOGITS = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "logits"
NETWORKS = ("cifar10_resnet-20", "cifar10_vgg19_bn", "cifar100_resnet-20", "cifar100_vgg19_bn")
#: The default run's binned and cumulative confidence and classwise estimators, and NLL (row-weighted always).
METRICS = ["nll", "ece.conf.em15.l1", "ece.conf.ew15.l1", "ece.cw.em15.l1", "ece.conf.em15.l1.debiased", "ks.conf"]


def _measure(outputs: dict, seeds, methods, metrics, resamples: int, repeat: int) -> dict:
    """Time the paired bootstrap of ``outputs[method, seed]`` and count what it recomputed and left out."""
    from calbench.stats.draws import RECOMPUTE_SECONDS, source_draws

    load = lambda method, seed: outputs.get((method, seed))  # noqa: E731
    fast = source_draws("bench", seeds, methods, metrics, load, 2, recompute=False, budget=0.0)
    recomputed = sum(int(np.isnan(a[..., 0]).sum()) for a in fast.draws.values()) + sum(
        len(methods) * len(seeds) for m in metrics if m not in fast.draws)
    cpu = time.process_time()
    found = {}
    seconds = timed(lambda: (), lambda: found.update(
        draws=source_draws("bench", seeds, methods, metrics, load, resamples, recompute=False)), repeat)
    draws = found["draws"]
    return {"seconds": seconds, "cpu_seconds": (time.process_time() - cpu) / repeat, "resamples": resamples,
            "cells_without_fast_form": recomputed, "left_out": sorted(draws.omitted),
            "every_interval": all(np.isfinite(draws.draws[m]).all() for m in metrics if m in draws.draws)
            and not draws.omitted, "budget_seconds": RECOMPUTE_SECONDS}


def _cifar(network: str):
    def run(repeat):
        from calbench.data.splits import split_pool
        from calbench.methods import make
        from calbench.scores import Scores
        from calbench.stats.resampling import RESAMPLES

        if not (LOGITS / network).is_dir():
            return {"seconds": float("nan"), "skipped": f"{LOGITS / network} is absent"}
        z = np.load(LOGITS / network / "scores.npy").astype(np.float64)
        y = np.load(LOGITS / network / "targets.npy").astype(np.int64)
        outputs = {}
        for seed in (0, 1):
            cal, test = split_pool(y, seed, cal_size=5000)
            ts = make("ts").fit(Scores(z[cal]), y[cal])
            for method, probs in (("uncal", softmax(z[test], axis=1)), ("ts", ts.predict_proba(Scores(z[test])))):
                outputs[method, seed] = {"probs": probs, "labels": y[test], "index": test}
        return {**_measure(outputs, [0, 1], ["uncal", "ts"], METRICS, RESAMPLES, repeat),
                "rows": 5000, "classes": z.shape[1]}

    return run


for _network in NETWORKS:
    benchmark(f"fallback.cifar.{_network}", repeat=1)(_cifar(_network))


@benchmark("fallback.1000_classes", repeat=1)
def thousand_classes(repeat):
    """25,000 rows × 1,000 classes; the metrics of the confidence (the classwise ones at 1,000 classes cost
    seconds per resample, beyond any budget: ``recommend --recompute`` is for them)."""
    from calbench.perf.scale_param import overconfident_logits
    from calbench.stats.resampling import RESAMPLES

    logits, labels = overconfident_logits(25_000, 1)
    uncal = softmax(logits, axis=1)
    rounded = np.round(uncal, 3)
    probs = {"uncal": uncal, "ts": softmax(logits / 1.5, axis=1),
             "rounded": rounded / rounded.sum(axis=1, keepdims=True)}
    outputs = {(m, 0): {"probs": p, "labels": labels, "index": np.arange(labels.size)} for m, p in probs.items()}
    metrics = ["nll", "ece.conf.em15.l1", "ece.conf.ew15.l1", "ks.conf"]
    return {**_measure(outputs, [0], list(probs), metrics, RESAMPLES, repeat), "rows": labels.size, "classes": 1000}
