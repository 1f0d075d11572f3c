"""Sums of conformal-set metrics on R bootstrap resamples given as row counts, in compiled passes whose inner loop runs
over the resamples (the lanes), as :mod:`calbench.kernels.resampled_bins` does for binned errors
(:mod:`calbench.metrics.conformal_eval` prepares the rows and finishes the metrics).

Per division of the test rows, each resample r weights the rows by their counts w_{i,r}:

* :func:`weighted_quantile_positions`: the position, among the conformal-calibration scores sorted ascending, of
  each resample's conformal quantile, the ⌈(w + 1)(1 − α)⌉-th smallest of the multiset (w its total weight), or −1
  past the end; the totals and cumulative weights are summed row after row in sorted order;
* :func:`division_sums`: over the evaluation rows, Σ w, Σ w · covered, Σ w · set size, and per class Σ w and
  Σ w · covered, and where asked the weighted histogram of set sizes and the per-stratum sums (SSCV); a row's set
  size under resample r is a column of the row's table of sizes at each distinct threshold of the resamples.

Counts arrive as contiguous chunks ``[N, r]`` (:func:`calbench.kernels.resampled_bins.chunks`): int8 or int32 row
counts, summed exactly, or float64 weights.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def weighted_quantile_positions(rows, alpha, counts, integer, out):  # pragma: no cover (compiled)
    """``out[r]``: the position in ``rows`` (the calibration rows in ascending order of score) of resample r's
    conformal quantile at ``alpha``, or −1 where its rank exceeds the total weight; ``counts`` [N, r]. Integer
    counts (``integer``) are walked down from the largest score (the rank lies near the top; integer sums are exact
    in any order), weights up from the smallest, summed in the order of a cumulative sum."""
    lanes = counts.shape[1]
    total = np.zeros(lanes)
    if integer:  # summed as integers (exact, and in vector instructions several times as wide)
        held = np.zeros(lanes, dtype=np.int64)
        for k in range(rows.size):
            i = rows[k]
            for r in range(lanes):
                held[r] += np.int64(counts[i, r])
        total[:] = held
    else:
        for k in range(rows.size):
            for r in range(lanes):
                total[r] += counts[rows[k], r]
    rank = np.ceil((total + 1) * (1 - alpha) - 1e-9)
    done = rank > total
    open_lanes = 0
    for r in range(lanes):
        out[r] = -1 if done[r] else 0
        open_lanes += not done[r]
    if integer:  # the smallest position whose cumulative count reaches the rank, from the top
        room = total - rank  # the counts the rows above the position may hold (the lanes past the end: < 0)
        above = np.zeros(lanes)  # the counts of the rows above the position
        for k in range(rows.size - 1, 0, -1):  # every lane at once, without a branch per lane
            if open_lanes == 0:
                break
            row = counts[rows[k]]
            for r in range(lanes):
                reached = not done[r] and above[r] + row[r] > room[r]
                out[r] = k if reached else out[r]
                done[r] = done[r] or reached
                above[r] += 0.0 if done[r] else float(row[r])
            if k % 8 == 0:  # every lane found yet?
                open_lanes = 0
                for r in range(lanes):
                    open_lanes += not done[r]
        return
    cumulative = np.zeros(lanes)
    for r in range(lanes):
        if not done[r]:
            out[r] = rows.size - 1
    for k in range(rows.size):  # row after row (the lanes of a row are adjacent), until every lane has its position
        if open_lanes == 0:
            break
        for r in range(lanes):
            cumulative[r] += counts[rows[k], r]
            if not done[r] and cumulative[r] >= rank[r]:
                out[r] = k
                done[r] = True
                open_lanes -= 1


@njit(cache=True, nogil=True)
def division_sums(rows, labels, true_scores, sizes, lane_threshold, thresholds, strata, counts, out_total,
                  out_covered, out_size, out_held, out_hits, out_hist, out_strata_held,
                  out_strata_hits):  # pragma: no cover (compiled)
    """Sums of one division's evaluation ``rows`` (their ``labels`` and ``true_scores``) under each resample r:
    covered where the true score ≤ ``thresholds[lane_threshold[r]]``; set size ``sizes[k, lane_threshold[r]]``
    for the k-th row. ``out_held``/``out_hits`` [K, r]; ``out_hist`` [K + 1, r] and ``out_strata_*`` [S, r] (the
    stratum of each size in ``strata``) are filled only where they have rows. The outputs are int64 for row counts
    (integer sums, exact in any order and in wider vector instructions) and float64 for weights (summed row after
    row)."""
    lanes = counts.shape[1]
    q = thresholds[lane_threshold]
    want_detail = out_hist.shape[0] > 0
    for k in range(rows.size):  # a few arrays per loop over the lanes (each runs as vector instructions), no views
        i, y, t = rows[k], labels[k], true_scores[k]
        for r in range(lanes):
            w = counts[i, r]
            out_total[r] += w
            out_held[y, r] += w
        for r in range(lanes):
            c = counts[i, r] if t <= q[r] else 0
            out_covered[r] += c
            out_hits[y, r] += c
        for r in range(lanes):
            out_size[r] += counts[i, r] * sizes[k, lane_threshold[r]]
        if want_detail:
            for r in range(lanes):
                w = counts[i, r]
                size = sizes[k, lane_threshold[r]]
                out_hist[size, r] += w
                out_strata_held[strata[size], r] += w
                if t <= q[r]:
                    out_strata_hits[strata[size], r] += w


def warm_up() -> None:
    """Compile (or load from the cache) the kernels' signatures."""
    rows, labels = np.array([1, 0, 2]), np.array([0, 1, 1])
    scores, sizes = np.array([0.1, 0.5, 0.9]), np.array([[1, 2], [0, 1], [2, 2]])
    for counts in (np.array([[1, 2], [0, 1], [2, 0]]).astype(dtype) for dtype in (np.int8, np.int32, np.float64)):
        positions = np.zeros(2, dtype=np.int64)
        weighted_quantile_positions(rows, 0.1, counts, counts.dtype.kind == "i", positions)
        for hist_rows, strata_rows in ((0, 0), (3, 7)):
            dtype = np.int64 if counts.dtype.kind == "i" else np.float64
            out = [np.zeros(2, dtype) for _ in range(3)] + [np.zeros((2, 2), dtype), np.zeros((2, 2), dtype),
                                                             np.zeros((hist_rows, 2), dtype),
                                                             np.zeros((strata_rows, 2), dtype),
                                                             np.zeros((strata_rows, 2), dtype)]
            division_sums(rows, labels, scores, sizes, np.array([0, 1]), np.array([0.4, np.inf]),
                          np.array([0, 0, 1]), counts, *out)
