"""Isotonic calibration: one-vs-rest (IROvA) and the accuracy-preserving multiclass IRM.

Zhang, Kailkhura & Han, *Mix-n-Match* (ICML 2020) §3.3 (docs/methods_nonparametric.md):

* ``irova``: one isotonic map per class, fitted by PAV on (p̂_j, 1[y = j]), then renormalised
  (§3.3.1; the LECE paper's IR). Not accuracy-preserving.
* ``irm``: the "data ensemble" (§3.3.2): one isotonic g* fitted on all n·L pooled pairs
  (p̂_ij, 1[y_i = j]), made strictly isotonic as ĝ(a) = g*(a) + ε·a and applied to every entry,
  then normalised (Eq. 4). One strictly increasing g for all classes keeps the argmax (Prop. 3.1).
* ``cir``: centred isotonic regression per class (Oron & Flournoy 2017), IROvA's maps with each constant block
  collapsed to its centre (:class:`~calbench.maps1d.maps.CenteredIsotonic`).

Both evaluate the fitted step function with linear interpolation between its knots and clip
outside the fitted range (scikit-learn ``IsotonicRegression(out_of_bounds="clip")``, as both
authors' codes). Paper vs code: the codes add ``1e-9·p̂`` and do not renormalise; here outputs are
always renormalised (Eq. 4), ``eps`` is ε (IRM's strictness; for IROvA the codes' guard against
zero probabilities, 0 in the paper).
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Instance, ListOf
from calbench.maps1d.maps import CenteredIsotonic, Isotonic
from calbench.maps1d.one_vs_rest import renormalise
from calbench.methods.base import Calibrator
from calbench.methods.binary_calibrators import OneVsRest
from calbench.methods.constraints import Interval
from calbench.methods.registry import register
from calbench.scores import Scores


def _check_eps(eps, *, positive: bool) -> None:
    if not np.isfinite(eps) or eps < 0 or (positive and eps == 0):
        need = "a small positive number (strict isotonicity)" if positive else "a number >= 0"
        raise ValueError(f"eps: expected {need}, got {eps!r}")


@register("irova")
class IsotonicOneVsRest(OneVsRest):
    """IROvA: isotonic regression per class, plus ``eps``·p̂_j, renormalised.

    ``eps = 1e-9`` (default, the authors' codes: LECE, Mix-n-Match) keeps every class with p̂_j > 0
    strictly positive, so log-loss stays finite; ``eps = 0`` is the paper's map, which gives exact
    zeros on the true class of some test rows (1–2 % on 100-class sets: an infinite log-loss).
    """

    _fitted_state = {"binary_maps_": ListOf(Instance(Isotonic), "C")}

    _parameter_constraints = {"eps": [Interval("real", 0)]}
    #: Shown in the tables' notes (:mod:`calbench.report.tables`).
    floor_note = "ĉ_j + 1e-9·p̂_j (eps; `eps: 0` is the paper's unfloored map)"

    def __init__(self, *, eps: float = 1e-9):
        self.eps = eps

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        _check_eps(self.eps, positive=False)
        super()._fit(scores, y)

    def fit_binary(self, p: np.ndarray, hits: np.ndarray):
        return Isotonic().fit(p, hits)

    def apply_binary(self, fitted, p: np.ndarray) -> np.ndarray:
        return fitted.predict(p) + self.eps * p


@register("cir")
class CenteredIsotonicOneVsRest(IsotonicOneVsRest):
    """Centred isotonic regression per class (Oron & Flournoy 2017; probmetrics' ``cir``): IROvA with every
    constant PAV block collapsed to its centre, so the map is strictly increasing between centres (no flat steps
    that tie the argmax); plus ``eps``·p̂_j (as ``irova``: blocks at 0 stay at 0), renormalised."""

    floor_note = "ĉ_j + 1e-9·p̂_j (eps; `eps: 0` is the unfloored map)"

    def fit_binary(self, p: np.ndarray, hits: np.ndarray):
        return CenteredIsotonic().fit(p, hits)


@register("irm")
class IsotonicMulticlass(Calibrator):
    """IRM: one strictly isotonic map ĝ(a) = g*(a) + ε·a shared by all classes; accuracy-preserving.

    ``eps`` is ε, "a very small positive number" in the paper, 1e-9 in the authors' code.
    """

    _fitted_state = {"isotonic_": Instance(Isotonic)}

    preserves_argmax = True
    _parameter_constraints = {"eps": [Interval("real", 0, closed="neither")]}

    def __init__(self, *, eps: float = 1e-9):
        self.eps = eps

    def _fit(self, scores: Scores, y: np.ndarray) -> None:
        _check_eps(self.eps, positive=True)
        probs = scores.probs
        hits = np.zeros(probs.shape, dtype=bool)  # 1 byte per pair: at 1,000 × 25,000 the fit stays under 1 GB
        hits[np.arange(y.size), y] = True
        self.isotonic_ = Isotonic().fit_checked(probs.ravel(), hits.ravel())

    def _predict_proba(self, scores: Scores) -> np.ndarray:
        probs = scores.probs
        mapped = self.isotonic_.predict(probs.ravel()).reshape(probs.shape) + self.eps * probs
        return renormalise(mapped)

    def fitted_summary(self) -> dict:
        return {"knots": self.isotonic_.summary()["steps"]}
