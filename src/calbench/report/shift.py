"""Tables and figures of calibration under dataset shift (docs/shift.md), from the long metrics table.

Ovadia et al. (NeurIPS 2019, Fig. 2) summarise each shift intensity by the metric's distribution over the
corruption families; calbench's tables show its mean over families and seeds per severity (0 = the clean test
split), the mean over every shifted set ("under shift"), and each method's rank on the clean split beside its
rank under shift (ranked as the clean tables: on the displayed mean, ties get the minimum rank).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.metrics import lookup
from calbench.report.label_shift import without_label_shift
from calbench.report.plotting import plt, save_figure
from calbench.report.tables import CLEAN, clean

#: The metrics of the shift figure, as Ovadia et al. draw them (ECE, NLL, Brier score, accuracy): the first
#: configured metric of each pattern.
FIGURE_METRICS = ("ece.conf.", "nll", "brier", "acc")
UNDER_SHIFT = "under shift"


def with_severity(long: pd.DataFrame) -> pd.DataFrame:
    """``long`` (but its label-shifted sets, docs/label_shift.md) with ``family`` and ``severity`` columns
    (``clean``: family ``clean``, severity 0)."""
    long = without_label_shift(long)
    parts = long["test_set"].str.split("/", n=1, expand=True).reindex(columns=[0, 1])
    out = long.assign(family=parts[0], severity=pd.to_numeric(parts[1]).fillna(0).astype(int))
    return out


def severity_means(long: pd.DataFrame, metric_id: str) -> pd.DataFrame:
    """Rows (source, method), columns severities 0 (clean) … 5 and :data:`UNDER_SHIFT`: the metric's mean over
    corruption families and seeds (under shift: over every shifted set and seed)."""
    sub = with_severity(long[long["metric"] == metric_id])
    by_severity = sub.groupby(["source", "method", "severity"])["value"].mean().unstack("severity")
    shifted = sub[sub["severity"] > 0].groupby(["source", "method"])["value"].mean().rename(UNDER_SHIFT)
    return by_severity.join(shifted)


def shifted_sources(long: pd.DataFrame) -> list[str]:
    long = without_label_shift(long)
    return sorted(long.loc[long["test_set"] != CLEAN, "source"].unique())


def ranks(means: pd.DataFrame, metric_id: str, column) -> pd.DataFrame:
    """Rank of each method within each source (rows sources, columns methods) on ``means[column]``."""
    family, _ = lookup(metric_id)
    shown = (means[column].unstack("method") * family.scale).round(family.decimals)
    return family.badness(shown).rank(axis=1, method="min")


def severity_markdown(long: pd.DataFrame, metric_id: str, method_order=None) -> str:
    """Per shifted source: methods × severity of ``metric_id`` (mean over families and seeds)."""
    family, _ = lookup(metric_id)
    means = severity_means(long, metric_id)
    scale, dec = family.scale, family.decimals
    direction = family.direction
    lines = [f"### {metric_id}{f', ×{scale:g}' if scale != 1 else ''} under shift ({direction}; mean over "
             "corruption families and seeds per severity, 0 = clean test split)", ""]
    sources = [s for s in shifted_sources(long) if s in means.index.get_level_values("source")]
    if not sources:
        lines.append("No source with shifted test sets has this metric (`true_ce.*` needs a true calibration map, "
                     "which only synthetic sources know).")
    for source in sources:
        table = means.loc[source]
        columns = [c for c in table.columns if c != UNDER_SHIFT] + [UNDER_SHIFT]
        methods = [m for m in (method_order or table.index) if m in table.index]
        lines += [f"**{source}**", "", "| method | " + " | ".join(
            "clean" if c == 0 else (c if c == UNDER_SHIFT else f"severity {c}") for c in columns) + " |",
            "|---|" + "---|" * len(columns)]
        lines += [f"| {m} | " + " | ".join("–" if np.isnan(table.at[m, c]) else f"{table.at[m, c] * scale:.{dec}f}"
                                           for c in columns) + " |" for m in methods]
        lines.append("")
    return "\n".join(lines)


def ranking_markdown(long: pd.DataFrame, metric_ids, method_order=None) -> str:
    """Each method's average rank over the shifted sources, on the clean split and under shift, per metric (those
    the shifted sources have)."""
    sources = shifted_sources(long)
    shifted = long[long["source"].isin(sources)]
    metric_ids = [m for m in metric_ids if m in set(shifted["metric"])]
    lines = ["### Ranking on the clean test split and under shift (average rank over the sources with shifted "
             "sets; lower is better)", "",
             "| method | " + " | ".join(f"{m} clean | {m} shift" for m in metric_ids) + " |",
             "|---|" + "---|---|" * len(metric_ids)]
    columns = {}
    for metric_id in metric_ids:
        means = severity_means(shifted, metric_id)
        columns[metric_id] = (ranks(means, metric_id, 0).mean(), ranks(means, metric_id, UNDER_SHIFT).mean())
    methods = sorted({m for pair in columns.values() for m in pair[0].index})
    methods = [m for m in (method_order or methods) if m in methods]
    lines += [f"| {m} | " + " | ".join(f"{columns[c][0].get(m, np.nan):.2f} | {columns[c][1].get(m, np.nan):.2f}"
                                       for c in metric_ids) + " |" for m in methods]
    return "\n".join(lines) + "\n"


def ranking_rows(long: pd.DataFrame, under_shift: bool = False) -> pd.DataFrame:
    """The clean test split's rows, or (``under_shift``) each (source, method, seed, metric)'s mean over the
    shifted test sets, in the long table's columns but ``test_set``."""
    if not under_shift:
        return clean(long).drop(columns="test_set", errors="ignore")
    long = without_label_shift(long)
    shifted = long[long["test_set"] != CLEAN] if "test_set" in long else long.iloc[:0]
    if shifted.empty:
        raise ValueError("the results hold no shifted test sets: give a source `shifts` (docs/shift.md) and rerun")
    return shifted.groupby(["source", "method", "seed", "metric"], as_index=False)["value"].mean()


