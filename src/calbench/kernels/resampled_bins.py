"""Per-bin sums of binned calibration errors on R bootstrap resamples given as row counts, in compiled passes whose
inner loop runs over the resamples (the lanes), so that a resample costs a few vector operations per row and bin
edge instead of a re-binning (:mod:`calbench.metrics.binned`, which prepares the sorted columns).

Both kernels read the row counts as contiguous chunks ``[N, r]`` of ``r`` resamples (:data:`LANES`: a chunk stays
in cache while every column is visited) and visit each column's rows in a given order, its rows flattened column
after column (``rows``, with ``starts`` [M + 1] delimiting the columns):

* :func:`segment_sums`: Σ counts, Σ counts · score and Σ counts · hit over consecutive segments of each column's
  rows (equal-width bins once the rows are ordered by bin; blocks of sorted rows for equal-mass bins);
* :func:`cumulative_maxima`: the largest |cumulative sum| of counts × (hit − score) along each column's sorted
  rows, at the ends of groups of tied scores (the KS calibration error);
* :func:`equal_mass_sums`: equal-mass bins of each resample's sorted values, the resample's m kept rows (row i
  repeated counts_i times) split into B bins of ⌊m/B⌋, the m mod B larger ones first or last: the block sums of
  :func:`segment_sums` up to the block that holds each edge's rank, then that block's rows one by one (a row whose
  copies straddle the edge counts on both sides with the copies below and above it).

Row counts are summed as integers (exact), weights (label-shifted sets' scaled counts) and scores and hits in float64
in the rows' order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Resamples per chunk of row counts: [N, LANES] int32 counts of 10,000 rows take 2.5 MB.
LANES = 64


@njit(cache=True, nogil=True)
def segment_sums(rows, scores, hits, seg_starts, counts, out_c, out_s, out_h):  # pragma: no cover (compiled)
    """``out_*[g, r]`` = Σ over the rows ``rows[seg_starts[g]:seg_starts[g + 1]]`` of ``counts[row, r]`` times 1,
    ``scores`` and ``hits`` (given in the order of ``rows``); ``counts`` [N, r] int32, ``out_*`` [G, r]."""
    lanes = counts.shape[1]
    for g in range(seg_starts.size - 1):
        acc_c, acc_s, acc_h = out_c[g], out_s[g], out_h[g]
        for k in range(seg_starts[g], seg_starts[g + 1]):
            i, score, hit = rows[k], scores[k], hits[k]
            for r in range(lanes):
                acc_c[r] += counts[i, r]
                acc_s[r] += counts[i, r] * score
            if hit != 0.0:
                for r in range(lanes):
                    acc_h[r] += counts[i, r] * hit


@njit(cache=True, nogil=True)
def equal_mass_sums(rows, scores, hits, starts, counts, n_bins, larger_first, block, out_c, out_s, out_h
                    ):  # pragma: no cover (compiled)
    """``out_*[j, b, r]``: count, score sum and hit sum of equal-mass bin b of column j on resample r, the column's
    rows ``rows[starts[j]:starts[j + 1]]`` sorted by score, in blocks of ``block`` rows; ``counts`` [N, r] int32,
    ``out_*`` [M, n_bins, r]."""
    lanes = counts.shape[1]
    for j in range(starts.size - 1):
        lo, hi = starts[j], starts[j + 1]
        n_blocks = (hi - lo + block - 1) // block
        seg = np.minimum(lo + block * np.arange(n_blocks + 1), hi)
        sums_c = np.zeros((n_blocks, lanes))
        sums_s = np.zeros((n_blocks, lanes))
        sums_h = np.zeros((n_blocks, lanes))
        segment_sums(rows, scores, hits, seg, counts, sums_c, sums_s, sums_h)
        total = sums_c.sum(axis=0)
        blk = np.zeros(lanes, dtype=np.int64)
        before_c, before_s, before_h = np.zeros(lanes), np.zeros(lanes), np.zeros(lanes)  # blocks before blk
        last_c, last_s, last_h = np.zeros(lanes), np.zeros(lanes), np.zeros(lanes)  # below the previous edge
        for e in range(1, n_bins + 1):
            for r in range(lanes):
                whole = total[r]  # weights scaled from counts (label-shifted sets) need not be integers
                per_bin = np.floor(whole / n_bins)
                extra = whole - n_bins * per_bin
                if e == n_bins:
                    edge = whole
                elif larger_first:
                    edge = e * per_bin + min(float(e), extra)
                else:
                    edge = e * per_bin + max(e - (n_bins - extra), 0.0)
                b = blk[r]
                while b < n_blocks and before_c[r] + sums_c[b, r] <= edge:
                    before_c[r] += sums_c[b, r]
                    before_s[r] += sums_s[b, r]
                    before_h[r] += sums_h[b, r]
                    b += 1
                blk[r] = b
                below_c, below_s, below_h = before_c[r], before_s[r], before_h[r]
                if b < n_blocks:  # the copies of the block's rows below the edge
                    for k in range(seg[b], seg[b + 1]):
                        if below_c >= edge:
                            break
                        taken = min(float(counts[rows[k], r]), edge - below_c)
                        below_c += taken
                        below_s += taken * scores[k]
                        below_h += taken * hits[k]
                out_c[j, e - 1, r] = below_c - last_c[r]
                out_s[j, e - 1, r] = below_s - last_s[r]
                out_h[j, e - 1, r] = below_h - last_h[r]
                last_c[r], last_s[r], last_h[r] = below_c, below_s, below_h


@njit(cache=True, nogil=True)
def cumulative_maxima(rows, gaps, ends, starts, counts, out):  # pragma: no cover (compiled)
    """``out[j, r]`` = max over the group ends k of column j of |Σ_{k' ≤ k} counts[rows[k'], r] · gaps[k']|, the
    column's rows ``rows[starts[j]:starts[j + 1]]`` sorted by score (summed row after row, as a cumulative sum
    along them); ``counts`` [N, r], ``out`` [M, r]."""
    lanes = counts.shape[1]
    for j in range(starts.size - 1):
        cumulative = np.zeros(lanes)
        best = out[j]
        for k in range(starts[j], starts[j + 1]):
            i, gap = rows[k], gaps[k]
            for r in range(lanes):
                cumulative[r] += counts[i, r] * gap
            if ends[k]:
                for r in range(lanes):
                    best[r] = max(best[r], abs(cumulative[r]))


def chunks(counts: np.ndarray):
    """``(first resample, [N, r] contiguous counts)`` of :data:`LANES` resamples at a time: int32 where the counts
    are integers (row counts), else float64 (weights)."""
    counts = np.asarray(counts)
    dtype = np.int32 if np.array_equal(counts, np.round(counts)) else np.float64
    for first in range(0, counts.shape[0], LANES):
        yield first, np.ascontiguousarray(counts[first:first + LANES].T, dtype=dtype)


def warm_up() -> None:
    """Compile (or load from the cache) the kernels' signatures."""
    rows, scores, hits = np.array([1, 0, 2]), np.array([0.1, 0.5, 0.9]), np.array([0.0, 1.0, 1.0])
    counts = np.array([[1, 2], [0, 1], [2, 0]], dtype=np.int32)
    for given in (counts, counts.astype(np.float64)):
        out = [np.zeros((1, 2, 2)) for _ in range(3)]
        equal_mass_sums(rows, scores, hits, np.array([0, 3]), given, 2, True, 32, *out)
        cumulative_maxima(rows, hits - scores, np.array([True, False, True]), np.array([0, 3]), given,
                          np.zeros((1, 2)))
