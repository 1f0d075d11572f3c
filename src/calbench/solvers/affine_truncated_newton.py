"""Truncated Newton for the affine-softmax fit (Nocedal & Wright 2006, Alg. 7.1): full maps of more than
:data:`~calbench.solvers.affine_softmax_fit.NEWTON_MAX_PARAMS` parameters and diagonal maps of
:data:`~calbench.solvers.affine_softmax_fit.LARGE_MAP_CLASSES` classes or more, whose exact Hessian is too large
to factor (docs/solver.md)."""

from __future__ import annotations

import numpy as np

from calbench.solvers.affine_newton import armijo
from calbench.solvers.affine_objective import AffineProblem, Evaluation, float32_probs, hessian_vector
from calbench.solvers.affine_path_state import PathState
from calbench.solvers.affine_preconditioners import (
    block_preconditioner,
    diagonal_map_preconditioner,
    large_map_preconditioner,
)

# The CG solves stop at a relative residual min(0.5, √‖g‖) but not below this: the float32 Hessian-vector
# products are not accurate beyond it, and an inexact Newton step converges to the same optimum.
CG_MIN_RESIDUAL = 1e-4
# A fit alone (not on a grid path) takes the curvature of its preconditioner (the per-class blocks, a diagonal
# map's exact Hessian) as the mean over every s-th row, s = n // PRECONDITIONER_ROWS: it only shapes the steps, and
# one fit pays for it alone; a grid path shares it over its fits, whose weakest penalties need all rows'
# (docs/solver.md). The large-map preconditioner of a fit alone keeps at least LARGE_MAP_ROWS_PER_CLASS·k rows,
# twice its dense block's 3k dimension: from every 24th of 25,000 rows at 1,000 classes one `sms` fit needed 13
# instead of 9 steps and products, each product two 25,000 × 1,000 × 1,000 products; from every 4th it needs the
# same 7 steps and products as from all rows, its set-up 1.9 CPU-s instead of 6.0 (at 100 classes × 5,000 rows
# too: 17 iterations either way).
PRECONDITIONER_ROWS = 1024
LARGE_MAP_ROWS_PER_CLASS = 6


def newton_cg(problem: AffineProblem, theta: np.ndarray, max_iter: int, path: PathState | None = None,
              evaluated: Evaluation | None = None, large_map: bool = False) -> tuple[np.ndarray, dict]:
    """Truncated Newton from ``theta``: each step solves H s = −g by preconditioned conjugate gradients
    (:func:`_conjugate_gradients`), then Armijo backtracking (:func:`~calbench.solvers.affine_newton.armijo`);
    stops as Newton's method, where half the Newton decrement −gᵀs is at most the problem's tolerance, or before
    the CG solve where the penalty's bound on it (:meth:`AffineProblem.newton_decrease_bound`) already is: the
    same stopping point, without the last solve's products (one ``sms`` fit at 100 classes: 6 of its 18).

    The preconditioner (:mod:`calbench.solvers.affine_preconditioners`) is the balanced block inverse for full
    maps, the large-map one for a ``large_map`` (a full map beyond
    :data:`~calbench.solvers.affine_softmax_fit.NEWTON_CG_MAX_CLASSES` classes), the exact Hessian's inverse at
    each step for diagonal maps. Its log-loss part is taken at the start of the first fit on ``x`` that needs
    it (``path``; a fit without one takes it from every s-th row, :data:`PRECONDITIONER_ROWS`).
    ``evaluated``: the objective at ``theta``, where the caller has it. The Hessian's products (the
    preconditioner and H v) run in float32, at half the cost: they only shape the step; the objective and
    gradient, which decide the steps' acceptance and the stop, hence the optimum, stay float64. Each
    Hessian-vector product costs about a gradient, so it counts as an iteration: at most ``max_iter`` products
    and steps in all, the work bound of as many L-BFGS iterations. Returns (θ, info) with info =
    {"iterations", "converged", "loss"}."""
    y, penalty, diagonal = problem.y, problem.penalty, problem.diagonal
    value, grad, residual = evaluated or problem.evaluate(theta)
    del evaluated
    if problem.converged(problem.newton_decrease_bound(grad), value):
        return theta, {"iterations": 0, "converged": True, "loss": float(value)}
    probs = float32_probs(residual, y)
    del residual
    stride = 1 if path is not None else preconditioner_stride(len(y), problem.k, large_map)
    path = PathState() if path is None else path
    x_single = path.float32_features(problem.x)
    sample = slice(None, None, stride)  # the rows whose curvature a diagonal map's preconditioner takes
    if diagonal:
        precondition = None  # the exact Hessian's, taken at each step
    elif large_map:
        precondition = large_map_preconditioner(x_single, probs, penalty, path, stride)
    else:
        precondition = block_preconditioner(x_single, probs, penalty, path, stride)
    converged, used = False, 0
    while True:
        if diagonal:
            precondition = diagonal_map_preconditioner(x_single[sample], probs[sample], penalty)
        step, products = _conjugate_gradients(lambda d: hessian_vector(x_single, probs, penalty, d, diagonal),
                                              precondition, grad, min(theta.size, max(max_iter - used, 1)))
        used += products
        if used >= max_iter:  # the budget ended inside CG: the step (and its decrement) is incomplete
            break
        if not step.any():
            step = -precondition(grad)
        decrease = -float(grad @ step)
        if problem.converged(decrease / 2, value):
            converged = True
            break
        used += 1
        if used >= max_iter:
            break
        del probs  # the trial points' objectives each need an n × k work array
        theta, value, grad, residual, stopped = armijo(problem, theta, step, value, grad, decrease)
        if stopped is not None:
            converged = stopped
            break
        if problem.converged(problem.newton_decrease_bound(grad), value):  # stops without a CG solve
            converged = True
            break
        probs = float32_probs(residual, y)
        del residual
    return theta, {"iterations": used, "converged": converged, "loss": float(value)}


def preconditioner_stride(n: int, k: int, large_map: bool) -> int:
    """s of a fit alone's preconditioner, which takes every s-th of its ``n`` rows: at least
    :data:`PRECONDITIONER_ROWS` rows, and for the large-map preconditioner at least
    :data:`LARGE_MAP_ROWS_PER_CLASS` per class."""
    return max(1, n // max(PRECONDITIONER_ROWS, LARGE_MAP_ROWS_PER_CLASS * k if large_map else 0))


def _conjugate_gradients(hessian_times, precondition, grad: np.ndarray, max_products: int):
    """The preconditioned CG solve of H s = −``grad`` (``hessian_times``: v ↦ H v) to a relative residual
    min(0.5, √‖g‖), at least :data:`CG_MIN_RESIDUAL`, in at most ``max_products`` products; it stops early
    along a direction of no curvature (the softmax's shift invariance), taking the step so far. Returns (step,
    products used)."""
    step, residual = np.zeros_like(grad), -grad
    z = precondition(residual)
    direction, rz = z.copy(), float(residual @ z)
    target = float(np.clip(np.sqrt(np.linalg.norm(grad)), CG_MIN_RESIDUAL, 0.5)) * np.linalg.norm(grad)
    used = 0
    for _ in range(max_products):
        h_dir = hessian_times(direction)
        used += 1
        curvature = float(direction @ h_dir)
        if curvature <= 0:
            break
        alpha = rz / curvature
        step += alpha * direction
        residual -= alpha * h_dir
        if np.linalg.norm(residual) <= target:
            break
        z = precondition(residual)
        rz, rz_old = float(residual @ z), rz
        direction = z + (rz / rz_old) * direction
    return step, used
