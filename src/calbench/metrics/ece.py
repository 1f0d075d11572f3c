"""Binned calibration errors: confidence ECE, classwise ECE, MCE.

* Confidence ECE (LECE paper Eq. 1, after Naeini et al. 2015): Σ_b |B_b|/n · |acc_b − conf_b|,
  bins built on the top probability, acc_b the accuracy in bin b.
* Classwise ECE (Dirichlet paper Eq. 4; LECE paper §2.4): the mean over classes j of the ECE of the
  binary problem (p̂_j, 1[y = j]) over all n instances, each class binned on its own.
* ``l2`` norm: sqrt(Σ_b |B_b|/n · (acc_b − conf_b)²) (Kumar et al. 2019's plug-in).
* MCE (Dirichlet paper's code): max over non-empty bins of |acc_b − conf_b|.
Empty bins contribute nothing. Binning conventions are in :mod:`calbench.metrics.binning`.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics.binning import assign_bins, bin_sums


def _binned_gaps(scores: np.ndarray, hits: np.ndarray, n_bins: int, scheme: str):
    """Per-bin weights |B_b|/n and gaps acc_b − conf_b (arrays of shape [..., n_bins])."""
    bins = assign_bins(scores, n_bins, scheme)
    counts, score_sum, hit_sum = bin_sums(bins, n_bins, scores, hits)
    safe = np.maximum(counts, 1)
    return counts / scores.shape[0], (hit_sum - score_sum) / safe


def _norm(weights: np.ndarray, gaps: np.ndarray, norm: str) -> np.ndarray:
    if norm == "l1":
        return np.sum(weights * np.abs(gaps), axis=-1)
    if norm == "l2":
        return np.sqrt(np.sum(weights * gaps**2, axis=-1))
    raise ValueError(f"norm must be 'l1' or 'l2', got {norm!r}")


def top_label_ece(confidence, correct, n_bins: int = 15, scheme: str = "em", norm: str = "l1") -> float:
    """Confidence ECE from top-label confidences ``[N]`` and correctness indicators ``[N]``."""
    confidence = np.asarray(confidence, dtype=np.float64)
    return float(_norm(*_binned_gaps(confidence, np.asarray(correct, dtype=np.float64), n_bins, scheme), norm))


def confidence_ece(probs, labels, n_bins: int = 15, scheme: str = "em", norm: str = "l1") -> float:
    """Confidence ECE of probabilities ``[N, C]`` against integer labels."""
    probs = np.asarray(probs, dtype=np.float64)
    return top_label_ece(probs.max(axis=1), probs.argmax(axis=1) == labels, n_bins, scheme, norm)


def classwise_ece(probs, labels, n_bins: int = 15, scheme: str = "em", norm: str = "l1") -> float:
    """Classwise ECE: mean over classes of the one-vs-rest ECE of column j (Dirichlet paper Eq. 4)."""
    probs = np.asarray(probs, dtype=np.float64)
    onehot = np.zeros_like(probs)
    onehot[np.arange(labels.size), labels] = 1.0
    return float(np.mean(_norm(*_binned_gaps(probs, onehot, n_bins, scheme), norm)))


def confidence_mce(probs, labels, n_bins: int = 15, scheme: str = "ew") -> float:
    """Maximum calibration error over the non-empty confidence bins."""
    probs = np.asarray(probs, dtype=np.float64)
    weights, gaps = _binned_gaps(probs.max(axis=1), (probs.argmax(axis=1) == labels).astype(float), n_bins, scheme)
    return float(np.max(np.abs(gaps[weights > 0]), initial=0.0))
