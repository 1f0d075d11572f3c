"""The compiled passes of the paired bootstrap equal the plain computations they replace: row counts of drawn rows
(``np.bincount``), the conformal quantile's position in every resample at once (Angelopoulos et al. 2021, §1:
the ⌈(n + 1)(1 − α)⌉-th smallest calibration score of the resample's multiset), and the held-out Brier errors of the
fit-on-test paper's CV choice of equal-mass bins (§4.6, App. C.2: slope-1 maps of B = 1..40 bins, one pass for all
B) against the bin-by-bin search. Their cost is measured by ``python -m calbench.perf --only
intervals.recommend_all_metrics`` (calbench.perf.recommend_all), not here."""

import numpy as np
import pytest

from calbench.kernels.resampled_bins import chunks, integer
from calbench.kernels.resampled_sets import weighted_quantile_positions
from calbench.metrics.binned import _held_out_brier_em, cv_bin_counts
from calbench.metrics.binning import equal_mass_sizes
from calbench.metrics.bootstrap import counts_of


def test_row_counts_of_drawn_rows_equal_bincount():
    idx = np.random.default_rng(0).integers(300, size=(17, 300))
    expected = np.stack([np.bincount(row, minlength=300) for row in idx])
    found = counts_of(idx)
    assert found.dtype == np.int64 and np.array_equal(found, expected)


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.97])
def test_integer_quantile_positions_equal_the_order_statistic_of_each_resample(alpha):
    """Walking row counts down from the largest score (every resample at once) finds the position of the
    ⌈(w + 1)(1 − α)⌉-th smallest score of each resample's multiset (row i repeated its count times), −1 past the
    end, as sorting each multiset does and as the cumulative walk that weights take."""
    rng = np.random.default_rng(1)
    n = 60
    counts = rng.multinomial(n, np.full(n, 1 / n), size=150)
    counts[3] = 0
    counts[4, :] = 0
    counts[4, 7] = 2  # two copies of one row: ranks beyond them fall past the end
    rows = rng.permutation(n)  # the calibration rows in ascending order of score
    for first, chunk in chunks(counts):
        assert integer(chunk)
        found, walked = np.zeros(chunk.shape[1], dtype=np.int64), np.zeros(chunk.shape[1], dtype=np.int64)
        weighted_quantile_positions(rows, alpha, chunk, True, found)
        weighted_quantile_positions(rows, alpha, chunk.astype(np.float64), False, walked)
        assert np.array_equal(found, walked)
        for r in range(chunk.shape[1]):
            multiset = np.repeat(np.arange(n), counts[first + r][rows])  # positions in rows, ascending
            rank = int(np.ceil((multiset.size + 1) * (1 - alpha) - 1e-9))
            assert found[r] == (multiset[rank - 1] if rank <= multiset.size else -1)


def _plain_held_out_brier(s_tr, h_tr, s_te, h_te, candidates):
    """The held-out Brier error of each candidate's slope-1 equal-mass map, bin by bin: borders at the first
    training score of bins 1..B−1 (sorted), a test score in the bin of the borders ≤ it."""
    out = np.empty((len(candidates), s_tr.shape[1]))
    for j in range(s_tr.shape[1]):
        order = np.argsort(s_tr[:, j], kind="stable")
        s_sorted, h_sorted = s_tr[order, j], h_tr[order, j]
        for row, n_bins in enumerate(candidates):
            starts = np.concatenate([[0], np.cumsum(equal_mass_sizes(s_sorted.size, n_bins))])
            gap = np.array([h_sorted[a:b].sum() - s_sorted[a:b].sum() for a, b in zip(starts[:-1], starts[1:])])
            bins = np.searchsorted(s_sorted[starts[1:-1]], s_te[:, j], side="right")
            out[row, j] = np.mean((s_te[:, j] + gap[bins] / np.diff(starts)[bins] - h_te[:, j]) ** 2)
    return out


@pytest.mark.parametrize("rows, columns", [(400, 1), (57, 3), (41, 2)])
def test_held_out_brier_of_every_bin_count_at_once_equals_the_bin_by_bin_search(rows, columns, monkeypatch):
    """Also with the candidates taken a few at a time (a small budget), ties among the training scores, and more
    candidates than some bins hold rows; the chosen bin counts follow."""
    from calbench.metrics import binned

    rng = np.random.default_rng(2)
    scores = rng.random((rows, columns)) ** 3
    scores[: rows // 4] = scores[0]
    hits = (rng.random((rows, columns)) < scores).astype(np.float64)
    train, test = np.arange(rows) >= rows // 10, np.arange(rows) < rows // 10
    candidates = np.arange(1, min(40, int(train.sum())) + 1)
    expected = _plain_held_out_brier(scores[train], hits[train], scores[test], hits[test], candidates)
    found = _held_out_brier_em(scores[train], hits[train], scores[test], hits[test], candidates)
    np.testing.assert_allclose(found, expected, rtol=1e-12, atol=1e-15)
    monkeypatch.setattr(binned, "HELD_OUT_BUDGET", 3 * columns * int(test.sum()))
    assert np.array_equal(_held_out_brier_em(scores[train], hits[train], scores[test], hits[test], candidates),
                          found)
    assert cv_bin_counts(scores, hits, "em").shape == (columns,)


def test_sorted_columns_of_the_resampled_bins_take_the_stable_order():
    """The vectorised sort gives ``argsort(kind="stable")``'s order on rows without ties and sorts rows with ties (or
    NaN) stably again, so tied scores keep the order of their rows, as the bins' definition takes them."""
    from calbench.metrics.binned import _stable_order

    rng = np.random.default_rng(3)
    for trial in range(60):
        rows = rng.integers(0, 1 + trial % 9, size=(4, 50)).astype(np.float64) if trial % 2 else rng.random((4, 50))
        if trial % 5 == 0:
            rows[1, 3:5] = np.nan
        order, ordered = _stable_order(rows)
        expected = np.argsort(rows, axis=1, kind="stable")
        assert np.array_equal(order, expected)
        assert np.array_equal(ordered, np.take_along_axis(rows, expected, 1), equal_nan=True)
