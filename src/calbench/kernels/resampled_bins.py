"""Per-bin sums of binned calibration errors on R bootstrap resamples given as row counts, in compiled passes whose
inner loop runs over the resamples (the lanes), so that a resample costs a few vector operations per row and bin
edge instead of a re-binning (:mod:`calbench.metrics.binned`, which prepares the sorted columns).

The kernels read the row counts as contiguous chunks ``[N, r]`` of ``r`` resamples (:data:`LANES`; :func:`chunks`:
int8 row counts, so that a chunk of 10,000 rows stays in a core's cache while every column is visited) and visit
each column's rows in a given order, its rows flattened column after column (``rows``):

* :func:`block_sums`: Σ counts, Σ counts · score and Σ counts · hit over consecutive blocks of rows;
* :func:`shared_column_sums`: one pass of block sums per column (consecutive sorted rows, split where an
  equal-width bin or a kept suffix starts) serving several binnings of its sorted rows: equal-width bins as sums of
  blocks, and equal-mass bins by :func:`equal_mass_walk`;
* :func:`equal_mass_walk`: equal-mass bins of each resample's sorted values, the resample's m kept rows (row i
  repeated counts_i times) split into B bins of ⌊m/B⌋, the m mod B larger ones first or last: the block sums up
  to the block that holds each edge's rank, then that block's rows one by one (a row whose copies straddle the edge
  counts on both sides with the copies below and above it);
* :func:`cumulative_maxima`: the largest |cumulative sum| of counts × (hit − score) along each column's sorted
  rows, at the ends of groups of tied scores (the KS calibration error).

Row counts are summed as integers (exact), weights (label-shifted sets' scaled counts) and scores and hits in float64
in the rows' order.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Resamples per chunk of row counts: [N, LANES] int8 counts of 10,000 rows take 640 kB.
LANES = 64


@njit(cache=True, nogil=True)
def block_sums(rows, scores, hits, seg, counts, sums):  # pragma: no cover (compiled)
    """``sums[:, g, :r]`` = Σ over the rows ``rows[seg[g]:seg[g + 1]]`` of ``counts[row, :r]`` times 1, ``scores``
    and ``hits`` (given in the order of ``rows``), each block summed row after row from 0; ``counts`` [N, r],
    ``sums`` [3, ≥ G, ≥ r] (a buffer reused from column to column)."""
    lanes = counts.shape[1]
    for g in range(seg.size - 1):
        for r in range(lanes):
            sums[0, g, r] = 0.0
            sums[1, g, r] = 0.0
            sums[2, g, r] = 0.0
        for k in range(seg[g], seg[g + 1]):
            i, score, hit = rows[k], scores[k], hits[k]
            for r in range(lanes):
                sums[0, g, r] += counts[i, r]
                sums[1, g, r] += counts[i, r] * score
            if hit != 0.0:
                for r in range(lanes):
                    sums[2, g, r] += counts[i, r] * hit


@njit(cache=True, nogil=True)
def equal_mass_walk(rows, scores, hits, seg, first, sums, prefix, counts, integer, n_bins, larger_first, out, column,
                    lane0):  # pragma: no cover (compiled)
    """``out[:, column, b, lane0 + r]``: equal-mass bin b of resample r of one column's rows from block ``first``
    on, given the sums ``sums`` [3, blocks, r] (counts, scores, hits) of its blocks of sorted rows
    ``rows[seg[g]:seg[g + 1]]``: each edge's rank reached by whole blocks (the blocks' running sums ``prefix``
    [3, ≥ blocks + 1, ≥ r], a buffer, summed block after block for all resamples at once), then by the rows of
    the block that holds it, row after row, ``min(count, edge − below)`` copies of each (a row whose copies
    straddle the edge counts with those below it). Integer counts (``integer``) keep the copies still to take as
    an integer, so that a row's step waits on one integer subtraction, not on the previous row's float sums; the
    sums are the same, term for term."""
    lanes = counts.shape[1]
    kept = seg.size - 1 - first
    for part in range(3):  # per resample, the sums of the kept blocks before each block
        for r in range(lanes):
            prefix[part, 0, r] = 0.0
        for g in range(kept):
            for r in range(lanes):
                prefix[part, g + 1, r] = prefix[part, g, r] + sums[part, first + g, r]
    for r in range(lanes):
        whole = prefix[0, kept, r]  # weights scaled from counts (label-shifted sets) need not be integers
        per_bin = np.floor(whole / n_bins)
        extra = whole - n_bins * per_bin
        b = 0
        last_c, last_s, last_h = 0.0, 0.0, 0.0  # below the previous edge
        for e in range(1, n_bins + 1):
            if e == n_bins:
                edge = whole
            elif larger_first:
                edge = e * per_bin + min(float(e), extra)
            else:
                edge = e * per_bin + max(e - (n_bins - extra), 0.0)
            while b < kept and prefix[0, b + 1, r] <= edge:
                b += 1
            below_c, below_s, below_h = prefix[0, b, r], prefix[1, b, r], prefix[2, b, r]
            if b < kept and integer:
                left = np.int64(edge - below_c)  # copies still to take (exact: integers)
                for k in range(seg[first + b], seg[first + b + 1]):
                    if left <= 0:
                        break
                    step = min(np.int64(counts[rows[k], r]), left)
                    left -= step
                    taken = float(step)
                    below_c += taken
                    below_s += taken * scores[k]
                    below_h += taken * hits[k]
            elif b < kept:
                for k in range(seg[first + b], seg[first + b + 1]):
                    if below_c >= edge:
                        break
                    taken = min(float(counts[rows[k], r]), edge - below_c)
                    below_c += taken
                    below_s += taken * scores[k]
                    below_h += taken * hits[k]
            out[0, column, e - 1, lane0 + r] = below_c - last_c
            out[1, column, e - 1, lane0 + r] = below_s - last_s
            out[2, column, e - 1, lane0 + r] = below_h - last_h
            last_c, last_s, last_h = below_c, below_s, below_h


@njit(cache=True, nogil=True)
def shared_column_sums(rows, scores, hits, seg, column_blocks, counts, integer, lane0, walk_first, walk_bins,
                       walk_larger, width_bin, out_walk, out_width):  # pragma: no cover (compiled)
    """Several binnings of the same sorted columns from one pass over their rows, for the resamples ``lane0`` to
    ``lane0 + r`` of the outputs (``counts`` [N, r]): per column j, the sums [3, r] of its blocks
    ``seg[column_blocks[j]:column_blocks[j + 1] + 1]`` (boundaries in ``rows``), then for each walk w the
    equal-mass bins (``walk_bins[w]``, the larger ones first where ``walk_larger[w]``) of the rows from block
    ``walk_first[w, j]`` on (:func:`equal_mass_walk`) into ``out_walk[w, :, j, :walk_bins[w]]`` [W, 3, M, B, R],
    and for each equal-width binning e the blocks summed into their bins ``width_bin[e, g]`` (one per block) of
    ``out_width[e]`` [E, 3, M, B', R]."""
    lanes = counts.shape[1]
    most = 0
    for j in range(column_blocks.size - 1):
        most = max(most, column_blocks[j + 1] - column_blocks[j])
    sums = np.empty((3, most, lanes))
    prefix = np.empty((3, most + 1, lanes))
    run = np.empty((3, lanes))
    for j in range(column_blocks.size - 1):
        first_block, end_block = column_blocks[j], column_blocks[j + 1]
        local = seg[first_block:end_block + 1]
        block_sums(rows, scores, hits, local, counts, sums)
        for e in range(width_bin.shape[0]):  # a bin's blocks are consecutive (sorted rows): summed, then added once
            g = 0
            while g < end_block - first_block:
                b = width_bin[e, first_block + g]
                run[:, :lanes] = 0.0
                while g < end_block - first_block and width_bin[e, first_block + g] == b:
                    for part in range(3):
                        for r in range(lanes):
                            run[part, r] += sums[part, g, r]
                    g += 1
                for part in range(3):
                    for r in range(lanes):
                        out_width[e, part, j, b, lane0 + r] += run[part, r]
        for w in range(walk_bins.size):
            equal_mass_walk(rows, scores, hits, local, walk_first[w, j] - first_block, sums, prefix, counts,
                            integer, walk_bins[w], walk_larger[w], out_walk[w], j, lane0)


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
    """``(first resample, [N, r] contiguous counts)`` of :data:`LANES` resamples at a time: int8 where the counts are
    integers below 128 (row counts of a bootstrap: a quarter of int32's memory traffic, and a chunk of 10,000 rows
    fits a core's cache), int32 where larger, else float64 (weights)."""
    counts = np.asarray(counts)
    dtype = np.float64
    if counts.dtype.kind in "iub" or np.array_equal(counts, np.round(counts)):
        dtype = np.int8 if counts.size == 0 or (counts.min() >= 0 and counts.max() < 128) else np.int32
    for first in range(0, counts.shape[0], LANES):
        yield first, np.ascontiguousarray(counts[first:first + LANES].T, dtype=dtype)


def integer(chunk: np.ndarray) -> bool:
    """Whether a chunk of :func:`chunks` holds row counts (integers, summed exactly), not weights."""
    return chunk.dtype.kind == "i"


def warm_up() -> None:
    """Compile (or load from the cache) the kernels' signatures, for each type of :func:`chunks`."""
    rows, scores, hits = np.array([1, 0, 2]), np.array([0.1, 0.5, 0.9]), np.array([0.0, 1.0, 1.0])
    counts = np.array([[1, 2], [0, 1], [2, 0]])
    for given in (counts.astype(np.int8), counts.astype(np.int32), counts.astype(np.float64)):
        shared_column_sums(rows, scores, hits, np.array([0, 2, 3]), np.array([0, 2]), given, integer(given), 2,
                           np.array([[0]]), np.array([2]), np.array([True]), np.array([[0, 1]]),
                           np.zeros((1, 3, 1, 2, 4)), np.zeros((1, 3, 1, 2, 4)))
        cumulative_maxima(rows, hits - scores, np.array([True, False, True]), np.array([0, 3]), given,
                          np.zeros((1, 2)))