def figure_metrics(metric_ids) -> list[str]:
    """The first configured metric of each of :data:`FIGURE_METRICS` (ECE, NLL, Brier, accuracy)."""
    found = []
    for prefix in FIGURE_METRICS:
        match = [m for m in metric_ids if m == prefix or (prefix.endswith(".") and m.startswith(prefix))]
        found += match[:1]
    return found


def severity_figure(long: pd.DataFrame, source: str, metric_ids, path, method_order=None) -> pd.DataFrame:
    """The metrics against shift severity (0 = clean), one line per method (mean over families and seeds), as
    Ovadia et al.'s Fig. 2 per shift intensity; returns the plotted means."""
    sub = long[long["source"] == source]
    fig, axes = plt.subplots(1, len(metric_ids), figsize=(4.2 * len(metric_ids), 3.6), layout="constrained",
                             squeeze=False)
    frames = []
    for ax, metric_id in zip(axes[0], metric_ids):
        means = severity_means(sub, metric_id).loc[source].drop(columns=UNDER_SHIFT)
        methods = [m for m in (method_order or means.index) if m in means.index]
        for method in methods:
            ax.plot(means.columns, means.loc[method], marker="o", ms=3, label=method)
        ax.set(xlabel="shift severity (0 = clean)", title=metric_id, xticks=list(means.columns))
        frames.append(means.loc[methods].reset_index().melt(id_vars="method", var_name="severity", value_name="mean")
                      .assign(source=source, metric=metric_id))
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"{source}: calibration under shift (mean over corruption families and seeds)")
    save_figure(fig, path)
    return pd.concat(frames, ignore_index=True)[["source", "metric", "method", "severity", "mean"]]
