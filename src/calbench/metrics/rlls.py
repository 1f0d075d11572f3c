"""Regularized learning under label shift (RLLS; Azizzadenesheli, Liu, Yang & Anandkumar, ICLR 2019), as
Alexandari, Kundaje & Shrikumar (2020) run it (docs/label_shift.md).

RLLS estimates the weights w = 1 + θ from θ̂ = argmin_{θ ≥ −1} ‖Ĉ θ − b̂‖₂ + Δ_C ‖θ‖₂ (Azizzadenesheli et al.
2019, Eq. 4), b̂ = μ̂_target − μ̂_source the change of the (hard or soft) prediction frequencies and Ĉ their joint
with the labels on the calibration split. The regulariser Δ_C = α · 3 (2 log(2k/δ)/(3n) + √(2 log(2k/δ)/n)), n
the calibration rows, k the classes: the bound of their Lemma 1 with δ = 0.05, scaled by α = 0.01, the setting of
the authors' code that Alexandari et al. keep (:data:`ALPHA`, :data:`DELTA`).

The objective is convex, and smooth wherever Ĉ θ ≠ b̂ and θ ≠ 0. θ = 0 is optimal exactly when the subgradient
condition ‖Ĉᵀ b̂‖/‖b̂‖ ≤ Δ_C holds (the residual's gradient at 0 lies in the regulariser's ball; 0 is inside
θ ≥ −1); otherwise the minimum is the exact fit C⁻¹ b̂ or lies where the objective is smooth, and projected
Newton steps find it (:func:`solve`; ``tests/unit/test_label_shift_reference.py`` compares with the authors' cvxpy
solution).
"""

from __future__ import annotations

import numpy as np

#: Azizzadenesheli et al.'s δ of the regulariser's bound, and the factor α of the authors' code.
DELTA = 0.05
ALPHA = 0.01
#: :func:`solve`'s Newton iterations stop at a step of at most NEWTON_STEP in every θⱼ (then within rounding of the
#: optimum: the steps converge quadratically) and hand a problem to L-BFGS-B after NEWTON_MAX_ITER steps.
NEWTON_STEP = 1e-12
NEWTON_MAX_ITER = 100


def regulariser(num_classes: int, cal_rows: int, alpha: float = ALPHA, delta: float = DELTA) -> float:
    """Δ_C = α · 3 (2 log(2k/δ)/(3n) + √(2 log(2k/δ)/n)) (module docstring)."""
    log_term = 2.0 * np.log(2.0 * num_classes / delta)
    return alpha * 3.0 * (log_term / (3.0 * cal_rows) + np.sqrt(log_term / cal_rows))


def solve(confusion: np.ndarray, changes: np.ndarray, strength: float, max_iter: int = NEWTON_MAX_ITER
          ) -> np.ndarray:
    """θ̂ = argmin_{θ ≥ −1} ‖C θ − b‖ + strength ‖θ‖ [R, k] for each row b of ``changes`` [R, k], all at once:

    * θ̂ = 0 where ‖Cᵀ b‖ ≤ strength ‖b‖ (module docstring);
    * θ̂ = C⁻¹ b, the exact fit, where it is feasible (≥ −1) and optimal: the residual's norm has at 0 the unit ball
      as subdifferential, so C⁻¹ b is optimal exactly when some u, ‖u‖ ≤ 1, has Cᵀ u + strength θ̂/‖θ̂‖ = 0, that
      is strength ‖C⁻ᵀ θ̂/‖θ̂‖‖ ≤ 1;
    * else the minimum has a residual ≠ 0 and θ ≠ 0, where the objective is smooth: the projected Newton method of
      Bertsekas (1982, SIAM J. Control Optim. 20, §2: Newton on the variables off the bound, the variables at the
      bound with a positive gradient held there, an Armijo search along the projected arc) from half the
      least-squares θ clipped at −1, to a step of at most :data:`NEWTON_STEP` (quadratic convergence: the optimum
      to rounding);
    * a problem that has not converged after ``max_iter`` Newton steps, or whose Newton step is undefined (a
      singular Hessian on the free variables; none seen), is solved by L-BFGS-B from where Newton left it.
    """
    rows, k = changes.shape
    theta = np.zeros((rows, k))
    norms = np.linalg.norm(changes, axis=1)
    todo = ~((norms == 0) | (np.linalg.norm(changes @ confusion, axis=1) <= strength * norms))
    if np.linalg.cond(confusion) < 1e12:
        fit = np.linalg.solve(confusion, changes.T).T
        unit = fit / np.maximum(np.linalg.norm(fit, axis=1, keepdims=True), 1e-300)
        pull = strength * np.linalg.norm(np.linalg.solve(confusion.T, unit.T), axis=0)
        exact = todo & (fit >= -1.0).all(axis=1) & (pull <= 1.0)
        theta[exact], todo = fit[exact], todo & ~exact
    if todo.any():
        theta[todo] = _projected_newton(confusion, changes[todo], strength, max_iter)
    return theta


