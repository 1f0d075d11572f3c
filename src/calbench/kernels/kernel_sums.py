"""KCal's Eq. 3 class sums for a block of query rows in one compiled pass (ImageNet-sized data).

For each query row i of a block, from the matrix product ``gram[i, j] = 2·q_i·s_j`` (float32, BLAS):
squared distances ``max(‖q_i‖² + ‖s_j‖² − gram[i, j], 0)`` in float64, support points of the query's own
group (cross-validation fold) left out, the nearest admissible distance δ_i, and the per-class sums
``mass[i, c] = Σ_{j in class c} exp((δ_i − sq_ij) / (d·h))`` over the support sorted by class. The numpy
path it replaces made six passes over [rows, support] arrays and exponentiated in float32.

The exponentials are :func:`calbench.kernels.vector_exp.exp_split`'s vectorised float64 exp (numba has no vector exp
without Intel's SVML); kernel values below 2⁻¹⁰²² (the smallest normal float) count as 0, and each row's nearest
point contributes 1.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from calbench.kernels.vector_exp import exp_split

#: Support points processed together per row: the segment's two float64 buffers stay in the L1 cache.
SEGMENT = 2048


@njit(cache=True, nogil=True, fastmath={"nnan", "nsz", "reassoc"})
def _nearest(gram_row, query_sq, support_sq, support_groups, query_group):  # pragma: no cover (compiled)
    """The smallest squared distance from one query row to a support point outside its group (+inf if none).

    ``min`` under a branch compiles to a vectorised reduction (0.9 ns per point); a select of +inf feeding a
    compare-and-select did not (3.8 ns: 2.4 of the 4 CPU-s of a leave-one-out evaluation at 25,000 rows)."""
    nearest = np.inf
    for j in range(gram_row.size):
        sq = query_sq + support_sq[j] - np.float64(gram_row[j])
        if support_groups[j] != query_group:
            nearest = min(nearest, sq)
    return max(nearest, 0.0)


@njit(cache=True, nogil=True, fastmath={"contract"})
def _exponents(gram_row, query_sq, support_sq, support_groups, query_group, nearest, scale,
               out):  # pragma: no cover (compiled)
    """Over one segment: (nearest − sq)·scale, −inf for the query's own group (its kernel value is then 0)."""
    for j in range(out.size):
        sq = query_sq + support_sq[j] - np.float64(gram_row[j])
        t = (nearest - (sq if sq > 0.0 else 0.0)) * scale
        out[j] = t if support_groups[j] != query_group else -np.inf


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _dot(poly, powers, lo, hi):  # pragma: no cover (compiled)
    """Σ poly[j]·powers[j] for lo ≤ j < hi."""
    total = 0.0
    for j in range(lo, hi):
        total += poly[j] * powers[j]
    return total


@njit(cache=True, nogil=True)
def _add_by_class(poly, powers, offset, class_ends, first_class, mass_row):  # pragma: no cover (compiled)
    """``mass_row[c] += Σ poly[j]·powers[j]`` over the segment's support points of each class c (support sorted by
    class: class c ends at ``class_ends[c]``; the segment starts at support point ``offset``, in ``first_class``).
    Returns the class of the segment's last point."""
    c = first_class
    lo = 0
    while lo < poly.size:
        while class_ends[c] <= offset + lo:
            c += 1
        hi = min(class_ends[c] - offset, poly.size)
        mass_row[c] += _dot(poly, powers, lo, hi)
        lo = hi
    return c


@njit(cache=True, nogil=True)
def class_mass(gram, query_sq, support_sq, support_groups, query_groups, class_ends, scale, query_labels,
               nearest, find_nearest, mass):  # pragma: no cover (compiled)
    """Eq. 3's kernel mass for each query row i, shifted by the row's nearest admissible point (module docstring):
    with ``query_labels`` empty, ``mass[i, c]`` for every class c; otherwise ``mass[i] = (mass of class
    query_labels[i], total mass)``. Rows without any admissible support point are left at 0.
    ``scale`` = 1 / (d·h); ``class_ends[c]``: end of class c in the support sorted by class; a query group
    that no support point has excludes nothing. ``nearest[i]``: the row's nearest squared distance, written
    with ``find_nearest`` and otherwise read (it does not depend on h: a bandwidth search finds it once)."""
    n = gram.shape[1]
    poly = np.empty(SEGMENT)
    scaled = np.empty(SEGMENT)
    every_class = query_labels.size == 0
    for i in range(gram.shape[0]):
        mass[i, :] = 0.0
        if find_nearest:
            nearest[i] = _nearest(gram[i], query_sq[i], support_sq, support_groups, query_groups[i])
        if nearest[i] == np.inf:
            continue
        c = 0
        if not every_class:
            label = query_labels[i]
            start = class_ends[label - 1] if label > 0 else 0
        for lo in range(0, n, SEGMENT):
            m = min(SEGMENT, n - lo)
            _exponents(gram[i, lo:lo + m], query_sq[i], support_sq[lo:lo + m], support_groups[lo:lo + m],
                       query_groups[i], nearest[i], scale, poly[:m])
            exp_split(poly[:m], scaled[:m])
            if every_class:
                c = _add_by_class(poly[:m], scaled[:m], lo, class_ends, c, mass[i])
            else:
                mass[i, 1] += _dot(poly, scaled, 0, m)
                mass[i, 0] += _dot(poly, scaled, min(max(start - lo, 0), m), min(max(class_ends[label] - lo, 0), m))


def warm_up() -> None:
    """Compile :func:`class_mass` as KCal calls it: every class's mass, and a label's mass with the total
    (nearest distances found, then read)."""
    rng = np.random.default_rng(0)
    support = rng.normal(size=(6, 2))
    query = support[:3].astype(np.float32)
    gram = 2.0 * query @ support.astype(np.float32).T
    query_sq, support_sq = np.einsum("ij,ij->i", support[:3], support[:3]), np.einsum("ij,ij->i", support, support)
    groups, class_ends = np.zeros(6, dtype=np.int64), np.array([3, 6], dtype=np.int64)
    nearest = np.empty(3)
    for labels, columns, find in ((np.empty(0, dtype=np.int64), 2, True), (np.zeros(3, dtype=np.int64), 2, False)):
        class_mass(gram, query_sq, support_sq, groups, np.full(3, -1, dtype=np.int64), class_ends, 0.5, labels,
                   nearest, find, np.empty((3, columns)))
