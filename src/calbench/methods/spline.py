"""Spline recalibration (Gupta, Rahimi, Ajanthan, Mensink, Sminchisescu & Hartley, ICLR 2021, §4;
:mod:`calbench.maps1d.spline`): the derivative of a cubic spline fitted to the cumulative accuracy.

* ``spline_conf``: the paper's top-label form, one map fitted on (max p̂, 1[argmax p̂ = y]); the calibrated
  confidence replaces max p̂ and the other classes share the rest as the TvA methods do
  (:func:`calbench.methods.tva.keep_prediction`), so the predicted class is kept wherever ĉ ≥ 1/k.
* ``spline_ovr``: one map per class on (p̂_j, 1[y = j]), renormalised (one-vs-rest, as the fit-on-test paper
  applies it).

Settings: ``knots`` (6, the authors' default), ``runout`` ("natural", the paper's; "parabolic", "cubic"),
``interpolation`` ("linear"; "authors_code": the authors' evaluation between calibration scores), ``eps`` (1e-9: adds
``eps``·p̂ so that a class clipped to 0 keeps a positive probability, as ``irova``; 0 is the unfloored map).
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Instance, ListOf
from calbench.maps1d.spline import INTERPOLATIONS, RUNOUTS, Spline
from calbench.methods.binary_calibrators import OneVsRest
from calbench.methods.constraints import Interval, Options
from calbench.methods.registry import register
from calbench.methods.tva import BinaryTopVersusAll


@register("spline_ovr")
class SplineOneVsRest(OneVsRest):
    """Spline recalibration per class on (p̂_j, 1[y = j]), plus ``eps``·p̂_j, renormalised."""

    _fitted_state = {"binary_maps_": ListOf(Instance(Spline), "C")}

    _parameter_constraints = {"knots": [Interval("int", 2)], "runout": [Options(*RUNOUTS)],
                              "interpolation": [Options(*INTERPOLATIONS)], "eps": [Interval("real", 0)]}
    #: Shown in the tables' notes (:mod:`calbench.report.tables`).
    floor_note = "ĉ_j + 1e-9·p̂_j (eps; `eps: 0` is the unfloored map)"

    def __init__(self, *, knots: int = 6, runout: str = "natural", interpolation: str = "linear", eps: float = 1e-9):
        self.knots, self.runout, self.interpolation, self.eps = knots, runout, interpolation, eps

    def fit_binary(self, p: np.ndarray, hits: np.ndarray):
        return Spline(self.knots, self.runout, self.interpolation).fit(p, hits)

    def apply_binary(self, fitted, p: np.ndarray) -> np.ndarray:
        return fitted.predict(p) + self.eps * p

    def fitted_summary(self) -> dict:
        return {"classes": len(self.binary_maps_)}


@register("spline_conf")
class SplineConfidence(BinaryTopVersusAll):
    """Spline recalibration of the confidence (the paper's top-label form); the rest of the row as TvA."""

    _fitted_state = {"map_": Instance(Spline)}

    binary_class = SplineOneVsRest
    _parameter_constraints = SplineOneVsRest._parameter_constraints
    floor_note = SplineOneVsRest.floor_note

    def __init__(self, *, knots: int = 6, runout: str = "natural", interpolation: str = "linear", eps: float = 1e-9):
        self.knots, self.runout, self.interpolation, self.eps = knots, runout, interpolation, eps

    def fitted_summary(self) -> dict:
        return self.map_.summary()