def _objective(confusion: np.ndarray, changes: np.ndarray, strength: float, theta: np.ndarray) -> np.ndarray:
    return np.linalg.norm(theta @ confusion.T - changes, axis=1) + strength * np.linalg.norm(theta, axis=1)


def _projected_newton(confusion: np.ndarray, changes: np.ndarray, strength: float, max_iter: int) -> np.ndarray:
    """:func:`solve`'s third case on each row of ``changes``: projected Newton steps on the rows not yet converged."""
    gram = confusion.T @ confusion
    theta = 0.5 * np.maximum(np.linalg.lstsq(confusion, changes.T, rcond=None)[0].T, -1.0)
    todo, handed = np.arange(changes.shape[0]), []
    for _ in range(max_iter):
        t, b = theta[todo], changes[todo]
        with np.errstate(divide="ignore", invalid="ignore"):
            direction, gradient = _newton_direction(confusion, gram, strength, t, b)
        stuck = ~np.isfinite(direction).all(axis=1)  # a residual or θ at 0, a singular Hessian: L-BFGS-B
        handed.extend(todo[stuck])
        todo, t, b, direction, gradient = todo[~stuck], t[~stuck], b[~stuck], direction[~stuck], gradient[~stuck]
        full = np.maximum(t + direction, -1.0)
        done = np.abs(full - t).max(axis=1) <= NEWTON_STEP
        before, slope = _objective(confusion, b, strength, t), -np.sum(gradient * direction, axis=1)
        step, new = np.ones(t.shape[0]), full
        for _ in range(60):  # Armijo along the projected arc (rounding slack: f is known to ~1e-16 relative)
            ok = done | (_objective(confusion, b, strength, new) <= before * (1 + 1e-15) - 1e-4 * step * slope)
            if ok.all():
                break
            step = np.where(ok, step, step / 2)
            new = np.where(ok[:, None], new, np.maximum(t + step[:, None] * direction, -1.0))
        theta[todo] = new
        todo = todo[~done]
        if todo.size == 0:
            break
    for row in [*handed, *todo]:
        theta[row] = _lbfgsb(confusion, changes[row], strength, theta[row])
    return theta


