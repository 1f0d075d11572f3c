"""Every metric, by id: :func:`evaluate` (the package's front door, ``from calbench.metrics import evaluate``)
and the id checks; importing it registers every metric definition."""

from __future__ import annotations

import numpy as np

from calbench.metrics import definitions as _definitions  # noqa: F401  (registers the metric ids)
from calbench.metrics.bootstrap import bootstrap_intervals, values_from_counts
from calbench.metrics.registry import MetricContext, known_patterns, lookup
from calbench.scores import check_labels, check_logits


def _optional(array, shape, name):
    if array is None:
        return None
    array = np.asarray(array, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"{name}: expected shape {shape} (one row per instance of probs), got {array.shape}")
    return array


#: Largest |row sum − 1| accepted by :func:`evaluate` for float64 probabilities (tight enough that a
#: calibrator's rounding shows, loose enough for float64 sums); inputs of lower precision (float32) get ``C``
#: times their machine epsilon where that is larger.
SUM_TOL = 1e-6


def check_probs(probs, method: str | None = None) -> np.ndarray:
    """Return ``probs`` as float64 ``[N, C]`` or raise when a row is negative or does not sum to 1.

    Names ``method`` (the calibrator whose output is checked) and the number of bad rows; logits,
    whose rows are neither non-negative nor normalised, are refused with a pointer to the softmax.
    """
    raw = np.asarray(probs)
    arr = check_logits(raw, name="probs")
    precision = np.finfo(raw.dtype).eps if np.issubdtype(raw.dtype, np.floating) else 0.0
    tol = max(SUM_TOL, arr.shape[1] * precision)
    bad = (np.abs(arr.sum(axis=1) - 1.0) > tol) | (arr < 0).any(axis=1)
    if bad.any():
        who = f"probs of method {method!r}" if method else "probs"
        worst = np.abs(arr.sum(axis=1) - 1.0).max()
        raise ValueError(
            f"{who}: {np.count_nonzero(bad)} of {arr.shape[0]} rows are not probability vectors (negative entries, "
            f"or a sum off 1 by more than {tol:g}; largest |sum - 1| = {worst:.3g}); evaluate() scores "
            "probabilities: for logits pass scipy.special.softmax(logits, axis=1) or calbench.Scores(logits).probs"
        )
    return arr


def evaluate(probs, labels, ids, true_probs=None, seed: int = 0, uncal_probs=None, bootstrap: int = 0,
             level: float = 0.95, interval: str = "basic", method: str | None = None,
             label_shift=None) -> dict[str, float]:
    """Compute the metrics ``ids`` of probabilities ``[N, C]`` against integer ``labels``.

    ``true_probs`` (the true calibration map at each instance) is needed by ``true_ce.*``/``cmee.*``;
    ``uncal_probs`` (the uncalibrated classifier's probabilities) by ``ece_gain.*``; ``seed`` drives
    metrics that resample (bootstrap, consistency resampling, CV folds of PL/PL3).
    ``bootstrap`` > 0 adds a bootstrap interval (``interval`` "basic" or "percentile") of confidence
    ``level`` for every metric as ``<id>.ci_low`` / ``<id>.ci_high`` (instances resampled with
    replacement, the same resamples for all metrics; see :mod:`calbench.metrics.bootstrap`).
    Rows of ``probs`` must be non-negative and sum to 1 (:func:`check_probs`; ``method`` names
    the calibrator in its error). ``label_shift`` (:class:`calbench.metrics.label_shift.LabelShiftInputs`) is
    needed by the adaptation metrics of a label-shifted set (``nll.em``, ``prior_mse.bbse``, ...).
    """
    return evaluate_resampled(probs, labels, ids, None, true_probs, seed, uncal_probs, bootstrap, level, interval,
                              method, label_shift)[0]


def evaluate_resampled(probs, labels, ids, counts, true_probs=None, seed: int = 0, uncal_probs=None,
                       bootstrap: int = 0, level: float = 0.95, interval: str = "basic", method: str | None = None,
                       label_shift=None) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """(:func:`evaluate`'s values, ``{id: values on each resample}``) for bootstrap row counts ``counts`` [R, N]
    given by the caller (the paired bootstrap of :mod:`calbench.stats` draws the same counts for
    every method), for the ids with a row-weighted form (:func:`calbench.metrics.bootstrap.values_from_counts`);
    ``counts`` None: no resamples. The estimates and the resamples share one context (an adaptation's EM once)."""
    ctx, families = _context(probs, labels, ids, true_probs, seed, uncal_probs, method, label_shift)
    out = {metric_id: float(family.function(ctx, **groups)) for metric_id, family, groups in families}
    if bootstrap:
        out.update(bootstrap_intervals(ctx, families, dict(out), bootstrap, level, interval))
    return out, ({} if counts is None else values_from_counts(ctx, families, counts, recompute=False))


def _context(probs, labels, ids, true_probs, seed, uncal_probs, method, label_shift):
    """The checked :class:`MetricContext` and ``(id, family, groups)`` of every id."""
    probs = check_probs(probs, method)
    labels = check_labels(labels, probs.shape[1], probs.shape[0])
    ctx = MetricContext(probs, labels, _optional(true_probs, probs.shape, "true_probs"), seed,
                        _optional(uncal_probs, probs.shape, "uncal_probs"), label_shift)
    families = []
    for metric_id in ids:
        family, groups = lookup(metric_id)
        if family.needs_true_probs and ctx.true_probs is None:
            raise ValueError(f"metric {metric_id!r} needs the true calibration map (a synthetic source's true_probs)")
        if family.needs_uncal_probs and ctx.uncal_probs is None:
            raise ValueError(f"metric {metric_id!r} needs the uncalibrated probabilities (pass uncal_probs=...)")
        if family.needs_label_shift and ctx.label_shift is None:
            raise ValueError(f"metric {metric_id!r} adapts to label shift: it is computed on a source's label-shifted "
                             "test sets (`label_shift`, docs/label_shift.md), with their adaptation inputs")
        families.append((metric_id, family, groups))
    return ctx, families


def check_metric_ids(ids) -> None:
    """Raise on the first unknown id (used by config validation)."""
    for metric_id in ids:
        lookup(metric_id)


__all__ = ["evaluate", "evaluate_resampled", "check_probs", "check_metric_ids", "known_patterns", "lookup"]
