"""Compiled row passes of the affine-softmax solver (:mod:`calbench.solvers.affine_softmax_fit`): what follows the
BLAS product s = x Wᵀ in an objective evaluation, a truncated-Newton step's probabilities, a Hessian-vector
product and the calibrators' predictions (:mod:`calbench.methods.linear_maps`), one pass per row while the row
is in cache.

numpy spent 5–7 passes over the n × k array there (the intercept, row max, exp, row sum, division, the label's
entry, column sums), and its float64 exp is not vectorised on machines without AVX-512; here the exp is
:func:`calbench.kernels.vector_exp.exp_split`'s, over blocks of rows
(:data:`BLOCK_ENTRIES`). On one CIFAR-100 fold (4,000 × 100) an objective evaluation went from
6.7 to 4.9 ms, of which the two products are ~4 ms. The kernels take float64 or float32 rows (truncated Newton's
Hessian products run in float32); the exp and the sums are float64 either way.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from calbench.kernels.vector_exp import exp_split, offset_max

#: Rows go through the exp in blocks of about this many entries: a row of 10 classes alone is too short for the
#: compiled exp's vector loop (its set-up and remainder dominate), so a block's shifted scores are laid end to end
#: and exponentiated in one loop. 4,000 × 10 (a CIFAR-10 fold): 0.28 ms a residual pass, against 0.73 row by row;
#: rows of ≥ 512 entries go one at a time.
BLOCK_ENTRIES = 512


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _shifted_block(scores, intercept, start, stop, buffer, scale, tops):
    """Rows ``start:stop`` of ``scores`` + b, each less its max (into ``tops``), end to end in ``buffer``, then
    exponentiated in place in two factors (:func:`exp_split`: exp = buffer · scale)."""
    k = scores.shape[1]
    for r in range(stop - start):
        row = scores[start + r]
        top = offset_max(row, intercept)
        tops[r] = top
        for j in range(k):
            buffer[r * k + j] = row[j] + intercept[j] - top
    exp_split(buffer[: (stop - start) * k], scale[: (stop - start) * k])


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def residual_pass(scores, intercept, y, column_sums):
    """The log-loss part of :func:`~calbench.solvers.affine_objective.objective` (Dirichlet paper Eq. 7's layer):
    each row s of ``scores`` (x Wᵀ, without b) becomes the residual σ(s + b) − onehot(y) in place, its column
    sums are added into ``column_sums`` (float64, [k]), and the return value is Σᵢ logsumexp(sᵢ + b) − (sᵢ + b)_yᵢ,
    the summed log-loss."""
    n, k = scores.shape
    block = max(1, BLOCK_ENTRIES // k)
    buffer, scale, tops = np.empty(block * k), np.empty(block * k), np.empty(block)
    loss = 0.0
    for start in range(0, n, block):
        stop = min(n, start + block)
        _shifted_block(scores, intercept, start, stop, buffer, scale, tops)
        for r in range(stop - start):
            i = start + r
            row, label = scores[i], y[i]
            total = 0.0
            for j in range(k):
                buffer[r * k + j] *= scale[r * k + j]
                total += buffer[r * k + j]
            loss += tops[r] + math.log(total) - (row[label] + intercept[label])
            inverse = 1.0 / total
            for j in range(k):
                row[j] = buffer[r * k + j] * inverse
                column_sums[j] += row[j]
            row[label] -= 1.0
            column_sums[label] -= 1.0
    return loss


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def softmax_pass(scores, intercept):
    """Each row s of ``scores`` (x Wᵀ, without b) ← σ(s + b), in place."""
    n, k = scores.shape
    block = max(1, BLOCK_ENTRIES // k)
    buffer, scale, tops = np.empty(block * k), np.empty(block * k), np.empty(block)
    for start in range(0, n, block):
        stop = min(n, start + block)
        _shifted_block(scores, intercept, start, stop, buffer, scale, tops)
        for r in range(stop - start):
            row = scores[start + r]
            total = 0.0
            for j in range(k):
                buffer[r * k + j] *= scale[r * k + j]
                total += buffer[r * k + j]
            inverse = 1.0 / total
            for j in range(k):
                row[j] = buffer[r * k + j] * inverse


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def hessian_vector_pass(dz, shift, probs, column_sums):
    """The rows of a Hessian-vector product's log-loss term: with the scores' change d = dz + c (``dz`` = x Vᵀ,
    ``shift`` = c) and p = ``probs``, ``dz`` ← p ⊙ (d − p·d) in place (the product of the softmax's Jacobian
    diag(p) − p pᵀ with d), its column sums added into ``column_sums`` (float64, [k])."""
    k = dz.shape[1]
    for i in range(dz.shape[0]):
        row, p = dz[i], probs[i]
        mean = 0.0
        for j in range(k):
            mean += p[j] * (row[j] + shift[j])
        for j in range(k):
            row[j] = p[j] * (row[j] + shift[j] - mean)
            column_sums[j] += row[j]


def warm_up() -> None:
    """Compile the row passes for the solver's types: float64 objective and softmax, float32 Hessian products."""
    rng = np.random.default_rng(0)
    scores, intercept = rng.normal(size=(4, 3)), np.zeros(3)
    residual_pass(scores.copy(), intercept, np.arange(4, dtype=np.int64) % 3, np.zeros(3))
    softmax_pass(scores.copy(), intercept)
    single = scores.astype(np.float32)
    hessian_vector_pass(single.copy(), np.zeros(3, dtype=np.float32), single, np.zeros(3))
