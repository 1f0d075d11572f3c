"""Calibration measured on cumulative sums along the sorted scores: the KS calibration error and the
Kolmogorov–Smirnov, Kuiper and Spiegelhalter calibration tests.

Binary columns (scores p, hits y), sorted by p; the cumulative differences C_k = (1/n) Σ_{j ≤ k} (y_j − p_j),
C_0 = 0, are taken only at the last row of each group of tied scores (the cumulative functions of the
papers are functions of the score threshold, so no order among tied rows is implied).

* **KS calibration error** (Gupta, Rahimi, Ajanthan, Mensink, Sminchisescu & Hartley, ICLR 2021, §4):
  max_k |h_k − h̃_k| with h the cumulative hit rate and h̃ the cumulative score, both divided by n:
  max_k |C_k|. Top-label: (max p̂, correct); classwise: the mean over classes of (p̂_j, 1[y = j]).
* **KS and Kuiper tests** (Arrieta-Ibarra, Gujral, Tannen, Tygert & Xu, JMLR 2022, §3; Tygert 2022 for the
  p-values): statistics max_k |C_k| / σ and (max_k C_k − min_k C_k) / σ with σ = sqrt(Σ p(1 − p)) / n
  (k over 0..n: C_0 = 0 is in the range, as in the paper and probmetrics' ``kuiper``); under perfect
  calibration C/σ tends to a standard Brownian motion on [0, 1], so the p-values are the tails of the
  maximum of |B_t| (Darling & Siegert 1953) and of the range of B_t (Feller 1951), by their series. MAPIE
  1.6 takes the Kuiper range over k ≥ 1 only (at most |C_1|/σ less) and breaks ties by jittering the scores
  (relative 1e-8, seed 1), so its statistics also count partial sums inside a group of tied scores, in the
  jitter's order: they are never below calbench's, and differ only where tied scores have different hits.
* **Spiegelhalter's Z** (Spiegelhalter 1986, Statistics in Medicine 5: 421–433, §3): Z = Σ (y − p)(1 − 2p) /
  sqrt(Σ (1 − 2p)² p (1 − p)), standard normal under calibration; the p-value is two-sided, 2·Φ(−|Z|)
  (MAPIE reports the one-sided 1 − Φ(Z)).
* Where a statistic's variance under calibration is 0 (every score 0 or 1; for Z also ½) the outcome is
  certain under the null: p = 0 if the data deviate from it, else 1 (MAPIE divides by zero).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

from calbench.metrics.binned import sorted_columns

#: Terms of the series are summed until they fall below this (their sum is then exact to float64).
SERIES_TOL = 1e-17


def cumulative_differences(scores: np.ndarray, hits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(C, ends) per column, [M, N] for scores and hits [N, M] (or [1, N] for [N]): C_k along each column's
    sorted scores and whether row k ends a group of tied scores (only there is C_k one of the papers')."""
    s, y = sorted_columns(scores, hits)
    ends = np.ones(s.shape, dtype=bool)
    ends[:, :-1] = s[:, 1:] != s[:, :-1]
    c = np.subtract(y, s)
    np.cumsum(c, axis=1, out=c)
    c /= s.shape[1]
    return c, ends


#: Elements (resamples × rows × columns) of the resampled cumulative sums of :func:`ks_error_resampled` at most.
RESAMPLED_KS_BUDGET = 2**31


def ks_error_resampled(scores: np.ndarray, hits: np.ndarray, counts: np.ndarray) -> np.ndarray | None:
    """:func:`ks_error` averaged over the columns on R bootstrap resamples given as row counts ``[R, N]``
    (``[R]``), or None above :data:`RESAMPLED_KS_BUDGET`. A resample's sorted rows are the rows in sorted order,
    row i repeated counts[r, i] times; at the last row of each group of tied scores its C_k is the counts-weighted
    cumulative sum of the original sort's (whose order within a group does not matter there), and a group that
    the resample leaves out repeats the previous group's C_k: the maximum is the resample's, to rounding."""
    from calbench.kernels.resampled_bins import cumulative_maxima
    from calbench.metrics.row_counts import lanes

    scores, hits = np.atleast_2d(np.asarray(scores, dtype=np.float64).T), np.atleast_2d(np.asarray(hits).T)
    m, n = scores.shape
    if counts.size * m > RESAMPLED_KS_BUDGET:
        return None
    order = np.argsort(scores, axis=1)
    s = np.take_along_axis(scores, order, axis=1)
    gaps = np.take_along_axis(hits, order, axis=1) - s
    ends = np.ones(s.shape, dtype=bool)
    ends[:, :-1] = s[:, 1:] != s[:, :-1]
    maxima = np.zeros((m, counts.shape[0]))  # per column, the largest |C_k| of each resample (compiled, lanes)
    starts = n * np.arange(m + 1)
    for first, chunk in lanes(counts):
        part = np.zeros((m, chunk.shape[1]))
        cumulative_maxima(order.ravel(), gaps.ravel(), ends.ravel(), starts, chunk, part)
        maxima[:, first:first + chunk.shape[1]] = part
    total, weight = np.zeros(counts.shape[0]), counts.sum(axis=1)  # a resample's rows (n, or a pool's share)
    for column in range(m):
        total += maxima[column] / weight
    return total / m


