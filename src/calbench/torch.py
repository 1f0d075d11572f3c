"""Fitted calibrators as torch modules: ship the winner inside the model (``calbench.torch.calibrated``).

>>> import calbench.torch
>>> net = calbench.torch.calibrated(model, calbench.load("ts.safetensors"))   # model(x) → logits
>>> probs = net(x)                                                            # calibrated probabilities

Parametric methods only: ``uncal``, ``ts``, ``ets``, ``vs``, ``ms``, ``ms_odir``, the Dirichlet variants
(``dir``, ``dir_diag``, ``dir_l2``, ``dir_odir``), ``platt`` and ``beta`` one-vs-rest, their chains, and their
grid searches (fold ensembles average the fold models' probabilities, as ``predict_proba``). Each stage
reproduces the numpy formulas of its method in float64 (the output has the input's dtype); between chain
stages it passes on what the method's ``transform`` passes (logits of TS and the affine maps, the clipped
log-probabilities of the others). Methods that keep the calibration set or a step function (LECE, KCal,
isotonic, binning, PL) raise: apply them with ``predict_proba`` or ``calbench apply``.

This module is named ``torch`` inside the package; it imports the real torch absolutely and only when used,
so ``import calbench`` never needs torch.
"""

from __future__ import annotations

import torch as _torch  # absolute import: the real torch, not this module

from calbench.scores import PROB_EPS

nn = _torch.nn
Tensor = _torch.Tensor


class _Stage(nn.Module):
    """One calibration stage on float64 logits: ``forward`` gives what the next stage reads, ``proba``
    the calibrated probabilities."""

    def __init__(self):
        super().__init__()
        self.eps = PROB_EPS  # an attribute: TorchScript cannot read module-level floats

    def forward(self, z: Tensor) -> Tensor:
        return _torch.log(_torch.clamp(self.proba(z), min=self.eps))

    def proba(self, z: Tensor) -> Tensor:
        raise NotImplementedError


class Identity(_Stage):
    """``uncal``: σ(z)."""

    def forward(self, z: Tensor) -> Tensor:
        return z

    def proba(self, z: Tensor) -> Tensor:
        return _torch.softmax(z, dim=1)


class Temperature(_Stage):
    """``ts``: σ(z / T)."""

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = float(temperature)

    def forward(self, z: Tensor) -> Tensor:
        return z / self.temperature

    def proba(self, z: Tensor) -> Tensor:
        return _torch.softmax(z / self.temperature, dim=1)


class EnsembleTemperature(_Stage):
    """``ets`` (Eq. 5): w₁σ(z/t) + w₂σ(z) + w₃/L."""

    def __init__(self, temperature: float, weights):
        super().__init__()
        self.temperature = float(temperature)
        self.register_buffer("weights", _torch.as_tensor(weights, dtype=_torch.float64))

    def proba(self, z: Tensor) -> Tensor:
        w = self.weights
        return (w[0] * _torch.softmax(z / self.temperature, dim=1) + w[1] * _torch.softmax(z, dim=1)
                + w[2] / z.shape[1])


class Affine(_Stage):
    """``ms``/``vs``/Dirichlet: σ(W x + b), x the logits or ln q̂ clipped below at ln(eps)."""

    def __init__(self, weights, intercept, diagonal: bool, log_probs: bool, eps: float):
        super().__init__()
        weights = _torch.as_tensor(weights, dtype=_torch.float64)
        self.register_buffer("weights", _torch.diagonal(weights).clone() if diagonal else weights)
        self.register_buffer("intercept", _torch.as_tensor(intercept, dtype=_torch.float64))
        self.diagonal, self.log_probs = bool(diagonal), bool(log_probs)
        self.log_eps = float(_torch.log(_torch.tensor(eps, dtype=_torch.float64))) if log_probs else 0.0

    def forward(self, z: Tensor) -> Tensor:
        x = _torch.clamp(_torch.log_softmax(z, dim=1), min=self.log_eps) if self.log_probs else z
        out = x * self.weights if self.diagonal else x @ self.weights.t()
        return out + self.intercept

    def proba(self, z: Tensor) -> Tensor:
        return _torch.softmax(self.forward(z), dim=1)


class OneVsRestMaps(_Stage):
    """``platt``/``beta``: per class σ(a·ln p − b·ln(1 − p) + c) on p clipped to [ε, 1 − ε], renormalised
    (Platt: b = a, c = its intercept); all-zero rows become uniform."""

    def __init__(self, a, b, c):
        super().__init__()
        for name, value in (("a", a), ("b", b), ("c", c)):
            self.register_buffer(name, _torch.as_tensor(value, dtype=_torch.float64))

    def proba(self, z: Tensor) -> Tensor:
        p = _torch.clamp(_torch.softmax(z, dim=1), min=self.eps, max=1.0 - self.eps)
        q = _torch.sigmoid(self.a * _torch.log(p) - self.b * _torch.log1p(-p) + self.c)
        total = q.sum(dim=1, keepdim=True)
        uniform = _torch.full_like(q, 1.0 / q.shape[1])
        return _torch.where(total > 0, q / _torch.where(total > 0, total, _torch.ones_like(total)), uniform)


