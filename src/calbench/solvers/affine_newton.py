"""Newton's method with the exact Hessian for the affine-softmax fit (θ of at most
:data:`~calbench.solvers.affine_softmax_fit.NEWTON_MAX_PARAMS` entries), and the Armijo backtracking line search
that it, truncated Newton and the tied fits (:mod:`calbench.solvers.tied_affine_fit`) share (Nocedal & Wright
2006, §3.1; docs/solver.md)."""

from __future__ import annotations

import numpy as np

from calbench.solvers.affine_hessian import loss_hessian
from calbench.solvers.affine_objective import AffineProblem


def armijo(problem: AffineProblem, theta: np.ndarray, step: np.ndarray, value: float, grad: np.ndarray,
           decrease: float):
    """Backtracking from the full (Newton) step until the objective falls by 1e-4·t·``decrease`` (Armijo),
    halving t down to 1e-10. Returns ``(theta, value, grad, residual, None)`` at the accepted point (the
    residual of :meth:`AffineProblem.evaluate` there); where even the smallest step does not descend (rounding
    level reached), the unchanged point, no residual and, in place of None, whether the fit counts as converged
    (a predicted decrease already below 1e-8 relative)."""
    t = 1.0
    while True:
        new_value, new_grad, residual = problem.evaluate(theta + t * step)
        if new_value <= value - 1e-4 * t * decrease or t < 1e-10:
            break
        t /= 2
        del residual  # before the next trial's: one n × k work array at a time
    if new_value > value:
        return theta, value, grad, None, decrease < 1e-8 * max(abs(value), 1.0)
    return theta + t * step, new_value, new_grad, residual, None


def eigen_newton_step(h: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The Newton step s solving h s = −grad by eigendecomposition, treating eigenvalues below 1e-12·max as zero
    (the softmax is invariant to adding a constant to every score, so the unpenalised Hessian is singular along
    those directions, where the gradient is zero)."""
    eigenvalues, vectors = np.linalg.eigh(h)
    keep = eigenvalues > 1e-12 * eigenvalues.max()
    return -vectors[:, keep] @ ((vectors[:, keep].T @ grad) / eigenvalues[keep])


def newton(problem: AffineProblem, theta: np.ndarray, max_iter: int) -> tuple[np.ndarray, dict]:
    """Newton's method from ``theta`` with Armijo backtracking (:func:`armijo`), each step
    :func:`eigen_newton_step`; stops where half the Newton decrement −gᵀs is at most the problem's tolerance, or
    after ``max_iter`` steps. Each Hessian (:func:`~calbench.solvers.affine_hessian.loss_hessian`) takes its
    probabilities from the residual of the objective evaluation at the same point, not from a softmax of its own.
    Returns (θ, info) with info = {"iterations", "converged", "loss"}."""
    y = problem.y
    rows = np.arange(len(y))
    curvature = problem.curvature()
    value, grad, residual = problem.evaluate(theta)
    converged, steps = False, 0
    for steps in range(max_iter + 1):
        residual[rows, y] += 1.0  # σ(W x + b)
        h = loss_hessian(problem.x, residual, problem.diagonal)
        del residual
        h[np.diag_indices_from(h)] += curvature
        step = eigen_newton_step(h, grad)
        decrease = -float(grad @ step)  # the squared Newton decrement; the predicted decrease is half of it
        if problem.converged(decrease / 2, value):
            converged = True
            break
        if steps == max_iter:
            break
        theta, value, grad, residual, stopped = armijo(problem, theta, step, value, grad, decrease)
        if stopped is not None:
            converged = stopped
            break
    return theta, {"iterations": steps, "converged": converged, "loss": float(value)}