def _newton_direction(confusion: np.ndarray, gram: np.ndarray, strength: float, theta: np.ndarray,
                      changes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the projected Newton direction, the gradient) at each row of ``theta``; a row of NaN or ±inf where the
    objective has no Hessian there or it is singular on the free variables."""
    k = theta.shape[1]
    eye = np.eye(k)
    residual = theta @ confusion.T - changes
    r_norm, t_norm = np.linalg.norm(residual, axis=1)[:, None], np.linalg.norm(theta, axis=1)[:, None]
    pulled, t_unit = residual @ confusion / r_norm, theta / t_norm  # Cᵀ r̂ and θ̂
    gradient = pulled + strength * t_unit
    # Hessian: Cᵀ (I − r̂ r̂ᵀ) C / ‖r‖ + strength (I − θ̂ θ̂ᵀ) / ‖θ‖
    hessian = ((gram - pulled[:, :, None] * pulled[:, None, :]) / r_norm[:, :, None]
               + strength * (eye - t_unit[:, :, None] * t_unit[:, None, :]) / t_norm[:, :, None])
    projected = np.abs(theta - np.maximum(theta - gradient, -1.0)).max(axis=1, keepdims=True)
    held = (theta <= -1.0 + np.minimum(projected, 1e-6)) & (gradient > 0)  # Bertsekas's ε-active set
    free = ~held
    hessian = hessian * (free[:, :, None] & free[:, None, :]) + eye * held[:, None, :]
    direction = np.full_like(theta, np.nan)
    fine = np.isfinite(hessian).all(axis=(1, 2)) & np.isfinite(gradient).all(axis=1)
    fine &= _conditioned(np.where(fine[:, None, None], hessian, eye), 1e14)
    direction[fine] = -np.linalg.solve(hessian[fine], np.where(free, gradient, 0.0)[fine][..., None])[..., 0]
    return direction, gradient


def _conditioned(matrices: np.ndarray, limit: float) -> np.ndarray:
    """``np.linalg.cond(matrices) < limit`` for each of the finite ``matrices`` [R, k, k], the SVD computed only where
    a Cholesky factorisation does not already show it with a margin of 50. With F = ‖A‖_F ≥ σ_max and c = 100 F/limit:
    where the symmetric part S = (A + Aᵀ)/2 less c·I factorises (λ_min(S) > c, to rounding) and ‖A − S‖_F ≤ c/2,
    σ_min(A) ≥ λ_min(S) − ‖A − S‖ > c/2 (Weyl), so the condition number is below limit/50. The Newton Hessians are
    symmetric positive semi-definite: all but the nearly singular ones are shown so."""
    from calbench.kernels.label_shift import positive_definite  # lazy: numba only where RLLS runs

    frobenius = np.sqrt((matrices ** 2).sum(axis=(1, 2)))
    symmetric = (matrices + matrices.transpose(0, 2, 1)) / 2
    shift = 100 * frobenius / limit
    shown = np.empty(matrices.shape[0], dtype=bool)
    positive_definite(np.ascontiguousarray(symmetric - shift[:, None, None] * np.eye(matrices.shape[1])), shown)
    shown &= np.sqrt(((matrices - symmetric) ** 2).sum(axis=(1, 2))) <= shift / 2
    if not shown.all():
        shown[~shown] = np.linalg.cond(matrices[~shown]) < limit
    return shown


def _lbfgsb(confusion: np.ndarray, b: np.ndarray, strength: float, start: np.ndarray) -> np.ndarray:
    """argmin_{θ ≥ −1} ‖C θ − b‖ + strength ‖θ‖ by L-BFGS-B from ``start`` (the fallback of :func:`solve`)."""
    from scipy.optimize import minimize  # lazy: only a fallback needs it

    def objective(theta):
        residual = confusion @ theta - b
        r_norm, t_norm = np.linalg.norm(residual), np.linalg.norm(theta)
        gradient = confusion.T @ residual / max(r_norm, 1e-300) + strength * theta / max(t_norm, 1e-300)
        return r_norm + strength * t_norm, gradient

    found = minimize(objective, start, jac=True, method="L-BFGS-B", bounds=[(-1.0, None)] * b.size,
                     options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-12})
    return found.x


def rlls_weights(confusion: np.ndarray, predicted: np.ndarray, mean_cal: np.ndarray, cal_rows: int,
                 alpha: float = ALPHA) -> np.ndarray:
    """The RLLS weights 1 + θ̂ [R, k] for the prediction frequencies ``predicted`` [R, k] of R sets (or resamples),
    ``mean_cal`` [k] the calibration split's and ``confusion`` [pred, label] its joint with the labels
    (:func:`solve`, all sets at once)."""
    strength = regulariser(confusion.shape[0], cal_rows, alpha)
    return 1.0 + solve(confusion, np.atleast_2d(predicted) - mean_cal, strength)
