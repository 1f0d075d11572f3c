"""The exact Hessian of the affine-softmax objective (:mod:`calbench.solvers.affine_objective`) and its parts:
the mean log-loss Hessian of a full or diagonal map in θ's layout (Newton's method), over per-class features (the
large-map preconditioner's dense block) and its per-class diagonal blocks (truncated Newton's preconditioner).
No n × k × k array is built: the products are summed over blocks of rows (docs/solver.md)."""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from calbench.solvers.affine_objective import affine_logits, pack
from calbench.solvers.affine_penalty import Penalty

# The dense Hessian blocks of :func:`class_features_hessian` accumulate over blocks of this many rows (1,000
# classes × 3 features: 24 MB of float32 a block, where the whole of 20,000 rows held 0.7 GB at once).
HESSIAN_BLOCK_ROWS = 2048
# :func:`hessian_blocks` forms the pairwise products of this many rows' features at a time (100 classes: 5 MB of
# float32).
PAIR_PRODUCT_ROWS = 256
# Newton's Hessian of a full map (:func:`loss_hessian`) sums its products over row blocks of about this many
# entries of G (256 KB of float64: the temporaries stay in cache and are not fresh pages each time).
NEWTON_BLOCK_ENTRIES = 2**15
# Probabilities below this are 0 in the Hessian's products (:func:`curvature_parts`): float32's smallest normal
# number is 1.2·10⁻³⁸, and a product of such a probability with squared features must stay above it.
TINY_PROBABILITY = 1e-30


def curvature_parts(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, 1 − p) for the log-loss Hessian Σ (diag(p) − p pᵀ) ⊗ x̃ x̃ᵀ from class probabilities ``p`` [n, k], in
    their dtype. The Hessian is positive semi-definite because 1 − pₐ = Σ_{b≠a} p_b; two roundings break that
    in float32 (truncated Newton's preconditioners), and an unpenalised 1,000-class vector scaling's
    preconditioner then failed even with a ridge: a probability that rounds to 1 (beyond 1 − 6·10⁻⁸) has 1 − p
    = 0 while the others stay positive, so each row's largest entry's complement is taken as the sum of its
    others; and a probability below :data:`TINY_PROBABILITY` loses its relative precision in products that fall
    among float32's subnormals, so it is taken as 0 (its curvature is below 10⁻²⁰ of any other)."""
    p = p * (p >= TINY_PROBABILITY)
    rows, top = np.arange(len(p)), p.argmax(axis=1)
    complement = 1.0 - p
    largest = p[rows, top]
    p[rows, top] = 0.0  # the others' sum without the largest: 1 − (its sum with it) cancels
    complement[rows, top] = p.sum(axis=1)
    p[rows, top] = largest
    return p, complement


def hessian(x: np.ndarray, weights: np.ndarray, intercept: np.ndarray, penalty: Penalty, diagonal: bool) -> np.ndarray:
    """Exact Hessian of the objective in θ's layout: :func:`loss_hessian` at σ(W x + b) plus the penalty's
    2·weight on the diagonal."""
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
    :data:`NEWTON_BLOCK_ENTRIES` entries, then permuted to θ's layout (one n × P array at once is slower, mostly
    page faults on its fresh temporaries: docs/solver.md). The products run in the precision of ``x`` and ``p``
    (float32 for truncated Newton's preconditioner); float64 result."""
    n, k = x.shape
    if diagonal:  # class a: w_aa on x_a, then b_a on 1 (θ index a, then k + a)
        return class_features_hessian(p, [x, np.ones((1, 1), dtype=x.dtype)])
    m = k + 1
    upper, blocks = np.zeros((k * m, k * m)), np.zeros((k * m, m))
    rows = max(1, NEWTON_BLOCK_ENTRIES // (k * m))
    features = np.ones((rows, m), dtype=x.dtype)
    for start in range(0, n, rows):
        (p_rows, complement), x_rows = curvature_parts(p[start:start + rows]), x[start:start + rows]
        f = features[: len(x_rows)]
        f[:, :k] = x_rows
        g = p_rows[:, :, None] * f[:, None, :]  # [rows, k, k + 1]: G's rows, class-major
        upper += _gram_upper(g.reshape(len(x_rows), -1))
        g *= complement[:, :, None]
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
        p_rows, complement = curvature_parts(p[rows])
        f_rows = [np.broadcast_to(f[rows] if f.shape[0] == n else f, p_rows.shape) for f in features]
        v_rows = p_rows * complement
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


def hessian_blocks(x: np.ndarray, probs: np.ndarray, penalty: Penalty) -> np.ndarray:
    """The Hessian's k diagonal blocks of a full map at class probabilities ``probs``: block a, over class a's
    parameters (w_a1 … w_ak, b_a), is mean vₐ x̃ x̃ᵀ with vₐ = pₐ(1 − pₐ) and x̃ = (x, 1), plus the penalty's
    curvature. All k blocks come from one product per :data:`PAIR_PRODUCT_ROWS` rows, vᵀ times the rows' products
    x̃ⱼ x̃ₗ over the pairs j ≤ l (a row-wise Khatri–Rao product, faster than one BLAS syrk per class), in the
    precision of ``x`` and ``probs`` (float32 halves the cost: truncated Newton uses them only to precondition),
    summed in float64; float64 blocks."""
    n, k = x.shape
    m = k + 1
    upper = np.triu_indices(m)
    weights = np.multiply(*curvature_parts(probs))
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
    return with_curvature(blocks, penalty)


def with_curvature(blocks: np.ndarray, penalty: Penalty) -> np.ndarray:
    """The per-class blocks of :func:`hessian_blocks` plus the penalty's (diagonal) curvature, in place."""
    k = blocks.shape[0]
    pen_w, pen_b = penalty.curvature(k)
    blocks[:, np.arange(k + 1), np.arange(k + 1)] += np.hstack([pen_w, pen_b[:, None]])
    return blocks
