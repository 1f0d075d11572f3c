"""Accuracy and proper scoring rules.

* ``nll``: mean −ln p̂_y (natural log, both papers); probabilities are clipped at ``NLL_EPS``
  first, as sklearn's ``log_loss`` does, because non-parametric methods can output exact zeros.
* ``brier``: (1/n) Σ_i Σ_j (p̂_ij − y_ij)², summed over classes (LECE paper; Table 1 ≈ 0.44).
  ``brier.mean`` divides by C as well (Dirichlet paper's Supp. Table 14 convention).
* ``brier.top``: the binary Brier score of the top-label confidence against correctness.
"""

from __future__ import annotations

import numpy as np

#: The floor under p̂_y of every log-loss, one per job; the values differ on purpose, each kept as the published
#: numbers used it. The ``nll`` metric and the grid searches' CV loss (sklearn's ``log_loss`` clip):
NLL_EPS = 1e-15
#: KCal's projection training loss and bandwidth CV loss (the kernel's class share of the true label):
KCAL_LOSS_EPS = 1e-10
#: ETS's fitting loss, whose fitted weights and temperature depend on it:
ETS_LOSS_EPS = 1e-20


def accuracy(probs, labels) -> float:
    return float(np.mean(np.argmax(probs, axis=1) == labels))


def log_loss_rows(probs, labels) -> np.ndarray:
    """Per-instance −ln p̂_y (clipped at ``NLL_EPS``) [N]."""
    return log_loss_terms(np.asarray(probs)[np.arange(labels.size), labels])


def log_loss_terms(p_true) -> np.ndarray:
    """−ln p̂_y of each label probability ``p_true``, clipped at ``NLL_EPS``."""
    return -np.log(np.clip(p_true, NLL_EPS, None))


def log_loss(probs, labels) -> float:
    return float(np.mean(log_loss_rows(probs, labels)))


def brier_rows(probs, labels) -> np.ndarray:
    """Per-instance Brier score Σ_j (p̂_ij − y_ij)² [N]."""
    probs = np.asarray(probs, dtype=np.float64)
    return np.sum(probs**2, axis=1) - 2 * probs[np.arange(labels.size), labels] + 1.0


def brier(probs, labels, *, mean_over_classes: bool = False) -> float:
    sq = np.asarray(probs, dtype=np.float64) ** 2
    p_true = np.asarray(probs)[np.arange(labels.size), labels]
    per_row = sq.sum(axis=1) - 2 * p_true + 1.0
    value = float(np.mean(per_row))
    return value / probs.shape[1] if mean_over_classes else value


def brier_top(probs, labels) -> float:
    probs = np.asarray(probs)
    hits = (probs.argmax(axis=1) == labels).astype(np.float64)
    return float(np.mean((probs.max(axis=1) - hits) ** 2))
