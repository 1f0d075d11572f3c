"""Consistency-resampling calibration test (Vaicenavicius et al. 2019) as the Dirichlet paper uses it.

Under the null hypothesis that the model is calibrated, labels drawn as ỹ_i ~ Categorical(p̂_i)
are distributed like the real ones. The test recomputes the ECE on R such pseudo-label sets and
reports the p-value: the fraction of resampled ECEs above the observed one (Dirichlet paper §2:
"10,000 sets of pseudo-labels … 170 … higher ECE" → p = 0.017). As the authors' code, the p-value is
1 − percentileofscore(samples, observed, kind="rank")/100 (ties count half), R = 1000 (their UCI
runs). The bins depend only on p̂, so they are fixed across resamples; every resample's per-bin hit
sums come from one ``bincount``. The draws are seeded from the metric context's seed.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics.binning import assign_bins, bin_sums

RESAMPLES = 1000
CHUNK = 100


def _ece_rows(hit_sums, counts, score_sums, n):
    """ECE (l1) of each resample from hit sums [R, M, B]; averaged over the M columns."""
    safe = np.maximum(counts, 1)
    gaps = np.abs(hit_sums - score_sums) / safe
    return np.mean(np.sum(counts / n * gaps, axis=-1), axis=-1)


def p_value(observed: float, samples: np.ndarray) -> float:
    """1 − percentileofscore(samples, observed, kind='rank')/100."""
    below, at_most = np.sum(samples < observed), np.sum(samples <= observed)
    pct = (below + at_most + (1 if at_most > below else 0)) * 50.0 / samples.size
    return float(1.0 - pct / 100.0)


def consistency_p_value(probs, labels, target: str, n_bins: int = 15, scheme: str = "ew",
                        resamples: int = RESAMPLES, seed: int = 0) -> float:
    """p-value of the ECE (confidence or classwise, l1) under consistency resampling."""
    probs = np.asarray(probs, dtype=np.float64)
    n, c = probs.shape
    rng = np.random.default_rng([seed, 7231])
    if target == "conf":
        scores = probs.max(axis=1)
        bins = assign_bins(scores, n_bins, scheme)
        counts, score_sums, observed_hits = bin_sums(bins, n_bins, scores,
                                                     (probs.argmax(axis=1) == labels).astype(float))
        samples = []
        for start in range(0, resamples, CHUNK):
            r = min(CHUNK, resamples - start)
            hits = rng.random((r, n)) < scores  # ỹ equals the argmax with probability max p̂
            flat = (np.arange(r)[:, None] * n_bins + bins[None, :]).ravel()
            hit_sums = np.bincount(flat, hits.ravel(), r * n_bins).reshape(r, 1, n_bins)
            samples.append(_ece_rows(hit_sums, counts, score_sums, n))
        observed = _ece_rows(observed_hits[None, None], counts, score_sums, n)[0]
        return p_value(observed, np.concatenate(samples))
    if target != "cw":
        raise ValueError(f"target must be 'conf' or 'cw', got {target!r}")
    bins = assign_bins(probs, n_bins, scheme)  # [N, C]
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), labels] = 1.0
    counts, score_sums, observed_hits = bin_sums(bins, n_bins, probs, onehot)  # [C, B]
    cdf = np.cumsum(probs, axis=1)
    cdf[:, -1] = 1.0
    flat_cdf = (cdf + np.arange(n)[:, None]).ravel()  # rows offset by their index: one sorted array
    samples = []
    for start in range(0, resamples, CHUNK):
        r = min(CHUNK, resamples - start)
        u = rng.random((r, n)) + np.arange(n)
        drawn = np.minimum(np.searchsorted(flat_cdf, u, side="right") - np.arange(n) * c, c - 1)  # ỹ [r, N]
        cell = (np.arange(r)[:, None] * c + drawn) * n_bins + bins[np.arange(n), drawn]
        hit_sums = np.bincount(cell.ravel(), minlength=r * c * n_bins).reshape(r, c, n_bins)
        samples.append(_ece_rows(hit_sums, counts, score_sums, n))
    observed = _ece_rows(observed_hits[None], counts, score_sums, n)[0]
    return p_value(observed, np.concatenate(samples))
