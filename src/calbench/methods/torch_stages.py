"""Torch modules of the calibration stages that parametric calibrators export (``Calibrator.torch_stage``).

Every stage reads float64 logits ``[N, C]``: ``forward`` returns what the method's ``transform`` passes to a
chain's next stage (the logits of TS and the affine maps, the log-probabilities floored at ``PROB_EPS`` of the
others) and ``proba`` the calibrated probabilities, each reproducing its method's numpy formula. Imported only
by ``torch_stage`` methods, so that no calibrate job imports torch.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from calbench.scores import PROB_EPS


def _buffer(value) -> Tensor:
    return torch.as_tensor(value, dtype=torch.float64).clone()


class Stage(nn.Module):
    """One calibration stage: by default its output for the next stage is ln max(``proba``, ``PROB_EPS``)
    (``Calibrator.transform``)."""

    def __init__(self):
        super().__init__()
        self.eps = PROB_EPS  # an attribute: TorchScript cannot read module-level floats

    def forward(self, z: Tensor) -> Tensor:
        return torch.log(torch.clamp(self.proba(z), min=self.eps))

    def proba(self, z: Tensor) -> Tensor:
        raise NotImplementedError


class Identity(Stage):
    """``uncal``: σ(z), passing z on."""

    def forward(self, z: Tensor) -> Tensor:
        return z

    def proba(self, z: Tensor) -> Tensor:
        return torch.softmax(z, dim=1)


class Temperature(Stage):
    """Temperature scaling (Guo et al. 2017, §4.2): σ(z / T), passing z / T on."""

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = float(temperature)

    def forward(self, z: Tensor) -> Tensor:
        return z / self.temperature

    def proba(self, z: Tensor) -> Tensor:
        return torch.softmax(z / self.temperature, dim=1)


class EnsembleTemperature(Stage):
    """Ensemble temperature scaling (Zhang et al. 2020, Eq. 5): w₁σ(z/t) + w₂σ(z) + w₃/L."""

    def __init__(self, temperature: float, weights):
        super().__init__()
        self.temperature = float(temperature)
        self.register_buffer("weights", _buffer(weights))

    def proba(self, z: Tensor) -> Tensor:
        w = self.weights
        return (w[0] * torch.softmax(z / self.temperature, dim=1) + w[1] * torch.softmax(z, dim=1)
                + w[2] / z.shape[1])


class Logits(nn.Module):
    """Features x = z (matrix and vector scaling)."""

    def forward(self, z: Tensor) -> Tensor:
        return z


class ClippedLogProbs(nn.Module):
    """Features x = max(ln σ(z), ln eps) (Dirichlet calibration, Kull et al. 2019 §3)."""

    def __init__(self, eps: float):
        super().__init__()
        self.log_eps = math.log(eps)

    def forward(self, z: Tensor) -> Tensor:
        return torch.clamp(torch.log_softmax(z, dim=1), min=self.log_eps)


class MixedLogProbs(nn.Module):
    """Features x = ln((1 − ε) σ(β ln σ(z)) + ε/k): SMS/SVS's preprocessing (Berta et al. 2025, §3)."""

    def __init__(self, inv_temperature: float, mix: float):
        super().__init__()
        self.inv_temperature, self.mix = float(inv_temperature), float(mix)

    def forward(self, z: Tensor) -> Tensor:
        q = torch.softmax(self.inv_temperature * torch.log_softmax(z, dim=1), dim=1)
        return torch.log((1.0 - self.mix) * q + self.mix / z.shape[1])


class Affine(Stage):
    """σ(W x + b) on the ``features`` x of z (Kull et al. 2019 §3; ``diagonal``: W's diagonal only), passing
    W x + b on."""

    def __init__(self, features: nn.Module, weights, intercept, diagonal: bool):
        super().__init__()
        weights = _buffer(weights)
        self.features = features
        self.register_buffer("weights", torch.diagonal(weights).clone() if diagonal else weights)
        self.register_buffer("intercept", _buffer(intercept))
        self.diagonal = bool(diagonal)

    def forward(self, z: Tensor) -> Tensor:
        x = self.features(z)
        out = x * self.weights if self.diagonal else x @ self.weights.t()
        return out + self.intercept

    def proba(self, z: Tensor) -> Tensor:
        return torch.softmax(self.forward(z), dim=1)


class OneVsRestMaps(Stage):
    """Per class σ(a·ln p − b·ln(1 − p) + c) on p = σ(z) clipped to [eps, 1 − eps], renormalised, all-zero rows
    uniform (beta calibration, Kull et al. 2017; Platt: b = a); one-vs-rest as the Dirichlet paper §4.1."""

    def __init__(self, a, b, c):
        super().__init__()
        for name, value in (("a", a), ("b", b), ("c", c)):
            self.register_buffer(name, _buffer(value))

    def binary(self, p: Tensor) -> Tensor:
        p = torch.clamp(p, min=self.eps, max=1.0 - self.eps)
        return torch.sigmoid(self.a * torch.log(p) - self.b * torch.log1p(-p) + self.c)

    def proba(self, z: Tensor) -> Tensor:
        q = self.binary(torch.softmax(z, dim=1))
        total = q.sum(dim=1, keepdim=True)
        uniform = torch.full_like(q, 1.0 / q.shape[1])
        return torch.where(total > 0, q / torch.where(total > 0, total, torch.ones_like(total)), uniform)


class OneVsRestQuadratic(OneVsRestMaps):
    """Per class σ(a + b·ℓ + c·ℓ²), ℓ = ln p − ln(1 − p) with each logarithm clipped to ±``log_clip`` (quadratic
    scaling, :func:`calbench.maps1d.maps.quadratic_logit`), renormalised as :class:`OneVsRestMaps`."""

    def __init__(self, a, b, c, log_clip: float):
        super().__init__(a, b, c)
        self.log_clip = float(log_clip)

    def binary(self, p: Tensor) -> Tensor:
        ell = (torch.clamp(torch.log(p), min=self.log_clip, max=-self.log_clip)
               - torch.clamp(torch.log1p(-p), min=self.log_clip, max=-self.log_clip))
        return torch.sigmoid(self.a + self.b * ell + self.c * ell * ell)


class Sequence(Stage):
    """A chain's stages in order: each reads what the previous one passes on."""

    def __init__(self, stages):
        super().__init__()
        self.inner = nn.ModuleList(stages[:-1])
        self.last = stages[-1]

    def forward(self, z: Tensor) -> Tensor:
        for stage in self.inner:
            z = stage(z)
        return self.last(z)

    def proba(self, z: Tensor) -> Tensor:
        for stage in self.inner:
            z = stage(z)
        return self.last.proba(z)


class FoldAverage(Stage):
    """A grid search's fold models: the mean of their probabilities; one model passes on its own output."""

    def __init__(self, members):
        super().__init__()
        self.members = nn.ModuleList(members)
        self.single = len(members) == 1

    def forward(self, z: Tensor) -> Tensor:
        if self.single:
            out = z
            for member in self.members:
                out = member(z)
            return out
        return torch.log(torch.clamp(self.proba(z), min=self.eps))

    def proba(self, z: Tensor) -> Tensor:
        total = torch.zeros_like(z)
        for member in self.members:
            total = total + member.proba(z)
        return total / len(self.members)
