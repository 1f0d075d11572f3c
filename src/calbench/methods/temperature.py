"""Temperature scaling (Guo et al. 2017; LECE paper §2.5, Dirichlet paper §2): ĉ(z) = σ(z / T).

Fitted by minimising the calibration log-loss over β = 1/T (:mod:`calbench.solvers.temperature_fit`: a
safeguarded Newton iteration on the convex loss, compiled passes over the logits, which also give the
prediction's softmax).
On probabilities (synthetic sources, imported probabilities) it acts on ln p̂, which is the same map.
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Scalar
from calbench.methods.base import Calibrator
from calbench.methods.registry import register
from calbench.scores import Scores
from calbench.solvers.temperature_fit import fit_inverse_temperature, softmax_scaled


@register("ts")
class TemperatureScaling(Calibrator):
    """One temperature shared by all classes, fitted by log-loss; preserves the argmax.

    Fitted attribute ``temperature_`` (T > 1 softens, T < 1 sharpens).
    """

    _fitted_state = {"temperature_": Scalar(float, within="(0, inf)")}

    preserves_argmax = True
    composes_to_itself = True

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        self.temperature_ = 1.0 / fit_inverse_temperature(scores.logits, y)

    def transform(self, scores) -> Scores:
        scores = self._check_scores(scores)
        return scores.with_logits(scores.logits / self.temperature_)

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        """σ(z / T), by a compiled pass per row into the float64 output (no temporaries)."""
        return softmax_scaled(scores.logits, 1.0 / self.temperature_)

    def torch_stage(self):
        from calbench.methods.torch_stages import Temperature

        return Temperature(self.temperature_)

    def fitted_summary(self) -> dict:
        return {"temperature": self.temperature_}