class FoldAverage(_Stage):
    """A grid search's fold models: the mean of their probabilities (one model: that model)."""

    def __init__(self, members):
        super().__init__()
        self.members = nn.ModuleList(members)
        self.single = len(members) == 1

    def forward(self, z: Tensor) -> Tensor:
        if self.single:  # its own output: e.g. a refitted TS passes on z / T, as GridSearch.transform
            out = z
            for member in self.members:
                out = member(z)
            return out
        return _torch.log(_torch.clamp(self.proba(z), min=self.eps))

    def proba(self, z: Tensor) -> Tensor:
        total = _torch.zeros_like(z)
        for member in self.members:
            total = total + member.proba(z)
        return total / len(self.members)


class Calibration(nn.Module):
    """Logits ``[N, C]`` → calibrated probabilities (or, with ``log``, log-probabilities) of a calibrator."""

    def __init__(self, stages, num_classes: int, log: bool = False):
        super().__init__()
        self.stages = nn.ModuleList(stages[:-1])
        self.last = stages[-1]
        self.num_classes = int(num_classes)
        self.log = bool(log)

    def forward(self, logits: Tensor) -> Tensor:
        if logits.dim() != 2 or logits.shape[1] != self.num_classes:
            raise ValueError("calibration head: expected logits [N, " + str(self.num_classes) + "]")
        z = logits.to(_torch.float64)
        for stage in self.stages:
            z = stage(z)
        probs = self.last.proba(z)
        out = _torch.log(probs) if self.log else probs
        return out.to(logits.dtype)


class Calibrated(nn.Module):
    """``model`` followed by a :class:`Calibration` head."""

    def __init__(self, model, head: Calibration):
        super().__init__()
        self.model = model
        self.head = head

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.model(x))


def _stages(cal) -> list:
    """The torch stages of a fitted calibrator (a chain gives several)."""
    from calbench.methods.base import Calibrator
    from calbench.methods.binary_calibrators import BetaOneVsRest, PlattOneVsRest
    from calbench.methods.chain import Chain
    from calbench.methods.ets import EnsembleTemperatureScaling
    from calbench.methods.linear_maps import AffineSoftmax
    from calbench.methods.temperature import TemperatureScaling
    from calbench.methods.tuning import GridSearch
    from calbench.methods.uncal import Uncalibrated

    if not isinstance(cal, Calibrator) or not hasattr(cal, "num_classes_"):
        raise ValueError(f"expected a fitted calibrator, got {cal!r}; fit it (or calbench.load it) first")
    if isinstance(cal, Chain):
        return [stage for step in cal.steps for stage in _stages(step)]
    if isinstance(cal, GridSearch):
        members = [_single(_stages(est)) for est in cal.estimators_]
        return [FoldAverage(members)]
    if isinstance(cal, Uncalibrated):
        return [Identity()]
    if isinstance(cal, TemperatureScaling):
        return [Temperature(cal.temperature_)]
    if isinstance(cal, EnsembleTemperatureScaling):
        return [EnsembleTemperature(cal.temperature_, cal.weights_)]
    if isinstance(cal, AffineSoftmax):
        return [Affine(cal.weights_, cal.intercept_, cal.diagonal, cal.uses_log_probs, getattr(cal, "eps", PROB_EPS))]
    if isinstance(cal, PlattOneVsRest):
        a = [m.a_ for m in cal.binary_maps_]
        return [OneVsRestMaps(a, a, [m.b_ for m in cal.binary_maps_])]
    if isinstance(cal, BetaOneVsRest):
        maps = cal.binary_maps_
        return [OneVsRestMaps([m.a_ for m in maps], [m.b_ for m in maps], [m.c_ for m in maps])]
    name = getattr(cal, "method_name", type(cal).__name__)
    raise ValueError(f"{name} cannot be exported to torch: it is not a parametric map (it keeps calibration data, "
                     "a step function or a table); apply it with predict_proba or `calbench apply` instead. "
                     "Exportable: uncal, ts, ets, vs, ms, ms_odir, dir, dir_diag, dir_l2, dir_odir, platt, beta, "
                     "their chains and grid searches")


def _single(stages: list) -> _Stage:
    if len(stages) == 1:
        return stages[0]
    return _Chain(stages)


class _Chain(_Stage):
    """Stages applied in order (a chain inside a grid search's fold model)."""

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


def calibration_module(calibrator, log: bool = False) -> Calibration:
    """A torch module from logits ``[N, C]`` to ``calibrator``'s probabilities (``log``: log-probabilities)."""
    return Calibration(_stages(calibrator), calibrator.num_classes_, log=log)


def calibrated(model, calibrator, log: bool = False) -> Calibrated:
    """``model`` (any ``nn.Module`` returning logits) followed by the calibration of ``calibrator``; the
    result is an ``nn.Module`` (scriptable with ``torch.jit.script``) that outputs calibrated probabilities,
    or log-probabilities with ``log=True``."""
    return Calibrated(model, calibration_module(calibrator, log=log))
