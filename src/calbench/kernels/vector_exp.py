"""exp in a numba loop that the compiler turns into vector instructions (libm's exp is one call per point,
2.5 × slower): shared by the compiled kernels (PL / PL3 maps, temperature scaling, the affine-softmax passes,
KCal's class sums), with the one shifted softmax numerator :func:`shifted_exp` of the softmax kernels.

exp(t) = 2^k·e^r with k = round(t / ln 2) and |r| ≤ ln 2 / 2: ln 2 in two parts (r exact to ~1e-19), the
constant 1.5·2^52 whose addition rounds t / ln 2 to an integer kept in its low bits, Taylor terms of e^r to
r^12 (remainder 0.35^13 / 13! < 2e-16 relative), and 2^k written into the exponent field of a float.

numba's on-disk cache of a kernel checks only the kernel's own file: after editing this module, delete the
callers' cached kernels (``src/calbench/**/__pycache__/*.nbi``, ``*.nbc``), or they keep the old exp.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
_ROUND = 6755399441055744.0
_ROUND_BITS = np.array([_ROUND]).view(np.int64)[0]
_TAYLOR = np.array([1.0 / math.factorial(i) for i in range(12, -1, -1)])


@njit(cache=True, nogil=True, fastmath={"contract"})
def exp_split(t, scale):
    """exp(t) as two factors, in place: afterwards exp(t_in[i]) = t[i]·scale[i] (``scale``: an array of t's
    size; it holds 2^k). Arguments are clamped to [−746, 708]; below −1022.5·ln 2 ≈ −708.7 (true values under
    2^−1022, the smallest normal float) the result is 0. Callers multiply the factors in their next loop."""
    for i in range(t.size):
        x = min(max(t[i], -746.0), 708.0)
        rounded = x * _LOG2E + _ROUND
        k = rounded - _ROUND
        r = (x - k * _LN2_HI) - k * _LN2_LO
        e = _TAYLOR[0]
        for c in _TAYLOR[1:]:
            e = e * r + c
        t[i] = e
        scale[i] = rounded
    bits = scale.view(np.int64)
    for i in range(t.size):  # 2^k from the bits of its exponent field (0 below the normal range)
        bits[i] = max(bits[i] - _ROUND_BITS + 1023, 0) << 52


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def exp_sum(t, scale):
    """``t`` ← exp(t) in place (``scale``: work array of t's size, as for :func:`exp_split`); returns Σ exp(t):
    a softmax row's numerators and normaliser in one call."""
    exp_split(t, scale)
    total = 0.0
    for i in range(t.size):
        t[i] *= scale[i]
        total += t[i]
    return total


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def offset_max(row, offset):
    """max_j (row[j] + offset[j]): the shift that keeps :func:`shifted_exp`'s exponents ≤ 0."""
    top = row[0] + offset[0]
    for j in range(row.size):
        top = max(top, row[j] + offset[j])
    return top


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def shifted_exp(row, offset, shift, beta, out, scale):
    """``out`` ← exp(β (row + offset − shift)) (``scale``: float64 work of the row's size); returns Σ out. With
    ``shift`` = :func:`offset_max`, σ(β (row + offset)) = out / Σ and its logsumexp = β shift + ln Σ."""
    for j in range(row.size):
        out[j] = beta * (row[j] + offset[j] - shift)
    return exp_sum(out, scale)


def warm_up() -> None:
    """Compile the kernels of this module for the float64 rows that their callers pass."""
    row = np.linspace(-3.0, 0.0, 5)
    scale = np.empty(5)
    exp_split(row.copy(), scale)
    exp_sum(row.copy(), scale)
    shifted_exp(row, np.zeros(5), offset_max(row, np.zeros(5)), 1.0, np.empty(5), scale)
