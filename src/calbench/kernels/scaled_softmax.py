"""Compiled row passes of temperature scaling (:mod:`calbench.solvers.temperature_fit`): the row moments of
exp(β z) that its Newton iteration needs and the prediction σ(β z), one pass per row while the row is in cache
(per row its max shift and :func:`calbench.kernels.vector_exp.shifted_exp`'s vectorised exp).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from calbench.kernels.vector_exp import offset_max, shifted_exp


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def moments_block(start, stop, beta, z, top, moments):
    """Columns start..stop of ``moments`` ([order + 1, n]): per row Σ_j exp(β d_ij)·d_ij^p, d = z − row max,
    in one pass over the row (it stays in cache: the exp, then one multiply-add per moment and logit)."""
    classes, order = z.shape[1], moments.shape[0] - 1
    weight, scale, no_offset = np.empty(classes), np.empty(classes), np.zeros(classes)
    for i in range(start, stop):
        row, shift = z[i], top[i]
        moments[0, i] = shifted_exp(row, no_offset, shift, beta, weight, scale)
        for p in range(1, order + 1):
            total = 0.0
            for j in range(classes):
                weight[j] *= row[j] - shift
                total += weight[j]
            moments[p, i] = total


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def softmax_block(start, stop, beta, z, out):
    """Rows start..stop of ``out`` ← σ(β z) (one pass per row, in cache)."""
    classes = z.shape[1]
    scale, no_offset = np.empty(classes), np.zeros(classes)
    for i in range(start, stop):
        row, probs = z[i], out[i]
        total = shifted_exp(row, no_offset, offset_max(row, no_offset), beta, probs, scale)
        for j in range(classes):
            probs[j] /= total


def warm_up() -> None:
    """Compile both passes for float64 logits."""
    z = np.random.default_rng(0).normal(size=(4, 3))
    moments_block(0, 4, 1.0, z, z.max(axis=1), np.empty((8, 4)))
    softmax_block(0, 4, 1.0, z, np.empty_like(z))
