"""Σ ln t and Σ w ln t in numba loops that the compiler turns into vector instructions (libm's log is one call per
point): the cross-entropy terms of the PL / PL3 maps (:mod:`calbench.kernels.piecewise`) and the log-likelihood of
the label-shift EM (:mod:`calbench.kernels.label_shift`).

t = m·2^k with m ∈ [√½, √2) (k and m from the bits of t), ln t = k·ln 2 + 2 atanh(s), s = (m − 1)/(m + 1),
|s| ≤ 0.172: the odd series of atanh to s^19 (remainder 0.172^21 / 21 < 3e-17 relative), ln 2 in two parts.
Within 2 ulps of libm's log (tests/unit/test_maps1d.py).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_ONE_BITS = np.array([1.0]).view(np.int64)[0]
_SQRT2_BITS = np.array([math.sqrt(2.0)]).view(np.int64)[0]
_MANTISSA = (1 << 52) - 1
#: 2 / (2j + 1), j = 9 … 0: ln m = s·Σ_j (2 / (2j + 1)) s^{2j}, evaluated by Horner's rule in s².
_ATANH = np.array([2.0 / (2 * j + 1) for j in range(9, -1, -1)])


@njit(cache=True, nogil=True, error_model="numpy")
def _reduce(t, exponent):
    """t = m·2^k in place: ``t`` ← m ∈ [√½, √2), ``exponent`` ← k."""
    bits = t.view(np.int64)
    for i in range(t.size):  # m from the mantissa bits, halved (k + 1) where it is ≥ √2
        mantissa = (bits[i] & _MANTISSA) | _ONE_BITS
        above = np.int64(mantissa >= _SQRT2_BITS)
        exponent[i] = (bits[i] >> 52) - 1023 + above
        bits[i] = mantissa - (above << 52)


@njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy", inline="always")
def _ln(mantissa, exponent):
    """ln(m·2^k) for m ∈ [√½, √2) (:func:`_reduce`'s outputs)."""
    s = (mantissa - 1.0) / (mantissa + 1.0)
    z = s * s
    series = _ATANH[0]
    for c in _ATANH[1:]:
        series = series * z + c
    return exponent * _LN2_HI + (s * series + exponent * _LN2_LO)


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"}, error_model="numpy")
def log_sum(t, exponent):
    """Σ ln t[i] for positive normal floats t (overwritten; ``exponent``: float64 work array of t's size)."""
    _reduce(t, exponent)
    total = 0.0
    for i in range(t.size):
        total += _ln(t[i], exponent[i])
    return total


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"}, error_model="numpy")
def log_dot(t, weights, exponent):
    """Σ weights[i] · ln t[i] for positive normal floats t (overwritten; ``exponent`` as for :func:`log_sum`)."""
    _reduce(t, exponent)
    total = 0.0
    for i in range(t.size):
        total += weights[i] * _ln(t[i], exponent[i])
    return total


def warm_up() -> None:
    """Compile :func:`log_sum` and :func:`log_dot` for the float64 arrays that their callers pass."""
    log_sum(np.linspace(0.5, 2.0, 5), np.empty(5))
    log_dot(np.linspace(0.5, 2.0, 5), np.ones(5), np.empty(5))
