"""Bayesian ensembles of binning and near-isotonic models (Naeini, Cooper & Hauskrecht, AAAI 2015; Naeini & Cooper,
ICDM 2016), each in the top-label and the one-vs-rest form.

* ``bbq_conf`` / ``bbq_ovr``: BBQ, Bayesian binning into quantiles (:mod:`calbench.maps1d.bbq`): equal-frequency
  binnings of every size in the paper's range averaged with their BDeu marginal likelihoods. Settings: ``strength``
  (N'/B = 2 prior samples per bin), ``elbow_alpha`` (0.001, the authors' pruning; None averages every model).
* ``enir_conf`` / ``enir_ovr``: ENIR, the ensemble of near-isotonic regressions (:mod:`calbench.maps1d.enir`): the
  models along the near-isotonic path averaged with BIC weights. No settings.

The ``_conf`` forms fit one map on (max p̂, 1[argmax p̂ = y]), the setting of both papers (binary classifiers) applied
to the confidence; the calibrated confidence replaces max p̂ and the other classes share the rest as the TvA methods do
(:func:`calbench.methods.tva.keep_prediction`). The ``_ovr`` forms fit one map per class on (p̂_j, 1[y = j]) and
renormalise (netcal's multiclass form). Both maps' values lie strictly inside (0, 1) (BBQ's and ENIR's smoothing), so
no floor is added.
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Instance, ListOf
from calbench.maps1d.bbq import BayesianBinning
from calbench.maps1d.enir import NearIsotonicEnsemble
from calbench.methods.binary_calibrators import OneVsRest
from calbench.methods.constraints import Interval
from calbench.methods.registry import register
from calbench.methods.tva import BinaryTopVersusAll


class _MapsOneVsRest(OneVsRest):
    def _new_map(self):
        raise NotImplementedError

    def fit_binary(self, p: np.ndarray, hits: np.ndarray):
        return self._new_map().fit(p, hits)

    def apply_binary(self, fitted, p: np.ndarray) -> np.ndarray:
        return fitted.predict(p)

    def fitted_summary(self) -> dict:
        sizes = [m.summary() for m in self.binary_maps_]
        return {key: int(np.median([s[key] for s in sizes])) for key in sizes[0]}


@register("bbq_ovr")
class BBQOneVsRest(_MapsOneVsRest):
    """BBQ per class on (p̂_j, 1[y = j]), renormalised."""

    _fitted_state = {"binary_maps_": ListOf(Instance(BayesianBinning), "C")}

    _parameter_constraints = {"strength": [Interval("real", 0, closed="neither")],
                              "elbow_alpha": [None, Interval("real", 0)]}

    def __init__(self, *, strength: float = 2.0, elbow_alpha: float | None = 1e-3):
        self.strength, self.elbow_alpha = strength, elbow_alpha

    def _new_map(self):
        return BayesianBinning(self.strength, self.elbow_alpha)


@register("bbq_conf")
class BBQConfidence(BinaryTopVersusAll):
    """BBQ of the confidence; the rest of the row as TvA."""

    _fitted_state = {"map_": Instance(BayesianBinning)}

    binary_class = BBQOneVsRest
    _parameter_constraints = BBQOneVsRest._parameter_constraints

    def __init__(self, *, strength: float = 2.0, elbow_alpha: float | None = 1e-3):
        self.strength, self.elbow_alpha = strength, elbow_alpha

    def fitted_summary(self) -> dict:
        return self.map_.summary()


@register("enir_ovr")
class ENIROneVsRest(_MapsOneVsRest):
    """ENIR per class on (p̂_j, 1[y = j]), renormalised."""

    _fitted_state = {"binary_maps_": ListOf(Instance(NearIsotonicEnsemble), "C")}

    def _new_map(self):
        return NearIsotonicEnsemble()


@register("enir_conf")
class ENIRConfidence(BinaryTopVersusAll):
    """ENIR of the confidence; the rest of the row as TvA."""

    _fitted_state = {"map_": Instance(NearIsotonicEnsemble)}

    binary_class = ENIROneVsRest

    def fitted_summary(self) -> dict:
        return self.map_.summary()
