"""One-vs-rest composition of binary calibration maps (LECE paper §2.5; Dirichlet paper §4.1).

Class j's map is fitted on the pairs (p̂_j, 1[y = j]) of all calibration instances and applied to
column j; the calibrated columns are renormalised to sum to one. A row whose calibrated columns are
all zero (possible with binning or isotonic maps) becomes uniform, since no class is preferred.
"""

from __future__ import annotations

import numpy as np

from calbench.methods.base import Calibrator, MissingClass
from calbench.parallel import thread_map
from calbench.scores import Scores


def renormalise(q: np.ndarray) -> np.ndarray:
    """Rows of ``q`` (non-negative) divided by their sums; all-zero rows become uniform."""
    q = np.clip(q, 0.0, None)
    total = q.sum(axis=1, keepdims=True)
    uniform = np.full_like(q, 1.0 / q.shape[1])
    return np.where(total > 0, q / np.where(total > 0, total, 1.0), uniform)


class OneVsRest(Calibrator):
    """Base of one-vs-rest calibrators: subclasses define the binary map of one column.

    ``_fit_binary(p, hits)`` returns the fitted map of one class (any object) from probabilities
    ``p`` [N] and binary targets ``hits`` [N]; ``_apply_binary(fitted, p)`` evaluates it.
    """

    #: A class without calibration examples gets a map fitted on all-zero targets: refused.
    on_missing_class = MissingClass.REFUSE

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        """The classes' maps in threads (:func:`calbench.parallel.thread_map`): their fits are independent, and
        the numpy and compiled (numba, ``nogil``) work of one runs while another holds the GIL."""
        probs = scores.probs
        self.binary_maps_ = thread_map(lambda j: self._fit_binary(probs[:, j], (y == j).astype(np.float64)),
                                       range(probs.shape[1]))

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        probs = scores.probs
        columns = [self._apply_binary(fitted, probs[:, j]) for j, fitted in enumerate(self.binary_maps_)]
        return renormalise(np.column_stack(columns))

    def _fit_binary(self, p: np.ndarray, hits: np.ndarray):
        raise NotImplementedError

    def _apply_binary(self, fitted, p: np.ndarray) -> np.ndarray:
        raise NotImplementedError
