"""Vector and matrix scaling on logits (Guo et al. 2017; Dirichlet paper §3–4.2; docs/methods_parametric.md).

* ``vs``: σ(diag(w) z + b), unregularised.
* ``ms``: σ(W z + b), unregularised (the Dirichlet paper leaves it out: it overfits with many classes).
* ``ms_odir``: σ(W z + b) with the ODIR penalty λ/(k(k−1)) Σ_{i≠j} w²ᵢⱼ + μ/k Σ b²ⱼ, (λ, μ) chosen by 5-fold
  CV on log-loss over the authors' grid, the 5 fold models averaged at prediction time (paper §4.2).
"""

from __future__ import annotations

from calbench.methods.base import MissingClass
from calbench.methods.linear_maps import AffineSoftmax, ODIRTuned
from calbench.methods.registry import register


@register("ms")
class MatrixScaling(AffineSoftmax):
    """σ(W z + b) on logits, unregularised, fitted by log-loss from W = I, b = 0."""

    #: Unregularised: a class without examples drives its bias to −∞ (refused; ms_odir copes).
    on_missing_class = MissingClass.REFUSE
    composes_to_itself = True

    def __init__(self, *, max_iter: int = 1000, tol: float = 1e-10):
        self.max_iter = max_iter
        self.tol = tol


@register("vs")
class VectorScaling(MatrixScaling):
    """σ(diag(w) z + b) on logits: matrix scaling with W restricted to its diagonal, from w = 1, b = 0."""

    diagonal = True


@register("ms_odir")
class MatrixScalingODIR(ODIRTuned, AffineSoftmax):
    """σ(W z + b) on logits with the ODIR penalty (Dirichlet paper §3), λ and μ tuned by cross-validation.
    The tuning is :class:`ODIRTuned`'s."""

    def __init__(self, *, reg_lambda: float = 0.0, reg_mu: float = 0.0, reg_scale: str = "paper",
                 shrink_to: str = "temperature", max_iter: int = 1000, tol: float = 1e-10):
        self.reg_lambda = reg_lambda
        self.reg_mu = reg_mu
        self.reg_scale = reg_scale
        self.shrink_to = shrink_to
        self.max_iter = max_iter
        self.tol = tol
