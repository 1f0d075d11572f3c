"""Bin assignment for ECE-type estimators, vectorised over classes.

Conventions (fixed here, used by every binned metric):

* ``ew`` (equal width): bin ``b`` holds ``[b/B, (b+1)/B)``; a value of exactly 1.0 falls in the last
  bin and 0.0 in the first. (The Dirichlet authors' code uses ``(l, u]`` intervals; the two differ
  only for values exactly on an inner edge.)
* ``em`` (equal mass / equal size, LECE paper §4.2.3): sort the values and split the sorted
  sequence into ``B`` consecutive chunks whose sizes differ by at most one, the first ``n mod B``
  chunks one larger (as ``numpy.array_split``). Tied values may fall in different bins.
"""

from __future__ import annotations

import numpy as np


def equal_width_bins(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index of each value in ``[0, 1]`` (any shape) for ``n_bins`` equal-width bins."""
    return np.minimum((np.asarray(values) * n_bins).astype(np.int64), n_bins - 1).clip(0)


def equal_mass_sizes(n: int, n_bins: int) -> np.ndarray:
    """Sizes of ``n_bins`` equal-mass bins of ``n`` sorted values: the first ``n mod n_bins`` one larger."""
    sizes = np.full(n_bins, n // n_bins)
    sizes[: n % n_bins] += 1
    return sizes


def equal_mass_bins(values: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index of each value for ``n_bins`` equal-mass bins, per column of a 2-D array.

    For ``values`` of shape ``[N]`` or ``[N, C]`` (each column binned on its own), returns int64
    indices of the same shape.
    """
    values = np.asarray(values)
    n = values.shape[0]
    bin_of_rank = np.repeat(np.arange(n_bins), equal_mass_sizes(n, n_bins))
    order = np.argsort(values, axis=0, kind="stable")
    bins = np.empty(values.shape, dtype=np.int64)
    np.put_along_axis(bins, order, bin_of_rank.reshape((n,) + (1,) * (values.ndim - 1)), axis=0)
    return bins


def assign_bins(values: np.ndarray, n_bins: int, scheme: str) -> np.ndarray:
    """Dispatch on the scheme name ``"ew"`` or ``"em"``."""
    if scheme == "ew":
        return equal_width_bins(values, n_bins)
    if scheme == "em":
        return equal_mass_bins(values, n_bins)
    raise ValueError(f"binning scheme must be 'ew' (equal width) or 'em' (equal mass), got {scheme!r}")


def bin_sums(bins: np.ndarray, n_bins: int, *arrays: np.ndarray) -> list[np.ndarray]:
    """Per-bin counts and sums of ``arrays``, for ``bins`` of shape ``[N]`` or ``[N, C]``.

    Returns ``[counts, sum_0, sum_1, ...]``, each of shape ``[n_bins]`` or ``[C, n_bins]``.
    """
    if bins.ndim == 1:
        return [np.bincount(bins, minlength=n_bins).astype(np.float64)] + [
            np.bincount(bins, weights=a, minlength=n_bins) for a in arrays
        ]
    n_cols = bins.shape[1]
    flat = (bins + n_bins * np.arange(n_cols)).ravel()
    size = n_bins * n_cols
    out = [np.bincount(flat, minlength=size).astype(np.float64)]
    out += [np.bincount(flat, weights=np.asarray(a, dtype=np.float64).ravel(), minlength=size) for a in arrays]
    return [o.reshape(n_cols, n_bins) for o in out]
