"""Which method to use: per source and metric, the best method, an interval of its value and a paired test
against every other method (``calbench recommend``; docs/choosing.md).

With several seeds, the seeds are the replicates: a t-interval of the mean over seeds and a two-sided paired
t-test over the seeds two methods share. With one seed, the test rows are: the metric on R bootstrap
resamples of the test rows (Davison & Hinkley 1997, §5.2-5.3), the same resamples for every method, gives the
best method's basic interval and, per other method, a two-sided paired bootstrap test of "no difference":
twice the smaller share of resampled differences on either side of zero, the level at which the percentile
interval of the difference starts to exclude zero (Efron & Tibshirani 1993, "An Introduction to the
Bootstrap", ch. 16).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.metrics import lookup, resampled
from calbench.metrics.bootstrap import interval


def compare(long: pd.DataFrame, metric: str, outputs: Callable[[str, str, int], Path] | None = None,
            level: float = 0.95, resamples: int = 1000) -> list[dict]:
    """Per source (sorted): the best method by mean ``metric`` and how the others compare with it.

    ``outputs(source, method, seed)`` is the calibrated output file of a job (one-seed sources are tested on
    their test rows; without it, or for metrics that need more than the outputs, they get no test). Each record:
    ``source, metric, method, value, low, high, basis`` ("seeds", "test rows" or None) and ``others``, a list of
    ``(method, value, p_value)`` from the runner-up on (p NaN where no test applies).
    """
    family, _ = lookup(metric)
    if family.signed:
        raise ValueError(f"{metric} is signed (0 is best): the paired tests compare methods in one direction; "
                         "compare its unsigned parts or an ECE instead (docs/metrics.md, Signed calibration error)")
    sub = long[long["metric"] == metric]
    out = []
    for source, rows in sub.groupby("source", sort=True):
        table = rows.pivot_table(index="seed", columns="method", values="value")
        means = table.mean()
        order = list(means.sort_values(ascending=not family.higher_is_better, kind="stable").index)
        if table.shape[0] > 1:
            record = _over_seeds(table, order, level)
        elif outputs is not None and not (family.needs_true_probs or family.needs_uncal_probs):
            record = _over_rows(source, int(table.index[0]), metric, order, outputs, level, resamples)
        else:
            record = {"low": np.nan, "high": np.nan, "basis": None,
                      "others": [(m, float(means[m]), np.nan) for m in order[1:]]}
        out.append({"source": source, "metric": metric, "method": order[0], "value": float(means[order[0]]),
                    "seed": int(table[order[0]].dropna().index.min()), **record})
    return out


def _over_seeds(table: pd.DataFrame, order: list, level: float) -> dict:
    """A t-interval of the best method's mean over seeds and paired t-tests over the seeds shared."""
    from scipy import stats

    best = table[order[0]].dropna()
    half = stats.t.ppf(0.5 + level / 2, best.size - 1) * best.std(ddof=1) / np.sqrt(best.size) if best.size > 1 \
        else np.nan
    others = []
    for method in order[1:]:
        pair = table[[order[0], method]].dropna()
        diff = pair[order[0]] - pair[method]
        if pair.shape[0] > 1 and diff.std(ddof=1) > 0:
            p_value = float(stats.ttest_rel(pair[order[0]], pair[method]).pvalue)
        else:  # equal on every shared seed (methods that keep the argmax, for accuracy): no difference at all
            p_value = 1.0 if pair.shape[0] > 1 and not diff.any() else np.nan
        others.append((method, float(table[method].mean()), p_value))
    return {"low": best.mean() - half, "high": best.mean() + half, "basis": "seeds", "others": others}


def _over_rows(source: str, seed: int, metric: str, order: list, outputs, level: float, resamples: int) -> dict:
    """A basic bootstrap interval of the best method's value and paired bootstrap tests, all on the same
    resamples of the seed's test rows."""
    from calbench.data.store import read_calibrated

    draws = {}
    for method in order:
        part = read_calibrated(outputs(source, method, seed), "test")
        draws[method] = resampled(part["probs"], part["labels"], [metric], resamples, seed)[metric]
    value, best = draws[order[0]]
    low, high = interval(value, best, level)
    others = []
    for method in order[1:]:
        diff = best - draws[method][1]
        p_value = min(1.0, 2 * min(np.mean(diff >= 0), np.mean(diff <= 0)))
        others.append((method, draws[method][0], float(p_value)))
    return {"low": low, "high": high, "basis": "test rows", "others": others}


def shown(metric: str, value: float) -> str:
    """``value`` as the tables show ``metric`` (ECE ×100, the table's decimals)."""
    family, _ = lookup(metric)
    return f"{value * family.scale:.{family.decimals}f}" if np.isfinite(value) else "n/a"


def scale_note(metric: str) -> str:
    """`` (×100)`` for metrics the tables show scaled, else empty."""
    scale = lookup(metric)[0].scale
    return "" if scale == 1 else f" (×{scale:g})"
