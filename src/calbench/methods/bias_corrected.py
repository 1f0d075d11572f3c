"""Bias-corrected temperature scaling and vector scaling without biases (Alexandari, Kundaje & Shrikumar, ICML
2020, "Maximum likelihood with bias-corrected calibration is hard-to-beat at label shift adaptation", §3;
docs/label_shift.md).

* ``bcts``: σ(z / T + b), one temperature and a bias per class, fitted by log-loss (BCTS);
* ``nbvs``: σ(w ⊙ z), a scale per class and no bias (NBVS), fitted by log-loss.

Beside ``ts`` (σ(z / T)) and ``vs`` (σ(w ⊙ z + b)) they complete the paper's four calibrators: the class-wise
biases are what makes EM's prior estimate unbiased under label shift. Both are diagonal affine maps whose
parameters are tied (:mod:`calbench.solvers.tied_affine_fit`), started from temperature scaling's fit; they are
saved and exported to torch as the other affine maps.
"""

from __future__ import annotations

import warnings

import numpy as np

from calbench.convergence import NotConvergedWarning
from calbench.methods.base import Calibrator, MissingClass
from calbench.methods.linear_maps import AffineSoftmax
from calbench.methods.registry import register
from calbench.scores import Scores
from calbench.solvers.temperature_fit import fit_inverse_temperature
from calbench.solvers.tied_affine_fit import bcts_basis, fit_tied_affine, nbvs_basis


class TiedDiagonalMap(AffineSoftmax):
    """σ(diag(w) z + b) on logits with (w, b) in the range of the subclass's ``basis(k)`` (a
    :mod:`calbench.solvers.tied_affine_fit` basis), fitted by log-loss from temperature scaling's map (w = β·1,
    b = 0). Fitted attributes as :class:`AffineSoftmax`'s."""

    diagonal = True
    #: Unpenalised per-class parameters: a class without examples drives its own to ±∞.
    on_missing_class = MissingClass.REFUSE
    #: One fit; a grid (none by default) fits each point on its own.
    predict_grid = Calibrator.predict_grid
    not_converged_advice = ("A class separated from the others by its own logit drives its parameters to infinity: "
                            "use more calibration data or ts; otherwise raise max_iter.")

    def __init__(self, *, max_iter: int = 1000, tol: float = 1e-10):
        self.max_iter = max_iter
        self.tol = tol

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        x, k = self.features(scores), scores.num_classes
        start = np.concatenate([np.full(k, fit_inverse_temperature(x, y)), np.zeros(k)])
        weights, intercept, info = fit_tied_affine(x, y, self.basis(k), start, self.max_iter, self.tol)
        if not info["converged"]:
            warnings.warn(self._not_converged_message(info), NotConvergedWarning, stacklevel=2)
        self.penalty_centre_ = None
        self._set_fitted(weights, intercept, info, k)


@register("bcts")
class BiasCorrectedTemperatureScaling(TiedDiagonalMap):
    """BCTS: σ(z / T + b) (Alexandari et al. 2020 §3); ``temperature`` in the fitted summary."""

    basis = staticmethod(bcts_basis)

    def fitted_summary(self) -> dict:
        return {**super().fitted_summary(), "temperature": 1.0 / float(self.weights_[0, 0])}


@register("nbvs")
class NoBiasVectorScaling(TiedDiagonalMap):
    """NBVS: σ(w ⊙ z), vector scaling without biases (Alexandari et al. 2020 §3)."""

    basis = staticmethod(nbvs_basis)
