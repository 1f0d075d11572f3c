"""Temperature scaling (Guo et al. 2017; LECE paper §2.5, Dirichlet paper §2): ĉ(z) = σ(z / T).

Fitted by minimising the calibration log-loss over β = 1/T. The loss
``mean_i(logsumexp(β z_i) − β z_{i,y_i})`` is convex in β with gradient ``mean(E_p[z] − z_y)`` and
curvature ``mean(Var_p[z]) ≥ 0``, so a safeguarded Newton iteration inside a bracket finds the
exact minimiser (to float64 precision) in a few steps; no step size or starting value to tune.
On probabilities (synthetic sources, imported probabilities) it acts on ln p̂, which is the same map.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from calbench.methods.base import Calibrator
from calbench.methods.registry import register
from calbench.scores import Scores

BETA_MIN, BETA_MAX = 1e-6, 1e6
#: Above this many logits the Newton iteration starts from the β fitted on every m-th row (m chosen to
#: leave about this many), so that the full data pays 2–3 Newton steps instead of 6–10 from β = 1.
SUBSAMPLE_ENTRIES = 1_000_000


def _gradient_curvature(beta: float, z: np.ndarray, z_true: np.ndarray, work: np.ndarray) -> tuple[float, float]:
    """Gradient mean(E_p[z] − z_y) and curvature mean(Var_p[z]) at β, for rows ``z`` ≤ 0 with max 0.

    ``work`` (z's shape) holds exp(β z), then exp(β z)·z, in place: one exp and four passes over n × k."""
    np.multiply(z, beta, out=work)
    np.exp(work, out=work)
    total = work.sum(axis=1)
    work *= z
    mean_z = work.sum(axis=1) / total
    var_z = np.einsum("ij,ij->i", work, z) / total - mean_z**2
    return float(np.mean(mean_z - z_true)), float(np.mean(np.maximum(var_z, 0.0)))


def fit_inverse_temperature(z: np.ndarray, y: np.ndarray, tol: float = 1e-12, max_iter: int = 200,
                            subsample_entries: int = SUBSAMPLE_ENTRIES) -> float:
    """The β = 1/T minimising the log-loss of σ(β z), clamped to [1e-6, 1e6].

    Large inputs start from the β of a row subsample (every m-th row); the stopping test is on the full
    data either way, so the start changes the iterations, not the answer (beyond ``tol``)."""
    beta = 1.0
    stride = -(-z.size // subsample_entries)
    if stride > 1 and z.shape[0] // stride >= 100:
        beta = fit_inverse_temperature(z[::stride], y[::stride], tol, max_iter, subsample_entries)
    z = z - z.max(axis=1, keepdims=True)
    z_true = z[np.arange(y.size), y]
    work = np.empty_like(z)
    lo, hi = BETA_MIN, BETA_MAX
    for _ in range(max_iter):
        g, h = _gradient_curvature(beta, z, z_true, work)
        if g > 0:
            hi = beta
        else:
            lo = beta
        if abs(g) <= tol * max(1.0, abs(beta) * h) or hi / lo < 1 + 1e-14:
            break
        step = beta - g / h if h > 0 else np.nan
        beta = step if lo < step < hi else np.sqrt(lo * hi)  # bisect in log space when Newton leaves the bracket
    return float(np.clip(beta, BETA_MIN, BETA_MAX))


@register("ts")
class TemperatureScaling(Calibrator):
    """One temperature shared by all classes, fitted by log-loss; preserves the argmax.

    Fitted attribute ``temperature_`` (T > 1 softens, T < 1 sharpens).
    """

    preserves_argmax = True

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        self.temperature_ = 1.0 / fit_inverse_temperature(scores.logits, y)

    def transform(self, scores) -> Scores:
        scores = self._check_scores(scores)
        return scores.with_logits(scores.logits / self.temperature_)

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        return softmax(scores.logits / self.temperature_, axis=1)

    def fitted_summary(self) -> dict:
        return {"temperature": self.temperature_}
