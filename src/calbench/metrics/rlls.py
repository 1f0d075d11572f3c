"""Regularized learning under label shift (RLLS; Azizzadenesheli, Liu, Yang & Anandkumar, ICLR 2019), as
Alexandari, Kundaje & Shrikumar (2020) run it (docs/label_shift.md).

RLLS estimates the weights w = 1 + θ from θ̂ = argmin_{θ ≥ −1} ‖Ĉ θ − b̂‖₂ + Δ_C ‖θ‖₂ (Azizzadenesheli et al.
2019, Eq. 4), b̂ = μ̂_target − μ̂_source the change of the (hard or soft) prediction frequencies and Ĉ their joint
with the labels on the calibration split. The regulariser Δ_C = α · 3 (2 log(2k/δ)/(3n) + √(2 log(2k/δ)/n)), n
the calibration rows, k the classes: the bound of their Lemma 1 with δ = 0.05, scaled by α = 0.01, the setting of
the authors' code that Alexandari et al. keep (:data:`ALPHA`, :data:`DELTA`).

The objective is convex, and smooth wherever Ĉ θ ≠ b̂ and θ ≠ 0. θ = 0 is optimal exactly when the subgradient
condition ‖Ĉᵀ b̂‖/‖b̂‖ ≤ Δ_C holds (the residual's gradient at 0 lies in the regulariser's ball; 0 is inside
θ ≥ −1); otherwise the minimum is away from 0 and L-BFGS-B with the bounds finds it
(``tests/unit/test_label_shift_reference.py`` compares with the authors' cvxpy solution).
"""

from __future__ import annotations

import numpy as np

#: Azizzadenesheli et al.'s δ of the regulariser's bound, and the factor α of the authors' code.
DELTA = 0.05
ALPHA = 0.01


def regulariser(num_classes: int, cal_rows: int, alpha: float = ALPHA, delta: float = DELTA) -> float:
    """Δ_C = α · 3 (2 log(2k/δ)/(3n) + √(2 log(2k/δ)/n)) (module docstring)."""
    log_term = 2.0 * np.log(2.0 * num_classes / delta)
    return alpha * 3.0 * (log_term / (3.0 * cal_rows) + np.sqrt(log_term / cal_rows))


def _solve(confusion: np.ndarray, b: np.ndarray, strength: float) -> np.ndarray:
    """argmin_{θ ≥ −1} ‖C θ − b‖ + strength ‖θ‖, from half the least-squares θ clipped at −1 (the least-squares θ
    itself fits exactly, where the residual's norm has no gradient)."""
    from scipy.optimize import minimize  # lazy: only RLLS needs it

    k = b.size
    b_norm = np.linalg.norm(b)
    if b_norm == 0 or np.linalg.norm(confusion.T @ b) <= strength * b_norm:
        return np.zeros(k)

    def objective(theta):
        residual = confusion @ theta - b
        r_norm, t_norm = np.linalg.norm(residual), np.linalg.norm(theta)
        gradient = confusion.T @ residual / max(r_norm, 1e-300) + strength * theta / max(t_norm, 1e-300)
        return r_norm + strength * t_norm, gradient

    start = 0.5 * np.maximum(np.linalg.lstsq(confusion, b, rcond=None)[0], -1.0)
    found = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(-1.0, None)] * k,
                     options={"maxiter": 10_000, "ftol": 1e-12, "gtol": 1e-9})
    return found.x


def rlls_weights(confusion: np.ndarray, predicted: np.ndarray, mean_cal: np.ndarray, cal_rows: int,
                 alpha: float = ALPHA) -> np.ndarray:
    """The RLLS weights 1 + θ̂ [R, k] for the prediction frequencies ``predicted`` [R, k] of R sets (or resamples),
    ``mean_cal`` [k] the calibration split's and ``confusion`` [pred, label] its joint with the labels. The solves
    run with one BLAS thread: their k × k products are too small to share, and idle BLAS threads spinning between
    them cost 20 times the work on a busy machine (0.4 against 9 CPU-s for 200 solves at k = 10)."""
    from threadpoolctl import threadpool_limits  # lazy: only RLLS needs it

    strength = regulariser(confusion.shape[0], cal_rows, alpha)
    with threadpool_limits(limits=1, user_api="blas"):
        return 1.0 + np.array([_solve(confusion, row - mean_cal, strength) for row in np.atleast_2d(predicted)])
