"""Ensemble temperature scaling (ETS), Mix-n-Match (Zhang, Kailkhura & Han, ICML 2020) Eq. 5.

T(z; w, t) = w₁·σ(z/t) + w₂·σ(z) + w₃·(1/L), with t > 0 and w on the simplex: a mixture of the
temperature-scaled, the uncalibrated and the uniform prediction (docs/methods_nonparametric.md).
Every component keeps the order of the classes, so the argmax is preserved whenever w₁ + w₂ > 0.

Options (docs/methods_nonparametric.md):

* ``loss``: ``"mse"`` — the squared error (1/(N·L)) Σ (p − e_y)², the paper's loss (§5.2, after
  Kumar et al.); ``"nll"`` — log-loss, the code's alternative.
* ``procedure``: ``"joint"`` — minimise the loss over (t, w) together, as Eq. 5's problem is stated;
  it starts from the two-stage solution, so its loss is never higher. ``"two_stage"`` — the authors'
  code: t alone by temperature scaling on ``loss`` (L-BFGS-B, t ∈ [0.05, 5], from 1), then w with t
  fixed (SLSQP on the simplex, from (1, 0, 0)).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import softmax

from calbench.methods.base import Calibrator
from calbench.methods.constraints import Interval, Options
from calbench.methods.registry import register
from calbench.scores import Scores

CODE_T_BOUNDS = (0.05, 5.0)
JOINT_T_BOUNDS = (1e-2, 1e2)
NLL_EPS = 1e-20
LOSSES = ("mse", "nll")
PROCEDURES = ("joint", "two_stage")


def ensemble(z: np.ndarray, t: float, w) -> np.ndarray:
    """Eq. 5 on logits ``z``: w₁σ(z/t) + w₂σ(z) + w₃/L."""
    return w[0] * softmax(z / t, axis=1) + w[1] * softmax(z, axis=1) + w[2] / z.shape[1]


def loss_value(probs: np.ndarray, onehot: np.ndarray, loss: str) -> float:
    if loss == "mse":
        return float(np.mean((probs - onehot) ** 2))
    return float(-np.mean(np.log(np.clip(np.sum(probs * onehot, axis=1), NLL_EPS, None))))


def _simplex_constraint():
    return ({"type": "eq", "fun": lambda w: np.sum(w) - 1.0, "jac": lambda w: np.ones_like(w)},)


@register("ets")
class EnsembleTemperatureScaling(Calibrator):
    """ETS with fitted ``temperature_`` and ``weights_`` (w₁ temperature-scaled, w₂ raw, w₃ uniform)."""

    preserves_argmax = True
    _parameter_constraints = {"loss": [Options(*LOSSES)], "procedure": [Options(*PROCEDURES)]}

    def __init__(self, loss: str = "mse", procedure: str = "joint"):
        self.loss = loss
        self.procedure = procedure

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss: expected one of {LOSSES} ('mse' is the paper's), got {self.loss!r}")
        if self.procedure not in PROCEDURES:
            raise ValueError(f"procedure: expected one of {PROCEDURES} ('two_stage' is the authors' code), "
                             f"got {self.procedure!r}")
        z = scores.logits
        onehot = np.zeros_like(z)
        onehot[np.arange(y.size), y] = 1.0

        def ts_loss(x):
            return loss_value(softmax(z / x[0], axis=1), onehot, self.loss)

        t = float(minimize(ts_loss, x0=[1.0], method="L-BFGS-B", bounds=[CODE_T_BOUNDS], tol=1e-12).x[0])
        weights = minimize(lambda w: loss_value(ensemble(z, t, w), onehot, self.loss), x0=[1.0, 0.0, 0.0],
                           method="SLSQP", bounds=[(0.0, 1.0)] * 3, constraints=_simplex_constraint(),
                           tol=1e-12).x
        if self.procedure == "joint":
            def joint_loss(x):
                return loss_value(ensemble(z, x[0], x[1:]), onehot, self.loss)

            start = np.concatenate([[t], weights])
            constraint = ({"type": "eq", "fun": lambda x: np.sum(x[1:]) - 1.0},)
            result = minimize(joint_loss, x0=start, method="SLSQP", bounds=[JOINT_T_BOUNDS] + [(0.0, 1.0)] * 3,
                              constraints=constraint, tol=1e-12)
            if result.fun <= joint_loss(start):
                t, weights = float(result.x[0]), result.x[1:]
        weights = np.clip(weights, 0.0, None)
        self.temperature_ = t
        self.weights_ = weights / weights.sum()

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return ensemble(scores.logits, self.temperature_, self.weights_)

    def fitted_summary(self) -> dict:
        return {"temperature": self.temperature_, "weights": [float(w) for w in self.weights_]}
