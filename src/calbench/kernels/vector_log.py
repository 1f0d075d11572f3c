"""Σ ln t in numba loops that the compiler turns into vector instructions (libm's log is one call per point):
the cross-entropy terms of the PL / PL3 maps (:mod:`calbench.kernels.piecewise`).

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


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"}, error_model="numpy")
def log_sum(t, exponent):
    """Σ ln t[i] for positive normal floats t (overwritten; ``exponent``: float64 work array of t's size)."""
    bits = t.view(np.int64)
    for i in range(t.size):  # t = m·2^k: m from the mantissa bits, halved (k + 1) where it is ≥ √2
        mantissa = (bits[i] & _MANTISSA) | _ONE_BITS
        above = np.int64(mantissa >= _SQRT2_BITS)
        exponent[i] = (bits[i] >> 52) - 1023 + above
        bits[i] = mantissa - (above << 52)
    total = 0.0
    for i in range(t.size):
        s = (t[i] - 1.0) / (t[i] + 1.0)
        z = s * s
        series = _ATANH[0]
        for c in _ATANH[1:]:
            series = series * z + c
        total += exponent[i] * _LN2_HI + (s * series + exponent[i] * _LN2_LO)
    return total


def warm_up() -> None:
    """Compile :func:`log_sum` for the float64 arrays that its callers pass."""
    log_sum(np.linspace(0.5, 2.0, 5), np.empty(5))
