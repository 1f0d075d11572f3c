"""ENIR's ensemble (Naeini & Cooper, ICDM 2016) along the near-isotonic regression path, in one compiled pass.

Near-isotonic regression (Tibshirani, Hoefling & Tibshirani 2011) of targets on sorted scores minimises
½ Σ w_i (ȳ_i − β_i)² + λ Σ_i (β_i − β_{i+1})₊. Its solution path in λ is traced by the modified pool-adjacent-
violators algorithm (their §3): groups of adjacent points share one value, β_g(λ) = ȳ_g + λ (v_{g−1,g} − v_{g,g+1})/W_g
with W_g the group's weight, ȳ_g its mean target and v = 1 where the pair of groups is decreasing (a violation);
adjacent groups whose values meet are fused and stay fused. Groups of equal consecutive ȳ are fused at λ = 0.
Every λ at which groups fuse gives one model (fusions at the same λ, within a relative 1e-10, one model), up to the
isotonic fit where no pair is decreasing.

Each model is scored as the authors' code scores it: β clipped to [0, 1], degrees of freedom = number of runs of
distinct consecutive values, BIC = −2 ln L + df (ln N + ln 2π) with L the Bernoulli likelihood of the N targets;
the λ = 0 model (the data themselves) and models of infinite BIC are left out, unless no other model exists. Each
run's value is smoothed as the authors' code does, β ← (β n + f̄ (1 − e)) / (n + 1 − e), with n its points, f̄
their mean score and e = |ȳ − f̄| the run's calibration error. The ensemble value of each initial group is the
average of its smoothed values over the models, weighted by exp(−BIC/2).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: Fusions whose λ lies within this relative distance of the next one count as simultaneous (one model).
SAME_LAMBDA = 1e-10


@njit(cache=True, nogil=True)
def _model(lam, weight, ones, score_sum, mean, slope, nxt, total, value, runs):  # pragma: no cover (compiled)
    """Clipped values of the live groups at ``lam`` (into ``value``), their smoothed run values (``runs``, by group)
    and the model's BIC (inf where a positive target gets probability 0)."""
    log_lik, df = 0.0, 0
    g = 0
    prev_value = -1.0
    while g >= 0:
        v = min(max(mean[g] + lam * slope[g], 0.0), 1.0)
        value[g] = v
        if ones[g] > 0:
            if v <= 0.0:
                return np.inf
            log_lik += ones[g] * math.log(v)
        if weight[g] - ones[g] > 0:
            if v >= 1.0:
                return np.inf
            log_lik += (weight[g] - ones[g]) * math.log1p(-v)
        if v != prev_value:
            df += 1
        prev_value = v
        g = nxt[g]
    g = 0
    while g >= 0:  # runs of equal clipped value: smoothed as the authors' code
        h, n, n1, fs = g, 0.0, 0.0, 0.0
        while h >= 0 and value[h] == value[g]:
            n += weight[h]
            n1 += ones[h]
            fs += score_sum[h]
            h = nxt[h]
        mean_score = fs / n
        error = abs(n1 / n - mean_score)
        smoothed = (value[g] * n + mean_score * (1.0 - error)) / (n + 1.0 - error)
        k = g
        while k != h:
            runs[k] = smoothed
            k = nxt[k]
        g = h
    return -2.0 * log_lik + df * (math.log(total) + math.log(2.0 * math.pi))


@njit(cache=True, nogil=True)
def _collision(mean, slope, g, h, lam):  # pragma: no cover (compiled)
    """The λ ≥ ``lam`` at which groups g and h = next(g) meet, +inf if they do not."""
    rate = slope[g] - slope[h]
    if rate == 0.0:
        return np.inf
    meet = (mean[h] - mean[g]) / rate
    return meet if meet >= lam else np.inf


@njit(cache=True, nogil=True)
def ensemble(weight, ones, score_sum):  # pragma: no cover (compiled)
    """ENIR's averaged smoothed value of each initial group (groups: consecutive runs of equal mean target over the
    sorted distinct scores, with their weights, positive counts and score sums), and the λ of each model averaged."""
    m = weight.size
    mean = ones / weight
    weight, ones, score_sum = weight.copy(), ones.copy(), score_sum.copy()
    slope = np.zeros(m)
    decreasing = np.zeros(m, dtype=np.bool_)  # pair (g, next g)
    nxt = np.empty(m, dtype=np.int64)
    prv = np.empty(m, dtype=np.int64)
    last_member = np.arange(m)  # the last initial group of each live group
    for g in range(m):
        nxt[g] = g + 1 if g + 1 < m else -1
        prv[g] = g - 1
        decreasing[g] = g + 1 < m and mean[g] > mean[g + 1]
    for g in range(m):
        slope[g] = ((1.0 if g > 0 and decreasing[g - 1] else 0.0) - (1.0 if decreasing[g] else 0.0)) / weight[g]
    total = weight.sum()
    value = np.empty(m)
    runs = np.empty(m)
    acc = np.zeros(m)
    norm, best, models = 0.0, -np.inf, 0
    lambdas = np.empty(m)
    fallback = np.empty(m)
    _model(0.0, weight, ones, score_sum, mean, slope, nxt, total, value, runs)
    fallback[:] = runs
    meet = np.empty(m)
    lam = 0.0
    while True:
        nearest = np.inf
        g = 0
        while g >= 0 and nxt[g] >= 0:
            meet[g] = _collision(mean, slope, g, nxt[g], lam)
            nearest = min(nearest, meet[g])
            g = nxt[g]
        if nearest == np.inf:
            break
        lam = nearest
        limit = nearest * (1.0 + SAME_LAMBDA)
        g = 0
        while g >= 0 and nxt[g] >= 0:
            h = nxt[g]
            if meet[g] <= limit:  # fuse h into g: g keeps its left pair, takes h's right pair
                weight[g] += weight[h]
                ones[g] += ones[h]
                score_sum[g] += score_sum[h]
                last_member[g] = last_member[h]
                decreasing[g] = decreasing[h]
                meet[g] = meet[h] if nxt[h] >= 0 else np.inf
                nxt[g] = nxt[h]
                if nxt[h] >= 0:
                    prv[nxt[h]] = g
                left = 1.0 if prv[g] >= 0 and decreasing[prv[g]] else 0.0
                slope[g] = (left - (1.0 if decreasing[g] else 0.0)) / weight[g]
                mean[g] = ones[g] / weight[g]
            else:
                g = h
        score = _model(lam, weight, ones, score_sum, mean, slope, nxt, total, value, runs)
        if score == np.inf:
            continue
        log_weight = -0.5 * score
        if log_weight > best:
            scale = math.exp(best - log_weight) if best > -np.inf else 0.0
            for i in range(m):
                acc[i] *= scale
            norm *= scale
            best = log_weight
        w = math.exp(log_weight - best)
        norm += w
        lambdas[models] = lam
        models += 1
        g = 0
        while g >= 0:
            for i in range(g, last_member[g] + 1):
                acc[i] += w * runs[g]
            g = nxt[g]
    if models == 0:
        return fallback, np.zeros(1)
    return acc / norm, lambdas[:models]


def warm_up() -> None:
    """Compile (or load from the cache) the kernel's signature."""
    ensemble(np.ones(6), np.array([0.0, 1.0, 0.0, 1.0, 1.0, 0.0]), np.linspace(0.1, 0.9, 6))
