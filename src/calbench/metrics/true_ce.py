"""True calibration errors on synthetic sources whose calibration map c(·) is known.

LECE paper §4.1.3 and Table 1 (docs/metrics.md): with α = 1 and the expectation replaced by the
test-set average, as the authors' code computes them (the version that reproduces Table 1), where
ĉ(p̂) is the calibrated output and c(p̂) the true map at the *uncalibrated* prediction:

* ``true_ce.conf.l1`` = mean_i |max_j ĉ_j(p̂_i) − max_j c_j(p̂_i)|
* ``true_ce.cw.l1``   = mean_i mean_j |ĉ_j(p̂_i) − c_j(p̂_i)|
"""

from __future__ import annotations

import numpy as np


def confidence_rows(probs, true_probs, squared: bool = False) -> np.ndarray:
    """Per row |max_j ĉ_j − max_j c_j| (squared: its square); ``true_ce.conf`` is their mean (l2: its root)."""
    diff = np.max(probs, axis=1) - np.max(true_probs, axis=1)
    return diff**2 if squared else np.abs(diff)


def classwise_rows(probs, true_probs, squared: bool = False) -> np.ndarray:
    """Per row mean_j |ĉ_j − c_j| (squared: of the squares); ``true_ce.cw`` is their mean (l2: its root)."""
    diff = np.asarray(probs) - np.asarray(true_probs)
    return np.mean(diff**2 if squared else np.abs(diff), axis=1)


def _row_mean(rows: np.ndarray, squared: bool) -> float:
    """The mean of the per-row terms; with ``squared`` (rows of squares) its root."""
    mean = np.mean(rows)
    return float(np.sqrt(mean) if squared else mean)


def true_confidence_ce(probs, true_probs, squared: bool = False) -> float:
    return _row_mean(confidence_rows(probs, true_probs, squared), squared)


def true_classwise_ce(probs, true_probs, squared: bool = False) -> float:
    """``squared``: sqrt of the mean squared difference (``l2``; the fit-on-test paper's squared CMEE, rooted)."""
    return _row_mean(classwise_rows(probs, true_probs, squared), squared)
