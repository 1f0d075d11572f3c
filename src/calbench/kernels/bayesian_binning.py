"""BBQ's binning models (Naeini, Cooper & Hauskrecht, AAAI 2015) in one compiled pass over the sorted scores.

For every number of bins b = ``min_bins`` … ``max_bins`` the sorted scores are cut into equal-frequency bins of
⌊N/b⌋ points (the last bin takes the rest; a bin whose next bins start with its own first score absorbs them, so
tied scores share a bin), as the authors' code builds them. Per bin: the boundaries are the midpoints between
neighbouring bins' scores (0 and 1 at the ends), the estimate is the authors' smoothed frequency
(n₁ + p₀)/(n + 1) with p₀ = (Σ positive scores + m)/(n₁ + 1) and m the bin's midpoint, and the model's log
marginal likelihood is the paper's BDeu score with ``strength`` = N'/B prior samples per bin, Beta-distributed around
the bin's midpoint p_b (clipped to [0.005, 0.995]); the authors' code, "the version used in the paper", takes N' = 2B:

  ln P(D | M) = Σ_b [ln Γ(C) − ln Γ(n_b + C) + ln Γ(n₁ + C p_b) − ln Γ(C p_b)
                     + ln Γ(n₀ + C(1 − p_b)) − ln Γ(C(1 − p_b))].
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: Bin midpoints in the BDeu prior are clipped to [PRIOR_CLIP, 1 − PRIOR_CLIP] (the authors' code).
PRIOR_CLIP = 5e-3


@njit(cache=True, nogil=True)
def _bins(f, b, starts, ends):  # pragma: no cover (compiled)
    """Fill ``starts``/``ends`` (inclusive) with the bins of the b-bin model of sorted scores ``f``; their count."""
    n = f.size
    if b == 1:
        starts[0], ends[0] = 0, n - 1
        return 1
    width = n // b
    count, i, last = 0, 1, -1
    while i < b:
        first = (i - 1) * width
        last = i * width - 1
        j = i + 1
        while j <= b:
            end = j * width - 1 if j < b else n - 1
            if f[end] == f[first]:
                last = end
                j += 1
            else:
                break
        starts[count], ends[count] = first, last
        count += 1
        i = j
    if last < n - 1:
        starts[count], ends[count] = last + 1, n - 1
        count += 1
    return count


@njit(cache=True, nogil=True)
def binning_models(f, hits, min_bins, max_bins, strength):  # pragma: no cover (compiled)
    """Every model's cut points and bin estimates, flat (model m owns bins ``offsets[m]:offsets[m + 1]``; its cut
    points are the upper edges of all but its last bin), and each model's log marginal likelihood."""
    n = f.size
    cum_hits = np.zeros(n + 1)
    cum_pos = np.zeros(n + 1)
    for i in range(n):
        cum_hits[i + 1] = cum_hits[i] + hits[i]
        cum_pos[i + 1] = cum_pos[i] + hits[i] * f[i]
    models = max_bins - min_bins + 1
    total = (min_bins + max_bins) * models // 2
    upper = np.empty(total)
    estimate = np.empty(total)
    offsets = np.zeros(models + 1, dtype=np.int64)
    log_marginal = np.empty(models)
    starts = np.empty(max_bins, dtype=np.int64)
    ends = np.empty(max_bins, dtype=np.int64)
    for m in range(models):
        count = _bins(f, min_bins + m, starts, ends)
        score = count * math.lgamma(strength)
        base = offsets[m]
        for k in range(count):
            lo = 0.0 if k == 0 else 0.5 * (f[starts[k]] + f[ends[k - 1]])
            hi = 1.0 if k == count - 1 else 0.5 * (f[ends[k]] + f[starts[k + 1]])
            size = ends[k] - starts[k] + 1.0
            ones = cum_hits[ends[k] + 1] - cum_hits[starts[k]]
            prior = 0.5 * (lo + hi)
            p0 = (cum_pos[ends[k] + 1] - cum_pos[starts[k]] + prior) / (ones + 1.0)
            upper[base + k] = hi
            estimate[base + k] = (ones + p0) / (size + 1.0)
            centre = min(max(prior, PRIOR_CLIP), 1.0 - PRIOR_CLIP)
            a, c = strength * centre, strength * (1.0 - centre)
            score += (math.lgamma(ones + a) + math.lgamma(size - ones + c) - math.lgamma(size + strength)
                      - math.lgamma(a) - math.lgamma(c))
        offsets[m + 1] = base + count
        log_marginal[m] = score
    return upper[:offsets[models]], estimate[:offsets[models]], offsets, log_marginal


def warm_up() -> None:
    """Compile (or load from the cache) the kernel's signature."""
    f = np.linspace(0.0, 1.0, 20)
    binning_models(f, (f > 0.5).astype(np.float64), 1, 4, 2.0)
