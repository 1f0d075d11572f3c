"""Evaluation metrics, addressed by id (docs/metrics.md).

>>> from calbench.metrics import evaluate
>>> evaluate(probs, labels, ["acc", "nll", "ece.conf.em15.l1"])

The names below live in :mod:`calbench.metrics.evaluation`, imported on first use: importing one metric
module (``calbench.metrics.proper``) does not import every metric, nor make their files code inputs of the
jobs that use it (:mod:`calbench.imports`).
"""

__all__ = ["evaluate", "check_probs", "check_metric_ids", "known_patterns", "lookup"]


def __getattr__(name: str):
    """The front door's names, from :mod:`calbench.metrics.evaluation` on first use (PEP 562)."""
    if name in __all__:
        from calbench.metrics import evaluation

        return getattr(evaluation, name)
    raise AttributeError(f"module 'calbench.metrics' has no attribute {name!r}")
