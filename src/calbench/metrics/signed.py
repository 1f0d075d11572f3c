"""Signed calibration error: over- versus under-confidence.

* ``sce.conf``, binless: mean(max p̂) − accuracy, the average confidence minus the accuracy (positive:
  over-confident; Guo, Pleiss, Sun & Weinberger, ICML 2017, §2, compare the two). It is the mean of the
  per-row terms max p̂ − 1[correct], so it has an exact bootstrap.
* Binned: the signed binned ECE Σ_b (n_b/n)(p̄_b − ȳ_b) equals ``sce.conf`` exactly whatever the bins (they
  partition the rows), so the binned form is offered as the two halves of the l1 binned ECE (Naeini, Cooper
  & Hauskrecht 2015; LECE paper Eq. 1): the over-confident part Σ_b (n_b/n)·max(p̄_b − ȳ_b, 0) and the
  under-confident part Σ_b (n_b/n)·max(ȳ_b − p̄_b, 0). over + under = ``ece.*.l1`` with the same bins,
  over − under = the binless signed error (for ``conf``; 0 for ``cw``, as every class's mean score and
  frequency then sum to 1 over the classes).
"""

from __future__ import annotations

import numpy as np


def confidence_gap_rows(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """max p̂_i − 1[argmax p̂_i = y_i] per row [N]; its mean is ``sce.conf``."""
    probs = np.asarray(probs, dtype=np.float64)
    return probs.max(axis=1) - (probs.argmax(axis=1) == labels)


def signed_parts(counts: np.ndarray, mean_score: np.ndarray, mean_hit: np.ndarray, part: str) -> np.ndarray:
    """The over- or under-confident part of the l1 binned ECE per column from bin statistics [..., B]."""
    if part not in ("over", "under"):
        raise ValueError(f"part must be 'over' or 'under', got {part!r}")
    gap = mean_score - mean_hit if part == "over" else mean_hit - mean_score
    return np.sum(counts / counts.sum(axis=-1, keepdims=True) * np.maximum(gap, 0.0), axis=-1)
