"""Resampled metrics at the cost ``calbench recommend --all-metrics`` can afford on 100 classes (it took 95 s on three
10,000-row sources): the classwise binned ECEs of 1,000 bootstrap resamples from their row counts in compiled passes
(calbench.kernels.resampled_bins), equal to re-binning each resample's rows, and the conformal sets' per-class sums
as float products."""

import time

import numpy as np
import pytest

from calbench.metrics import lookup
from calbench.metrics.binned import bin_stats, equal_mass_stats_resampled, equal_width_stats_resampled
from calbench.metrics.registry import MetricContext
from calbench.stats.resampling import SeedRows, unit_counts


def _outputs(rows=5000, classes=100, seed=0):
    """Softmax outputs of an over-confident classifier (continuous scores: no ties) and labels drawn from a
    tempered version of them."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=3.0, size=(rows, classes))
    probs = np.exp(z - z.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    tempered = np.exp(z / 2 - (z / 2).max(1, keepdims=True))
    labels = (tempered.cumsum(1) / tempered.sum(1, keepdims=True) > rng.random((rows, 1))).argmax(1)
    return probs, labels


@pytest.mark.parametrize("scheme", ["em", "ew"])
def test_classwise_bin_sums_of_resamples_equal_rebinning_each_resample(scheme):
    probs, labels = _outputs(rows=700, classes=12, seed=3)
    onehot = np.eye(12)[labels]
    counts = np.concatenate(unit_counts(SeedRows("all", np.arange(0, 1400, 2), 1400), 40))
    fast = (equal_mass_stats_resampled if scheme == "em" else equal_width_stats_resampled)(probs, onehot, 15, counts)
    for r in (0, 7, 39):
        drawn = np.repeat(np.arange(700), counts[r])
        for got, expected in zip(fast, bin_stats(probs[drawn], onehot[drawn], 15, scheme)):
            np.testing.assert_allclose(got[r], expected, rtol=1e-12, atol=1e-12)


def test_classwise_ece_of_1000_resamples_of_a_100_class_test_split_costs_well_under_a_cpu_second():
    """5,000 test rows × 100 classes × 1,000 resamples: equal-mass and equal-width classwise ECE together took
    4 CPU-s per method and seed (sparse products per column, 12 methods × seeds of a source: 50 s); the compiled
    passes take about 0.6 (measured on a loaded 2-core Xeon)."""
    probs, labels = _outputs()
    counts = unit_counts(SeedRows("all", np.arange(0, 10000, 2), 10000), 1000)
    ctx = MetricContext(probs, labels, None, 0, None)
    families = [lookup(m) for m in ("ece.cw.em15.l1", "ece.cw.ew15.l1")]
    for family, groups in families:  # compiled (or loaded from the cache) before the clock starts
        family.resampled(MetricContext(probs[:50], labels[:50]), counts[0][:2, :50], **groups)
    clock = time.thread_time()
    values = [np.concatenate([family.resampled(ctx, block, **groups) for block in counts]) for family, groups in
              families]
    spent = time.thread_time() - clock
    assert all(v.shape == (1000,) and np.isfinite(v).all() for v in values)
    assert spent < 1.5, spent


def test_class_conditional_coverage_gap_of_1000_resamples_of_a_100_class_split_costs_under_two_cpu_seconds():
    """The conformal sets' per-class sums of 1,000 resamples are float matrix products (BLAS): with the row counts as
    integers they were integer products without BLAS, about 10 CPU-s per method and seed at 100 classes."""
    probs, labels = _outputs()
    counts = np.concatenate(unit_counts(SeedRows("all", np.arange(0, 10000, 2), 10000), 1000))
    family, groups = lookup("cc_gap.aps.a10.div5")
    ctx = MetricContext(probs, labels, None, 0, None)
    family.function(ctx, **groups)  # the division sets, as the metrics JSON's estimate makes them
    clock = time.thread_time()
    values = family.resampled(ctx, counts, **groups)
    spent = time.thread_time() - clock
    assert values.shape == (1000,) and np.isfinite(values).all()
    assert spent < 2.0, spent
