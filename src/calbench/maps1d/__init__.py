"""One-dimensional (binary) calibration maps p ↦ ĉ(p) on [0, 1], shared by calibrators and metrics.

Each map is a small estimator with ``fit(p, y) -> self`` and ``predict(p) -> ĉ(p)`` on 1-D float
arrays (``y`` in {0, 1}). The same classes serve as one-vs-rest / confidence calibrators
(:mod:`calbench.methods.binary_calibrators`) and as the families of the fit-on-test
calibration-error estimators (:mod:`calbench.metrics.fitted_maps_ece`; Kängsepp et al. 2025, Table 1).

* :class:`~calbench.maps1d.maps.Platt`: σ(a·logit p + b), log-loss (fit-on-test App. C.4).
* :class:`~calbench.maps1d.maps.Beta`: beta calibration "abm" (Kull et al. 2017), log-loss.
* :class:`~calbench.maps1d.maps.Quadratic`: σ(a + b·logit p + c·logit² p), log-loss (probmetrics' quadratic scaling).
* :class:`~calbench.maps1d.maps.Isotonic`: isotonic regression (PAV), squared loss;
  :class:`~calbench.maps1d.maps.CenteredIsotonic`: its centred form (Oron & Flournoy 2017).
* :class:`~calbench.maps1d.piecewise.PiecewiseLinear`: PL and PL3 with a fixed number of pieces;
  :class:`~calbench.maps1d.piecewise.PiecewiseLinearCV`: the fit-on-test paper's PL/PL3 (pieces by
  10-fold CV with the 0.1 % rule, prediction = mean of the fold models).
"""

from calbench.maps1d.maps import Beta, CenteredIsotonic, Isotonic, Platt, Quadratic
from calbench.maps1d.piecewise import PiecewiseLinear, PiecewiseLinearCV

FAMILIES = {
    "platt": lambda seed=0: Platt(),
    "beta": lambda seed=0: Beta(),
    "iso": lambda seed=0: Isotonic(),
    "pl": lambda seed=0: PiecewiseLinearCV(logit_space=False, loss="ce", seed=seed),
    "pl_mse": lambda seed=0: PiecewiseLinearCV(logit_space=False, loss="mse", seed=seed),
    "pl3": lambda seed=0: PiecewiseLinearCV(logit_space=True, loss="ce", seed=seed),
    "pl3_mse": lambda seed=0: PiecewiseLinearCV(logit_space=True, loss="mse", seed=seed),
}


def make_map(family: str, seed: int = 0):
    """An unfitted binary map of ``family`` (one of :data:`FAMILIES`); ``seed`` drives PL/PL3's CV folds."""
    if family not in FAMILIES:
        raise ValueError(f"binary map family {family!r} unknown; allowed: {', '.join(FAMILIES)}")
    return FAMILIES[family](seed=seed)


__all__ = ["Platt", "Beta", "Quadratic", "Isotonic", "CenteredIsotonic", "PiecewiseLinear", "PiecewiseLinearCV",
           "FAMILIES", "make_map"]
