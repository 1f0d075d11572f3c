"""Fit-on-test calibration-error estimators and CMEE (Kängsepp, Valk & Kull 2025).

* **Plug-in estimator (Eq. 3)**: fit a calibration map ĉ from a family F on the *test* pairs
  (p̂_i, y_i) by a proper loss, then ĈE_q = (1/n Σ_i |p̂_i − ĉ(p̂_i)|^q)^{1/q}. The families are the
  binary maps of :mod:`calbench.maps1d`: ``platt``, ``beta``, ``iso``, ``pl``/``pl3`` (cross-entropy,
  the paper's headline PL and PL3) and ``pl_mse``/``pl3_mse``. The paper reports q = 2 without the
  square root; calbench's ``l2`` takes the root like every other ``l2`` id (square it to compare).
  These estimators are not debiased (the paper debiases binning ECEs only).
* **CMEE** (§6.1): the calibration-map estimation error E|ĉ(p̂) − c(p̂)|^q of the fitted map against
  the true calibration map c, available on synthetic sources. The true target of instance i is
  c(p̂_i) = ``true_probs[i]`` (its top class entry for the confidence reduction). ``true_probs`` is the
  true map at the *uncalibrated* prediction; for an injective calibrator T, E[Y | T(p̂)] = c(p̂)
  (Mix-n-Match App. D), so it is also the true map of the calibrated output. For non-injective
  methods (binning, isotonic) it is the Theorem-3 reference c(p̂) of the paper's calibrator CMEE.
"""

from __future__ import annotations

import numpy as np

from calbench.maps1d import make_map


def fitted_maps(scores: np.ndarray, hits: np.ndarray, family: str, seed: int = 0) -> np.ndarray:
    """ĉ(p̂) per column [N, M]: a map of ``family`` fitted on each binary column's own pairs."""
    return np.column_stack([make_map(family, seed).fit(scores[:, j], hits[:, j]).predict(scores[:, j])
                            for j in range(scores.shape[1])])


def _norm(diff: np.ndarray, norm: str) -> np.ndarray:
    if norm == "l1":
        return np.mean(np.abs(diff), axis=0)
    if norm == "l2":
        return np.sqrt(np.mean(diff**2, axis=0))
    raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")


def fit_on_test_ce(scores, hits, family: str, norm: str = "l1", seed: int = 0) -> np.ndarray:
    """Plug-in calibration error per column [M] (fit-on-test Eq. 3)."""
    return _norm(scores - fitted_maps(scores, hits, family, seed), norm)


def cmee(scores, hits, true_target, family: str, norm: str = "l1", seed: int = 0) -> np.ndarray:
    """Calibration-map estimation error per column [M] of the ``family`` map fitted on (scores, hits)."""
    return _norm(fitted_maps(scores, hits, family, seed) - true_target, norm)


def true_target(probs: np.ndarray, true_probs: np.ndarray, target: str) -> np.ndarray:
    """c(p̂) for each binary column: the true probability of the predicted class (conf) or of each class (cw)."""
    if target == "conf":
        return np.take_along_axis(true_probs, probs.argmax(axis=1)[:, None], axis=1)
    return np.asarray(true_probs, dtype=np.float64)
