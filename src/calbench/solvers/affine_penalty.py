"""The quadratic penalties of the affine-softmax fit σ(W x + b) (Dirichlet paper, Kull et al. 2019, §3;
docs/methods_parametric.md):

* ODIR:  λ/(k(k−1)) Σ_{i≠j} w²ᵢⱼ + μ/k Σⱼ b²ⱼ, the diagonal of W unpenalised;
* L2 (Dir-L2):  λ/(k(k+1)) (Σᵢⱼ w²ᵢⱼ + Σⱼ b²ⱼ), shrinking towards W = 0, b = 0.

``reg_scale="paper"`` uses those normalisations; ``reg_scale="code"`` drops the 1/(k(k−1)), 1/k and
1/(k(k+1)) factors as the authors' Keras code did, so λ_paper = k(k−1)·λ_code and μ_paper = k·μ_code
(ODIR), λ_paper = k(k+1)·λ_code (L2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REG_SCALES = ("paper", "code")


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


def check_reg_scale(reg_scale: str) -> None:
    """Refuses a ``reg_scale`` other than :data:`REG_SCALES`, naming both."""
    if reg_scale not in REG_SCALES:
        raise ValueError(f"reg_scale: expected one of {REG_SCALES} ('paper': the paper's normalised penalty, "
                         f"'code': the authors' unnormalised Keras penalty), got {reg_scale!r}")


def odir_penalty(reg_lambda: float, reg_mu: float, k: int, reg_scale: str = "paper",
                 centre: float | None = None) -> Penalty:
    """ODIR (Dirichlet paper §3): λ/(k(k−1)) Σ_{i≠j} w²ᵢⱼ + μ/k Σ b²ⱼ (``"code"``: no normalisation). With a
    ``centre`` β (``shrink_to="temperature"``), the diagonal is penalised as each off-diagonal weight is, around
    β: + λ/(k(k−1)) Σᵢ (wᵢᵢ − β)², so that the strong-λ limit is temperature scaling σ(β x), not a free diagonal."""
    check_reg_scale(reg_scale)
    lam, mu = _check_reg("reg_lambda", reg_lambda), _check_reg("reg_mu", reg_mu)
    if reg_scale == "paper":
        lam, mu = lam / (k * (k - 1)), mu / k
    if centre is None:
        return Penalty(off=lam, diag=0.0, bias=mu)
    return Penalty(off=lam, diag=lam, bias=mu, diag_centre=centre)


def l2_penalty(reg_lambda: float, k: int, reg_scale: str = "paper", centre: float | None = None) -> Penalty:
    """Dir-L2: λ/(k(k+1)) times the squared norm of all k(k+1) parameters (``"code"``: no normalisation), around
    the uniform map W = 0, b = 0, or around temperature scaling W = βI, b = 0 with a ``centre`` β."""
    check_reg_scale(reg_scale)
    lam = _check_reg("reg_lambda", reg_lambda)
    if reg_scale == "paper":
        lam = lam / (k * (k + 1))
    return Penalty(off=lam, diag=lam, bias=lam, diag_centre=0.0 if centre is None else centre)
