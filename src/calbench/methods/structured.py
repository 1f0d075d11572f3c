"""Structured matrix and vector scaling, SMS and SVS (Berta, Holzmüller, Jordan & Bach 2025, arXiv 2511.03685).

Logistic calibration on log-probabilities, σ(W x + b), made robust for many classes by three choices:

* preprocessing: temperature scaling first (β fitted by log-loss, unregularised), then a mixture with the
  uniform distribution, q̃ = (1 − ε) σ(β z) + ε/k with ε = ``uniform_mix``/(n + 1), so that the features
  x = ln q̃ are bounded below by ln(ε/k) (no −∞ from saturated softmax outputs);
* parametrisation around the identity: W = I + Δ (the global scale is fixed to 1 after the TS step);
* structured ridge penalty, one strength per parameter group, scaled with the number of classes k and
  of calibration points n:

      mean log-loss + λ_b k^ρ/n^τ Σⱼ b²ⱼ + λ_d k^ρ/n^τ Σⱼ Δ²ⱼⱼ + λ_o (k(k−1))^ρ/n^τ Σ_{i≠j} Δ²ᵢⱼ.

SVS restricts W to its diagonal. Defaults (λ = 1, ρ = τ = 1, ``uniform_mix`` = 1) are those of the
authors' package ``probmetrics`` (``get_calibrator("sms")``, ridge penalty); the fit reuses the affine-softmax
solvers of :mod:`calbench.solvers.affine_softmax_fit` (the penalty centred at W = I).
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Scalar
from calbench.kernels.softmax_residual import softmax_pass
from calbench.methods.base import Calibrator
from calbench.methods.constraints import Interval
from calbench.methods.linear_maps import AffineSoftmax
from calbench.methods.registry import register
from calbench.scores import Scores
from calbench.solvers.affine_penalty import Penalty
from calbench.solvers.temperature_fit import fit_inverse_temperature


@register("sms")
class StructuredMatrixScaling(AffineSoftmax):
    """SMS: σ((I + Δ) ln q̃ + b) with the structured ridge penalty; q̃ is the TS output mixed with uniform."""

    _fitted_state = {"n_fit_": Scalar(int), "inv_temperature_": Scalar(float, within="(0, inf)"),
                     "mix_": Scalar(float, within="[0, 1]")}

    uses_log_probs = True
    #: One fit alone, from the identity, pays for truncated Newton's preconditioner whenever it runs, so it starts
    #: after 2 L-BFGS iterations instead of a grid path's 20 (CIFAR-100 ResNet-20, 5,000 rows, one thread:
    #: 0.18–0.19 CPU-s against 0.28–0.29, the same optimum; docs/methods_parametric.md, "Beside probmetrics").
    newton_cg_after = 2
    #: From 50 classes a fit alone runs truncated Newton from the identity with the large-map preconditioner
    #: (fit_affine_softmax), whose set-up is a few n × k × k products, where the per-class blocks cost n k³ and
    #: their inverses k⁴ (5,000 rows, one thread: at 100 classes 0.095 against 0.151 CPU-s, at 64 0.053 against
    #: 0.081, at 40 0.037 against 0.030; the same optimum).
    large_map_classes = 50
    _parameter_constraints = {
        **{name: [Interval("real", 0)] for name in ("lambda_intercept", "lambda_diagonal", "lambda_off_diagonal", "rho",
                                                      "tau", "uniform_mix")},
        **{name: AffineSoftmax._parameter_constraints[name] for name in ("max_iter", "tol")}}

    def __init__(self, *, lambda_intercept: float = 1.0, lambda_diagonal: float = 1.0, lambda_off_diagonal: float = 1.0,
                 rho: float = 1.0, tau: float = 1.0, uniform_mix: float = 1.0, max_iter: int = 1000,
                 tol: float = 1e-10):
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.lambda_off_diagonal = lambda_off_diagonal
        self.rho = rho
        self.tau = tau
        self.uniform_mix = uniform_mix
        self.max_iter = max_iter
        self.tol = tol

    def penalty(self, k: int) -> Penalty:
        n = self.n_fit_
        scale = k**self.rho / n**self.tau
        off = float(getattr(self, "lambda_off_diagonal", 0.0)) * (k * (k - 1)) ** self.rho / n**self.tau
        return Penalty(off=off, diag=float(self.lambda_diagonal) * scale, bias=float(self.lambda_intercept) * scale,
                       diag_centre=1.0)

    def features(self, scores: Scores) -> np.ndarray:
        """ln q̃, q̃ = (1 − ε) σ(β ln p̂) + ε/k: the robust preprocessing (TS, then mixing with uniform). σ(β ln p̂) =
        σ(β z) for the logits z (ln p̂ = z − log Σ exp z), so no log-softmax is formed: one compiled softmax pass
        over β z (:func:`~calbench.kernels.softmax_residual.softmax_pass`) and one log, in place (at 25,000 × 1,000
        0.2 CPU-s against 1.3 for scipy's log-softmax, softmax and the log)."""
        x = np.multiply(scores.logits, self.inv_temperature_, dtype=np.float64, order="C")
        softmax_pass(x, np.zeros(x.shape[1]))
        eps = self.mix_
        x *= 1.0 - eps
        x += eps / x.shape[1]
        return np.log(x, out=x)

    def torch_features(self):
        from calbench.methods.torch_stages import MixedLogProbs

        return MixedLogProbs(self.inv_temperature_, self.mix_)

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        self.n_fit_ = scores.n
        self.inv_temperature_ = fit_inverse_temperature(scores.logits, y)  # σ(β ln p̂) = σ(β z): no log-softmax
        self.mix_ = min(self.uniform_mix / (scores.n + 1), 1.0)
        super()._fit(scores, y)

    def _solve(self, x, y, init=None, path=None):
        """From the identity map, the penalty's centre, also where truncated Newton runs on the large-map route
        (whose default start is the diagonal map's fit)."""
        k = x.shape[1]
        return super()._solve(x, y, init=(np.eye(k), np.zeros(k)) if init is None else init, path=path)

    #: Each grid point fitted on its own (the preprocessing is part of every fit), not along the affine maps' path.
    predict_grid = Calibrator.predict_grid

    def fitted_summary(self) -> dict:
        return {**super().fitted_summary(), "temperature": 1.0 / self.inv_temperature_, "uniform_mix": self.mix_}


@register("svs")
class StructuredVectorScaling(StructuredMatrixScaling):
    """SVS: SMS with W restricted to its diagonal, σ((1 + v) ⊙ ln q̃ + b)."""

    diagonal = True

    def __init__(self, *, lambda_intercept: float = 1.0, lambda_diagonal: float = 1.0, rho: float = 1.0,
                 tau: float = 1.0, uniform_mix: float = 1.0, max_iter: int = 1000, tol: float = 1e-10):
        self.lambda_intercept = lambda_intercept
        self.lambda_diagonal = lambda_diagonal
        self.rho = rho
        self.tau = tau
        self.uniform_mix = uniform_mix
        self.max_iter = max_iter
        self.tol = tol
