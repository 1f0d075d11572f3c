"""Fitted calibrators as torch modules: ship the winner inside the model (``calbench.torch.calibrated``).

>>> import calbench.torch
>>> net = calbench.torch.calibrated(model, calbench.load("ts.safetensors"))   # model(x) → logits
>>> probs = net(x)                                                            # calibrated probabilities

Each calibrator describes its own torch computation (``Calibrator.torch_stage``): the parametric methods
(``uncal``, ``ts``, ``ets``, ``vs``, ``ms``, ``ms_odir``, the Dirichlet variants, ``sms``, ``svs``, ``platt`` and
``beta`` one-vs-rest), their chains and their grid searches. The others (LECE, KCal, isotonic, binning, PL, …)
refuse with an error naming the method: apply them with ``predict_proba`` or ``calbench apply``.

The model may output logits or probabilities (``outputs``: detected per batch by default, rows in [0, 1]
summing to 1, or declared). A calibrator fitted on probabilities (``input_kind_ == "probs"``, e.g. ``calbench
fit --probs``) reads ln max(p, ``PROB_FLOOR``) as at its fit, from either; one fitted on logits refuses
probabilities, which do not determine the logits.

This module is named ``torch`` inside the package; it imports the real torch absolutely and only when used,
so ``import calbench`` never needs torch.
"""

from __future__ import annotations

import math

import torch as _torch  # absolute import: the real torch, not this module

from calbench.scores import DISTRIBUTION_TOL, PROB_FLOOR, NotDistributionsError

nn = _torch.nn
Tensor = _torch.Tensor

OUTPUTS = ("auto", "logits", "probs")
#: Rows of probabilities sum to 1 within this (as ``calbench.scores.looks_like_probs``).
SUM_TOLERANCE = 1e-3


class Calibration(nn.Module):
    """A model's outputs ``[N, C]`` → the calibrated probabilities (``log``: log-probabilities) of a calibrator
    whose torch ``stage`` reads logits; ``outputs`` and ``fitted_on_probs`` as :func:`calibrated`."""

    def __init__(self, stage, num_classes: int, log: bool = False, outputs: str = "auto",
                 fitted_on_probs: bool = False, source: str = "the calibrator"):
        super().__init__()
        self.stage = stage
        self.num_classes = int(num_classes)
        self.log = bool(log)
        self.detect, self.declared_probs = outputs == "auto", outputs == "probs"
        self.fitted_on_probs = bool(fitted_on_probs)
        self.floor, self.log_floor = PROB_FLOOR, math.log(PROB_FLOOR)
        self.tolerance = SUM_TOLERANCE
        self.mixed_kinds = _MIXED_KINDS  # an attribute: TorchScript cannot read module-level strings
        self.not_distributions = (f"{source}: the calibration head computed rows that are not probability "
                                  f"distributions (finite, non-negative and summing to 1, within {DISTRIBUTION_TOL})"
                                  "; its file holds fitted values that no fit makes: refit the calibrator")
        self.distribution_tol = DISTRIBUTION_TOL

    def forward(self, outputs: Tensor) -> Tensor:
        if outputs.dim() != 2 or outputs.shape[1] != self.num_classes:
            raise ValueError("calibration head: expected model outputs [N, " + str(self.num_classes) + "]")
        x = outputs.to(_torch.float64)
        if self.detect:
            probs_given = ((x >= 0).all() & (x <= 1).all()
                           & ((x.sum(dim=1) - 1.0).abs() <= self.tolerance).all())
        else:
            probs_given = _torch.full((), self.declared_probs, dtype=_torch.bool)
        if self.fitted_on_probs:  # ln max(p, floor), as Scores.from_probs at the fit
            z = _torch.where(probs_given, _torch.log(_torch.clamp(x, min=self.floor)),
                             _torch.clamp(_torch.log_softmax(x, dim=1), min=self.log_floor))
        else:
            self._refuse_probabilities(probs_given)
            z = x
        probs = self.stage.proba(z)
        self._refuse_non_distributions(probs)
        out = _torch.log(probs) if self.log else probs
        return out.to(outputs.dtype)

    def _refuse_non_distributions(self, probs: Tensor) -> None:
        """Rows that are not distributions: :class:`~calbench.scores.NotDistributionsError` with their count (eager),
        a ValueError (TorchScript), a runtime assertion in a ``torch.export``/``torch.compile`` graph."""
        good = (_torch.isfinite(probs).all(dim=1) & (probs.amin(dim=1) >= -self.distribution_tol)
                & ((probs.sum(dim=1) - 1.0).abs() <= self.distribution_tol))
        if _torch.jit.is_scripting():
            if not bool(good.all()):
                raise ValueError(self.not_distributions)
        elif _torch.compiler.is_compiling() or _torch.compiler.is_exporting():
            _torch._assert_async(good.all(), self.not_distributions)
        elif not bool(good.all()):
            bad = int((~good).sum())
            raise NotDistributionsError(self.not_distributions.replace("computed rows", f"computed {bad} of "
                                                                       f"{probs.shape[0]} rows"))


    def _refuse_probabilities(self, probs_given: Tensor) -> None:
        """A ValueError (eager, TorchScript: the batch is read on the host, no device-side assert), a runtime
        assertion in a ``torch.export``/``torch.compile`` graph."""
        if _torch.jit.is_scripting():
            if bool(probs_given):
                raise ValueError(self.mixed_kinds)
        elif _torch.compiler.is_compiling() or _torch.compiler.is_exporting():
            _torch._assert_async(~probs_given, self.mixed_kinds)
        elif bool(probs_given):
            raise ValueError(self.mixed_kinds)


