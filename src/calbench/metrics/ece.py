"""Binned calibration errors: confidence ECE, classwise ECE, MCE (the skeleton's entry points).

* Confidence ECE (LECE paper Eq. 1, after Naeini et al. 2015): Σ_b |B_b|/n · |acc_b − conf_b|,
  bins built on the top probability, acc_b the accuracy in bin b.
* Classwise ECE (Dirichlet paper Eq. 4; LECE paper §2.4): the mean over classes j of the ECE of the
  binary problem (p̂_j, 1[y = j]) over all n instances, each class binned on its own.
* ``l2`` norm: sqrt(Σ_b |B_b|/n · (acc_b − conf_b)²) (Kumar et al. 2019's plug-in).
* MCE (Dirichlet paper's code): max over non-empty bins of |acc_b − conf_b|.
Empty bins contribute nothing. Binning conventions are in :mod:`calbench.metrics.binning`; the
estimators (and their debiased and CV-bins variants) in :mod:`calbench.metrics.binned`.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics.binned import bin_stats, binned_ece, classwise_columns, confidence_columns


def top_label_ece(confidence, correct, n_bins: int = 15, scheme: str = "em", norm: str = "l1") -> float:
    """Confidence ECE from top-label confidences ``[N]`` and correctness indicators ``[N]``."""
    scores = np.asarray(confidence, dtype=np.float64)[:, None]
    return float(binned_ece(scores, np.asarray(correct, dtype=np.float64)[:, None], n_bins, scheme, norm)[0])


def confidence_ece(probs, labels, n_bins: int = 15, scheme: str = "em", norm: str = "l1") -> float:
    """Confidence ECE of probabilities ``[N, C]`` against integer labels."""
    return float(binned_ece(*confidence_columns(probs, labels), n_bins, scheme, norm)[0])


def classwise_ece(probs, labels, n_bins: int = 15, scheme: str = "em", norm: str = "l1") -> float:
    """Classwise ECE: mean over classes of the one-vs-rest ECE of column j (Dirichlet paper Eq. 4)."""
    return float(np.mean(binned_ece(*classwise_columns(probs, labels), n_bins, scheme, norm)))


def confidence_mce(probs, labels, n_bins: int = 15, scheme: str = "ew") -> float:
    """Maximum calibration error over the non-empty confidence bins."""
    return float(mce_from_stats(*bin_stats(*confidence_columns(probs, labels), n_bins, scheme))[0])


def mce_from_stats(counts, mean_score, mean_hit) -> np.ndarray:
    """Largest |ȳ_k − p̄_k| over the non-empty bins (last axis), 0 where every bin is empty."""
    return np.max(np.where(counts > 0, np.abs(mean_hit - mean_score), 0.0), axis=-1)
