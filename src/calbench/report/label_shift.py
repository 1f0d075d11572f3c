"""Tables of calibration and prior adaptation under label shift (docs/label_shift.md), from the long metrics table.

As Alexandari, Kundaje & Shrikumar (ICML 2020, Tables 1–2) report, per calibrator and shift strength (a Dirichlet
α or a tweak-one ρ): the metric's mean over the drawn sets and seeds, with a t-interval over the seeds (the
calibration split is what differs between seeds; the draws of one seed share its test rows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.data.label_shift import PREFIX, parse_name
from calbench.metrics import lookup

LEVEL = 0.95


def is_label_shifted(test_sets: pd.Series) -> pd.Series:
    return test_sets.str.startswith(PREFIX)


def without_label_shift(long: pd.DataFrame) -> pd.DataFrame:
    """The rows of the clean and covariate-shifted test sets."""
    return long[~is_label_shifted(long["test_set"])] if "test_set" in long else long


def label_shift_rows(long: pd.DataFrame) -> pd.DataFrame:
    """Each (source, method, seed, metric)'s mean over the label-shifted sets (``calbench recommend
    --under-label-shift``), in the long table's columns but ``test_set``."""
    shifted = long[is_label_shifted(long["test_set"])] if "test_set" in long else long.iloc[:0]
    if shifted.empty:
        raise ValueError("the results hold no label-shifted test sets: give a source `label_shift` "
                         "(docs/label_shift.md) and rerun")
    return shifted.groupby(["source", "method", "seed", "metric"], as_index=False)["value"].mean()


def strength_means(long: pd.DataFrame, metric_id: str) -> pd.DataFrame:
    """Rows (source, method, kind, strength): ``mean`` over draws and seeds, ``half`` the half-width of the
    t-interval over the seeds' means (NaN with one seed), ``seeds``."""
    from scipy import stats  # lazy: only the label-shift report needs it

    sub = long[(long["metric"] == metric_id) & is_label_shifted(long["test_set"])]
    parsed = pd.DataFrame([parse_name(n)[:2] for n in sub["test_set"]], columns=["kind", "strength"], index=sub.index)
    per_seed = sub.join(parsed).groupby(["source", "method", "kind", "strength", "seed"])["value"].mean()
    grouped = per_seed.groupby(["source", "method", "kind", "strength"])
    out = pd.DataFrame({"mean": grouped.mean(), "std": grouped.std(ddof=1), "seeds": grouped.count()})
    t = stats.t.ppf(0.5 + LEVEL / 2, np.maximum(out["seeds"] - 1, 1))
    out["half"] = np.where(out["seeds"] > 1, t * out["std"] / np.sqrt(out["seeds"]), np.nan)
    return out.drop(columns="std")


def strength_markdown(long: pd.DataFrame, metric_id: str, method_order=None) -> str:
    """Per source: methods × shift strength of ``metric_id``, mean ± half-width of the 95 % t-interval over
    seeds."""
    family, _ = lookup(metric_id)
    scale, dec = family.scale, family.decimals
    direction = "higher is better" if family.higher_is_better else "lower is better"
    lines = [f"### {metric_id}{f', ×{scale:g}' if scale != 1 else ''} under label shift ({direction}; mean over "
             f"draws and seeds ± half-width of the {LEVEL:.0%} t-interval over seeds)", ""]
    means = strength_means(long, metric_id)
    if means.empty:
        return "\n".join(lines + ["No label-shifted set has this metric.", ""])
    for source, table in means.groupby(level="source"):
        table = table.droplevel("source")
        columns = sorted({(kind, strength) for _, kind, strength in table.index},
                         key=lambda c: (c[0], c[1] if c[0] == "tweak_one" else -c[1]))
        methods = table.index.get_level_values("method").unique()
        methods = [m for m in (method_order or methods) if m in methods]
        lines += [f"**{source}**", "", "| method | " + " | ".join(
            f"Dirichlet α={s:g}" if k == "dirichlet" else f"tweak-one ρ={s:g}" for k, s in columns) + " |",
            "|---|" + "---|" * len(columns)]
        for method in methods:
            cells = []
            for kind, strength in columns:
                key = (method, kind, strength)
                if key not in table.index:
                    cells.append("–")
                    continue
                mean, half = table.at[key, "mean"] * scale, table.at[key, "half"] * scale
                cells.append(f"{mean:.{dec}f}" + ("" if np.isnan(half) else f" ± {half:.{dec}f}"))
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)
