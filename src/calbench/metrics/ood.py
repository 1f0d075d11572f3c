"""Out-of-distribution detection from a calibrated output's confidence (docs/shift.md; Ovadia et al., NeurIPS 2019,
§4.1 and Fig. 3; Hendrycks & Gimpel, ICLR 2017): in-distribution rows are the positives, a score that is higher
on them (the maximum probability, or the negative entropy) separates them from out-of-distribution rows.

Not a registered metric: each needs a second set of rows beside the test rows.
"""

from __future__ import annotations

import numpy as np

from calbench.metrics.selective import auroc

#: The confidence scores: the top probability and the negative entropy of each output row.
SCORES = ("maxprob", "entropy")


def confidence_scores(probs: np.ndarray) -> dict[str, np.ndarray]:
    """``{maxprob: max_k p_k, entropy: Σ_k p_k log p_k}`` of each row (higher = more confident)."""
    probs = np.asarray(probs, dtype=np.float64)
    return {"maxprob": probs.max(axis=1),
            "entropy": np.sum(probs * np.log(np.where(probs > 0, probs, 1.0)), axis=1)}


def fpr_at_tpr(positive: np.ndarray, negative: np.ndarray, tpr: float = 0.95) -> float:
    """The share of negatives at or above the highest threshold that keeps at least ``tpr`` of the positives
    (FPR at 95 % TPR)."""
    ordered = np.sort(positive)[::-1]
    threshold = ordered[int(np.ceil(tpr * len(ordered))) - 1]
    return float(np.mean(negative >= threshold))


def confidence_curve(in_probs: np.ndarray, in_labels: np.ndarray, out_probs: np.ndarray,
                     thresholds: np.ndarray) -> dict[str, list]:
    """Ovadia et al.'s Fig. 3 at each confidence threshold τ: the accuracy of the in-distribution rows with
    max probability ≥ τ (NaN where none), and the shares of in- and out-of-distribution rows with max probability
    ≥ τ."""
    conf_in, conf_out = in_probs.max(axis=1), out_probs.max(axis=1)
    correct = in_probs.argmax(axis=1) == in_labels
    kept = conf_in[None, :] >= thresholds[:, None]
    count = kept.sum(axis=1)
    accuracy = np.where(count > 0, (kept & correct).sum(axis=1) / np.maximum(count, 1), np.nan)
    return {"threshold": thresholds.tolist(), "accuracy": accuracy.tolist(),
            "in_share": (count / len(conf_in)).tolist(),
            "out_share": np.mean(conf_out[None, :] >= thresholds[:, None], axis=1).tolist()}


def ood_metrics(in_probs: np.ndarray, out_probs: np.ndarray) -> dict[str, float]:
    """AUROC and FPR at 95 % TPR of each confidence score, ``{auroc.maxprob, fpr95.maxprob, auroc.entropy,
    fpr95.entropy}``."""
    inside, outside = confidence_scores(in_probs), confidence_scores(out_probs)
    positive = np.r_[np.ones(len(in_probs), dtype=bool), np.zeros(len(out_probs), dtype=bool)]
    values = {}
    for score in SCORES:
        values[f"auroc.{score}"] = auroc(np.concatenate([inside[score], outside[score]]), positive)
        values[f"fpr95.{score}"] = fpr_at_tpr(inside[score], outside[score])
    return values
