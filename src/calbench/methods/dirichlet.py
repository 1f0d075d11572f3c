"""Dirichlet calibration (Kull et al. 2019, "Beyond temperature scaling"; docs/methods_parametric.md).

The map is fitted in the linear parametrisation σ(W ln q̂ + b) (paper Eq. 7) on the clipped
log-probabilities and exposed also in the canonical one σ(A ln(q̂/u) + ln c) (Eq. 8, u = (1/k, …, 1/k)),
which is unique: A ≥ 0 with a zero in every column, c ∈ Δ_k (the image of the simplex centre). The
conversions after Theorem 1 (Supp. B) are :func:`linear_to_canonical` and :func:`canonical_to_linear`.

* ``dir``: unregularised (LECE paper §4.1.2: "DIR … without regularization", 3 classes).
* ``dir_diag``: W diagonal, unregularised.
* ``dir_l2``: λ/(k(k+1)) (‖W‖² + ‖b‖²) (Dir-L2; the paper gives no formula, this is the authors' DNN code
  normalised like the ``reg_norm`` option of their library), λ by 5-fold CV, fold models averaged.
* ``dir_odir``: λ/(k(k−1)) Σ_{i≠j} w²ᵢⱼ + μ/k Σ b²ⱼ (paper §3), (λ, μ) by 5-fold CV, fold models averaged.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from calbench.methods.base import MissingClass
from calbench.methods.linear_maps import AffineSoftmax, ODIRTuned, l2_default_grid
from calbench.methods.registry import register
from calbench.scores import PROB_EPS
from calbench.solvers.affine_penalty import Penalty, l2_penalty


def linear_to_canonical(weights: np.ndarray, intercept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) → (A, c): aᵢⱼ = wᵢⱼ − minᵢ wᵢⱼ (column minimum), c = σ(W ln u + b) (Dirichlet paper Supp. B)."""
    k = weights.shape[0]
    canonical_weights = weights - weights.min(axis=0, keepdims=True)
    centre = softmax(weights @ np.full(k, -np.log(k)) + intercept)
    return canonical_weights, centre


def canonical_to_linear(canonical_weights: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A, c) → (W, b) = (A, ln c − A ln u), the inverse map up to the softmax invariances."""
    k = canonical_weights.shape[0]
    return canonical_weights.copy(), np.log(centre) - canonical_weights @ np.full(k, -np.log(k))


class DirichletBase(AffineSoftmax):
    """σ(W ln q̂ + b) with q̂ clipped below at ``eps``; the canonical form (A, c) of Eq. 8 in
    ``canonical_weights_`` and ``canonical_intercept_``."""

    uses_log_probs = True

    @property
    def canonical_weights_(self) -> np.ndarray:
        """A of the canonical parametrisation (Eq. 8)."""
        return linear_to_canonical(self.weights_, self.intercept_)[0]

    @property
    def canonical_intercept_(self) -> np.ndarray:
        """c of the canonical parametrisation (Eq. 8): the calibrated output at the simplex centre."""
        return linear_to_canonical(self.weights_, self.intercept_)[1]

    def fitted_summary(self) -> dict:
        summary = super().fitted_summary()
        if self.weights_.shape[0] <= 10:
            a, c = linear_to_canonical(self.weights_, self.intercept_)
            summary |= {"canonical_weights": a.tolist(), "canonical_intercept": c.tolist()}
        return summary


@register("dir")
class Dirichlet(DirichletBase):
    """Full Dirichlet calibration, unregularised."""

    #: Unregularised: a class without examples drives its bias to −∞ (refused; dir_l2, dir_odir cope).
    on_missing_class = MissingClass.REFUSE

    def __init__(self, *, eps: float = PROB_EPS, max_iter: int = 1000, tol: float = 1e-10):
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol


@register("dir_diag")
class DirichletDiagonal(Dirichlet):
    """Dirichlet calibration with a diagonal W (vector scaling on ln q̂), unregularised."""

    diagonal = True


@register("dir_l2")
class DirichletL2(DirichletBase):
    """Dir-L2: full Dirichlet calibration with an L2 penalty on its weights and intercepts (Dirichlet paper §3),
    λ tuned by cross-validation. The penalty is :func:`l2_penalty`."""

    default_grid = staticmethod(l2_default_grid)
    default_cv = {"folds": 5, "ensemble": True}

    def __init__(self, *, reg_lambda: float = 0.0, reg_scale: str = "paper", shrink_to: str = "temperature",
                 eps: float = PROB_EPS, max_iter: int = 1000, tol: float = 1e-10):
        self.reg_lambda = reg_lambda
        self.reg_scale = reg_scale
        self.shrink_to = shrink_to
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol

    def penalty(self, k: int) -> Penalty:
        return l2_penalty(self.reg_lambda, k, self.reg_scale, self.penalty_centre_)


@register("dir_odir")
class DirichletODIR(ODIRTuned, DirichletBase):
    """Dir-ODIR: full Dirichlet calibration with the ODIR penalty (off-diagonal and intercept regularisation,
    Dirichlet paper §3), λ and μ tuned by cross-validation. The tuning is :class:`ODIRTuned`'s."""

    def __init__(self, *, reg_lambda: float = 0.0, reg_mu: float = 0.0, reg_scale: str = "paper",
                 shrink_to: str = "temperature", eps: float = PROB_EPS, max_iter: int = 1000, tol: float = 1e-10):
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.reg_scale = reg_scale
        self.shrink_to = shrink_to
        self.eps = eps
        self.max_iter = max_iter
        self.tol = tol