def ks_error(scores: np.ndarray, hits: np.ndarray) -> np.ndarray:
    """Gupta et al.'s KS calibration error max_k |C_k| per column ([M]; [1] for one column)."""
    c, ends = cumulative_differences(scores, hits)
    np.abs(c, out=c)
    c[~ends] = 0.0
    return np.max(c, axis=1)


def _length_scale(scores: np.ndarray) -> float:
    """σ = sqrt(Σ p(1 − p)) / n, the standard deviation of C_n under calibration."""
    return float(np.sqrt(np.sum(scores * (1 - scores))) / scores.size)


def _degenerate(deviation: float) -> tuple[float, float]:
    """A test whose statistic has variance 0 under calibration (every score 0 or 1; for Z also ½): the data
    are then certain, so a deviation is impossible under the null (p = 0) and none is no evidence (p = 1)."""
    return (np.inf, 0.0) if deviation != 0 else (0.0, 1.0)


def max_abs_brownian_sf(x: float) -> float:
    """P(max_{t ≤ 1} |B_t| > x) = 1 − (4/π) Σ_k (−1)^k/(2k+1) exp(−(2k+1)²π²/(8x²))."""
    if x <= 0:
        return 1.0
    k = np.arange(int(np.ceil(x * np.sqrt(2 * np.log(1 / SERIES_TOL)) / np.pi)) + 1) + 0.5
    cdf = 2 / np.pi * np.sum((-1.0) ** np.arange(k.size) / k * np.exp(-(k * np.pi / x) ** 2 / 2))
    return float(min(max(1.0 - cdf, 0.0), 1.0))


def brownian_range_sf(x: float) -> float:
    """P(max_{t ≤ 1} B_t − min_{t ≤ 1} B_t > x) = 1 − Σ_k (8/x² + 2/((k + ½)π)²) exp(−2((k + ½)π/x)²)."""
    if x <= 0:
        return 1.0
    scale = max(8 / x**2, 1.0)
    k = np.arange(int(np.ceil(x * np.sqrt(np.log(scale / SERIES_TOL) / 2) / np.pi)) + 1) + 0.5
    cdf = np.sum((8 / x**2 + 2 / (k * np.pi) ** 2) * np.exp(-2 * (k * np.pi / x) ** 2))
    return float(min(max(1.0 - cdf, 0.0), 1.0))


def ks_test(scores: np.ndarray, hits: np.ndarray) -> tuple[float, float]:
    """(statistic max|C|/σ, p-value) of the KS calibration test on one binary column."""
    scores = np.asarray(scores, dtype=np.float64)
    deviation, sigma = float(ks_error(scores, hits)[0]), _length_scale(scores)
    if sigma == 0:
        return _degenerate(deviation)
    return deviation / sigma, max_abs_brownian_sf(deviation / sigma)


def kuiper_test(scores: np.ndarray, hits: np.ndarray) -> tuple[float, float]:
    """(statistic (max C − min C)/σ over k = 0..n, p-value) of the Kuiper calibration test."""
    scores = np.asarray(scores, dtype=np.float64)
    c, ends = cumulative_differences(scores, hits)
    c = np.concatenate([[0.0], c[ends]])  # C_0 = 0 and the group ends
    deviation, sigma = float(c.max() - c.min()), _length_scale(scores)
    if sigma == 0:
        return _degenerate(deviation)
    return deviation / sigma, brownian_range_sf(deviation / sigma)


def spiegelhalter_test(scores: np.ndarray, hits: np.ndarray) -> tuple[float, float]:
    """(Z, two-sided p-value 2Φ(−|Z|)) of Spiegelhalter's test on one binary column."""
    p, y = np.asarray(scores, dtype=np.float64), np.asarray(hits, dtype=np.float64)
    variance = np.sum((1 - 2 * p) ** 2 * p * (1 - p))
    deviation = float(np.sum((y - p) * (1 - 2 * p)))
    if variance == 0:
        return _degenerate(deviation)
    z = deviation / float(np.sqrt(variance))
    return z, float(2 * ndtr(-abs(z)))