_MIXED_KINDS = ("calibration head: the model outputs probabilities (rows in [0, 1] summing to 1), but the "
                "calibrator was fitted on logits; pass the model without its final softmax, or fit the calibrator "
                "on these probabilities (`calbench fit --probs`); outputs='logits' declares logits that only look "
                "like probabilities")


class Calibrated(nn.Module):
    """``model`` followed by a :class:`Calibration` head."""

    def __init__(self, model, head: Calibration):
        super().__init__()
        self.model = model
        self.head = head

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.model(x))


def calibration_module(calibrator, log: bool = False, outputs: str = "auto") -> Calibration:
    """A torch module from a model's outputs ``[N, C]`` to ``calibrator``'s probabilities (``log``:
    log-probabilities); ``outputs`` as :func:`calibrated`."""
    from calbench.methods.base import Calibrator

    if not isinstance(calibrator, Calibrator):
        raise ValueError(f"expected a fitted calibrator, got {calibrator!r}; fit it (or calbench.load it) first")
    if outputs not in OUTPUTS:
        raise ValueError(f"outputs: expected one of {OUTPUTS} (what the model returns; 'auto' detects "
                         f"probabilities per batch), got {outputs!r}")
    on_probs = getattr(calibrator, "input_kind_", "logits") == "probs"
    if outputs == "probs" and not on_probs:
        raise ValueError(_MIXED_KINDS.replace("the model outputs", "outputs='probs' declares"))
    return Calibration(calibrator.to_torch(), calibrator.num_classes_, log=log, outputs=outputs,
                       fitted_on_probs=on_probs, source=getattr(calibrator, "loaded_from_", "the calibrator"))


def calibrated(model, calibrator, log: bool = False, outputs: str = "auto") -> Calibrated:
    """``model`` (any ``nn.Module``) followed by the calibration of ``calibrator``: an ``nn.Module``
    (exportable with ``torch.export``) that outputs calibrated probabilities, or log-probabilities with
    ``log=True``. ``outputs``: what ``model`` returns, ``"logits"``, ``"probs"`` (e.g. a model ending in
    ``nn.Softmax``) or ``"auto"`` (probabilities where every row of a batch lies in [0, 1] and sums to 1)."""
    return Calibrated(model, calibration_module(calibrator, log=log, outputs=outputs))
