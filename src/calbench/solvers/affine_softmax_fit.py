"""The solver of the softmax of an affine map, σ(W x + b), shared by vector/matrix scaling and Dirichlet calibration:
penalties, objective and Hessian, the L-BFGS and Newton solvers (the warm starts of a grid path:
:mod:`calbench.solvers.warm_start_path`; docs/solver.md).

Dirichlet paper (Kull et al. 2019) §3: matrix scaling is σ(W z + b) on logits z, Dirichlet calibration the
same layer on x = ln q̂ (its Eq. 7, the linear parametrisation); vector scaling and the diagonal
Dirichlet map fix the off-diagonal entries of W to 0. The objective is the mean log-loss plus a quadratic
penalty (docs/methods_parametric.md):

* ODIR (paper §3):  λ/(k(k−1)) Σ_{i≠j} w²ᵢⱼ + μ/k Σⱼ b²ⱼ, the diagonal of W unpenalised;
* L2 (Dir-L2):      λ/(k(k+1)) (Σᵢⱼ w²ᵢⱼ + Σⱼ b²ⱼ), shrinking towards W = 0, b = 0.

``reg_scale="paper"`` uses those normalisations; ``reg_scale="code"`` drops the 1/(k(k−1)), 1/k and
1/(k(k+1)) factors as the authors' Keras code did, so λ_paper = k(k−1)·λ_code and μ_paper = k·μ_code
(ODIR), λ_paper = k(k+1)·λ_code (L2). Fitting is in float64 with the analytic gradient, started from the
identity map (W = I, b = 0) or from a given warm start, and deterministic: full-batch Jacobi-preconditioned
L-BFGS, finished by Newton's method with the exact Hessian where θ has at most :data:`NEWTON_MAX_PARAMS`
entries (full maps up to 16 classes, diagonal ones up to 150), and for larger full maps up to
:data:`NEWTON_CG_MAX_CLASSES` classes by truncated Newton with exact Hessian-vector products; maps of
:data:`LARGE_MAP_CLASSES` classes or more run truncated Newton from the diagonal map's fit (full maps) or after
L-BFGS (diagonal ones), with a preconditioner that fits in memory at 1,000 classes. No n × k × k array is ever
formed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import softmax

from calbench.kernels.softmax_residual import hessian_vector_pass, residual_pass, softmax_pass

REG_SCALES = ("paper", "code")
# Newton's method finishes fits of up to NEWTON_MAX_PARAMS parameters that L-BFGS has not finished in
# LBFGS_ITERS_BEFORE_NEWTON iterations: its Hessian costs about n·P² flops a step (5 ms for P = 110,
# n = 4,000, some 4 L-BFGS iterations), and it converges in a few steps where L-BFGS needed up to 1,000 on the saturated
# ln q̂ features of CIFAR-10 models. On the authors' 432-point grid (one fold, CIFAR-10, CPU s):
# dir_odir on VGG-19 38.8 (L-BFGS only), 7.7 (Newton only), 6.1 (this); ms_odir on ResNet-20 5.7, 7.5, 5.1.
NEWTON_MAX_PARAMS = 300
LBFGS_ITERS_BEFORE_NEWTON = 10
# Larger full maps of up to NEWTON_CG_MAX_CLASSES classes are finished by truncated Newton (:func:`_newton_cg`):
# its preconditioner holds k blocks of (k + 1)² entries (8 MB at 100 classes, 65 MB at 200). On the weakest
# ODIR penalty of the default grid (one CIFAR-100 fold, λ_code = 0.01) it needs ~150 Hessian-vector products
# where Jacobi-preconditioned L-BFGS needed ~420 iterations, and ~680 without the block preconditioner.
NEWTON_CG_MAX_CLASSES = 200
# It starts after LBFGS_ITERS_BEFORE_NEWTON_CG L-BFGS iterations, and on a grid path, once a fit has needed it,
# the later (weaker-penalty) fits start with it (:func:`fit_affine_softmax`). The 5-fold default-grid search of
# dir_odir on CIFAR-100 ResNet-20 (seed-0 `defaults` split), in objective evaluations + Hessian-vector products:
# 798 + 977 after 20 iterations, 614 + 1,211 after 10, 477 + 1,628 after 5 (a product costs ~0.4 of an evaluation).
LBFGS_ITERS_BEFORE_NEWTON_CG = 20
# L-BFGS ends at an iterate whose diagonal-Newton predicted decrease (:func:`_lbfgs`) is below this times tol·|f|: the
# prediction ignores the Hessian's coupling, which a factor 1 let through on a 20-class grid (validation losses
# 1e-7 from the converged ones; 3e-11 with 0.1 or 0.01).
LBFGS_ITERATE_MARGIN = 0.01
# Its CG solves stop at a relative residual min(0.5, √‖g‖) but not below this: the float32 Hessian-vector
# products are accurate to ~1e-6 relative, and an inexact Newton step converges to the same optimum.
CG_MIN_RESIDUAL = 1e-4
# A fit alone (not on a grid path, ``shared`` None) takes the per-class blocks of that preconditioner as the mean
# over every s-th row, s = n // PRECONDITIONER_ROWS (a sub-sampled Hessian, as Byrd, Chin, Neveitt & Nocedal 2011
# precondition Newton-CG with): they only shape the steps, and one fit pays for them alone (one `sms` fit on
# CIFAR-100 ResNet-20, 5,000 rows: 24 iterations either way, 0.18–0.22 CPU-s against 0.25–0.34). A grid path shares
# them over its fits, whose weakest penalties need all rows' (the 5-fold default-grid search of dir_odir on
# CIFAR-100 ResNet-20: 977 Hessian-vector products with them, 1,188 with every 2nd row's, 1,482 with every 4th).
PRECONDITIONER_ROWS = 1024
# Full maps of at least LARGE_MAP_CLASSES classes skip L-BFGS: one objective evaluation is two n × k × k
# products (1,000 classes × 20,000 rows: 1.9 CPU-s in float64), so they start from the diagonal map's fit and
# run truncated Newton from the first step, preconditioned by :func:`_large_map_preconditioner` instead of the
# (k + 1)² blocks, which would hold 8 GB at 1,000 classes. Diagonal maps of as many classes (``vs``) are
# finished by truncated Newton too, with their exact float32 Hessian as the preconditioner.
LARGE_MAP_CLASSES = NEWTON_CG_MAX_CLASSES + 1
# The dense Hessian blocks of :func:`class_features_hessian` accumulate over blocks of this many rows (1,000
# classes × 3 features: 24 MB of float32 a block, where the whole of 20,000 rows held 0.7 GB at once).
HESSIAN_BLOCK_ROWS = 2048
# :func:`hessian_blocks` forms the pairwise products of this many rows' features at a time (100 classes: 5 MB of
# float32).
PAIR_PRODUCT_ROWS = 256
# Newton's Hessian of a full map (:func:`loss_hessian`) sums its products over row blocks of about this many
# entries of G (256 KB of float64: the temporaries stay in cache and are not fresh pages each time).
NEWTON_BLOCK_ENTRIES = 2**15


@dataclass(frozen=True)
class Penalty:
    """Quadratic penalty off·Σ_{i≠j} w²ᵢⱼ + diag·Σᵢ (wᵢᵢ − diag_centre)² + bias·Σⱼ b²ⱼ
    (``diag_centre = 1``: SMS shrinks towards the identity map)."""

    off: float = 0.0
    diag: float = 0.0
    bias: float = 0.0
    diag_centre: float = 0.0

    def value(self, weights: np.ndarray, intercept: np.ndarray) -> float:
        squares = weights**2
        diag_sq = float(np.sum((np.diagonal(weights) - self.diag_centre) ** 2))
        np.fill_diagonal(squares, 0.0)  # summing the off-diagonal squares directly: Σ w² − Σ w²ᵢᵢ cancels
        # catastrophically near W = I, an error that a penalty weight of 10⁶ turns into objective noise
        return float(self.off * np.sum(squares) + self.diag * diag_sq + self.bias * np.sum(intercept**2))

    def gradient(self, weights: np.ndarray, intercept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        grad_w = 2.0 * self.off * weights
        np.fill_diagonal(grad_w, 2.0 * self.diag * (np.diagonal(weights) - self.diag_centre))
        return grad_w, 2.0 * self.bias * intercept

    def curvature(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The penalty's (constant) second derivative in each parameter: 2·weight, as (W-shaped, b-shaped)."""
        return Penalty(self.off, self.diag, self.bias).gradient(np.ones((k, k)), np.ones(k))


