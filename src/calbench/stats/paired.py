"""Intervals and paired tests from the resamples of one source (:class:`calbench.stats.draws.SourceDraws`): the
tables' marks, ``intervals.csv``, ``calbench recommend`` and the shift and label-shift tables all read these.

The tables show the mean over seeds θ̄_m of the seeds' estimates θ̂_{m,s}; its resamples pool the seeds as a
two-stage bootstrap does (Davison & Hinkley 1997, "Bootstrap Methods and their Application", §3.8: resample the
seeds, then the rows within each), with the seed stage shrunk so that the row noise, already in every seed's
estimate, is not counted twice:

    θ*_{m,r} = mean_s θ*_{m,s,r} + k_m · mean_j (θ̂_{m,J_{r,j}} − θ̄_m),   J_{r,1..S} seeds drawn with replacement,
    k_m² = S · max(0, b_m − v_m) / ((S − 1) · b_m),

b_m the variance of θ̂_{m,s} over seeds and v_m the mean over seeds of the row-resampling variance of θ*_{m,s,·}.
The row stage draws the units that were sampled (:mod:`calbench.stats.resampling`), so seeds that share test rows
share their counts; the seed stage carries what the rows do not explain (the calibration split, a fit's seed).

Per source and metric: the percentile interval of each method (Efron & Tibshirani 1993, §13.3) of its resamples
shifted by the bootstrap estimate of bias, mean(θ*) − θ̂ (§10.3): binned ECE grows on resamples, so unshifted
percentiles can lie wholly above the estimate. The shifted resamples are clipped at 0 for a metric whose every
resample is non-negative: an interval never goes below 0 for an ECE. Against the best method by estimate, the
two-sided bootstrap p-value of "no difference" (Davison & Hinkley §4.4, eq. 4.11, the resampled differences
centred at their mean as the null distribution): p = (1 + #{r : |d*_r − mean d*| ≥ |d|}) / (R + 1), whose
resolution is 1/(R + 1): a p-value at that floor reads "p < 1/R" (:func:`format_p`), never a number the resamples
cannot show. The p-values are adjusted over the comparisons with the best by Holm's step-down procedure (Holm
1979). A method is *tied with the best* when its adjusted p-value is at least α, else *worse than the best*: the
family-wise error of calling a method worse is at most α.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from calbench.metrics import lookup
from calbench.stats.draws import REFERENCE, SourceDraws


def pooled(estimates: np.ndarray, draws: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Resamples ``[..., R]`` of the mean over seeds from per-seed ``estimates`` ``[..., S]`` and resamples
    ``draws`` ``[..., S, R]`` (module docstring: the row stage within every seed, then the shrunk seed stage)."""
    within = draws.mean(axis=-2)
    seeds = estimates.shape[-1]
    if seeds == 1:
        return within
    between = estimates.var(axis=-1, ddof=1)
    row_noise = draws.var(axis=-1).mean(axis=-1)
    excess = np.maximum(between - row_noise, 0.0)
    shrink = np.sqrt(np.divide(seeds * excess, (seeds - 1) * between, out=np.zeros_like(between),
                               where=between > 0))
    centred = estimates - estimates.mean(axis=-1, keepdims=True)
    seed_stage = centred[..., picks].mean(axis=-1)  # [..., R]: the mean of the drawn seeds' deviations
    return within + shrink[..., None] * seed_stage


