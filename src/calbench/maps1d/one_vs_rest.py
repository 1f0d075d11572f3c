"""One-vs-rest composition of binary calibration maps (LECE paper §2.5; Dirichlet paper §4.1).

Class j's map is fitted on the pairs (p̂_j, 1[y = j]) of all calibration instances and applied to column j; the
calibrated columns are renormalised to sum to one. A row whose calibrated columns are all zero (possible with
binning or isotonic maps) becomes uniform, since no class is preferred. The calibrators built this way are the
subclasses of :class:`calbench.methods.binary_calibrators.OneVsRest`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from calbench.parallel import thread_map


def renormalise(q: np.ndarray) -> np.ndarray:
    """Rows of ``q`` (non-negative) divided by their sums; all-zero rows become uniform."""
    q = np.clip(q, 0.0, None)
    total = q.sum(axis=1, keepdims=True)
    uniform = np.full_like(q, 1.0 / q.shape[1])
    return np.where(total > 0, q / np.where(total > 0, total, 1.0), uniform)


def fit_per_class(fit_binary: Callable[[np.ndarray, np.ndarray], object], probs: np.ndarray,
                  y: np.ndarray) -> list:
    """The map of every class j, ``fit_binary(p̂_j, 1[y = j])``, fitted in threads
    (:func:`calbench.parallel.thread_map`): the fits are independent, and the numpy and compiled (numba,
    ``nogil``) work of one runs while another holds the GIL."""
    return thread_map(lambda j: fit_binary(probs[:, j], (y == j).astype(np.float64)), range(probs.shape[1]))


def predict_per_class(apply_binary: Callable[[object, np.ndarray], np.ndarray], maps: list,
                      probs: np.ndarray) -> np.ndarray:
    """Column j through ``apply_binary(maps[j], p̂_j)``, the rows renormalised (:func:`renormalise`)."""
    return renormalise(np.column_stack([apply_binary(fitted, probs[:, j]) for j, fitted in enumerate(maps)]))