def _check_reg(name: str, value) -> float:
    value = float(value)
    if not np.isfinite(value) or value < 0:
        raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")
    return value


def _check_scale(reg_scale: str) -> None:
    if reg_scale not in REG_SCALES:
        raise ValueError(f"reg_scale: expected one of {REG_SCALES} ('paper': the paper's normalised penalty, "
                         f"'code': the authors' unnormalised Keras penalty), got {reg_scale!r}")


def odir_penalty(reg_lambda: float, reg_mu: float, k: int, reg_scale: str = "paper",
                 centre: float | None = None) -> Penalty:
    """ODIR (Dirichlet paper §3): λ/(k(k−1)) Σ_{i≠j} w²ᵢⱼ + μ/k Σ b²ⱼ (``"code"``: no normalisation). With a
    ``centre`` β (``shrink_to="temperature"``), the diagonal is penalised as each off-diagonal weight is, around
    β: + λ/(k(k−1)) Σᵢ (wᵢᵢ − β)², so that the strong-λ limit is temperature scaling σ(β x), not a free diagonal."""
    _check_scale(reg_scale)
    lam, mu = _check_reg("reg_lambda", reg_lambda), _check_reg("reg_mu", reg_mu)
    if reg_scale == "paper":
        lam, mu = lam / (k * (k - 1)), mu / k
    if centre is None:
        return Penalty(off=lam, diag=0.0, bias=mu)
    return Penalty(off=lam, diag=lam, bias=mu, diag_centre=centre)


def l2_penalty(reg_lambda: float, k: int, reg_scale: str = "paper", centre: float | None = None) -> Penalty:
    """Dir-L2: λ/(k(k+1)) times the squared norm of all k(k+1) parameters (``"code"``: no normalisation), around
    the uniform map W = 0, b = 0, or around temperature scaling W = βI, b = 0 with a ``centre`` β."""
    _check_scale(reg_scale)
    lam = _check_reg("reg_lambda", reg_lambda)
    if reg_scale == "paper":
        lam = lam / (k * (k + 1))
    return Penalty(off=lam, diag=lam, bias=lam, diag_centre=0.0 if centre is None else centre)


def linear_scores(x: np.ndarray, weights: np.ndarray, diagonal: bool) -> np.ndarray:
    """W x for every row x of ``x`` [n, k] (a new C-ordered array, as the compiled row passes expect, whatever
    the order of ``x``); ``diagonal`` uses only the diagonal of W."""
    return np.multiply(x, np.diagonal(weights), order="C") if diagonal else x @ weights.T


def affine_logits(x: np.ndarray, weights: np.ndarray, intercept: np.ndarray, diagonal: bool) -> np.ndarray:
    """W x + b for every row x of ``x`` [n, k]; ``diagonal`` uses only the diagonal of W."""
    out = linear_scores(x, weights, diagonal)
    out += intercept
    return out


def objective(theta: np.ndarray, x: np.ndarray, y: np.ndarray, penalty: Penalty, diagonal: bool):
    """Mean log-loss of σ(W x + b) plus ``penalty``, and its gradient in θ = (W or diag W, b)."""
    value, grad, _ = _objective_residual(theta, x, y, penalty, diagonal)
    return value, grad


def _objective_residual(theta, x, y, penalty, diagonal):
    """:func:`objective` and the residual σ(W x + b) − onehot(y) [n, k] it was built from. One n × k work array:
    the product x Wᵀ (BLAS), then one compiled pass per row (:func:`softmax_residual.residual_pass`: the
    intercept, row max, exp, log-sum-exp and the residual in place), then the gradient's product (BLAS)."""
    n, k = x.shape
    weights, intercept = unpack(theta, k, diagonal)
    work = linear_scores(x, weights, diagonal)
    grad_b = np.zeros(k)
    loss = residual_pass(work, intercept, np.asarray(y, dtype=np.int64), grad_b) / n
    pen_w, pen_b = penalty.gradient(weights, intercept)
    grad_b = grad_b / n + pen_b
    if diagonal:
        grad_w = np.einsum("ij,ij->j", work, x) / n + np.diagonal(pen_w)
    else:
        grad_w = (work.T @ x / n + pen_w).ravel()
    return loss + penalty.value(weights, intercept), np.concatenate([grad_w, grad_b]), work


def hessian_diagonal(x: np.ndarray, y: np.ndarray, residual: np.ndarray, penalty: Penalty,
                     diagonal: bool) -> np.ndarray:
    """Diagonal of the objective's Hessian, in θ's layout: mean pᵢ(1−pᵢ) xⱼ² (+ 2·penalty weight), with p
    from the ``residual`` r = p − onehot(y) of :func:`_objective_residual` at the same point (no softmax of its
    own): p(1 − p) = r(1 − r), and −r(1 + r) at the label."""
    n, k = x.shape
    rows = np.arange(n)
    v = residual * (1.0 - residual)
    at_label = residual[rows, y]
    v[rows, y] = -at_label * (1.0 + at_label)
    if diagonal:
        h_w = np.einsum("ij,ij->j", v, x * x) / n + 2.0 * penalty.diag
    else:
        h_w = (v.T @ (x * x)) / n + 2.0 * penalty.off
        h_w[np.diag_indices(k)] += 2.0 * (penalty.diag - penalty.off)
        h_w = h_w.ravel()
    return np.concatenate([h_w, v.mean(axis=0) + 2.0 * penalty.bias])


