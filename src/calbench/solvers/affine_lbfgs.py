"""L-BFGS for the affine-softmax fit: scipy's L-BFGS-B in Jacobi-scaled coordinates, which runs first on every
map up to :data:`~calbench.solvers.affine_softmax_fit.NEWTON_CG_MAX_CLASSES` classes (diagonal maps: any size)
and alone where no Newton method finishes (docs/solver.md)."""

from __future__ import annotations

import numpy as np

from calbench.solvers.affine_objective import AffineProblem, Evaluation, hessian_diagonal
from calbench.solvers.affine_path_state import PathState

# L-BFGS ends at an iterate whose diagonal-Newton predicted decrease (:func:`lbfgs`) is below this times tol·|f|: the
# prediction ignores the Hessian's coupling, which a factor 1 let through (validation losses off the converged
# ones; docs/solver.md).
LBFGS_ITERATE_MARGIN = 0.01


def lbfgs(problem: AffineProblem, theta: np.ndarray, max_iter: int, path: PathState | None = None,
          keep_last: bool = False) -> tuple[np.ndarray, dict, Evaluation | None]:
    """L-BFGS on θ / d with d = diag(Hessian at the start)^(−1/2) (Jacobi preconditioning, :func:`jacobi_scaling`:
    ln q̂ features of very different scales otherwise make it crawl). In those coordinates the diagonal-Newton step
    is −g; its predicted decrease ½‖g‖² decides two things: a start (a warm start along a grid) or an iterate whose
    predicted decrease is at most the problem's tolerance (an iterate: :data:`LBFGS_ITERATE_MARGIN` times it)
    ends the fit, and the coordinates are further scaled by ‖g‖ so that L-BFGS's first trial step (unit length)
    is that Newton step rather than a blind unit step. It also stops when the objective's relative decrease in
    an iteration falls below ``tol``, or after ``max_iter`` iterations. The test at each iterate spares the line
    searches that L-BFGS-B runs at the objective's rounding level before its own relative-decrease test ends it.

    ``path``: a grid path of full maps, whose Jacobi scaling is shared. Returns (θ, info, last) with info =
    {"iterations", "converged", "loss"}; ``last``, with ``keep_last``, is the objective where L-BFGS stopped,
    for truncated Newton to start from without evaluating that point again (else None)."""
    value, grad, residual = problem.evaluate(theta)
    d = jacobi_scaling(problem, residual, path)
    newton_norm = float(np.linalg.norm(grad * d))
    if problem.converged(0.5 * newton_norm**2, value):
        return theta, {"iterations": 0, "converged": True, "loss": value}, None
    d *= newton_norm
    scaled = _ScaledObjective(problem, theta / d, d, Evaluation(value, grad, residual if keep_last else None))
    del residual

    def stop_at_small_predicted_decrease(intermediate_result):  # the start's test, with a margin, at each iterate
        if scaled.predicted_small(intermediate_result.x, d / newton_norm):
            raise StopIteration

    from scipy.optimize import minimize  # lazy: calibrate jobs of other methods skip its import

    result = minimize(scaled, scaled.start, jac=True, method="L-BFGS-B", callback=stop_at_small_predicted_decrease,
                      options={"maxiter": max_iter, "gtol": 1e-12, "ftol": problem.tol, "maxcor": 20})
    info = {"iterations": int(result.nit), "converged": bool(result.success) or scaled.stopped_small,
            "loss": float(result.fun)}
    last = Evaluation(*scaled.last[1:]) if keep_last and np.array_equal(scaled.last[0], result.x) else None
    return result.x * d, info, last


def jacobi_scaling(problem: AffineProblem, residual: np.ndarray, path: PathState | None) -> np.ndarray:
    """d = diag(H)^(−1/2) at the point of ``residual`` (:func:`~calbench.solvers.affine_objective.hessian_diagonal`),
    floored at 1e-8 of the largest entry. On a grid ``path`` the first fit's log-loss part is kept and reused,
    with each fit's penalty curvature, by the later ones (a scaling shapes the steps, not the optimum, and the
    diagonal of a full map costs an n × k × k product)."""
    curvature = problem.curvature()
    if path is not None and path.jacobi is not None:
        h = path.jacobi + curvature
    else:
        h = hessian_diagonal(problem.x, problem.y, residual, problem.penalty, problem.diagonal)
        if path is not None:
            path.jacobi = h - curvature
    return 1.0 / np.sqrt(np.maximum(h, 1e-8 * h.max() + 1e-300))


class _ScaledObjective:
    """The objective in L-BFGS's coordinates θ / d, which remembers the latest point evaluated (``last``: scaled
    point, value, gradient, and the residual where ``keep_last``) and knows the start's evaluation."""

    def __init__(self, problem: AffineProblem, start: np.ndarray, d: np.ndarray, first: Evaluation):
        self.problem, self.start, self.d = problem, start, d
        self.first = first
        self.keep_residual = first.residual is not None
        self.last = [start, first.value, first.grad, first.residual]
        self.stopped_small = False

    def __call__(self, theta_scaled: np.ndarray):
        if theta_scaled is self.start or np.array_equal(theta_scaled, self.start):  # already evaluated
            return self.first.value, self.first.grad * self.d
        self.last[:] = [theta_scaled.copy(), None, None, None]  # the previous residual goes before the next is made
        f, g, residual = self.problem.evaluate(theta_scaled * self.d)
        self.last[1:] = f, g, residual if self.keep_residual else None
        return f, g * self.d

    def predicted_small(self, theta_scaled: np.ndarray, unit_scale: np.ndarray) -> bool:
        """Whether ``theta_scaled`` is the latest point evaluated and its diagonal-Newton predicted decrease (the
        gradient in the coordinates scaled by ``unit_scale``) is at most :data:`LBFGS_ITERATE_MARGIN` times the
        tolerance; it sets ``stopped_small``."""
        scaled_grad = self.last[2] * unit_scale
        self.stopped_small = np.array_equal(theta_scaled, self.last[0]) and (
            0.5 * float(scaled_grad @ scaled_grad)
            <= LBFGS_ITERATE_MARGIN * self.problem.tol * max(abs(self.last[1]), 1.0))
        return self.stopped_small
