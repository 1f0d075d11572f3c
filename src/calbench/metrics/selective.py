"""Selective prediction: the risk–coverage curve of the confidence, its areas, and the AUROC of a score.

A selective classifier accepts the k most confident predictions (coverage k/n) and abstains on the rest.

* **AURC** (Geifman & El-Yaniv, NeurIPS 2017, §2; the area as Geifman, Uziel & El-Yaniv, ICLR 2019, §3
  compute it): the selective risk r_k = E_k / k, E_k the errors among the k accepted, averaged over the
  coverages k/n, k = 1..n: AURC = (1/n) Σ_k r_k.
* **AUGRC** (Traub et al., NeurIPS 2024, §4): the generalised risk E_k / n (the joint probability of
  accepting and erring) averaged the same way: AUGRC = (1/n) Σ_k E_k / n = (1/n²) Σ_k E_k.
* **Ties**: where confidences tie, the order of the tied rows is arbitrary; E_k within a tie group is the
  mean over its orders, the straight line between the cumulative errors at the group's ends (E_k is a
  hypergeometric count whose mean is that line, and k is fixed), so the areas do not depend on the sort.
  Without ties this is the plain sum. torch-uncertainty's ``AURC``/``AUGRC`` integrate the same points by
  the trapezoid rule over coverages 1/n..1 and divide by 1 − 1/n: (Σ_k r_k − (r_1 + r_n)/2)/(n − 1), an
  O(1/n) difference (docs/metrics.md).
* **AUROC** (:func:`auroc`): the Mann–Whitney probability that a positive outscores a negative, ties
  counting one half (midranks), per column of a score matrix. Of the confidence against correctness it is
  the misclassification-detection AUROC (Hendrycks & Gimpel, ICLR 2017); the same function serves
  out-of-distribution detection.
"""

from __future__ import annotations

import numpy as np


def tie_bounds(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For values sorted along axis 0 ([N] or [N, M]), the indices of the first and last rows of each row's
    group of equal values."""
    n = sorted_values.shape[0]
    rows = np.arange(n).reshape((n,) + (1,) * (sorted_values.ndim - 1))
    new = np.ones(sorted_values.shape, dtype=bool)
    new[1:] = sorted_values[1:] != sorted_values[:-1]
    first = np.maximum.accumulate(np.where(new, rows, 0), axis=0)
    ends = np.ones(sorted_values.shape, dtype=bool)
    ends[:-1] = new[1:]
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, rows, n), 0), axis=0), 0)
    return first, last


def midranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..N along axis 0 ([N] or [N, M]), tied values sharing the mean of their ranks."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, axis=0)
    first, last = tie_bounds(np.take_along_axis(values, order, axis=0))
    ranks = np.empty_like(values)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=0)
    return ranks


def auroc(scores: np.ndarray, positive: np.ndarray) -> np.ndarray | float:
    """Area under the ROC curve of ``scores`` for the boolean ``positive`` ([N] → float, [N, M] → [M]).

    (Σ ranks of positives − P(P + 1)/2) / (P·Q) with midranks (Mann–Whitney U); NaN where a column has
    no positive or no negative."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.broadcast_to(np.asarray(positive, dtype=bool), scores.shape)
    if scores.shape[0] == 0:
        raise ValueError("auroc needs at least one row")
    n_pos = positive.sum(axis=0).astype(np.float64)
    n_neg = scores.shape[0] - n_pos
    rank_sum = np.sum(np.where(positive, midranks(scores), 0.0), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return float(value) if np.ndim(value) == 0 else value


def cumulative_errors(confidence: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """E_k, k = 1..n: the errors among the k most confident rows, the mean over the orders of tied rows."""
    confidence = np.asarray(confidence, dtype=np.float64)
    order = np.argsort(-confidence)
    total = np.cumsum(np.asarray(errors, dtype=np.float64)[order])
    first, last = tie_bounds(confidence[order])
    before = np.where(first > 0, total[first - 1], 0.0)
    return before + (total[last] - before) * (np.arange(total.size) - first + 1) / (last - first + 1)


def aurc(confidence: np.ndarray, errors: np.ndarray) -> float:
    """(1/n) Σ_k E_k / k: the mean selective risk over the coverages k/n."""
    e = cumulative_errors(confidence, errors)
    return float(np.mean(e / np.arange(1, e.size + 1)))


def augrc(confidence: np.ndarray, errors: np.ndarray) -> float:
    """(1/n²) Σ_k E_k: the mean generalised risk over the coverages k/n."""
    e = cumulative_errors(confidence, errors)
    return float(np.sum(e) / e.size**2)