def unpack(theta: np.ndarray, k: int, diagonal: bool) -> tuple[np.ndarray, np.ndarray]:
    """θ → (W [k, k], b [k]); a diagonal θ holds the k diagonal entries of W first."""
    if diagonal:
        return np.diag(theta[:k]), theta[k:]
    return theta[: k * k].reshape(k, k), theta[k * k:]


def pack(weights: np.ndarray, intercept: np.ndarray, diagonal: bool) -> np.ndarray:
    return np.concatenate([np.diagonal(weights) if diagonal else weights.ravel(), intercept])


def hessian(x: np.ndarray, weights: np.ndarray, intercept: np.ndarray, penalty: Penalty, diagonal: bool) -> np.ndarray:
    """Exact Hessian of :func:`objective` in θ's layout: :func:`loss_hessian` at σ(W x + b) plus the
    penalty's 2·weight on the diagonal."""
    k = x.shape[1]
    h = loss_hessian(x, softmax(affine_logits(x, weights, intercept, diagonal), axis=1), diagonal)
    pen_w, pen_b = penalty.curvature(k)
    h[np.diag_indices_from(h)] += pack(pen_w, pen_b, diagonal)
    return h


def loss_hessian(x: np.ndarray, p: np.ndarray, diagonal: bool) -> np.ndarray:
    """Hessian of the mean log-loss of a full or diagonal map at class probabilities ``p``, in θ's layout:
    (1/n) Σᵢ ∂²/∂θ² of the log-loss, entry (r, c) = mean[(p_a δ_ab − p_a p_b) f_r f_c] for θ_r on feature f_r of
    class a and θ_c on f_c of class b. With G = [p_a x̃] (n × P, x̃ = (x, 1)): −GᵀG, except within each class
    a, where it is Σᵢ p_a(1 − p_a) x̃ x̃ᵀ (:func:`_hessian_from_gram`). No n × k × k array is built: G is formed
    class-major (w_a1 … w_ak, b_a of class a together) and its products summed over blocks of
    :data:`NEWTON_BLOCK_ENTRIES` entries, then permuted to θ's layout (one n × P array at once cost 4,000 × 10
    classes 11 ms a Hessian, mostly page faults on its fresh temporaries; by blocks 4). The products run in the
    precision of ``x`` and ``p`` (float32 for truncated Newton's preconditioner); float64 result."""
    n, k = x.shape
    if diagonal:  # class a: w_aa on x_a, then b_a on 1 (θ index a, then k + a)
        return class_features_hessian(p, [x, np.ones((1, 1), dtype=x.dtype)])
    m = k + 1
    upper, blocks = np.zeros((k * m, k * m)), np.zeros((k * m, m))
    rows = max(1, NEWTON_BLOCK_ENTRIES // (k * m))
    features = np.ones((rows, m), dtype=x.dtype)
    for start in range(0, n, rows):
        p_rows, x_rows = p[start:start + rows], x[start:start + rows]
        f = features[: len(x_rows)]
        f[:, :k] = x_rows
        g = p_rows[:, :, None] * f[:, None, :]  # [rows, k, k + 1]: G's rows, class-major
        upper += _gram_upper(g.reshape(len(x_rows), -1))
        g *= (1.0 - p_rows)[:, :, None]
        blocks += g.reshape(len(x_rows), -1).T @ f
    classes = np.arange(k)
    # θ index of class a's j-th parameter: w_aj at a·k + j, b_a at k² + a
    index = np.hstack([classes[:, None] * k + classes[None, :], (k * k + classes)[:, None]])
    h = np.triu(upper)
    h += np.triu(h, 1).T
    order = index.ravel()  # class-major position → θ index
    full = np.empty_like(h)
    full[order[:, None], order[None, :]] = h
    return _hessian_from_gram(full, blocks.reshape(k, m, m), index, n)


def class_features_hessian(p: np.ndarray, features: list[np.ndarray]) -> np.ndarray:
    """The mean log-loss Hessian over parameters that each act on one feature of one class: parameter
    (f, a) adds θ·features[f][:, a] to class a's score (each feature broadcast to [n, k]); layout feature-major,
    index f·k + a (a diagonal map's θ for ``[x, 1]``). As :func:`loss_hessian`: −GᵀG plus each class's block,
    in the precision of ``p`` and the features, by blocks of :data:`HESSIAN_BLOCK_ROWS` rows (G of 1,000
    classes × 3 features is 12 KB a row); float64 result."""
    n, k = p.shape
    m = len(features)
    upper, blocks = np.zeros((k * m, k * m)), np.zeros((k, m, m))
    for start in range(0, n, HESSIAN_BLOCK_ROWS):
        rows = slice(start, start + HESSIAN_BLOCK_ROWS)
        p_rows = p[rows]
        f_rows = [np.broadcast_to(f[rows] if f.shape[0] == n else f, p_rows.shape) for f in features]
        v_rows = p_rows * (1.0 - p_rows)
        for i, f in enumerate(f_rows):
            for j, g in enumerate(f_rows[: i + 1]):
                blocks[:, i, j] += np.einsum("na,na->a", v_rows * f, g, dtype=np.float64)
        upper += _gram_upper(np.hstack([p_rows * f for f in f_rows]))  # G's rows in θ's layout
    lower = np.tril_indices(m, -1)
    blocks[:, lower[1], lower[0]] = blocks[:, lower[0], lower[1]]
    return _hessian_from_gram(upper, blocks, np.arange(m)[None, :] * k + np.arange(k)[:, None], n)


def _gram_upper(flat: np.ndarray) -> np.ndarray:
    """The upper triangle of flatᵀ flat (BLAS syrk, in the precision of ``flat``), as float64."""
    from scipy.linalg.blas import get_blas_funcs  # lazy: only Newton-sized problems pay its import

    syrk = get_blas_funcs("syrk", (flat,))
    return syrk(1.0, flat.T, trans=0, lower=0).astype(np.float64)  # flat.T is Fortran-ordered: no copy


def _hessian_from_gram(gram_upper: np.ndarray, blocks: np.ndarray, positions: np.ndarray, n: int) -> np.ndarray:
    """(blocks − GᵀG) / n from the upper triangle of GᵀG (G's columns in θ's layout): each class a's block
    [m, m] of ``blocks`` [k, m, m] replaces GᵀG's entries at θ indices ``positions[a]``."""
    h = np.triu(gram_upper)
    h += np.triu(h, 1).T
    h *= -1.0
    h[positions[:, :, None], positions[:, None, :]] = blocks  # Σ p(1 − p) f fᵀ, not Σ p f fᵀ − Σ p² f fᵀ
    h /= n
    return h


def _armijo(theta, step, value, grad, decrease, x, y, penalty, diagonal):
    """Backtracking from the full (Newton) step until the objective falls by 1e-4·t·``decrease`` (Armijo),
    halving t down to 1e-10. Returns ``(theta, value, grad, residual, None)`` at the accepted point (the
    residual of :func:`_objective_residual` there); where even the smallest step does not descend (rounding
    level reached), the unchanged point, no residual and, in place of None, whether the fit counts as converged
    (a predicted decrease already below 1e-8 relative)."""
    t = 1.0
    while True:
        new_value, new_grad, residual = _objective_residual(theta + t * step, x, y, penalty, diagonal)
        if new_value <= value - 1e-4 * t * decrease or t < 1e-10:
            break
        t /= 2
        del residual  # before the next trial's: one n × k work array at a time
    if new_value > value:
        return theta, value, grad, None, decrease < 1e-8 * max(abs(value), 1.0)
    return theta + t * step, new_value, new_grad, residual, None


def _newton(x, y, penalty, diagonal, weights, intercept, max_iter, tol):
    """Newton's method with Armijo backtracking; the step solves H s = −g by eigendecomposition,
    treating eigenvalues below 1e-12·max as zero (the softmax is invariant to adding a constant to
    every score, so the unpenalised Hessian is singular along those directions, where g is zero). Each
    Hessian (:func:`loss_hessian`) takes its probabilities from the residual of the objective evaluation at
    the same point, not from a softmax of its own."""
    k = x.shape[1]
    rows = np.arange(len(y))
    curvature = pack(*penalty.curvature(k), diagonal)
    theta = pack(weights, intercept, diagonal)
    value, grad, residual = _objective_residual(theta, x, y, penalty, diagonal)
    converged, steps = False, 0
    for steps in range(max_iter + 1):
        residual[rows, y] += 1.0  # σ(W x + b)
        h = loss_hessian(x, residual, diagonal)
        del residual
        h[np.diag_indices_from(h)] += curvature
        eigenvalues, vectors = np.linalg.eigh(h)
        keep = eigenvalues > 1e-12 * eigenvalues.max()
        step = -vectors[:, keep] @ ((vectors[:, keep].T @ grad) / eigenvalues[keep])
        decrease = -float(grad @ step)  # the squared Newton decrement; the predicted decrease is half of it
        if decrease / 2 <= tol * max(abs(value), 1.0):
            converged = True
            break
        if steps == max_iter:
            break
        theta, value, grad, residual, stopped = _armijo(theta, step, value, grad, decrease, x, y, penalty, diagonal)
        if stopped is not None:
            converged = stopped
            break
    weights, intercept = unpack(theta, k, diagonal)
    return weights, intercept, {"iterations": steps, "converged": converged, "loss": float(value)}


def hessian_blocks(x: np.ndarray, probs: np.ndarray, penalty: Penalty) -> np.ndarray:
    """The Hessian's k diagonal blocks of a full map at class probabilities ``probs``: block a, over class a's
    parameters (w_a1 … w_ak, b_a), is mean vₐ x̃ x̃ᵀ with vₐ = pₐ(1 − pₐ) and x̃ = (x, 1), plus the penalty's
    curvature. All k blocks come from one product per :data:`PAIR_PRODUCT_ROWS` rows, vᵀ times the rows' products
    x̃ⱼ x̃ₗ over the pairs j ≤ l (a row-wise Khatri–Rao product), in the precision of ``x`` and ``probs`` (float32
    halves the cost: truncated Newton uses them only to precondition), summed in float64; float64 blocks.
    100 classes × 4,000 rows in float32: 88 ms, against 155 for one BLAS syrk per class."""
    n, k = x.shape
    m = k + 1
    upper = np.triu_indices(m)
    weights = probs * (1.0 - probs)
    sums = np.zeros((k, upper[0].size))
    features = np.ones((min(n, PAIR_PRODUCT_ROWS), m), dtype=x.dtype)
    for start in range(0, n, PAIR_PRODUCT_ROWS):
        rows = slice(start, start + PAIR_PRODUCT_ROWS)
        f = features[: len(x[rows])]
        f[:, :k] = x[rows]
        sums += weights[rows].T @ (f[:, upper[0]] * f[:, upper[1]])
    blocks = np.empty((k, m, m))
    blocks[:, upper[0], upper[1]] = sums
    blocks[:, upper[1], upper[0]] = sums
    blocks /= n
    return _with_curvature(blocks, penalty)


def _inverse_of_positive_definite(blocks: np.ndarray) -> np.ndarray:
    """The inverses of the symmetric positive definite ``blocks`` [b, m, m] by Cholesky (LAPACK potrf, potri; 100
    blocks of 101²: 19 ms against 46 for numpy's LU inverse); numpy's inverse where one is not positive definite."""
    from scipy.linalg import lapack

    out = np.empty_like(blocks)
    for i, block in enumerate(blocks):
        factor, info = lapack.dpotrf(block, lower=0, clean=0)
        if info == 0:
            out[i], info = lapack.dpotri(factor, lower=0)
        if info != 0:
            return np.linalg.inv(blocks)
    strict = np.triu_indices(blocks.shape[1], 1)
    out[:, strict[1], strict[0]] = out[:, strict[0], strict[1]]  # potri fills the upper triangle
    return out


def _large_map_preconditioner(x_single, probs, penalty: Penalty, diagonal: bool, shared: dict):
    """Truncated Newton's preconditioner beyond :data:`NEWTON_CG_MAX_CLASSES` classes (the per-class blocks
    would hold 8 GB at 1,000 classes).

    A diagonal map gets the inverse of its exact Hessian (:func:`loss_hessian` at ``probs``, an n × 2k × 2k
    product, plus the penalty's curvature). A full map splits each class a's off-diagonal weights (row a of W
    without w_aa) into their mean direction ũ = 1/√(k−1) (coordinate γₐ, feature t̃ₐ = Σ_{j≠a} x_j/√(k−1))
    and the rest (Π: minus the row mean). ln q̂ = s − log Σ exp s share a large per-row component, so the
    Hessian is stiff along γ and couples the classes there through the softmax; at 1,000 classes (ImageNet-
    sized ln q̂, λ_code = μ_code = 10) the gradient lay almost wholly along γ and a preconditioner without it
    needed ~260 Hessian-vector products a fit. Blocks:

    * (w_aa, γₐ, bₐ) of every class: the exact dense 3k × 3k Hessian (:func:`class_features_hessian`);
    * the rest of the off-diagonal weights, in coordinates θ = T θ′ with bₐ = b′ₐ − (Π w′ₐ)·(Π mₐ), where
      they no longer couple with the bias (vₐ = pₐ(1 − pₐ), mₐ = Σ vₐ x / (Σ vₐ + 2μn)): the diagonal of the
      Schur complement S (mean vₐ x_j² + 2λ − m_aj·mean vₐ x_j) minus its part along the row's all-ones
      direction (Nyström, (S u)²/(uᵀ S u)), projected by Π.

    P⁻¹ = T blockdiag(…)⁻¹ Tᵀ. The log-loss parts (three n × k × k products and one n × 3k × 3k, float32) are
    taken once in ``shared`` and reused with each fit's penalty."""
    k = x_single.shape[1]
    if diagonal:
        h = loss_hessian(x_single, probs, diagonal=True)
        h[np.diag_indices_from(h)] += pack(*penalty.curvature(k), True)
        return _cholesky_solver(h)
    if "moments" not in shared:
        sums = x_single.sum(axis=1, dtype=np.float64)  # t: each row's sum over the features
        shared["moments"] = (*_row_sum_moments(x_single, probs, sums), class_features_hessian(
            probs, [x_single, (sums.astype(np.float32)[:, None] - x_single) / np.float32(np.sqrt(k - 1)),
                    np.ones((1, 1), dtype=np.float32)]))  # features x_a, t̃ₐ = Σ_{j≠a} x_j / √(k−1), 1
    s0, s1, s2, s_xt, s_t, s_tt, coarse_block = shared["moments"]
    n = x_single.shape[0]
    pen_w, pen_b = penalty.curvature(k)
    diag = np.arange(k)
    off = ~np.eye(k, dtype=bool)
    curvature_b = np.maximum(s0 / n + pen_b, 1e-300)
    means = s1 / n / curvature_b[:, None]  # mₐ, row a: decouples class a's weights from bₐ
    h_w = s2 / n + pen_w - s1 / n * means  # the diagonal of the Schur complement S
    # minus its part along the row's common feature t (Nyström: S u (uᵀ S u)⁻¹ uᵀ S, u = ones)
    along = s_xt / n - means * (s_t / n)[:, None] + pen_w  # S u
    kappa = s_tt / n - (s_t / n) ** 2 / curvature_b + pen_w.sum(axis=1)  # uᵀ S u
    h_w = np.maximum(h_w - along * along / kappa[:, None], 1e-3 * h_w)
    inverse_w = np.where(off, 1.0 / np.maximum(h_w, 1e-12 * h_w.max() + 1e-300), 0.0)
    projected_means = _off_diagonal_projection(means)
    pen_coarse = np.concatenate([np.diagonal(pen_w), (pen_w.sum(axis=1) - np.diagonal(pen_w)) / (k - 1), pen_b])
    coarse_h = coarse_block.copy()
    coarse_h[np.diag_indices_from(coarse_h)] += pen_coarse
    coarse_solve = _cholesky_solver(coarse_h)
    del coarse_h
    root = np.sqrt(k - 1)

    def precondition(r):
        r_w, r_b = r[: k * k].reshape(k, k), r[k * k:]
        r_fine = _off_diagonal_projection(r_w) - projected_means * r_b[:, None]  # Tᵀ r (b′ enters b only)
        out = _off_diagonal_projection(r_fine * inverse_w)
        r_gamma = (r_w.sum(axis=1) - np.diagonal(r_w)) / root  # along each row's off-diagonal mean direction
        coarse = coarse_solve(np.concatenate([np.diagonal(r_w), r_gamma, r_b]))
        out_b = coarse[2 * k:] - np.sum(projected_means * out, axis=1)  # T u
        out += (coarse[k: 2 * k] / root)[:, None]
        out[diag, diag] = coarse[:k]  # w_aa: the coarse block's, replacing what the line above added
        return np.concatenate([out.ravel(), out_b])

    return precondition


def _row_sum_moments(x_single, probs, sums):
    """With v = p(1 − p), by blocks of :data:`HESSIAN_BLOCK_ROWS` rows: Σ v (per class), vᵀx, vᵀx², vᵀ(x t)
    (float32 products, float64 sums) and vᵀt, vᵀt² (float64) for the row sums t = ``sums`` of x."""
    n, k = x_single.shape
    s0, s_t, s_tt = np.zeros(k), np.zeros(k), np.zeros(k)
    s1, s2, s_xt = np.zeros((k, k)), np.zeros((k, k)), np.zeros((k, k))
    for start in range(0, n, HESSIAN_BLOCK_ROWS):
        rows = slice(start, start + HESSIAN_BLOCK_ROWS)
        v, x, t = probs[rows] * (1.0 - probs[rows]), x_single[rows], sums[rows]
        s0 += v.sum(axis=0, dtype=np.float64)
        s1 += v.T @ x
        s2 += v.T @ (x * x)
        s_xt += v.T @ (x * t[:, None].astype(np.float32))
        v64 = v.astype(np.float64)
        s_t += t @ v64
        s_tt += (t * t) @ v64
    return s0, s1, s2, s_xt, s_t, s_tt


def _off_diagonal_projection(a: np.ndarray) -> np.ndarray:
    """Each row of the square ``a`` restricted to its off-diagonal entries, minus their mean (Π of
    :func:`_large_map_preconditioner`); the diagonal is 0."""
    k = a.shape[0]
    out = a - ((a.sum(axis=1) - np.diagonal(a)) / (k - 1))[:, None]
    np.fill_diagonal(out, 0.0)
    return out


def _cholesky_solver(h: np.ndarray):
    """r ↦ h⁻¹ r by Cholesky, after symmetric Jacobi scaling (D^(−1/2) h D^(−1/2), D = diag h) plus a ridge of
    1e-7, tenfold until it is positive definite: the unpenalised softmax is invariant to adding a constant to
    every b, so the Hessian is singular there (where the gradient is zero), and float32 rounding can make it
    slightly indefinite. A preconditioner's ridge changes the steps, not the optimum. The scaling keeps the
    ridge relative to each entry: one relative to the mean diagonal let a strong intercept penalty
    (μ_code = 10⁶, curvature 2·10⁶) put a ridge of 0.1 on weights of curvature 10⁻³–1, and truncated Newton
    needed ~90 Hessian-vector products a step instead of a few."""
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    scale = 1.0 / np.sqrt(np.maximum(np.diagonal(h), 1e-300))
    scaled = h * scale[:, None]
    scaled *= scale[None, :]
    diagonal = np.diagonal(scaled).copy()
    for power in range(-7, 1):
        np.fill_diagonal(scaled, diagonal + 10.0**power)
        try:
            factor = cho_factor(scaled)  # a copy: a failed attempt must leave ``scaled`` whole
            return lambda r: scale * cho_solve(factor, scale * r)
        except LinAlgError:
            continue
    raise LinAlgError("truncated Newton's preconditioner is not positive definite even with a ridge of its "
                      "diagonal")


def _with_curvature(blocks: np.ndarray, penalty: Penalty) -> np.ndarray:
    """The per-class blocks of :func:`hessian_blocks` plus the penalty's (diagonal) curvature, in place."""
    k = blocks.shape[0]
    pen_w, pen_b = penalty.curvature(k)
    blocks[:, np.arange(k + 1), np.arange(k + 1)] += np.hstack([pen_w, pen_b[:, None]])
    return blocks


def hessian_vector(x: np.ndarray, probs: np.ndarray, penalty: Penalty, v: np.ndarray,
                   diagonal: bool = False) -> np.ndarray:
    """H v (θ's layout) at class probabilities ``probs``: with scores' change dz = V x + c, the log-loss term
    is mean x̃ ⊗ p ⊙ (dz − p·dz) (for a full map two n × k × k products, as a gradient), plus 2·weight·v.
    The products run in the precision of ``x`` and ``probs``; the result is float64."""
    n, k = x.shape
    weights, intercept = unpack(v.astype(x.dtype, copy=False), k, diagonal)
    r = linear_scores(x, weights, diagonal)
    sum_r = np.zeros(k)
    hessian_vector_pass(r, intercept, probs, sum_r)  # r ← p ⊙ (dz − p·dz), one compiled pass per row
    pen_w, pen_b = penalty.curvature(k)
    data_w = np.einsum("ij,ij->j", r, x) if diagonal else (r.T @ x).ravel()
    data_term = np.concatenate([data_w.astype(np.float64), sum_r]) / n
    return data_term + pack(pen_w, pen_b, diagonal) * v


def affine_probs(x: np.ndarray, weights: np.ndarray, intercept: np.ndarray, diagonal: bool) -> np.ndarray:
    """σ(W x + b) for every row x of ``x``: the product, then the compiled softmax pass in place (it adds b), in
    the precision of ``x`` (1,000 × 100 float64: 0.2 ms, scipy's softmax of the affine logits 1.4)."""
    probs = linear_scores(x, weights, diagonal)
    softmax_pass(probs, intercept)
    return probs


def _single_probs(residual: np.ndarray, y: np.ndarray) -> np.ndarray:
    """σ(W x + b) in float32, for the Hessian's products, from the float64 ``residual`` σ − onehot(y) of
    :func:`_objective_residual` at the same θ, which it overwrites: one n × k pass, where computing σ afresh
    costs a full map an n × k × k product (0.3 CPU-s at 1,000 classes × 20,000 rows)."""
    residual[np.arange(len(y)), y] += 1.0
    return residual.astype(np.float32)


def _blocks_solver(shared: dict, penalty: Penalty):
    """r ↦ the inverse of the per-class blocks of ``shared["blocks"]`` (:func:`hessian_blocks`, the log-loss
    part) plus ``penalty``'s curvature, applied to r in θ's layout (block a acts on class a's row (w_a·, b_a)).

    The fits of a grid row share λ and differ in μ, which changes only the last (intercept) entry of each block:
    the inverse without the intercept's penalty is taken once per (λ, blocks) and kept in ``shared``, and each
    fit adds its 2μ to it by Sherman–Morrison (O(k (k + 1)) a product instead of an inversion, which costs about
    three objective evaluations at 100 classes; adding a positive curvature keeps it stable)."""
    blocks = shared["blocks"]
    k = blocks.shape[0]
    key = (penalty.off, penalty.diag)
    if shared.get("inverse_blocks", (None,))[0] != key:
        without_bias = Penalty(penalty.off, penalty.diag, 0.0, penalty.diag_centre)
        shared["inverse_blocks"] = (key, _inverse_of_positive_definite(_with_curvature(blocks.copy(), without_bias)))
    inverse = shared["inverse_blocks"][1]
    column = inverse[:, :, k].copy()  # A⁻¹ e_b of each block, e_b the intercept's position
    added = 2.0 * penalty.bias
    factor = added / (1.0 + added * column[:, k])

    def solve(r):  # (A + 2μ e_b e_bᵀ)⁻¹ r = A⁻¹ r − factor (e_bᵀ A⁻¹ r) A⁻¹ e_b
        rows = np.hstack([r[: k * k].reshape(k, k), r[k * k:, None]])
        out = np.matmul(inverse, rows[:, :, None])[:, :, 0]  # batched: 2.3 × einsum's speed
        out -= (factor * out[:, k])[:, None] * column
        return np.concatenate([out[:, :k].ravel(), out[:, k]])

    return solve


def _without_shift(solve, curvature: np.ndarray, k: int):
    """``solve`` (a preconditioner of a full map's Hessian H) balanced by the softmax's shift directions (Mandel
    1993's balancing; the same iterates as deflated CG, Nabben & Vuik 2006).

    Adding one vector to every class's row (w_a·, b_a) of θ adds the same score to every class and leaves σ(Wx + b)
    unchanged, so the log-loss Hessian is exactly zero along the k + 1 directions U = (1_k ⊗ I_{k+1})/√k and
    H U = D U, D = ``curvature`` (the penalty's, θ's layout). A per-class block preconditioner puts the data's
    curvature there instead, which a weak penalty makes a stiffness ratio of 10³–10⁵: truncated Newton spent most
    of its products on these k + 1 directions. The balanced preconditioner
    P = Q + (I − Q H) M⁻¹ (I − H Q), Q = U (Uᵀ D U)⁻¹ Uᵀ, solves them exactly, at O(θ) a product since Uᵀ D U is
    diagonal and H Q = D Q. One CIFAR-100 fold of ``dir_odir`` at λ_code = 0.01, μ_code = 10⁶: ~55 Hessian-vector
    products a fit instead of ~220. A shift direction the penalty leaves flat (λ = 0, or μ = 0 for the
    intercepts) is a null direction of H that the gradient has no part in; Q leaves it out."""
    def over_classes(v):  # √k Uᵀ v: each feature's (w_·j, then b) sum over the classes
        return np.concatenate([v[: k * k].reshape(k, k).sum(axis=0), [v[k * k:].sum()]])

    along = over_classes(curvature) / k
    inverse_along = np.divide(1.0, along, out=np.zeros_like(along), where=along > 0)  # (Uᵀ D U)⁻¹

    def coarse(v):  # Q v = U (Uᵀ D U)⁻¹ Uᵀ v
        c = inverse_along * over_classes(v) / k
        return np.concatenate([np.tile(c[:k], k), np.full(k, c[k])])

    def precondition(r):
        coarse_r = coarse(r)
        fine = solve(r - curvature * coarse_r)
        return coarse_r + fine - coarse(curvature * fine)

    return precondition


def _newton_cg(x, y, penalty, weights, intercept, max_iter, tol, shared=None, diagonal=False, evaluated=None):
    """Truncated Newton (Nocedal & Wright 2006, Alg. 7.1): each step solves H s = −g by conjugate gradients
    with Hessian-vector products (:func:`hessian_vector`) to a relative residual min(0.5, √‖g‖), at least
    :data:`CG_MIN_RESIDUAL`, preconditioned by the inverse of :func:`hessian_blocks` balanced by the softmax's
    shift directions (:func:`_blocks_solver`, :func:`_without_shift`; full maps up to
    :data:`NEWTON_CG_MAX_CLASSES` classes) or of :func:`_large_map_preconditioner`'s parts (beyond, and
    diagonal maps), taken at the start of the first fit on ``x`` that needs them (``shared`` of
    :func:`fit_affine_softmax`; a fit
    without ``shared`` takes them from every s-th row, :data:`PRECONDITIONER_ROWS`); then Armijo backtracking.
    ``evaluated``: (value, gradient, residual) at the start, where the caller has them. Stops as :func:`_newton`:
    half the Newton decrement
    −gᵀs at most ``tol``·max(|f|, 1). The Hessian's products (the preconditioner and H v) run in float32, at
    half the cost: they only shape the step; the objective and gradient, which decide the steps' acceptance
    and the stop, hence the optimum, stay float64. Each Hessian-vector product costs about a gradient, so it
    counts as an iteration: at most ``max_iter`` products and steps in all, the work bound of as many L-BFGS
    iterations."""
    n, k = x.shape
    theta = pack(weights, intercept, diagonal)
    value, grad, residual = evaluated or _objective_residual(theta, x, y, penalty, diagonal)
    del evaluated
    probs = _single_probs(residual, y)
    del residual
    stride = max(1, n // PRECONDITIONER_ROWS) if shared is None else 1  # a fit alone: sub-sampled blocks
    shared = {} if shared is None else shared
    if "x_single" not in shared:
        shared["x_single"] = x.astype(np.float32)
    x_single = shared["x_single"]
    if diagonal:
        precondition = None  # the exact Hessian's, taken at each step
    elif k >= LARGE_MAP_CLASSES:
        precondition = _large_map_preconditioner(x_single, probs, penalty, False, shared)
    else:
        if "blocks" not in shared:
            shared["blocks"] = hessian_blocks(x_single[::stride], probs[::stride], Penalty())
            shared.pop("inverse_blocks", None)
        precondition = _without_shift(_blocks_solver(shared, penalty), pack(*penalty.curvature(k), False), k)

    converged, used = False, 0
    while True:
        if diagonal:
            precondition = _large_map_preconditioner(x_single, probs, penalty, True, shared)
        step, residual = np.zeros_like(grad), -grad
        z = precondition(residual)
        direction, rz = z.copy(), float(residual @ z)
        target = float(np.clip(np.sqrt(np.linalg.norm(grad)), CG_MIN_RESIDUAL, 0.5)) * np.linalg.norm(grad)
        for _ in range(min(theta.size, max(max_iter - used, 1))):
            h_dir = hessian_vector(x_single, probs, penalty, direction, diagonal)
            used += 1
            curvature = float(direction @ h_dir)
            if curvature <= 0:  # flat direction (the softmax's shift invariance): take the step so far
                break
            alpha = rz / curvature
            step += alpha * direction
            residual -= alpha * h_dir
            if np.linalg.norm(residual) <= target:
                break
            z = precondition(residual)
            rz, rz_old = float(residual @ z), rz
            direction = z + (rz / rz_old) * direction
        if used >= max_iter:  # the budget ended inside CG: the step (and its decrement) is incomplete
            break
        if not step.any():
            step = -precondition(grad)
        decrease = -float(grad @ step)
        if decrease / 2 <= tol * max(abs(value), 1.0):
            converged = True
            break
        used += 1
        if used >= max_iter:
            break
        del probs  # the trial points' objectives each need an n × k work array
        theta, value, grad, residual, stopped = _armijo(theta, step, value, grad, decrease, x, y, penalty, diagonal)
        if stopped is not None:
            converged = stopped
            break
        probs = _single_probs(residual, y)
        del residual
    weights, intercept = unpack(theta, k, diagonal)
    return weights, intercept, {"iterations": used, "converged": converged, "loss": float(value)}


def fit_affine_softmax(x: np.ndarray, y: np.ndarray, penalty: Penalty, diagonal: bool, init=None,
                       max_iter: int = 1000, tol: float = 1e-10, shared: dict | None = None,
                       newton_cg_after: int = LBFGS_ITERS_BEFORE_NEWTON_CG) -> tuple[np.ndarray, np.ndarray, dict]:
    """Minimise mean log-loss + ``penalty`` of σ(W x + b) from ``init = (W, b)`` (default: W = I, b = 0).

    L-BFGS (:func:`_lbfgs`) first; where θ has at most :data:`NEWTON_MAX_PARAMS` entries and L-BFGS has
    not converged within :data:`LBFGS_ITERS_BEFORE_NEWTON` iterations, Newton's method (:func:`_newton`) finishes from
    where it stopped. Well-conditioned fits (matrix scaling on logits) stay with the cheap L-BFGS
    iterations; ill-conditioned ones (saturated ln q̂ features) get Newton's 5–10 steps instead of
    hundreds. Larger full maps of up to :data:`NEWTON_CG_MAX_CLASSES` classes that L-BFGS has not finished in
    ``newton_cg_after`` (:data:`LBFGS_ITERS_BEFORE_NEWTON_CG`) iterations are finished by truncated Newton
    (:func:`_newton_cg`), as are diagonal maps of :data:`LARGE_MAP_CLASSES` classes or more; full maps of as
    many run :func:`_fit_large_map`. At most ``max_iter`` iterations (L-BFGS iterations plus Newton steps) in
    all. Returns (W, b, info) with info = {"iterations", "converged", "loss", "solver"}.

    ``shared``: a dict that fits on the same ``x`` (a grid path, strong penalties first) pass along, holding
    truncated Newton's float32 copy of ``x``, its preconditioner's Hessian blocks (the log-loss part, at the
    probabilities where the first of those fits needed it) and
    their inverse for the current λ (:func:`_blocks_solver`), and L-BFGS's scaling (:func:`_lbfgs`). On a path of
    full maps, once a fit has needed truncated Newton, the later ones go straight to it (``info["solver"]``
    "newton-cg"): their weaker penalties need it too, and L-BFGS's iterations before it were half the search's
    objective evaluations. A preconditioner changes the steps, not the optimum: under ODIR, blocks taken at
    another grid point's solution precondition about as well as the fit's own (one CIFAR-100 fold at λ_code =
    μ_code = 0.01: 80–133 iterations with blocks from λ_code = 0.1, 10 or 10⁴, 96 with blocks at its own optimum,
    154 alone with sub-sampled ones).
    """
    k = x.shape[1]
    if not diagonal and k >= LARGE_MAP_CLASSES:
        return _fit_large_map(x, y, penalty, init, max_iter, tol, shared)
    weights, intercept = init if init is not None else (np.eye(k), np.zeros(k))
    small = (k if diagonal else k * k) + k <= NEWTON_MAX_PARAMS
    finisher = _newton if small else _newton_cg if (diagonal and k >= LARGE_MAP_CLASSES
                                                    or not diagonal and k <= NEWTON_CG_MAX_CLASSES) else None
    first = LBFGS_ITERS_BEFORE_NEWTON if finisher is _newton else newton_cg_after if finisher else max_iter
    full_cg = finisher is _newton_cg and not diagonal
    path = shared if full_cg and shared is not None else None
    if path is not None and path.get("newton_cg_needed"):
        first = 0
    if first > 0:
        weights, intercept, info = _lbfgs(x, y, penalty, diagonal, weights, intercept, min(max_iter, first), tol,
                                          keep_last=full_cg, path=path)
        info["solver"] = "lbfgs"
    else:
        info = {"iterations": 0, "converged": False, "solver": ""}
    if finisher and not info["converged"] and info["iterations"] < max_iter:
        args = (x, y, penalty) + ((diagonal,) if finisher is _newton else ())
        extra = ({"shared": shared, "diagonal": diagonal, "evaluated": info.pop("last", None)}
                 if finisher is _newton_cg else {})
        weights, intercept, newton = finisher(*args, weights, intercept, max_iter - info["iterations"], tol, **extra)
        if path is not None:
            path["newton_cg_needed"] = True
        name = "newton" if finisher is _newton else "newton-cg"
        info = {**newton, "iterations": info["iterations"] + newton["iterations"],
                "solver": f"lbfgs+{name}" if info["iterations"] else name}
    info.pop("last", None)
    return weights, intercept, info


def _fit_large_map(x, y, penalty, init, max_iter, tol, shared):
    """A full map of at least :data:`LARGE_MAP_CLASSES` classes: truncated Newton (:func:`_newton_cg`, the
    preconditioner of :func:`_large_map_preconditioner`) from ``init``, or else from the diagonal map fitted
    under the same penalty (each of its evaluations is one n × k pass, not two n × k × k products). Where the
    off-diagonal penalty is strong the full map is close to the diagonal one: on 1,000 synthetic classes ×
    20,000 rows (ODIR, λ_code = μ_code = 10, logits) 3 objective evaluations and 5 Hessian-vector products
    from it, against 6 and 45 from the temperature-scaled identity and 28 L-BFGS iterations from the identity
    (72 CPU-s), the same optimum. The diagonal fit's iterations count towards ``max_iter``."""
    used = 0
    if init is None:
        weights, intercept, start = fit_affine_softmax(x, y, penalty, True, max_iter=max_iter, tol=tol,
                                                       shared=shared)
        init, used = (weights, intercept), start["iterations"]
    weights, intercept, info = _newton_cg(x, y, penalty, *init, max(max_iter - used, 1), tol, shared)
    return weights, intercept, {**info, "iterations": used + info["iterations"],
                                "solver": "newton-cg" if used == 0 else "diagonal+newton-cg"}


def _lbfgs(x, y, penalty, diagonal, weights, intercept, max_iter, tol, keep_last=False, path=None):
    """L-BFGS on θ / d with d = diag(Hessian at the start)^(−1/2) (Jacobi preconditioning: ln q̂ features
    of very different scales otherwise make it crawl). In those coordinates the diagonal-Newton step is −g;
    its predicted decrease ½‖g‖² decides two things: a start (a warm start along a grid) or an iterate whose
    predicted decrease is below ``tol``·max(|f|, 1) (an iterate: :data:`LBFGS_ITERATE_MARGIN` times that) ends
    the fit, and the coordinates are further scaled by
    ‖g‖ so that L-BFGS's first trial step (unit length) is that Newton step rather than a blind unit step,
    which from a good warm start cost up to 40 line-search evaluations. It also stops when the objective's
    relative decrease in an iteration falls below ``tol``, or after ``max_iter`` iterations. The test at each
    iterate spares the line searches that L-BFGS-B runs at the objective's rounding level before its own
    relative-decrease test ends it: 7–17 % of the evaluations of a 100-class default-grid search
    (CIFAR-100 ResNet-20: `dir_odir` 798 → 739, `ms_odir` 785 → 655, the same chosen points).

    ``path``: the ``shared`` dict of a grid path of full maps; its first fit's log-loss part of the diagonal is
    kept there and reused, with each fit's penalty curvature, by the later ones (a scaling shapes the steps, not
    the optimum; the diagonal costs an n × k × k product, 135 of them in a 100-class default-grid search).
    ``keep_last``: return the (value, gradient, residual) where L-BFGS stopped in ``info["last"]``, for truncated
    Newton to start from without evaluating that point again."""
    k = x.shape[1]
    theta = pack(weights, intercept, diagonal)
    value, grad, residual = _objective_residual(theta, x, y, penalty, diagonal)
    curvature = pack(*penalty.curvature(k), diagonal)
    if path is not None and "jacobi" in path:
        h = path["jacobi"] + curvature
    else:
        h = hessian_diagonal(x, y, residual, penalty, diagonal)
        if path is not None:
            path["jacobi"] = h - curvature
    d = 1.0 / np.sqrt(np.maximum(h, 1e-8 * h.max() + 1e-300))
    newton_norm = float(np.linalg.norm(grad * d))
    if 0.5 * newton_norm**2 <= tol * max(abs(value), 1.0):
        return weights, intercept, {"iterations": 0, "converged": True, "loss": value}
    d *= newton_norm
    start = theta / d
    last = [start, value, grad, residual if keep_last else None]  # the latest point evaluated
    del residual
    predicted_small = [False]

    def scaled(theta_scaled):
        if theta_scaled is start or np.array_equal(theta_scaled, start):  # the start is already evaluated
            return value, grad * d
        last[:] = [theta_scaled.copy(), None, None, None]  # the previous residual goes before the next is made
        f, g, residual_here = _objective_residual(theta_scaled * d, x, y, penalty, diagonal)
        last[1:] = f, g, residual_here if keep_last else None
        return f, g * d

    def stop_at_small_predicted_decrease(intermediate_result):  # the start's test, with a margin, at each iterate
        scaled_grad = last[2] * (d / newton_norm)
        if np.array_equal(intermediate_result.x, last[0]) and (
                0.5 * float(scaled_grad @ scaled_grad) <= LBFGS_ITERATE_MARGIN * tol * max(abs(last[1]), 1.0)):
            predicted_small[0] = True
            raise StopIteration

    from scipy.optimize import minimize  # lazy: calibrate jobs of other methods skip its import

    result = minimize(scaled, start, jac=True, method="L-BFGS-B", callback=stop_at_small_predicted_decrease,
                      options={"maxiter": max_iter, "gtol": 1e-12, "ftol": tol, "maxcor": 20})
    weights, intercept = unpack(result.x * d, k, diagonal)
    info = {"iterations": int(result.nit), "converged": bool(result.success) or predicted_small[0],
            "loss": float(result.fun)}
    if keep_last and np.array_equal(last[0], result.x):
        info["last"] = tuple(last[1:])  # (value, gradient, residual) where L-BFGS stopped: truncated Newton's start
    return weights, intercept, info
