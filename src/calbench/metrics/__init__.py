"""Evaluation metrics, addressed by id (docs/metrics.md).

>>> from calbench.metrics import evaluate
>>> evaluate(probs, labels, ["acc", "nll", "ece.conf.em15.l1"])
"""

from __future__ import annotations

import numpy as np

from calbench.metrics import definitions as _definitions  # noqa: F401  (registers the metric ids)
from calbench.metrics.bootstrap import bootstrap_intervals
from calbench.metrics.registry import MetricContext, known_patterns, lookup
from calbench.scores import check_labels, check_logits


def _optional(array, shape, name):
    if array is None:
        return None
    array = np.asarray(array, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"{name}: expected shape {shape} (one row per instance of probs), got {array.shape}")
    return array


def evaluate(probs, labels, ids, true_probs=None, seed: int = 0, uncal_probs=None, bootstrap: int = 0,
             level: float = 0.95, interval: str = "basic") -> dict[str, float]:
    """Compute the metrics ``ids`` of probabilities ``[N, C]`` against integer ``labels``.

    ``true_probs`` (the true calibration map at each instance) is needed by ``true_ce.*``/``cmee.*``;
    ``uncal_probs`` (the uncalibrated classifier's probabilities) by ``ece_gain.*``; ``seed`` drives
    metrics that resample (bootstrap, consistency resampling, CV folds of PL/PL3).
    ``bootstrap`` > 0 adds a bootstrap interval (``interval`` "basic" or "percentile") of confidence
    ``level`` for every metric as ``<id>.ci_low`` / ``<id>.ci_high`` (instances resampled with
    replacement, the same resamples for all metrics; see :mod:`calbench.metrics.bootstrap`).
    """
    probs = check_logits(probs, name="probs")
    labels = check_labels(labels, probs.shape[1], probs.shape[0])
    ctx = MetricContext(probs, labels, _optional(true_probs, probs.shape, "true_probs"), seed,
                        _optional(uncal_probs, probs.shape, "uncal_probs"))
    out, families = {}, []
    for metric_id in ids:
        family, groups = lookup(metric_id)
        if family.needs_true_probs and ctx.true_probs is None:
            raise ValueError(f"metric {metric_id!r} needs the true calibration map (a synthetic source's true_probs)")
        if family.needs_uncal_probs and ctx.uncal_probs is None:
            raise ValueError(f"metric {metric_id!r} needs the uncalibrated probabilities (pass uncal_probs=...)")
        out[metric_id] = float(family.function(ctx, **groups))
        families.append((metric_id, family, groups))
    if bootstrap:
        out.update(bootstrap_intervals(ctx, families, dict(out), bootstrap, level, interval))
    return out


def check_metric_ids(ids) -> None:
    """Raise on the first unknown id (used by config validation)."""
    for metric_id in ids:
        lookup(metric_id)


__all__ = ["evaluate", "check_metric_ids", "known_patterns", "lookup"]
