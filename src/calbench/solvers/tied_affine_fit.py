"""Fits of σ(diag(w) x + b) whose parameters are tied to fewer, φ ↦ θ = A φ, in the diagonal map's layout
θ = (w, b) of :mod:`calbench.solvers.affine_softmax_fit`, whose objective, Hessian, Newton step and line search
they use.

Alexandari, Kundaje & Shrikumar (ICML 2020, §3): bias-corrected temperature scaling (BCTS), σ(β z + b), ties the
diagonal to one β (k + 1 parameters, :func:`bcts_basis`); vector scaling without biases (NBVS), σ(w ⊙ z), fixes
b = 0 (k parameters, :func:`nbvs_basis`). Both objectives (the mean log-loss, unpenalised) are convex in φ, as the
logits are linear in it. Newton's method with the exact Hessian Aᵀ H A finishes in a few steps where φ has at most
:data:`~calbench.solvers.affine_softmax_fit.NEWTON_MAX_PARAMS` entries; larger maps (their 2k × 2k Hessian costs
n·4k² a step) run L-BFGS on the gradient Aᵀ g.
"""

from __future__ import annotations

import numpy as np

from calbench.solvers.affine_hessian import loss_hessian
from calbench.solvers.affine_newton import armijo, eigen_newton_step
from calbench.solvers.affine_objective import AffineProblem, objective_residual, unpack
from calbench.solvers.affine_penalty import Penalty
from calbench.solvers.affine_softmax_fit import NEWTON_MAX_PARAMS

NO_PENALTY = Penalty()


def bcts_basis(k: int) -> np.ndarray:
    """A [2k, k + 1] of BCTS: θ = (β·1, b) from φ = (β, b)."""
    basis = np.zeros((2 * k, k + 1))
    basis[:k, 0] = 1.0
    basis[k:, 1:] = np.eye(k)
    return basis


def nbvs_basis(k: int) -> np.ndarray:
    """A [2k, k] of NBVS: θ = (w, 0) from φ = w."""
    return np.vstack([np.eye(k), np.zeros((k, k))])


def fit_tied_affine(x: np.ndarray, y: np.ndarray, basis: np.ndarray, theta: np.ndarray, max_iter: int = 1000,
                    tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray, dict]:
    """Minimise the mean log-loss of σ(diag(w) x + b) over θ = (w, b) in the range of ``basis``, from ``theta``
    (in that range). Stops where the predicted decrease (half the squared Newton decrement; L-BFGS: its relative
    decrease) is below ``tol``·max(|f|, 1). Returns (W [k, k], b, info) with info = {"iterations", "converged",
    "loss", "solver"}."""
    k = x.shape[1]
    y = np.asarray(y, dtype=np.int64)
    if basis.shape[1] <= NEWTON_MAX_PARAMS:
        theta, info = _newton(x, y, basis, theta, max_iter, tol)
    else:
        theta, info = _lbfgs(x, y, basis, theta, max_iter, tol)
    weights, intercept = unpack(theta, k, True)
    return weights, intercept, info


def _newton(x, y, basis, theta, max_iter, tol):
    """Newton's method in φ with Armijo backtracking (:func:`~calbench.solvers.affine_newton.armijo` on θ = A φ);
    the step solves (Aᵀ H A) s = −Aᵀ g (:func:`~calbench.solvers.affine_newton.eigen_newton_step`: BCTS's
    objective is flat along b + c·1)."""
    problem = AffineProblem(x, y, NO_PENALTY, True, tol)
    rows = np.arange(len(y))
    value, grad, residual = problem.evaluate(theta)
    converged, steps = False, 0
    for steps in range(max_iter + 1):
        residual[rows, y] += 1.0  # σ(diag(w) x + b)
        h = basis.T @ loss_hessian(x, residual, True) @ basis
        del residual
        g = basis.T @ grad
        step = eigen_newton_step(h, g)
        decrease = -float(g @ step)
        if problem.converged(decrease / 2, value):
            converged = True
            break
        if steps == max_iter:
            break
        theta, value, grad, residual, stopped = armijo(problem, theta, basis @ step, value, grad, decrease)
        if stopped is not None:
            converged = stopped
            break
    return theta, {"iterations": steps, "converged": converged, "loss": float(value), "solver": "newton"}


def _lbfgs(x, y, basis, theta, max_iter, tol):
    """L-BFGS on φ (scipy's L-BFGS-B, relative-decrease test ``tol``), started from the φ of ``theta``."""
    from scipy.optimize import minimize  # lazy: only maps of many classes pay its import

    def objective(phi):
        value, grad, _ = objective_residual(basis @ phi, x, y, NO_PENALTY, True)
        return value, basis.T @ grad

    start = np.linalg.lstsq(basis, theta, rcond=None)[0]
    result = minimize(objective, start, jac=True, method="L-BFGS-B",
                      options={"maxiter": max_iter, "gtol": 1e-12, "ftol": tol, "maxcor": 20})
    return basis @ result.x, {"iterations": int(result.nit), "converged": bool(result.success),
                              "loss": float(result.fun), "solver": "lbfgs"}
