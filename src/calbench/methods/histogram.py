"""One-vs-rest histogram binning: H-LECD, H-LECE (equal-width bins) and classical binning (equal-size bins).

LECE paper §3.1 and Figure 1 (docs/methods_nonparametric.md): for class j and the bin B holding p̂_j,
with p̄_j(B) the mean prediction and ȳ_j(B) the label frequency of the calibration points in B,

* ``hist_lecd`` (classical, "locally equal calibration distributions"): ĉ_j = ȳ_j(B);
* ``hist_lece`` ("locally equal calibration errors"): ĉ_j = p̂_j − (p̄_j(B) − ȳ_j(B));

on ``n_bins`` equal-width bins of [0, 1] (5 in the paper's synthetic experiment), then renormalised.
``hist`` is Zadrozny & Elkan's histogram binning with equal-size (equal-frequency) bins: ĉ_j = ȳ_j(B).

Choices where the paper is silent (docs/methods_nonparametric.md): a bin without calibration points leaves p̂_j
unchanged (the authors' code returns 0); negative H-LECE values are clipped to 0 (the code divides
by the sum of absolute values), then ``eps``·p̂_j (1e-9) is added so that no output is exactly 0
(``eps = 0``: the paper's map); an all-zero row becomes uniform.
"""

from __future__ import annotations

import numpy as np

from calbench.fitted_state import Array, ListOf, Record
from calbench.methods.binary_calibrators import OneVsRest
from calbench.methods.constraints import Interval
from calbench.methods.registry import register
from calbench.metrics.binning import bin_sums, equal_width_bins


def _check_bins(n_bins) -> None:
    if not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins: expected a positive integer number of bins, got {n_bins!r}")


#: The fitted bins of one binary map: ``n_bins`` bins (the setting of the calibrator, or of the binning kept beside
#: the map: TLHB's), their ``n_bins - 1`` inner edges (None where the bins are fixed), which bins hold calibration
#: values, and their mean prediction and label frequency.
BINNED_MAP = Record({"edges": Array(float, ("n_bins-1",), none=True), "filled": Array(bool, ("n_bins",)),
                     "p_mean": Array(float, ("n_bins",), within="[0, 1]"),
                     "y_mean": Array(float, ("n_bins",), within="[0, 1]")})

class _BinnedOneVsRest(OneVsRest):
    """Per class: bin index of each p̂_j, per-bin mean prediction and label frequency."""

    _fitted_state = {"binary_maps_": ListOf(BINNED_MAP, "C")}

    _parameter_constraints = {"n_bins": [Interval("int", 1)]}

    def __init__(self, *, n_bins: int = 5):
        self.n_bins = n_bins

    def _fit(self, scores, y) -> None:
        _check_bins(self.n_bins)
        super()._fit(scores, y)

    def _bins(self, fitted, p: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _edges(self, p: np.ndarray):
        return None

    def fit_binary(self, p: np.ndarray, hits: np.ndarray):
        edges = self._edges(p)
        counts, p_sum, hit_sum = bin_sums(self._bins(edges, p), self.n_bins, p, hits)
        filled = counts > 0
        safe = np.where(filled, counts, 1.0)
        return {"edges": edges, "filled": filled, "p_mean": p_sum / safe, "y_mean": hit_sum / safe}

    def _estimate(self, fitted, p: np.ndarray, b: np.ndarray) -> np.ndarray:
        """ĉ_j of the class's binary map at ``p`` with bin indices ``b``."""
        return fitted["y_mean"][b]

    def apply_binary(self, fitted, p: np.ndarray) -> np.ndarray:
        b = self._bins(fitted["edges"], p)
        return np.where(fitted["filled"][b], self._estimate(fitted, p, b), p)


@register("hist_lecd")
class HistogramLECD(_BinnedOneVsRest):
    """Equal-width one-vs-rest histogram binning, ĉ_j = ȳ_j(B) (LECE paper Figure 1a, H-LECD)."""

    def _bins(self, edges, p: np.ndarray) -> np.ndarray:
        return equal_width_bins(p, self.n_bins)


@register("hist_lece")
class HistogramLECE(HistogramLECD):
    """Equal-width one-vs-rest binning of the calibration error, ĉ_j = p̂_j − (p̄_j(B) − ȳ_j(B)) (Figure 1b).

    ``eps`` (default 1e-9, as IROvA's guard) adds ``eps``·p̂_j to max(ĉ_j, 0), so that no class with
    p̂_j > 0 gets probability 0; ``eps = 0`` is the paper's map, whose negative ĉ_j become exact zeros.
    """

    #: Shown in the tables' notes (:mod:`calbench.report.tables`).
    floor_note = "max(ĉ_j, 0) + 1e-9·p̂_j (eps; `eps: 0` is the paper's unfloored map)"

    _parameter_constraints = {**_BinnedOneVsRest._parameter_constraints, "eps": [Interval("real", 0)]}

    def __init__(self, *, n_bins: int = 5, eps: float = 1e-9):
        self.n_bins = n_bins
        self.eps = eps

    def _estimate(self, fitted, p: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.maximum(p - (fitted["p_mean"][b] - fitted["y_mean"][b]), 0.0) + self.eps * p


@register("hist")
class HistogramBinning(_BinnedOneVsRest):
    """Classical histogram binning (Zadrozny & Elkan 2001): equal-size bins per class, ĉ_j = ȳ_j(B).

    The sorted calibration values are split into ``n_bins`` chunks whose sizes differ by at most
    one (``numpy.array_split``, as the metrics' equal-mass bins); a new value goes to the first bin
    whose largest calibration value is ≥ it (values above every bin go to the last).
    """

    def __init__(self, *, n_bins: int = 10):
        self.n_bins = n_bins

    def _edges(self, p: np.ndarray) -> np.ndarray:
        ordered = np.sort(p)
        sizes = np.full(self.n_bins, p.size // self.n_bins)
        sizes[: p.size % self.n_bins] += 1
        ends = np.cumsum(sizes)
        return ordered[np.clip(ends - 1, 0, None)][: self.n_bins - 1]  # upper edge of every bin but the last

    def _bins(self, edges, p: np.ndarray) -> np.ndarray:
        return np.searchsorted(edges, p, side="left")
