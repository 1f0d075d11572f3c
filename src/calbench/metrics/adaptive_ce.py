"""Adaptive calibration error (Nixon, Dusenberry, Zhang, Jerfel & Tran, CVPR Workshops 2019, §4).

ACE = (1/(K·R)) Σ_k Σ_r |acc(r, k) − conf(r, k)|: for every class k the N scores p̂_k are cut into R ranges
holding equal numbers of predictions, and the gaps between the mean hit 1[y = k] and the mean score of each
range are averaged with equal weight over ranges and classes (the binned ECE weights bins by their mass
instead). The ranges are calbench's equal-mass bins (:mod:`calbench.metrics.binning`: sizes differing by at
most one, the first N mod R one larger); with fewer rows than ranges the empty ranges are left out. ``conf``
applies the same to the top-label problem (max p̂, correct) — netcal's ``ACE(bins, equal_intervals=False)``,
whose ranges are cut at the scores' quantiles instead.
"""

from __future__ import annotations

import numpy as np


def ace_from_stats(counts: np.ndarray, mean_score: np.ndarray, mean_hit: np.ndarray) -> np.ndarray:
    """ACE from equal-mass bin statistics [..., M, B] (:func:`calbench.metrics.binned.bin_stats`, or of bootstrap
    resamples): the mean over the M columns and their non-empty bins of |ȳ_b − p̄_b| ([...])."""
    filled = counts > 0
    gaps = np.abs(mean_hit - mean_score)  # in place from here: one array of the resamples' bins
    gaps[~filled] = 0.0
    return np.mean(np.sum(gaps, axis=-1) / filled.sum(axis=-1), axis=-1)
