"""The fit of the softmax of an affine map, σ(W x + b), shared by vector/matrix scaling and Dirichlet calibration:
which solvers run, in which order, and on which maps (docs/solver.md).

Dirichlet paper (Kull et al. 2019) §3: matrix scaling is σ(W z + b) on logits z, Dirichlet calibration the
same layer on x = ln q̂ (its Eq. 7, the linear parametrisation); vector scaling and the diagonal
Dirichlet map fix the off-diagonal entries of W to 0. The objective is the mean log-loss plus a quadratic
penalty (:mod:`calbench.solvers.affine_penalty`, :mod:`calbench.solvers.affine_objective`). Fitting is in float64
with the analytic gradient, started from the identity map (W = I, b = 0) or from a given warm start, and
deterministic: full-batch Jacobi-preconditioned L-BFGS (:mod:`calbench.solvers.affine_lbfgs`), finished by
Newton's method with the exact Hessian (:mod:`calbench.solvers.affine_newton`) or by truncated Newton
(:mod:`calbench.solvers.affine_truncated_newton`) as :func:`finishing_solver` chooses; full maps of
:data:`LARGE_MAP_CLASSES` classes or more run truncated Newton from the diagonal map's fit (:func:`_fit_large_map`).
No n × k × k array is ever formed.
"""

from __future__ import annotations

import numpy as np

from calbench.solvers.affine_lbfgs import lbfgs
from calbench.solvers.affine_newton import newton
from calbench.solvers.affine_objective import AffineProblem, pack
from calbench.solvers.affine_path_state import PathState
from calbench.solvers.affine_penalty import Penalty
from calbench.solvers.affine_truncated_newton import newton_cg

# Newton's method finishes fits of up to NEWTON_MAX_PARAMS parameters (full maps up to 16 classes, diagonal ones
# up to 150) that L-BFGS has not finished in LBFGS_ITERS_BEFORE_NEWTON iterations: its Hessian costs about n·P²
# flops a step, a few L-BFGS iterations, and it converges in a few steps where L-BFGS needs hundreds on saturated
# ln q̂ features.
NEWTON_MAX_PARAMS = 300
LBFGS_ITERS_BEFORE_NEWTON = 10
# Larger full maps of up to NEWTON_CG_MAX_CLASSES classes are finished by truncated Newton after
# LBFGS_ITERS_BEFORE_NEWTON_CG L-BFGS iterations: its block preconditioner holds k blocks of (k + 1)² entries
# (65 MB at 200 classes).
NEWTON_CG_MAX_CLASSES = 200
LBFGS_ITERS_BEFORE_NEWTON_CG = 20
# Full maps of at least LARGE_MAP_CLASSES classes skip L-BFGS, whose every evaluation is two n × k × k products:
# they start from the diagonal map's fit and run truncated Newton from the first step, with the large-map
# preconditioner instead of the (k + 1)² blocks (8 GB at 1,000 classes). Diagonal maps of as many classes are
# finished by truncated Newton too, with their exact float32 Hessian as the preconditioner.
LARGE_MAP_CLASSES = NEWTON_CG_MAX_CLASSES + 1


def finishing_solver(k: int, diagonal: bool) -> str | None:
    """The solver that finishes a fit of a map over ``k`` classes that L-BFGS has not: "newton" where θ has at
    most :data:`NEWTON_MAX_PARAMS` entries; "newton-cg" for larger full maps up to :data:`NEWTON_CG_MAX_CLASSES`
    classes and for diagonal maps of :data:`LARGE_MAP_CLASSES` classes or more; None (L-BFGS alone) for the
    diagonal maps in between. Full maps of :data:`LARGE_MAP_CLASSES` classes or more: :func:`_fit_large_map`."""
    if (k if diagonal else k * k) + k <= NEWTON_MAX_PARAMS:
        return "newton"
    if diagonal:
        return "newton-cg" if k >= LARGE_MAP_CLASSES else None
    return "newton-cg" if k <= NEWTON_CG_MAX_CLASSES else None


