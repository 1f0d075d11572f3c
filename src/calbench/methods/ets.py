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
from scipy.special import softmax

from calbench.fitted_state import Array, Scalar
from calbench.methods.base import Calibrator
from calbench.methods.constraints import Options
from calbench.methods.registry import register
from calbench.metrics.proper import ETS_LOSS_EPS
from calbench.scores import Scores

CODE_T_BOUNDS = (0.05, 5.0)
JOINT_T_BOUNDS = (1e-2, 1e2)
LOSSES = ("mse", "nll")
PROCEDURES = ("joint", "two_stage")


def ensemble(z: np.ndarray, t: float, w) -> np.ndarray:
    """Eq. 5 on logits ``z``: w₁σ(z/t) + w₂σ(z) + w₃/L."""
    return w[0] * softmax(z / t, axis=1) + w[1] * softmax(z, axis=1) + w[2] / z.shape[1]


def loss_value(probs: np.ndarray, onehot: np.ndarray, loss: str) -> float:
    if loss == "mse":
        return float(np.mean((probs - onehot) ** 2))
    return float(-np.mean(np.log(np.clip(np.sum(probs * onehot, axis=1), ETS_LOSS_EPS, None))))


class EnsembleLoss:
    """``loss_value(ensemble(z, t, w), onehot, loss)`` from per-t sums, without forming the n × k ensemble.

    With A = σ(z/t), B = σ(z) and p = w₁A + w₂B + w₃/L: Σ(p − e_y)² = Σp² − 2Σp_y + N, and Σp² needs only
    ΣA², ΣA·B (ΣB², ΣA = ΣB = N fixed); the log-loss needs only p_y. So every t costs one softmax, cached,
    and every w is O(N): the weight and joint searches (finite differences in w) stop recomputing both
    softmaxes for each trial point. Equal to the direct formula up to rounding (tested)."""

    def __init__(self, z: np.ndarray, y: np.ndarray, loss: str):
        self.z, self.y, self.loss = z, y, loss
        self.rows = np.arange(y.size)
        self.raw = softmax(z, axis=1)
        self.raw_y, self.raw_sq = self.raw[self.rows, y], float(np.sum(self.raw**2))
        self._stats: dict[float, tuple] = {}

    def stats(self, t: float) -> tuple:
        """(A_y per row, ΣA², ΣA·B) of A = σ(z/t)."""
        if t not in self._stats:
            scaled = softmax(self.z / t, axis=1)
            self._stats[t] = (scaled[self.rows, self.y], float(np.sum(scaled**2)), float(np.sum(scaled * self.raw)))
        return self._stats[t]

    def __call__(self, t: float, w) -> float:
        (a_y, a_sq, a_raw), (n, k) = self.stats(float(t)), self.z.shape
        w1, w2, w3 = (float(v) for v in w)
        p_y = w1 * a_y + w2 * self.raw_y + w3 / k
        if self.loss == "nll":
            return float(-np.mean(np.log(np.clip(p_y, ETS_LOSS_EPS, None))))
        sum_sq = (w1**2 * a_sq + w2**2 * self.raw_sq + w3**2 * n / k + 2 * w1 * w2 * a_raw
                  + 2 * (w1 + w2) * w3 * n / k)
        return float((sum_sq - 2 * np.sum(p_y) + n) / (n * k))


def _simplex_constraint():
    return ({"type": "eq", "fun": lambda w: np.sum(w) - 1.0, "jac": lambda w: np.ones_like(w)},)


@register("ets")
class EnsembleTemperatureScaling(Calibrator):
    """Ensemble temperature scaling (Mix-n-Match paper Eq. 5): a fitted mix of the temperature-scaled, the raw
    and the uniform probabilities; preserves the argmax. Fitted ``temperature_`` and ``weights_`` (w₁
    temperature-scaled, w₂ raw, w₃ uniform)."""

    _fitted_state = {"temperature_": Scalar(float, within="(0, inf)"), "weights_": Array(float, (3,), within="[0, 1]")}

    preserves_argmax = True
    _parameter_constraints = {"loss": [Options(*LOSSES)], "procedure": [Options(*PROCEDURES)]}

    def __init__(self, *, loss: str = "mse", procedure: str = "joint"):
        self.loss = loss
        self.procedure = procedure

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss: expected one of {LOSSES} ('mse' is the paper's), got {self.loss!r}")
        if self.procedure not in PROCEDURES:
            raise ValueError(f"procedure: expected one of {PROCEDURES} ('two_stage' is the authors' code), "
                             f"got {self.procedure!r}")
        from scipy.optimize import minimize  # lazy: calibrate jobs of other methods skip its import

        loss = EnsembleLoss(scores.logits, y, self.loss)
        t = float(minimize(lambda x: loss(x[0], (1.0, 0.0, 0.0)), x0=[1.0], method="L-BFGS-B",
                           bounds=[CODE_T_BOUNDS], tol=1e-12).x[0])
        weights = minimize(lambda w: loss(t, w), x0=[1.0, 0.0, 0.0], method="SLSQP", bounds=[(0.0, 1.0)] * 3,
                           constraints=_simplex_constraint(), tol=1e-12).x
        if self.procedure == "joint":
            def joint_loss(x):
                return loss(x[0], x[1:])

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

    def torch_stage(self):
        from calbench.methods.torch_stages import EnsembleTemperature

        return EnsembleTemperature(self.temperature_, self.weights_)

    def fitted_summary(self) -> dict:
        return {"temperature": self.temperature_, "weights": [float(w) for w in self.weights_]}
