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


@pytest.mark.parametrize("scale", [1, 60])
def test_integer_edge_walk_gives_the_weights_loop_sums_bit_for_bit(scale, monkeypatch):
    """The equal-mass walk over row counts (int8 chunks, or int32 where a count reaches 128: ``scale`` 60) keeps the
    copies still to take as an integer; its per-bin sums equal, bit for bit, those of the definition's loop that
    weights take (``min(count, edge − below)`` copies of each row, in float), for calbench's equal-mass bins
    (remainder first), the KCal paper's (§4.3: remainder last, classwise entries below min(0.01, 1/K) dropped) and
    equal-width bins, in blocks of 3 sorted rows (several edges per block, rows straddling edges) and 7 resamples
    per chunk; and those sums equal binning each resample's rows (row i repeated its count times)."""
    from calbench.kernels import resampled_bins
    from calbench.metrics import binned

    probs, labels = _outputs(rows=400, classes=9, seed=5)
    onehot = np.eye(9)[labels]
    counts = scale * np.concatenate(unit_counts(SeedRows("all", np.arange(400), 400), 20))
    binnings = [("em", 15, None, "first"), ("em", 7, 0.01, "last"), ("ew", 10)]
    monkeypatch.setattr(binned, "RESAMPLE_RANK_BLOCK", 3)
    monkeypatch.setattr(resampled_bins, "LANES", 7)
    assert {chunk.dtype for _, chunk in resampled_bins.chunks(counts)} == {np.dtype(np.int8 if scale == 1 else
                                                                                    np.int32)}
    fast = binned.binned_sums_resampled(probs, onehot, counts, binnings)
    monkeypatch.setattr(resampled_bins, "integer", lambda chunk: False)  # the weights loop on the same chunks
    loop = binned.binned_sums_resampled(probs, onehot, counts, binnings)
    for got, expected in zip(fast, loop):
        assert np.array_equal(got, expected)
    for r in (0, 13):
        drawn = np.repeat(np.arange(400), counts[r])
        for got, expected in zip(binned.stats_of_sums(fast[0][:, r]), bin_stats(probs[drawn], onehot[drawn], 15,
                                                                                  "em")):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_chunks_hold_row_counts_as_the_smallest_exact_integers():
    """Row counts below 128 travel as int8, larger ones as int32, weights as float64, 64 resamples a chunk."""
    from calbench.kernels.resampled_bins import chunks, integer

    counts = np.array([[0, 3, 127]] * 70)
    for given, dtype in ((counts, np.int8), (counts + 1, np.int32), (counts * 0.5, np.float64)):
        found = list(chunks(given))
        assert [first for first, _ in found] == [0, 64]
        assert all(chunk.dtype == dtype and chunk.flags.c_contiguous for _, chunk in found)
        assert np.array_equal(np.concatenate([chunk.T for _, chunk in found]), given)
        assert integer(found[0][1]) == (dtype != np.float64)
