"""Benchmarks of the evaluation metrics: KDE-ECE, the PL/PL3 fits, CV-bins ECE, SKCE and the p-ECE test."""

import numpy as np
from scipy.special import expit

from calbench.data.synthetic import sample_categorical
from calbench.maps1d import PiecewiseLinear, PiecewiseLinearCV
from calbench.metrics import evaluate
from calbench.metrics.kde_ece import kde_ece
from calbench.perf import benchmark, timed


def _binary(n, seed=0):
    """Mix-n-Match §5.1 task (β0, β1) = (0.5, −1.5): scores and labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(2, size=n)
    return expit(0.5 - 1.5 * rng.normal(np.where(y == 1, -1.0, 1.0), 1.0)), y.astype(float)


def _multiclass(n, classes, seed=0):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(classes, 0.3), size=n)
    return probs**1.5 / np.sum(probs**1.5, axis=1, keepdims=True), sample_categorical(probs, rng)


@benchmark("metrics.kde_ece")
def kde_ece_10k(repeat):
    n = 10_000
    seconds = timed(lambda: _binary(n), kde_ece, repeat)
    return {"seconds": seconds, "n": n, "grid": 2**14}


@benchmark("binary.pl_fit", repeat=1)
def pl_fit(repeat):
    """One PL^CE map with 8 pieces, and the full CV estimator (B = 1..16, 10 folds, 160 fits)."""
    n = 3000
    single = timed(lambda: _binary(n), lambda p, y: PiecewiseLinear(8).fit(p, y), repeat)
    cv = timed(lambda: _binary(n), lambda p, y: PiecewiseLinearCV().fit(p, y), repeat)
    return {"seconds": cv, "single_fit_seconds": single, "n": n, "candidates": 16, "folds": 10}


@benchmark("binary.pl3_fit", repeat=1)
def pl3_fit(repeat):
    """As binary.pl_fit for PL3 (piecewise linear in logit–logit space)."""
    n = 3000
    single = timed(lambda: _binary(n), lambda p, y: PiecewiseLinear(8, logit_space=True).fit(p, y), repeat)
    cv = timed(lambda: _binary(n), lambda p, y: PiecewiseLinearCV(logit_space=True).fit(p, y), repeat)
    return {"seconds": cv, "single_fit_seconds": single, "n": n, "candidates": 16, "folds": 10}


@benchmark("metrics.cv_ece_skce_pece")
def cv_ece_skce_pece(repeat):
    n, c = 10_000, 100
    ids = ["ece.conf.cv.l1", "ece.cw.emcv.l1", "skce.ul", "p_ece.conf", "p_ece.cw", "kde_ece.conf.l1"]
    seconds = timed(lambda: _multiclass(n, c), lambda p, y: evaluate(p, y, ids), repeat)
    return {"seconds": seconds, "n": n, "classes": c, "metrics": len(ids)}


#: The metrics measured by ``metrics.each_25k_1000`` (each must take ≤ 5 s at 25,000 rows × 1,000 classes).
EACH_METRIC_IDS = ["ace.cw.em15", "ace.conf.em15", "mmce.conf", "ks.conf", "ks.cw", "sce.conf", "sce.conf.em15.over",
                   "sce.cw.em15.under", "p_spiegelhalter.conf", "p_ks.conf", "p_kuiper.conf", "aurc", "augrc",
                   "auroc.conf", "refinement.nll.ts.cv5", "calib_err.brier.ts.all", "refinement.nll.isotonic.cv5",
                   "calib_err.brier.isotonic.all"]


@benchmark("metrics.each_25k_1000", repeat=1)
def each_metric_25k_1000(repeat):
    """CPU seconds of ``evaluate`` for each id of :data:`EACH_METRIC_IDS` alone (its input checks included) on
    25,000 rows × 1,000 classes (softmax of 3 × standard normal logits, labels drawn from a flatter softmax);
    ``seconds`` is the largest."""
    import time

    from scipy.special import softmax

    rng = np.random.default_rng(0)
    logits = 3.0 * rng.normal(size=(25_000, 1_000))
    probs, labels = softmax(logits, axis=1), sample_categorical(softmax(logits / 2, axis=1), rng)
    evaluate(probs[:100], labels[:100], EACH_METRIC_IDS)  # first calls (compiled kernels), untimed
    cpu = {}
    for metric_id in EACH_METRIC_IDS:
        start = time.process_time()
        evaluate(probs, labels, [metric_id])
        cpu[metric_id] = round(time.process_time() - start, 3)
    return {"seconds": max(cpu.values()), "rows": 25_000, "classes": 1_000, "cpu_seconds": cpu}
