"""Calibration / refinement split of a proper score (Berta, Holzmüller, Jordan & Bach 2025, "Rethinking early
stopping: refine, then calibrate", §2–3).

A proper loss L of probabilities p splits into the refinement error min_g L(g ∘ p), the loss left after the
best post-hoc recalibration g, and the calibration error L(p) − min_g L(g ∘ p), the part that recalibration
removes. Both are estimated with g from a family fitted to the data: here temperature scaling on the log
probabilities (g(p) = softmax(β log p), β by :func:`calbench.solvers.temperature_fit.fit_inverse_temperature`),
as the paper does and as probmetrics' ``refinement_*_ts-mix_*`` / ``calib-err_*_ts-mix_*`` do, with
probmetrics' conventions:

* ``cvK``: cross-fitting — K stratified shuffled folds (scikit-learn's ``StratifiedKFold(K, shuffle=True,
  random_state=seed)`` folds, :func:`calbench.folds.stratified_kfold_splits`; unstratified shuffled folds
  where a class has fewer than K rows); each fold is recalibrated by β fitted on the other folds, and the
  loss of the assembled out-of-fold predictions is the refinement estimate. ``all``: β fitted and scored on
  all rows (in-sample: the refinement is then optimistic by the fit's one degree of freedom).
* The recalibrated probabilities are mixed with the uniform distribution, (1 − c)·q + c/C with
  c = 1/(n_fit + 1) (probmetrics' ``ts-mix``, ``MixtureCalibrator``), which bounds the log-loss.

The calibration error can be negative (out of fold, recalibration can lose); refinement + calibration error
= the loss of p.
"""

from __future__ import annotations

import numpy as np

from calbench.folds import kfold_splits, stratified_kfold_splits
from calbench.solvers.temperature_fit import fit_inverse_temperature, softmax_scaled


def _folds(labels: np.ndarray, folds: int, seed: int):
    if labels.size < 2 or folds > labels.size:
        raise ValueError(f"cross-fitted recalibration with {folds} folds needs at least {max(folds, 2)} rows, "
                         f"got {labels.size}: use the '.all' form or fewer folds")
    counts = np.bincount(labels)
    if counts[counts > 0].min() >= folds:
        return stratified_kfold_splits(labels, folds, seed)
    return list(kfold_splits(labels.size, folds, seed))


def recalibrated(probs: np.ndarray, labels: np.ndarray, folds: int | None, seed: int = 0) -> np.ndarray:
    """Temperature-scaled probabilities, out of fold (``folds`` = K) or in-sample (``folds`` = None); a zero
    probability enters as log of the smallest normal float64 (probmetrics: float32's)."""
    log_p = np.log(np.maximum(np.asarray(probs, dtype=np.float64), np.finfo(np.float64).tiny))
    splits = [(np.arange(labels.size),) * 2] if folds is None else _folds(labels, folds, seed)
    out = np.empty_like(log_p)
    for fit, score in splits:
        beta = fit_inverse_temperature(log_p[fit], labels[fit])
        mix = 1.0 / (fit.size + 1)
        out[score] = (1 - mix) * softmax_scaled(log_p[score], beta) + mix / log_p.shape[1]
    return out


