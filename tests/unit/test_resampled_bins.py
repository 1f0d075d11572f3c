"""The classwise binned ECEs of bootstrap resamples from their row counts in compiled passes
(calbench.kernels.resampled_bins) equal re-binning each resample's rows. Their cost is measured by the benchmark
``python -m calbench.perf --only metrics.resampled_100`` (calbench.perf.metrics), not here."""

import numpy as np
import pytest

from calbench.metrics.binned import bin_stats, equal_mass_stats_resampled, equal_width_stats_resampled
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
