"""Benchmarks of the evaluation metrics: KDE-ECE, the PL/PL3 fits, CV-bins ECE, SKCE, the p-ECE test and the
resampled metrics behind ``calbench recommend``."""

import numpy as np
from scipy.special import expit

from calbench.data.synthetic import sample_categorical
from calbench.maps1d import PiecewiseLinear, PiecewiseLinearCV
from calbench.metrics import evaluate, lookup
from calbench.metrics.kde_ece import kde_ece
from calbench.metrics.registry import MetricContext
from calbench.perf import benchmark, timed
from calbench.stats.resampling import SeedRows, unit_counts


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


#: Metrics whose 1,000 resamples cost the most in ``calbench recommend --all-metrics`` at 100 classes.
RESAMPLED_IDS = ["ece.cw.em15.l1", "ece.cw.ew15.l1", "cc_gap.aps.a10.div5"]


@benchmark("metrics.resampled_100")
def resampled_100(repeat):
    """1,000 bootstrap resamples (row counts over a 10,000-row pool, every other row tested) of 5,000 rows × 100
    classes, per metric and one method and seed: the classwise binned ECEs in compiled passes, the conformal
    sets' per-class sums as float products. Compiled kernels are warmed before the clock starts."""
    n, c = 5000, 100
    probs, labels = _multiclass(n, c)
    counts = np.concatenate(unit_counts(SeedRows("all", np.arange(0, 2 * n, 2), 2 * n), 1000))
    seconds = {}
    for metric in RESAMPLED_IDS:
        family, groups = lookup(metric)
        family.resampled(MetricContext(probs[:50], labels[:50]), counts[:2, :50], **groups)

        def estimated(family=family, groups=groups):
            """A fresh context (it caches per-row quantities) with the estimate made first, as the evaluate job
            makes it (the conformal division sets)."""
            ctx = MetricContext(probs, labels, None, 0, None)
            family.function(ctx, **groups)
            return (ctx,)

        seconds[metric] = timed(estimated, lambda ctx, family=family, groups=groups: family.resampled(
            ctx, counts, **groups), repeat)
    return {"seconds": sum(seconds.values()), "n": n, "classes": c, "resamples": 1000, "each": seconds}


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