def fit_affine_softmax(x: np.ndarray, y: np.ndarray, penalty: Penalty, diagonal: bool, *, init=None,
                       max_iter: int = 1000, tol: float = 1e-10, path: PathState | None = None,
                       newton_cg_after: int = LBFGS_ITERS_BEFORE_NEWTON_CG,
                       large_map_classes: int | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Minimise mean log-loss + ``penalty`` of σ(W x + b) from ``init = (W, b)`` (default: W = I, b = 0); the
    keyword-only parameters are the calibrators' settings and the grid path's state, passed through.

    L-BFGS first, then the solver of :func:`finishing_solver` where L-BFGS has not converged within
    :data:`LBFGS_ITERS_BEFORE_NEWTON` iterations (Newton) or ``newton_cg_after`` (truncated Newton), from where
    it stopped. Well-conditioned fits (matrix scaling on logits) stay with the cheap L-BFGS iterations;
    ill-conditioned ones (saturated ln q̂ features) get Newton's few steps instead of hundreds. At most
    ``max_iter`` iterations (L-BFGS iterations plus Newton steps and Hessian-vector products) in all. Returns
    (W, b, info) with info = {"iterations", "converged", "loss", "solver"}.

    ``path``: the :class:`~calbench.solvers.affine_path_state.PathState` that fits on the same ``x`` (a grid path,
    strong penalties first) pass along. On a path of full maps, once a fit has needed truncated Newton, the later
    ones go straight to it (``info["solver"]`` "newton-cg"): their weaker penalties need it too. A preconditioner
    or scaling taken at another grid point changes the steps, not the optimum.

    ``large_map_classes``: full maps of this many classes or more go to :func:`_fit_large_map` (None:
    :data:`LARGE_MAP_CLASSES`; a fit alone may lower it, as ``sms`` does, where the large-map preconditioner's
    one set-up costs less than the per-class blocks').
    """
    k = x.shape[1]
    problem = AffineProblem(x, y, penalty, diagonal, tol)
    if not diagonal and k >= (LARGE_MAP_CLASSES if large_map_classes is None else large_map_classes):
        theta, info = _fit_large_map(problem, init, max_iter, path)
    else:
        theta = pack(*(init if init is not None else (np.eye(k), np.zeros(k))), diagonal)
        theta, info = _lbfgs_then_finish(problem, theta, max_iter, path, newton_cg_after)
    return *problem.weights(theta), info


def _lbfgs_then_finish(problem: AffineProblem, theta: np.ndarray, max_iter: int, path: PathState | None,
                       newton_cg_after: int) -> tuple[np.ndarray, dict]:
    """L-BFGS from ``theta``, then :func:`finishing_solver`'s solver where it has not converged (as
    :func:`fit_affine_softmax`). A path of full maps shares L-BFGS's Jacobi scaling and learns whether truncated
    Newton was needed; L-BFGS hands its last evaluation to truncated Newton."""
    finisher = finishing_solver(problem.k, problem.diagonal)
    full_cg = finisher == "newton-cg" and not problem.diagonal
    cg_path = path if full_cg else None
    first = {"newton": LBFGS_ITERS_BEFORE_NEWTON, "newton-cg": newton_cg_after, None: max_iter}[finisher]
    if cg_path is not None and cg_path.newton_cg_needed:
        first = 0
    last = None
    if first > 0:
        theta, info, last = lbfgs(problem, theta, min(max_iter, first), path=cg_path, keep_last=full_cg)
        info["solver"] = "lbfgs"
    else:
        info = {"iterations": 0, "converged": False, "solver": ""}
    if finisher is None or info["converged"] or info["iterations"] >= max_iter:
        return theta, info
    budget = max_iter - info["iterations"]
    if finisher == "newton":
        theta, finished = newton(problem, theta, budget)
    else:
        theta, finished = newton_cg(problem, theta, budget, path=path, evaluated=last)
    if cg_path is not None:
        cg_path.newton_cg_needed = True
    return theta, {**finished, "iterations": info["iterations"] + finished["iterations"],
                   "solver": f"lbfgs+{finisher}" if info["iterations"] else finisher}


def _fit_large_map(problem: AffineProblem, init, max_iter: int, path: PathState | None) -> tuple[np.ndarray, dict]:
    """A full map of at least :data:`LARGE_MAP_CLASSES` classes: truncated Newton with the large-map
    preconditioner from ``init``, or else from the diagonal map fitted under the same penalty (each of its
    evaluations is one n × k pass, not two n × k × k products). Where the off-diagonal penalty is strong the full
    map is close to the diagonal one, and the start saves most of truncated Newton's products (docs/solver.md).
    The diagonal fit's iterations count towards ``max_iter``."""
    used = 0
    if init is None:
        weights, intercept, start = fit_affine_softmax(problem.x, problem.y, problem.penalty, True, max_iter=max_iter,
                                                       tol=problem.tol, path=path)
        init, used = (weights, intercept), start["iterations"]
    theta, info = newton_cg(problem, pack(*init, False), max(max_iter - used, 1), path=path, large_map=True)
    return theta, {**info, "iterations": used + info["iterations"],
                   "solver": "newton-cg" if used == 0 else "diagonal+newton-cg"}
