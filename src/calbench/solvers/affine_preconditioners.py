"""Truncated Newton's preconditioners for the affine-softmax fit (:mod:`calbench.solvers.affine_truncated_newton`;
docs/solver.md): each returns r ↦ P⁻¹ r in θ's layout. Full maps up to
:data:`~calbench.solvers.affine_softmax_fit.NEWTON_CG_MAX_CLASSES` classes: the inverse of the Hessian's per-class
blocks balanced by the softmax's shift directions (:func:`block_preconditioner`); larger full maps:
:func:`large_map_preconditioner`; diagonal maps of as many classes: their exact Hessian
(:func:`diagonal_map_preconditioner`). A preconditioner shapes the steps, not the optimum."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from calbench.solvers.affine_hessian import (
    HESSIAN_BLOCK_ROWS,
    class_features_hessian,
    curvature_parts,
    hessian_blocks,
    loss_hessian,
    with_curvature,
)
from calbench.solvers.affine_objective import pack
from calbench.solvers.affine_path_state import PathState
from calbench.solvers.affine_penalty import Penalty


def cholesky_solver(h: np.ndarray):
    """r ↦ h⁻¹ r by Cholesky, after symmetric Jacobi scaling (D^(−1/2) h D^(−1/2), D = diag h) plus a ridge of
    1e-7, tenfold until it is positive definite: the unpenalised softmax is invariant to adding a constant to
    every b, so the Hessian is singular there (where the gradient is zero), and float32 rounding can make it
    slightly indefinite. A preconditioner's ridge changes the steps, not the optimum. The scaling keeps the
    ridge relative to each entry: one relative to the mean diagonal let a strong intercept penalty
    (μ_code = 10⁶, curvature 2·10⁶) put a ridge of 0.1 on weights of curvature 10⁻³–1, and truncated Newton
    needed many more Hessian-vector products a step (docs/solver.md)."""
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


def _inverse_of_positive_definite(blocks: np.ndarray) -> np.ndarray:
    """The inverses of the symmetric positive definite ``blocks`` [b, m, m] by Cholesky (LAPACK potrf, potri;
    faster than numpy's LU inverse); numpy's inverse where one is not positive definite."""
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


def block_preconditioner(x_single: np.ndarray, probs: np.ndarray, penalty: Penalty, path: PathState, stride: int):
    """A full map's preconditioner up to :data:`~calbench.solvers.affine_softmax_fit.NEWTON_CG_MAX_CLASSES`
    classes: the inverse of the per-class blocks of :func:`~calbench.solvers.affine_hessian.hessian_blocks`
    (:func:`blocks_solver`) balanced by the softmax's shift directions (:func:`without_shift`). The blocks' log-loss
    part is taken once per ``path``, at ``probs``, from every ``stride``-th row (a sub-sampled Hessian, as Byrd,
    Chin, Neveitt & Nocedal 2011 precondition Newton-CG)."""
    k = x_single.shape[1]
    if path.blocks is None:
        path.blocks = hessian_blocks(x_single[::stride], probs[::stride], Penalty())
        path.inverse_key = path.inverse_blocks = None
    return without_shift(blocks_solver(path, penalty), pack(*penalty.curvature(k), False), k)


def blocks_solver(path: PathState, penalty: Penalty):
    """r ↦ the inverse of the per-class blocks of ``path.blocks`` (the log-loss part) plus ``penalty``'s
    curvature, applied to r in θ's layout (block a acts on class a's row (w_a·, b_a)).

    The fits of a grid row share λ and differ in μ, which changes only the last (intercept) entry of each block:
    the inverse without the intercept's penalty is taken once per (λ, blocks) and kept in ``path``, and each
    fit adds its 2μ to it by Sherman–Morrison (O(k (k + 1)) a product instead of an inversion; adding a positive
    curvature keeps it stable)."""
    blocks = path.blocks
    k = blocks.shape[0]
    key = (penalty.off, penalty.diag)
    if path.inverse_key != key:
        without_bias = Penalty(penalty.off, penalty.diag, 0.0, penalty.diag_centre)
        path.inverse_key = key
        path.inverse_blocks = _inverse_of_positive_definite(with_curvature(blocks.copy(), without_bias))
    inverse = path.inverse_blocks
    column = inverse[:, :, k].copy()  # A⁻¹ e_b of each block, e_b the intercept's position
    added = 2.0 * penalty.bias
    factor = added / (1.0 + added * column[:, k])

    def solve(r):  # (A + 2μ e_b e_bᵀ)⁻¹ r = A⁻¹ r − factor (e_bᵀ A⁻¹ r) A⁻¹ e_b
        rows = np.hstack([r[: k * k].reshape(k, k), r[k * k:, None]])
        out = np.matmul(inverse, rows[:, :, None])[:, :, 0]  # batched, faster than einsum
        out -= (factor * out[:, k])[:, None] * column
        return np.concatenate([out[:, :k].ravel(), out[:, k]])

    return solve


def without_shift(solve, curvature: np.ndarray, k: int):
    """``solve`` (a preconditioner of a full map's Hessian H) balanced by the softmax's shift directions (Mandel
    1993's balancing; the same iterates as deflated CG, Nabben & Vuik 2006).

    Adding one vector to every class's row (w_a·, b_a) of θ adds the same score to every class and leaves σ(Wx + b)
    unchanged, so the log-loss Hessian is exactly zero along the k + 1 directions U = (1_k ⊗ I_{k+1})/√k and
    H U = D U, D = ``curvature`` (the penalty's, θ's layout). A per-class block preconditioner puts the data's
    curvature there instead, which a weak penalty makes a stiffness ratio of 10³–10⁵: truncated Newton spent most
    of its products on these k + 1 directions. The balanced preconditioner
    P = Q + (I − Q H) M⁻¹ (I − H Q), Q = U (Uᵀ D U)⁻¹ Uᵀ, solves them exactly, at O(θ) a product since Uᵀ D U is
    diagonal and H Q = D Q. A shift direction the penalty leaves flat (λ = 0, or μ = 0 for the intercepts) is a
    null direction of H that the gradient has no part in; Q leaves it out."""
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


def diagonal_map_preconditioner(x_single: np.ndarray, probs: np.ndarray, penalty: Penalty):
    """A diagonal map's preconditioner from :data:`~calbench.solvers.affine_softmax_fit.LARGE_MAP_CLASSES`
    classes: the inverse of its exact Hessian (:func:`~calbench.solvers.affine_hessian.loss_hessian` at ``probs``,
    an n × 2k × 2k product, plus the penalty's curvature)."""
    k = x_single.shape[1]
    h = loss_hessian(x_single, probs, diagonal=True)
    h[np.diag_indices_from(h)] += pack(*penalty.curvature(k), True)
    return cholesky_solver(h)


class LargeMapMoments(NamedTuple):
    """The log-loss parts of :func:`large_map_preconditioner`, with v = p(1 − p) and t each row's feature sum:
    Σ v (per class), vᵀx, vᵀx², vᵀ(x t), vᵀt, vᵀt², the dense Hessian over (w_aa, γₐ, bₐ) of every class (a mean),
    and the number of rows summed."""

    s0: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    s_xt: np.ndarray
    s_t: np.ndarray
    s_tt: np.ndarray
    coarse_block: np.ndarray
    rows: int


def large_map_moments(x_single: np.ndarray, probs: np.ndarray) -> LargeMapMoments:
    """:class:`LargeMapMoments` at ``probs``: float32 products, float64 sums, by blocks of
    :data:`~calbench.solvers.affine_hessian.HESSIAN_BLOCK_ROWS` rows; the dense block over the features x_a,
    t̃ₐ = Σ_{j≠a} x_j / √(k−1) and 1 (:func:`~calbench.solvers.affine_hessian.class_features_hessian`)."""
    n, k = x_single.shape
    sums = x_single.sum(axis=1, dtype=np.float64)  # t: each row's sum over the features
    s0, s_t, s_tt = np.zeros(k), np.zeros(k), np.zeros(k)
    s1, s2, s_xt = np.zeros((k, k)), np.zeros((k, k)), np.zeros((k, k))
    for start in range(0, n, HESSIAN_BLOCK_ROWS):
        rows = slice(start, start + HESSIAN_BLOCK_ROWS)
        v, x, t = np.multiply(*curvature_parts(probs[rows])), x_single[rows], sums[rows]
        s0 += v.sum(axis=0, dtype=np.float64)
        s1 += v.T @ x
        s2 += v.T @ (x * x)
        s_xt += v.T @ (x * t[:, None].astype(np.float32))
        v64 = v.astype(np.float64)
        s_t += t @ v64
        s_tt += (t * t) @ v64
    coarse_block = class_features_hessian(
        probs, [x_single, (sums.astype(np.float32)[:, None] - x_single) / np.float32(np.sqrt(k - 1)),
                np.ones((1, 1), dtype=np.float32)])
    return LargeMapMoments(s0, s1, s2, s_xt, s_t, s_tt, coarse_block, n)


def large_map_preconditioner(x_single: np.ndarray, probs: np.ndarray, penalty: Penalty, path: PathState,
                             stride: int = 1):
    """Truncated Newton's preconditioner of a full map beyond
    :data:`~calbench.solvers.affine_softmax_fit.NEWTON_CG_MAX_CLASSES` classes, where the per-class blocks would
    not fit in memory (and of ``sms``'s fit alone from 50 classes, where they cost more to set up).

    It splits each class a's off-diagonal weights (row a of W without w_aa) into their mean direction
    ũ = 1/√(k−1) (coordinate γₐ, feature t̃ₐ = Σ_{j≠a} x_j/√(k−1)) and the rest (Π: minus the row mean).
    ln q̂ = s − log Σ exp s share a large per-row component, so the Hessian is stiff along γ and couples the
    classes there through the softmax; on ImageNet-sized ln q̂ the gradient lay almost wholly along γ
    (docs/solver.md). Blocks:

    * (w_aa, γₐ, bₐ) of every class: the exact dense 3k × 3k Hessian (:func:`_coarse_solver`);
    * the rest of the off-diagonal weights, in coordinates θ = T θ′ with bₐ = b′ₐ − (Π w′ₐ)·(Π mₐ), where
      they no longer couple with the bias: the diagonal of the Schur complement (:func:`_fine_inverse`).

    P⁻¹ = T blockdiag(…)⁻¹ Tᵀ. The log-loss parts (:func:`large_map_moments`) are taken once per ``path``, from
    every ``stride``-th row (a sub-sampled Hessian, as :func:`block_preconditioner`), and reused with each fit's
    penalty."""
    k = x_single.shape[1]
    if path.moments is None:
        rows = slice(None, None, stride)
        path.moments = large_map_moments(np.ascontiguousarray(x_single[rows]), np.ascontiguousarray(probs[rows]))
    inverse_w, means = _fine_inverse(path.moments, penalty)
    projected_means = _off_diagonal_projection(means)
    coarse_solve = _coarse_solver(path.moments.coarse_block, penalty)
    diag = np.arange(k)
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


def _fine_inverse(moments: LargeMapMoments, penalty: Penalty) -> tuple[np.ndarray, np.ndarray]:
    """The inverse diagonal of the off-diagonal weights' block of :func:`large_map_preconditioner` (0 on W's
    diagonal) and the means mₐ = Σ vₐ x / (Σ vₐ + 2μn) that decouple class a's weights from bₐ: the diagonal of
    the Schur complement S (mean vₐ x_j² + 2λ − m_aj·mean vₐ x_j) minus its part along the row's all-ones
    direction (Nyström, (S u)²/(uᵀ S u))."""
    k, n = moments.s0.shape[0], moments.rows
    pen_w, pen_b = penalty.curvature(k)
    off = ~np.eye(k, dtype=bool)
    curvature_b = np.maximum(moments.s0 / n + pen_b, 1e-300)
    means = moments.s1 / n / curvature_b[:, None]  # mₐ, row a: decouples class a's weights from bₐ
    h_w = moments.s2 / n + pen_w - moments.s1 / n * means  # the diagonal of the Schur complement S
    # minus its part along the row's common feature t (Nyström: S u (uᵀ S u)⁻¹ uᵀ S, u = ones)
    along = moments.s_xt / n - means * (moments.s_t / n)[:, None] + pen_w  # S u
    kappa = moments.s_tt / n - (moments.s_t / n) ** 2 / curvature_b + pen_w.sum(axis=1)  # uᵀ S u
    h_w = np.maximum(h_w - along * along / kappa[:, None], 1e-3 * h_w)
    return np.where(off, 1.0 / np.maximum(h_w, 1e-12 * h_w.max() + 1e-300), 0.0), means


def _coarse_solver(coarse_block: np.ndarray, penalty: Penalty):
    """r ↦ the inverse of the dense Hessian over (w_aa, γₐ, bₐ) of every class plus ``penalty``'s curvature
    there (:func:`cholesky_solver`)."""
    k = coarse_block.shape[0] // 3
    pen_w, pen_b = penalty.curvature(k)
    pen_coarse = np.concatenate([np.diagonal(pen_w), (pen_w.sum(axis=1) - np.diagonal(pen_w)) / (k - 1), pen_b])
    coarse_h = coarse_block.copy()
    coarse_h[np.diag_indices_from(coarse_h)] += pen_coarse
    return cholesky_solver(coarse_h)


def _off_diagonal_projection(a: np.ndarray) -> np.ndarray:
    """Each row of the square ``a`` restricted to its off-diagonal entries, minus their mean (Π of
    :func:`large_map_preconditioner`); the diagonal is 0."""
    k = a.shape[0]
    out = a - ((a.sum(axis=1) - np.diagonal(a)) / (k - 1))[:, None]
    np.fill_diagonal(out, 0.0)
    return out
