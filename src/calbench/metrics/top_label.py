"""Binned top-label ECE (Gupta & Ramdas, ICLR 2022, Eq. 3) for all predicted classes at once.

Σ_l (n_l / n)·ECE(c, 1[y = l] | ŷ = l): the rows predicted l are binned by confidence on their own (``ew``: the
fixed equal-width edges; ``em``: equal-mass chunks of the class's sorted confidences, as
:func:`~calbench.metrics.binning.equal_mass_bins`, ties in row order) and one bincount over (class, bin) pairs
gives every class's bin statistics; the same numbers as looping :func:`~calbench.metrics.binned.binned_ece`
over the predicted classes (``smooth_ece.top_label_average``), without the loop.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics.binned import ece_from_stats
from calbench.metrics.binning import bin_sums, equal_width_bins


def _equal_mass_bins_within(group: np.ndarray, values: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-mass bin of each value among the values of its own group (first n_g mod B bins one larger)."""
    order = np.lexsort((values, group))  # stable: ties keep row order, as equal_mass_bins
    sizes = np.bincount(group)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.arange(group.size) - start[group[order]]
    q, rem = sizes[group[order]] // n_bins, sizes[group[order]] % n_bins
    big = rem * (q + 1)  # the rows in the larger first bins
    sorted_bins = np.where(rank < big, rank // (q + 1), rem + (rank - big) // np.maximum(q, 1))
    bins = np.empty(group.size, dtype=np.int64)
    bins[order] = sorted_bins
    return bins


def top_label_binned_ece(probs: np.ndarray, labels: np.ndarray, n_bins: int, scheme: str, norm: str) -> float:
    """Top-label ECE with ``n_bins`` bins per predicted class (``scheme`` ew|em, ``norm`` l1|l2)."""
    probs = np.asarray(probs, dtype=np.float64)
    top = probs.argmax(axis=1)
    conf = probs[np.arange(top.size), top]
    hits = (top == labels).astype(np.float64)
    _, group = np.unique(top, return_inverse=True)  # predicted classes numbered 0..L-1
    group = group.ravel()
    if scheme == "ew":
        bins = equal_width_bins(conf, n_bins)
    elif scheme == "em":
        bins = _equal_mass_bins_within(group, conf, n_bins)
    else:
        raise ValueError(f"binning scheme must be 'ew' (equal width) or 'em' (equal mass), got {scheme!r}")
    counts, s_sum, h_sum = bin_sums(group * n_bins + bins, (group.max() + 1) * n_bins, conf, hits)
    shape = (-1, n_bins)
    counts, s_sum, h_sum = counts.reshape(shape), s_sum.reshape(shape), h_sum.reshape(shape)
    safe = np.maximum(counts, 1)
    per_class = ece_from_stats(counts, s_sum / safe, h_sum / safe, norm, debiased=False)
    return float(np.sum(counts.sum(axis=1) * per_class) / top.size)