def percentile_interval(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval (Efron & Tibshirani §13.3) of resamples ``[..., R]``."""
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=-1)
    return low, high


def value_intervals(estimates: np.ndarray, resampled: np.ndarray, picks: np.ndarray, level: float):
    """Percentile intervals of the mean over seeds of each row of ``estimates`` ``[..., S]`` (resamples
    ``[..., S, R]``), the resamples shifted by their bias and, for a metric whose every resample is non-negative,
    clipped at 0 (module docstring)."""
    values = pooled(estimates, resampled, picks)
    values = values - (values.mean(axis=-1) - estimates.mean(axis=-1))[..., None]  # less the bias
    values = np.where((resampled >= 0).all(axis=(-2, -1))[..., None], np.maximum(values, 0.0), values)
    return percentile_interval(values, level)


def paired_gaps(estimates: np.ndarray, resampled: np.ndarray, reference: np.ndarray, reference_resampled: np.ndarray,
                picks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-seed differences ``[..., S]`` of each row from the ``reference`` row ``[S]`` and the paired resamples
    ``[..., R]`` of their mean over seeds (the same row counts and seed draws for both; Efron & Tibshirani §16.4)."""
    difference = estimates - reference
    return difference, pooled(difference, resampled - reference_resampled, picks)


def difference_interval(difference: np.ndarray, gap: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of the paired resamples ``gap`` ``[..., R]`` of the differences ``[...]``, less
    their bias (as the values' intervals)."""
    return percentile_interval(gap - (gap.mean(axis=-1) - difference)[..., None], level)


def bootstrap_p_values(difference: np.ndarray, resampled: np.ndarray) -> np.ndarray:
    """Two-sided bootstrap p-values of "no difference" for estimated differences ``[...]`` with paired resamples
    ``[..., R]``: (1 + #{|d* − mean d*| ≥ |d|}) / (R + 1) (Davison & Hinkley §4.4, eq. 4.11; module docstring).
    1 for identical outputs (a difference and resamples all 0); 1/(R + 1), the resolution, where no resample
    reaches the difference."""
    resamples = resampled.shape[-1]
    centred = np.abs(resampled - resampled.mean(axis=-1, keepdims=True))
    beyond = (centred >= np.abs(difference)[..., None] - 1e-12 * np.abs(difference)[..., None]).sum(axis=-1)
    return np.minimum(1.0, (1 + beyond) / (resamples + 1))


def format_p(p_value: float, resamples: int) -> str:
    """``p = 0.031``, or ``p < 0.001`` (1/R) for a p-value below what ``resamples`` resamples resolve."""
    if p_value < 1 / resamples:
        return f"p < {1 / resamples:.2g}"
    return f"p = {p_value:.2g}"


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values: the i-th smallest of k is max_{j ≤ i} min(1, (k − j + 1) p_(j))."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    k = p.size
    adjusted = np.maximum.accumulate(np.minimum(1.0, (k - np.arange(k)) * p[order]))
    out = np.empty(k)
    out[order] = adjusted
    return out


@dataclass(frozen=True)
class Verdict:
    """One method on one source and metric: a row of ``intervals.csv``, a record of ``recommend --json``."""

    source: str
    metric: str
    method: str
    estimate: float
    low: float
    high: float
    best: str
    #: None where untested (no resamples)
    tied_with_best: bool | None
    #: Holm-adjusted bootstrap p-value against the best (NaN for the best itself or without resamples)
    p_value: float
    #: why the interval is missing (empty where it is shown)
    note: str = ""
    #: the resamples the interval and p-value rest on (0: none)
    resamples: int = 0
    #: what a resample draws: ``pool rows`` (seeds re-split one pool and share rows) or ``test rows``
    unit: str = ""

    def record(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _ranked(draws: SourceDraws, metric_id: str):
    """The family of ``metric_id`` and the rows of the methods with an estimate on every seed, best first."""
    family, _ = lookup(metric_id)
    estimates = draws.estimates[metric_id]
    index = np.flatnonzero(~np.isnan(estimates).any(axis=1))
    means = estimates[index].mean(axis=1)
    return family, estimates, index[np.argsort(-means if family.higher_is_better else means, kind="stable")]


def compare(draws: SourceDraws, metric_id: str, level: float = 0.95, alpha: float = 0.05) -> list[Verdict]:
    """Every method with an estimate on each seed of ``draws.source``, best first: its estimate (the mean over
    seeds), percentile interval and whether it is tied with the best (Holm-adjusted bootstrap test at ``alpha``,
    over the methods resampled). A method without resamples of ``metric_id`` (:attr:`SourceDraws.omitted`) has
    NaN interval and p-value, ``tied_with_best`` None and a ``note`` saying why; where the best has none, no
    method is tested."""
    family, estimates, order = _ranked(draws, metric_id)
    if family.signed:
        raise ValueError(f"{metric_id} is signed (0 is best): the paired tests compare methods in one direction; "
                         "compare its unsigned parts or an ECE instead (docs/metrics.md, Signed calibration error)")
    if not order.size:
        return []
    resampled, sampled = _resampled(draws, metric_id, order)
    low, high, p_adj = (np.full(len(order), np.nan) for _ in range(3))
    if sampled.any():
        low[sampled], high[sampled] = value_intervals(estimates[order[sampled]], resampled[order[sampled]],
                                                      draws.seed_picks, level)
    tested = sampled & (np.arange(len(order)) > 0) & sampled[0]
    if tested.any():
        best = order[0]
        _, gap = paired_gaps(estimates[order[tested]], resampled[order[tested]], estimates[best], resampled[best],
                             draws.seed_picks)
        difference = estimates[order[tested]].mean(axis=1) - estimates[best].mean()
        p_adj[tested] = holm(bootstrap_p_values(difference, gap))
    names = [draws.methods[i] for i in order]
    note = draws.omitted.get(metric_id, "no resamples")
    count = draws.seed_picks.shape[0]
    return [Verdict(draws.source, metric_id, name, float(estimates[i].mean()), float(lo), float(hi), names[0],
                    True if k == 0 else None if np.isnan(p) else bool(p >= alpha), float(p),
                    "" if ok else note, count if ok else 0, draws.unit)
            for k, (name, i, lo, hi, p, ok) in enumerate(zip(names, order, low, high, p_adj, sampled))]


def _resampled(draws: SourceDraws, metric_id: str, rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """The resamples ``[M, S, R]`` of ``metric_id`` (None where it has none) and, per row of ``rows``, whether that
    method has them on every seed."""
    resampled = draws.draws.get(metric_id)
    if resampled is None:
        return None, np.zeros(len(rows), dtype=bool)
    return resampled, ~np.isnan(resampled[rows]).any(axis=(1, 2))


def frame(verdicts: Sequence[Verdict]) -> "pd.DataFrame":  # noqa: F821 (pandas imported lazily)
    """The verdicts as a table with :class:`Verdict`'s fields as columns (``intervals.csv``)."""
    import pandas as pd  # lazy: recommend's JSON needs no pandas

    return pd.DataFrame([v.record() for v in verdicts], columns=list(Verdict.__dataclass_fields__))


CONTRAST_COLUMNS = ["source", "metric", "method", "estimate", "low", "high", "reference", "difference",
                    "difference_low", "difference_high", "p_value", "note", "unit"]


def against_reference(draws: SourceDraws, metric_id: str, reference: str = REFERENCE, level: float = 0.95
                      ) -> "pd.DataFrame":  # noqa: F821 (pandas imported lazily)
    """Every method with an estimate on each seed: its estimate (mean over seeds) and percentile interval, and its
    paired difference from ``reference`` (method − reference; percentile interval of the paired resamples, the
    two-sided bootstrap p-value of :func:`bootstrap_p_values` adjusted over the methods by :func:`holm`). NaN, with
    a ``note`` saying why, for a method without resamples of the metric (:attr:`SourceDraws.omitted`); the
    difference is NaN for the reference itself, for a signed metric (0 is best: a difference of signed values says
    nothing of which is better) and where ``reference`` has no resamples."""
    import pandas as pd

    family, _ = lookup(metric_id)
    estimates = draws.estimates[metric_id]
    rows = np.flatnonzero(~np.isnan(estimates).any(axis=1))
    resampled, sampled = _resampled(draws, metric_id, rows)
    out = pd.DataFrame({"source": draws.source, "metric": metric_id,
                        "method": [draws.methods[i] for i in rows], "estimate": estimates[rows].mean(axis=1),
                        "reference": reference,
                        "note": np.where(sampled, "", draws.omitted.get(metric_id, "no resamples")),
                        "unit": draws.unit},
                       columns=CONTRAST_COLUMNS)
    numbers = ["low", "high", "difference", "difference_low", "difference_high", "p_value"]
    out[numbers] = out[numbers].astype(np.float64)
    if not sampled.any():
        return out
    out.loc[sampled, "low"], out.loc[sampled, "high"] = value_intervals(
        estimates[rows[sampled]], resampled[rows[sampled]], draws.seed_picks, level)
    ref = draws.methods.index(reference) if reference in draws.methods else -1
    if family.signed or ref not in rows[sampled]:
        return out
    where = sampled & (rows != ref)
    others = rows[where]
    per_seed, gap = paired_gaps(estimates[others], resampled[others], estimates[ref], resampled[ref],
                                draws.seed_picks)
    difference = per_seed.mean(axis=1)
    low, high = difference_interval(difference, gap, level)
    out.loc[where, "difference"], out.loc[where, "difference_low"], out.loc[where, "difference_high"] = (
        difference, low, high)
    out.loc[where, "p_value"] = holm(bootstrap_p_values(difference, gap))
    return out
