"""Evaluation metrics, addressed by id (ARCHITECTURE.md §5).

>>> from calbench.metrics import evaluate
>>> evaluate(probs, labels, ["acc", "nll", "ece.conf.em15.l1"])
"""

from __future__ import annotations

import numpy as np

from calbench.metrics import definitions as _definitions  # noqa: F401  (registers the metric ids)
from calbench.metrics.registry import MetricContext, known_patterns, lookup
from calbench.scores import check_labels, check_logits


def evaluate(probs, labels, ids, true_probs=None, seed: int = 0) -> dict[str, float]:
    """Compute the metrics ``ids`` of probabilities ``[N, C]`` against integer ``labels``.

    ``true_probs`` (the true calibration map at each instance) is needed by ``true_ce.*`` only;
    ``seed`` drives metrics that resample (bootstrap, consistency resampling).
    """
    probs = check_logits(probs, name="probs")
    labels = check_labels(labels, probs.shape[1], probs.shape[0])
    ctx = MetricContext(probs, labels, None if true_probs is None else np.asarray(true_probs, dtype=np.float64), seed)
    out = {}
    for metric_id in ids:
        family, groups = lookup(metric_id)
        if family.needs_true_probs and ctx.true_probs is None:
            raise ValueError(f"metric {metric_id!r} needs the true calibration map (a synthetic source's true_probs)")
        out[metric_id] = float(family.function(ctx, **groups))
    return out


def check_metric_ids(ids) -> None:
    """Raise on the first unknown id (used by config validation)."""
    for metric_id in ids:
        lookup(metric_id)


__all__ = ["evaluate", "check_metric_ids", "known_patterns", "lookup"]
