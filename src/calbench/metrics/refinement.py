"""Calibration / refinement split of a proper score (Berta, Holzmüller, Jordan & Bach 2025, "Rethinking early
stopping: refine, then calibrate", §2–3).

A proper loss L of probabilities p splits into the refinement error min_g L(g ∘ p), the loss left after the
best post-hoc recalibration g, and the calibration error L(p) − min_g L(g ∘ p), the part that recalibration
removes. Both are estimated with g from a family fitted to the data: ``ts``, temperature scaling on the log
probabilities (g(p) = softmax(β log p), β by :func:`calbench.solvers.temperature_fit.fit_inverse_temperature`),
as the paper does and as probmetrics' ``refinement_*_ts-mix_*`` / ``calib-err_*_ts-mix_*`` do, or ``isotonic``,
one-vs-rest isotonic regression of 1[y = j] on p_j per class, renormalised (uniform where every class maps to 0),
as probmetrics' ``*_isotonic-mix_*`` (scikit-learn's ``CalibratedClassifierCV(method="isotonic")``;
:mod:`calbench.kernels.isotonic_folds`), with probmetrics' conventions:

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


def recalibrated(probs: np.ndarray, labels: np.ndarray, folds: int | None, seed: int = 0,
                 family: str = "ts") -> np.ndarray:
    """Probabilities recalibrated by ``family`` ("ts" or "isotonic"), out of fold (``folds`` = K) or in-sample
    (``folds`` = None), mixed with the uniform distribution."""
    probs = np.asarray(probs, dtype=np.float64)
    splits = [(np.arange(labels.size),) * 2] if folds is None else _folds(labels, folds, seed)
    out = _isotonic(probs, labels, splits, folds is not None) if family == "isotonic" else _temperature(probs, labels,
                                                                                                        splits)
    for fit, score in splits:
        mix = 1.0 / (fit.size + 1)
        out[score] = (1 - mix) * out[score] + mix / probs.shape[1]
    return out


def _temperature(probs, labels, splits) -> np.ndarray:
    """Temperature-scaled probabilities; a zero probability enters as log of the smallest normal float64
    (probmetrics: float32's)."""
    log_p = np.log(np.maximum(probs, np.finfo(np.float64).tiny))
    out = np.empty_like(log_p)
    for fit, score in splits:
        out[score] = softmax_scaled(log_p[score], fit_inverse_temperature(log_p[fit], labels[fit]))
    return out


def _isotonic(probs, labels, splits, out_of_fold: bool) -> np.ndarray:
    """One-vs-rest isotonic maps, renormalised per row (uniform where all classes map to 0, as scikit-learn)."""
    from calbench.kernels.isotonic_folds import recalibrate

    by_class = np.ascontiguousarray(probs.T)
    fold_of = np.zeros(labels.size, dtype=np.int64)
    for fold, (_, score) in enumerate(splits):
        fold_of[score] = fold
    out = recalibrate(by_class, np.argsort(by_class, axis=1), labels.astype(np.int64), fold_of,
                      len(splits) if out_of_fold else 0, np.empty_like(by_class)).T
    total = out.sum(axis=1, keepdims=True)
    return np.divide(out, total, out=np.full_like(out, 1.0 / probs.shape[1]), where=total > 0)
