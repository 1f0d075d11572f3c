"""KCal's Eq. 3 class sums for a block of query rows in one compiled pass (issue 12).

For each query row i of a block, from the matrix product ``gram[i, j] = 2·q_i·s_j`` (float32, BLAS):
squared distances ``max(‖q_i‖² + ‖s_j‖² − gram[i, j], 0)`` in float64, support points of the query's own
group (cross-validation fold) left out, the nearest admissible distance δ_i, and the per-class sums
``mass[i, c] = Σ_{j in class c} exp((δ_i − sq_ij) / (d·h))`` over the support sorted by class. The numpy
path it replaces made six passes over [rows, support] arrays and exponentiated in float32.

``exp`` here is a vectorisable float64 exp (numba has no vector exp without Intel's SVML): u = t·log₂e is
split as k + f with k = round(u) (the 1.5·2⁵² rounding trick) and |f| ≤ ½, 2^f by its Taylor series to
degree 12 (relative error < 1e-15), 2^k by writing k + 1023 into the exponent bits. Values below 2⁻¹⁰²⁰
(u < −1020) count as 0, as float64 ``exp`` underflows there too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
#: 1.5·2⁵²: adding it rounds a double of magnitude < 2⁵¹ to an integer held in the low mantissa bits.
ROUND_MAGIC = 6755399441055744.0
ROUND_MAGIC_BITS = 0x4338000000000000
#: Values of exp below 2^UNDERFLOW count as 0.
UNDERFLOW = -1020.0
#: Support points processed together per row: three float64 buffers of this length stay in L1/L2.
SEGMENT = 2048


@njit(cache=True, nogil=True, fastmath={"nnan", "nsz"})
def _distances(gram_row, query_sq, support_sq, support_groups, query_group, out):  # pragma: no cover (compiled)
    """Squared distances of one query row (+inf for its own group) into ``out``; returns the nearest."""
    nearest = np.inf
    for j in range(out.size):
        sq = query_sq + support_sq[j] - np.float64(gram_row[j])
        sq = np.inf if support_groups[j] == query_group else (sq if sq > 0.0 else 0.0)
        out[j] = sq
        nearest = sq if sq < nearest else nearest
    return nearest


@njit(cache=True, nogil=True, fastmath={"contract"})
def _exp_parts(sq, nearest, scale, poly, scaled):  # pragma: no cover (compiled)
    """2^u for u = (nearest − sq)·scale in two factors: ``poly`` = 2^f (0 where u < UNDERFLOW) and
    ``scaled`` = round(u) + ROUND_MAGIC, whose bits :func:`_exp2_integer` turns into 2^round(u)."""
    for j in range(sq.size):
        u = (nearest - sq[j]) * scale
        keep = u >= UNDERFLOW
        u = u if keep else 0.0
        shifted = u + ROUND_MAGIC
        f = (u - (shifted - ROUND_MAGIC)) * LN2
        p = 1.0 + f * (1.0 + f * (1.0 / 2 + f * (1.0 / 6 + f * (1.0 / 24 + f * (1.0 / 120 + f * (
            1.0 / 720 + f * (1.0 / 5040 + f * (1.0 / 40320 + f * (1.0 / 362880 + f * (
                1.0 / 3628800 + f * (1.0 / 39916800 + f / 479001600)))))))))))
        poly[j] = p if keep else 0.0
        scaled[j] = shifted


@njit(cache=True, nogil=True)
def _exp2_integer(bits):  # pragma: no cover (compiled)
    """In place: the bits of round(u) + ROUND_MAGIC become those of 2^round(u)."""
    for j in range(bits.size):
        bits[j] = (bits[j] - ROUND_MAGIC_BITS + 1023) << 52


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _add_by_class(poly, powers, offset, class_ends, first_class, mass_row):  # pragma: no cover (compiled)
    """``mass_row[c] += Σ poly[j]·powers[j]`` over the segment's support points of each class c (support sorted by
    class: class c ends at ``class_ends[c]``; the segment starts at support point ``offset``, in ``first_class``).
    Returns the class of the segment's last point."""
    c = first_class
    lo = 0
    n = poly.size
    while lo < n:
        while class_ends[c] <= offset + lo:
            c += 1
        hi = min(class_ends[c] - offset, n)
        total = 0.0
        for j in range(lo, hi):
            total += poly[j] * powers[j]
        mass_row[c] += total
        lo = hi
    return c


@njit(cache=True, nogil=True)
def class_mass(gram, query_sq, support_sq, support_groups, query_groups, class_ends, scale, mass):  # pragma: no cover
    """``mass[i, c]``: Eq. 3's kernel mass of class c for query row i, shifted by the row's nearest point
    (see the module docstring); rows without any admissible support point are left at 0.
    ``scale`` = log₂e / (d·h); ``class_ends[c]``: end of class c in the support sorted by class; a query group
    that no support point has excludes nothing."""
    n = gram.shape[1]
    sq = np.empty(n)
    poly = np.empty(SEGMENT)
    scaled = np.empty(SEGMENT)
    bits = scaled.view(np.int64)
    for i in range(gram.shape[0]):
        mass[i, :] = 0.0
        nearest = _distances(gram[i], query_sq[i], support_sq, support_groups, query_groups[i], sq)
        if nearest == np.inf:
            continue
        c = 0
        for lo in range(0, n, SEGMENT):
            m = min(SEGMENT, n - lo)
            _exp_parts(sq[lo:lo + m], nearest, scale, poly[:m], scaled[:m])
            _exp2_integer(bits[:m])
            c = _add_by_class(poly[:m], scaled[:m], lo, class_ends, c, mass[i])
