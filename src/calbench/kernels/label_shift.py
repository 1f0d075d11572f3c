"""Compiled kernels of label-shift adaptation on a set's bootstrap redraws (docs/label_shift.md), over each redraw's
rows of non-zero weight only (about 15–40 % of a redraw's row weights are non-zero): :func:`em_step`, one EM step
of Saerens, Latinne & Decaestecker (2002, Eqs. 2.9–2.10) for many row-weighted sets at once (the EM of
:func:`calbench.metrics.label_shift.em_priors`), and :func:`reweighted_rows`, rows re-weighted by their redraw's
class weights (Saerens et al. 2002, Eq. 2.4; the adapted per-row metrics of
:mod:`calbench.metrics.definitions_label_shift`).

For set a with row weights w (sparse, CSR: ``indptr``, ``cols``, ``vals``), s = p / π_s and priors π: the mixture
mᵢ = sᵢ · π, the step π ⊙ Σᵢ wᵢ sᵢ / mᵢ / Σ w and the weighted mean log-likelihood Σᵢ wᵢ ln max(mᵢ, 1e-300) / Σ w,
in one pass over the set's rows (the k-vector sᵢ read once for both sums; the k × n table s stays in cache).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from calbench.kernels.vector_log import log_dot


@njit(cache=True, nogil=True, error_model="numpy")
def em_step(scaled, indptr, cols, vals, totals, sets, priors, out, loglik, likelihood):
    """For each a: ``out[a]`` ← the EM step from ``priors[a]`` of set ``sets[a]``; ``loglik[a]`` ← its weighted mean
    log-likelihood at ``priors[a]`` where ``likelihood`` (else untouched). ``totals``: each set's weight sum. The
    logarithms run after each set's pass, as one vectorised loop (:func:`calbench.kernels.vector_log.log_dot`)."""
    k = scaled.shape[1]
    sums = np.empty(k)
    longest = np.max(indptr[1:] - indptr[:-1]) if sets.size else 0
    mixes, work = np.empty(longest), np.empty(longest)
    for a in range(sets.size):
        r = sets[a]
        start, stop = indptr[r], indptr[r + 1]
        sums[:] = 0.0
        for t in range(start, stop):
            i = cols[t]
            mix = 0.0
            for j in range(k):
                mix += scaled[i, j] * priors[a, j]
            ratio = vals[t] / mix
            for j in range(k):
                sums[j] += ratio * scaled[i, j]
            mixes[t - start] = max(mix, 1e-300)
        for j in range(k):
            out[a, j] = priors[a, j] * sums[j] / totals[r]
        if likelihood:
            size = stop - start
            loglik[a] = log_dot(mixes[:size], vals[start:stop], work[:size]) / totals[r]


@njit(cache=True, nogil=True, error_model="numpy")
def reweighted_rows(probs, ratios, sets, rows, out):
    """``out[t]`` ← ``probs[rows[t]] ⊙ ratios[sets[t]]`` renormalised, or ``probs[rows[t]]`` where the ratios zero the
    row (:func:`calbench.metrics.label_shift.reweight` on each (redraw, row) pair, without the gathered copies)."""
    k = probs.shape[1]
    for t in range(sets.size):
        r, i = sets[t], rows[t]
        total = 0.0
        for j in range(k):
            out[t, j] = probs[i, j] * ratios[r, j]
            total += out[t, j]
        for j in range(k):
            out[t, j] = out[t, j] / total if total > 0 else probs[i, j]


def sparse_rows(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr [R + 1], column of each non-zero [nnz], its weight [nnz]) of row weights ``weights`` [R, n]."""
    sets, cols = np.nonzero(weights)
    indptr = np.zeros(weights.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(sets, minlength=weights.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int64), weights[sets, cols]


def warm_up() -> None:
    """Compile (or load from the cache) the kernels for float64 tables and int64 indices."""
    scaled, weights = np.array([[1.0, 2.0], [3.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 2.0]])
    priors, out, loglik = np.full((2, 2), 0.5), np.empty((2, 2)), np.empty(2)
    em_step(scaled, *sparse_rows(weights), weights.sum(axis=1), np.arange(2), priors, out, loglik, True)
    reweighted_rows(scaled, priors, np.array([0, 1]), np.array([1, 0]), out)
