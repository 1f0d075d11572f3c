"""The KCal paper's adaptive ECE conventions (Lin, Trivedi & Sun 2023, §4.3 and its code).

* Adaptive bins: sort the scores, bins of ⌊m/B⌋ points with the remainder m mod B added one at a
  time to the *last* bins (calbench's ``em`` puts it in the first bins, as ``numpy.array_split``).
* Classwise ECE ("CECE"): for each class k keep only the instances with p̂_k ≥ τ, compute the
  adaptive-bin ECE of (p̂_k, 1[y = k]) on them, and average over the classes that keep any instance.
  τ = min(0.01, 1/K) as in the authors' code, which reproduces their Table 3 (the paper's text says
  max{0.01, 1/K}; docs/metrics.md).
* Confidence ECE: the same adaptive bins on (max p̂, correctness), nothing dropped.
Vectorised over classes: dropped instances go to an extra bin that is ignored.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics.binning import bin_sums


def adaptive_bins(scores: np.ndarray, keep: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index per entry of ``scores`` [N, M]; entries with ``keep`` False get bin ``n_bins``."""
    n = scores.shape[0]
    kept = keep.sum(axis=0)  # [M]
    order = np.argsort(np.where(keep, scores, -np.inf), axis=0, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(n)[:, None].repeat(scores.shape[1], axis=1), axis=0)
    r = rank - (n - kept)  # rank among the kept entries (kept ones sort last)
    size, rem = kept // n_bins, kept % n_bins
    small = size * (n_bins - rem)  # entries in the leading bins of ⌊m/B⌋ points
    bins = np.where(r < small, r // np.maximum(size, 1), (n_bins - rem) + (r - small) // (size + 1))
    return np.where(keep, bins, n_bins)


def kcal_ece(scores: np.ndarray, hits: np.ndarray, n_bins: int, threshold: float = 0.0) -> float:
    """Mean over columns (that keep any instance) of the adaptive-bin l1 ECE of scores ≥ ``threshold``."""
    keep = scores >= threshold
    bins = adaptive_bins(scores, keep, n_bins)
    counts, s_sum, h_sum = (a[:, :n_bins] for a in bin_sums(bins, n_bins + 1, scores, hits))
    kept = counts.sum(axis=1)
    ece = np.sum(np.abs(h_sum - s_sum), axis=1) / np.maximum(kept, 1)
    return float(np.mean(ece[kept > 0]))


def binning(n_bins: int, threshold: float) -> tuple:
    """The KCal paper's adaptive bins as a binning of :func:`calbench.metrics.binned.binned_sums_resampled`, whose
    per-bin sums on R bootstrap resamples :func:`kcal_ece_of_sums` turns into the ECE of each."""
    return ("em", n_bins, threshold, "last")


def kcal_ece_of_sums(sums: np.ndarray) -> np.ndarray:
    """:func:`kcal_ece` of each resample from its bin sums [3, R, M, B] (counts, scores, hits)."""
    totals, s_sum, h_sum = sums
    kept = totals.sum(axis=-1)
    gaps = h_sum - s_sum
    ece = np.sum(np.abs(gaps, out=gaps), axis=-1) / np.maximum(kept, 1)
    return np.sum(np.where(kept > 0, ece, 0.0), axis=1) / np.sum(kept > 0, axis=1)


def kcal_threshold(num_classes: int) -> float:
    return min(0.01, 1.0 / num_classes)
