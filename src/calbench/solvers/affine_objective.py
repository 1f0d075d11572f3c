"""The objective of the affine-softmax fit and its derivatives: the mean log-loss of σ(W x + b) plus a
:class:`~calbench.solvers.affine_penalty.Penalty`, its gradient, the Hessian's diagonal and Hessian-vector
products, in θ = (W or diag W, b) (Dirichlet paper, Kull et al. 2019, §3, Eq. 7's layer; docs/solver.md). The
Hessian itself: :mod:`calbench.solvers.affine_hessian`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from calbench.kernels.softmax_residual import hessian_vector_pass, residual_pass, softmax_pass
from calbench.solvers.affine_penalty import Penalty


class Evaluation(NamedTuple):
    """The objective at one θ: its value, gradient and the residual σ(W x + b) − onehot(y) [n, k]."""

    value: float
    grad: np.ndarray
    residual: np.ndarray


@dataclass(frozen=True)
class AffineProblem:
    """One fit: minimise the mean log-loss of σ(W x + b) on rows ``x`` [n, k] with labels ``y`` plus ``penalty``,
    W full or ``diagonal``, until the predicted decrease is at most ``tol``·max(|f|, 1)."""

    x: np.ndarray
    y: np.ndarray
    penalty: Penalty
    diagonal: bool
    tol: float

    @property
    def k(self) -> int:
        return self.x.shape[1]

    def evaluate(self, theta: np.ndarray) -> Evaluation:
        return objective_residual(theta, self.x, self.y, self.penalty, self.diagonal)

    def curvature(self) -> np.ndarray:
        """The penalty's second derivative in each parameter, in θ's layout."""
        return pack(*self.penalty.curvature(self.k), self.diagonal)

    def converged(self, predicted_decrease: float, value: float) -> bool:
        """The stopping test of every solver: a predicted decrease of at most ``tol``·max(|f|, 1)."""
        return predicted_decrease <= self.tol * max(abs(value), 1.0)

    def newton_decrease_bound(self, grad: np.ndarray) -> float:
        """An upper bound on Newton's predicted decrease ½ gᵀH⁻¹g at gradient ``grad``, from the penalty alone:
        the log-loss Hessian is positive semi-definite, so H ⪰ C, the penalty's (diagonal) curvature, and
        gᵀH⁻¹g ≤ gᵀC⁻¹g. Infinite where a parameter is unpenalised. Where it passes :meth:`converged`, the
        Newton step's own decrement (at most gᵀH⁻¹g) would too, so a solver may stop without solving for it."""
        curvature = self.curvature()
        if not (curvature > 0).all():
            return float("inf")
        return 0.5 * float(np.sum(grad * grad / curvature))

    def weights(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return unpack(theta, self.k, self.diagonal)


def unpack(theta: np.ndarray, k: int, diagonal: bool) -> tuple[np.ndarray, np.ndarray]:
    """θ → (W [k, k], b [k]); a diagonal θ holds the k diagonal entries of W first."""
    if diagonal:
        return np.diag(theta[:k]), theta[k:]
    return theta[: k * k].reshape(k, k), theta[k * k:]


def pack(weights: np.ndarray, intercept: np.ndarray, diagonal: bool) -> np.ndarray:
    """(W, b) → θ, the inverse of :func:`unpack`."""
    return np.concatenate([np.diagonal(weights) if diagonal else weights.ravel(), intercept])


def linear_scores(x: np.ndarray, weights: np.ndarray, diagonal: bool) -> np.ndarray:
    """W x for every row x of ``x`` [n, k] (a new C-ordered array, as the compiled row passes expect, whatever
    the order of ``x``); ``diagonal`` uses only the diagonal of W."""
    return np.multiply(x, np.diagonal(weights), order="C") if diagonal else x @ weights.T


def affine_logits(x: np.ndarray, weights: np.ndarray, intercept: np.ndarray, diagonal: bool) -> np.ndarray:
    """W x + b for every row x of ``x`` [n, k]; ``diagonal`` uses only the diagonal of W."""
    out = linear_scores(x, weights, diagonal)
    out += intercept
    return out


def affine_probs(x: np.ndarray, weights: np.ndarray, intercept: np.ndarray, diagonal: bool) -> np.ndarray:
    """σ(W x + b) for every row x of ``x``: the product, then the compiled softmax pass in place (it adds b), in
    the precision of ``x``."""
    probs = linear_scores(x, weights, diagonal)
    softmax_pass(probs, intercept)
    return probs


def objective(theta: np.ndarray, x: np.ndarray, y: np.ndarray, penalty: Penalty, diagonal: bool):
    """Mean log-loss of σ(W x + b) plus ``penalty``, and its gradient in θ = (W or diag W, b)."""
    value, grad, _ = objective_residual(theta, x, y, penalty, diagonal)
    return value, grad


def objective_residual(theta: np.ndarray, x: np.ndarray, y: np.ndarray, penalty: Penalty,
                       diagonal: bool) -> Evaluation:
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
    return Evaluation(loss + penalty.value(weights, intercept), np.concatenate([grad_w, grad_b]), work)


def hessian_diagonal(x: np.ndarray, y: np.ndarray, residual: np.ndarray, penalty: Penalty,
                     diagonal: bool) -> np.ndarray:
    """Diagonal of the objective's Hessian, in θ's layout: mean pᵢ(1−pᵢ) xⱼ² (+ 2·penalty weight), with p
    from the ``residual`` r = p − onehot(y) of :func:`objective_residual` at the same point (no softmax of its
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


def float32_probs(residual: np.ndarray, y: np.ndarray) -> np.ndarray:
    """σ(W x + b) in float32, for the Hessian's products, from the float64 ``residual`` σ − onehot(y) of
    :func:`objective_residual` at the same θ, which it overwrites: one n × k pass, where computing σ afresh
    costs a full map an n × k × k product."""
    residual[np.arange(len(y)), y] += 1.0
    return residual.astype(np.float32)
