"""ENIR, an ensemble of near-isotonic regressions (Naeini & Cooper, ICDM 2016; the authors' ``enir`` code).

The calibration scores are sorted and tied scores pooled; the near-isotonic regression path of the targets is traced
from the data (λ = 0) to the isotonic fit, each fusion point of the path is a model scored by BIC, and the models'
smoothed values are averaged with weights exp(−BIC/2) (:func:`calbench.kernels.near_isotonic.ensemble`). Averaging
commutes with the linear interpolation by which every model maps a score (between the distinct calibration scores;
the end value outside them), so the fitted map is one piecewise-linear function: the averaged values at the distinct
calibration scores. Scores within one run of equal targets always share a value, so only each run's first and last
score are kept as knots.
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Array, Scalar
from calbench.kernels.near_isotonic import ensemble
from calbench.maps1d.maps import check_binary


class NearIsotonicEnsemble:
    """ENIR on one binary problem: the map interpolates ``knots_y_`` (not monotone in general) at ``knots_x_``."""

    _fitted_state = {"knots_x_": Array(float, ("n",)), "knots_y_": Array(float, ("n",), within="[0, 1]"),
                     "models_": Scalar(int)}

    def fit(self, p, y) -> "NearIsotonicEnsemble":
        p, y = check_binary(p, y)
        scores, inverse, counts = np.unique(p, return_inverse=True, return_counts=True)
        ones = np.bincount(inverse, y, minlength=scores.size)
        mean = ones / counts
        starts = np.flatnonzero(np.concatenate([[True], mean[1:] != mean[:-1]]))
        ends = np.append(starts[1:], scores.size) - 1
        values, lambdas = ensemble(np.add.reduceat(counts.astype(np.float64), starts),
                                        np.add.reduceat(ones, starts), np.add.reduceat(scores * counts, starts))
        two = ends > starts
        x = np.concatenate([scores[starts], scores[ends[two]]])
        order = np.argsort(x, kind="stable")
        self.knots_x_, self.knots_y_ = x[order], np.concatenate([values, values[two]])[order]
        self.models_ = int(lambdas.size)
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        return np.clip(np.interp(p, self.knots_x_, self.knots_y_), 0.0, 1.0)

    def summary(self) -> dict:
        return {"models": int(self.models_), "knots": int(self.knots_x_.size)}
