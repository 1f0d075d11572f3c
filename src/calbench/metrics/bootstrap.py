"""Bootstrap confidence intervals of one metric on one test set (config key ``bootstrap``: the ``<id>.ci_low`` and
``<id>.ci_high`` of a metrics JSON; Davison & Hinkley 1997, §5.2–5.3), and the row-weighted forms of the metrics
that :mod:`calbench.stats` resamples with (:func:`values_from_counts`).

R resamples of the n test instances are drawn with replacement (seeded from the metric context's
seed, shared by all metrics so intervals of different metrics come from the same resamples). A
metric that registers ``pointwise`` (its value is the mean of per-instance terms: accuracy, NLL,
Brier, ECE gain) is bootstrapped as one matrix product of resample counts with those terms; one
that registers ``resampled`` (binned ECE and MCE: equal-width bins have fixed edges, so a resample's bin
sums are its row counts times the rows' bin indicators; equal-mass bins take their edges at ranks of the
cumulative counts) is computed from the counts of all resamples at once; other metrics (CV and adaptive
bins, kernels, fits) are recomputed on each resample (cost × R: keep R small for the fit-on-test PL/PL3
estimators and the p-ECE test). With q_lo, q_hi the (1 ∓ level)/2 quantiles of the R values:

* ``basic`` (default): [2θ̂ − q_hi, 2θ̂ − q_lo], the pivotal interval. It corrects for the
  resampling bias of estimators such as binned ECE, which grows on resamples (duplicated instances
  look more confident-and-right), so a percentile interval can miss the estimate itself.
* ``percentile``: [q_lo, q_hi].
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from calbench.metrics.registry import MetricContext


def resample_indices(n: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng([seed, 4242]).integers(n, size=(resamples, n))


def _take(ctx: MetricContext, idx: np.ndarray, families) -> MetricContext:
    """The resample ``idx`` of ``ctx``, with the optional arrays only where one of ``families`` reads them, the
    confidence columns taken from ``ctx``'s (the same values: row maxima do not depend on other rows) and the
    probabilities gathered only when a metric reads them (:class:`_Resample`)."""
    pick = lambda a, needed: None if a is None or not needed else a[idx]  # noqa: E731
    resampled = _Resample(parent=ctx, rows=idx, labels=ctx.labels[idx],
                          true_probs=pick(ctx.true_probs, any(f.needs_true_probs for f in families)),
                          uncal_probs=pick(ctx.uncal_probs, any(f.needs_uncal_probs for f in families)),
                          seed=ctx.seed, label_shift=ctx.label_shift)
    scores, hits = ctx.confidence
    resampled.__dict__["confidence"] = (scores[idx], hits[idx])  # fills the cached property
    return resampled


class _Resample(MetricContext):
    """A resample of a metric context whose probabilities ``[N, K]`` are gathered on first read: the confidence
    metrics read only the confidence columns, and at 1,000 classes the copy would cost them 100 times their
    own work. Made as a :class:`MetricContext` (e.g. by ``dataclasses.replace``) without ``parent``."""

    def __init__(self, *fields, parent: MetricContext | None = None, rows: np.ndarray | None = None, **named):
        if parent is None:
            super().__init__(*fields, **named)
            return
        for name, value in {"_parent": parent, "_rows": rows, **named}.items():
            object.__setattr__(self, name, value)  # a frozen dataclass

    @cached_property
    def probs(self) -> np.ndarray:
        return self._parent.probs[self._rows]


METHODS = ("basic", "percentile")
#: The key under which :func:`values_from_counts` records on a context the ids it resamples there
#: (``ctx.shared(RESAMPLED_IDS, list)``), so that a form can compute with its own what the others will read (the bin
#: sums of every binning of a target from one pass over the rows).
RESAMPLED_IDS = "resampled ids"


def bootstrap_values(ctx: MetricContext, families, resamples: int) -> dict[str, np.ndarray]:
    """``{id: values on each of the R resamples}`` for each ``(id, family, groups)`` in ``families``; the
    resamples depend only on ``n``, ``resamples`` and ``ctx.seed``, so two outputs on the same rows (two
    methods) are resampled alike and their differences are paired."""
    idx = resample_indices(ctx.labels.size, resamples, ctx.seed)
    return values_from_counts(ctx, families, counts_of(idx), idx)


def counts_of(idx: np.ndarray) -> np.ndarray:
    """Row counts ``[R, N]`` (int64) of the resamples ``idx`` ``[R, N]`` (rows drawn with replacement)."""
    from calbench.kernels.row_counts import count_rows

    idx = np.ascontiguousarray(idx, dtype=np.int64)
    out = np.zeros(idx.shape, dtype=np.int64)
    count_rows(idx, out)
    return out


def values_from_counts(ctx: MetricContext, families, counts: np.ndarray, idx: np.ndarray | None = None,
                       recompute: bool = True) -> dict[str, np.ndarray]:
    """``{id: values on each resample}`` of resamples given as row counts ``[R, N]`` (the rows weighted by
    their counts, which need not sum to N: a weighted mean divides by their sum): a matrix product for
    ``pointwise`` metrics, the family's ``resampled`` form where it has one, else (``recompute``; otherwise the id
    is left out) the metric recomputed on each resample's rows
    (``idx`` ``[R, N]``, in the order drawn, where known; else each row repeated its count times)."""
    n = ctx.labels.size
    ctx.shared(RESAMPLED_IDS, list).extend(m for m, _, _ in families if m not in ctx.shared(RESAMPLED_IDS, list))
    values = {m: weighted_means(ctx, counts, f) for m, f, _ in families if f.pointwise is not None}
    for metric_id, family, groups in families:
        if family.pointwise is None and family.resampled is not None:
            from_counts = family.resampled(ctx, counts, **groups)
            if from_counts is not None:
                values[metric_id] = from_counts
    others = [(m, f, g) for m, f, g in families if m not in values]
    if others and recompute:  # one resampled copy of the arrays per resample serves every metric
        per_resample = []
        for r, weights in enumerate(counts):
            rows = np.repeat(np.arange(n), weights) if idx is None else idx[r]
            resampled = _take(ctx, rows, [f for _, f, _ in others])
            per_resample.append([f.function(resampled, **g) for _, f, g in others])
        values.update((m, column) for (m, _, _), column in zip(others, np.array(per_resample).T))
    return {metric_id: np.asarray(values[metric_id], dtype=np.float64) for metric_id, _, _ in families
            if metric_id in values}


def weighted_means(ctx: MetricContext, counts: np.ndarray, family) -> np.ndarray:
    """Each resample's weighted mean of ``family``'s per-row terms, counts ``[R, N]`` (whose sums are n, or a
    resample's share of a pool's rows: :mod:`calbench.stats.resampling`), as one matrix product with a float copy of
    the counts shared by every metric and method of these counts; made once per family and counts on ``ctx`` (a
    metric and its change by adaptation read it)."""
    from calbench.metrics.row_counts import as_float, row_sums

    def compute():
        return as_float(counts) @ family.pointwise(ctx) / row_sums(counts)

    held_counts, means = ctx.shared(("weighted means", family.pattern.pattern), lambda: (counts, compute()))
    return means if held_counts is counts else compute()


def interval(estimate: float, values: np.ndarray, level: float, method: str = "basic") -> tuple[float, float]:
    """The ``level`` interval of ``estimate`` from its resampled ``values`` (``basic`` or ``percentile``)."""
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    if method == "basic":
        low, high = 2 * estimate - high, 2 * estimate - low
    return float(low), float(high)


def bootstrap_intervals(ctx: MetricContext, families, estimates: dict, resamples: int, level: float,
                        method: str = "basic") -> dict[str, float]:
    """``{id.ci_low, id.ci_high}`` for each ``(id, family, groups)`` in ``families``."""
    if not 0 < level < 1 or resamples < 2 or method not in METHODS:
        raise ValueError(f"bootstrap needs ≥ 2 resamples, 0 < level < 1 and a method in {METHODS}; "
                         f"got {resamples}, {level}, {method!r}")
    out = {}
    for metric_id, values in bootstrap_values(ctx, families, resamples).items():
        out[f"{metric_id}.ci_low"], out[f"{metric_id}.ci_high"] = interval(estimates[metric_id], values, level,
                                                                          method)
    return out
