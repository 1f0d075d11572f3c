"""BBQ, Bayesian binning into quantiles (Naeini, Cooper & Hauskrecht, AAAI 2015): an average of equal-frequency
histogram-binning models weighted by their Bayesian scores.

The models have b = max(1, ⌊N^{1/3}/10⌋) … min(⌈N/5⌉, ⌈10·N^{1/3}⌉) bins (the paper's range with C = 10, capped so
that a bin holds about 5 points, as the authors' code); each is built and scored by
:func:`calbench.kernels.bayesian_binning.binning_models`. The weight of model M is its relative likelihood
P(D | M) / max_M′ P(D | M′) (uniform structure prior), and the calibrated probability is the weighted average of the
models' bin estimates, P(z = 1 | p) = Σ_M w_M P(z = 1 | p, M) / Σ_M w_M (the paper's Eq. 2). As in the authors' code
the models are first pruned by the elbow rule: sorted by weight, models are kept while the drop to the next one,
relative to the weights' variance, exceeds ``elbow_alpha`` (0.001); ``elbow_alpha=None`` averages every model.

The average of step functions is itself a step function: the fitted map is one table of cut points and values, built
by summing each kept model's weighted jumps at its cut points, and a score is mapped by one binary search (a score
equal to a cut point belongs to the bin above it, as in the authors' code).
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Array, Scalar
from calbench.kernels.bayesian_binning import binning_models
from calbench.maps1d.maps import check_binary


def bin_range(n: int) -> tuple[int, int]:
    """The smallest and largest number of bins of BBQ's models for ``n`` calibration points."""
    root = n ** (1.0 / 3.0)
    return max(1, int(np.floor(root / 10.0))), max(1, int(min(np.ceil(n / 5.0), np.ceil(10.0 * root))))


def elbow(weights: np.ndarray, alpha: float) -> np.ndarray:
    """Indices of the models the authors' elbow rule keeps, highest weight first: after the run of models tied at
    the top, models are added while (w_(k) − w_(k+1)) / var(w) > ``alpha``; the last one added is left out unless
    it is the only one."""
    order = np.argsort(-weights, kind="stable")
    ranked = weights[order]
    spread = ranked.var()
    if ranked.size == 1 or spread == 0:
        return order
    k = 0
    while k + 1 < ranked.size and ranked[k] == ranked[k + 1]:
        k += 1
    while k < ranked.size - 1 and (ranked[k] - ranked[k + 1]) / spread > alpha:
        k += 1
    return order[:k] if k > 0 else order[:1]


class BayesianBinning:
    """BBQ on one binary problem: ``strength`` prior samples per bin (N'/B), pruning by ``elbow_alpha`` (None: off)."""

    _fitted_state = {"cuts_": Array(float, ("n",)), "values_": Array(float, ("n+1",), within="[0, 1]"),
                     "models_": Scalar(int)}

    #: Its settings (as BBQ's calibrators declare them), checked when a saved map is loaded.
    _declared_settings = {"strength": Scalar(float, within="(0, inf)"),
                          "elbow_alpha": Scalar(float, none=True, within="[0, inf)")}

    def __init__(self, strength: float = 2.0, elbow_alpha: float | None = 1e-3):
        self.strength, self.elbow_alpha = strength, elbow_alpha

    def fit(self, p, y) -> "BayesianBinning":
        p, y = check_binary(p, y)
        order = np.argsort(p, kind="stable")
        upper, estimate, offsets, log_marginal = binning_models(p[order], y[order], *bin_range(p.size),
                                                                float(self.strength))
        weights = np.exp(log_marginal - log_marginal.max())
        kept = np.arange(weights.size) if self.elbow_alpha is None else elbow(weights, self.elbow_alpha)
        share = weights[kept] / weights[kept].sum()
        model = np.repeat(np.arange(weights.size), np.diff(offsets))
        first = np.zeros(upper.size, dtype=bool)
        first[offsets[:-1]] = True
        last = np.zeros(upper.size, dtype=bool)
        last[offsets[1:] - 1] = True
        in_kept = np.isin(model, kept)
        jumps_at = in_kept & ~last  # each kept model jumps at the upper edge of every bin but its last
        jump = np.zeros(upper.size)
        jump[:-1] = estimate[1:] - estimate[:-1]
        scale = np.zeros(weights.size)
        scale[kept] = share
        cuts, size = upper[jumps_at], (jump * scale[model])[jumps_at]
        order = np.argsort(cuts, kind="stable")
        self.cuts_, position = np.unique(cuts[order], return_index=True)
        level = np.sum((estimate * scale[model])[first & in_kept]) + np.concatenate([[0.0], np.cumsum(size[order])])
        self.values_ = np.concatenate([level[:1], level[np.append(position[1:], cuts.size)]])
        self.models_ = int(kept.size)
        return self

    def predict(self, p) -> np.ndarray:
        p, _ = check_binary(p)
        return np.clip(self.values_[np.searchsorted(self.cuts_, p, side="right")], 0.0, 1.0)

    def summary(self) -> dict:
        return {"models": self.models_, "cuts": int(self.cuts_.size)}
