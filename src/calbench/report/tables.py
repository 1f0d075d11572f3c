"""Aggregate per-job metrics into the long CSV and ranked per-metric tables.

Ranking follows the LECE paper's tables (docs/figures_and_studies.md): within each row (source),
methods are ranked on the *displayed* mean (scaled and rounded as the metric's table shows it),
ties get the minimum rank, lower is better except for higher-is-better metrics such as accuracy.
The last row is each method's average rank over sources.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.data.store import PEAK_KEY
from calbench.metrics import lookup

ID_COLUMNS = ("source", "method", "seed")
#: The ``test_set`` of the held-out test split; a shifted set is ``family/severity`` (docs/shift.md).
CLEAN = "clean"


def long_table(metric_files) -> pd.DataFrame:
    """``source,method,seed,test_set,metric,value`` rows from metrics JSON files (docs/architecture.md §3):
    their flat metrics are the ``clean`` test set's, their ``shifts`` the shifted sets'."""
    rows = []
    for path in metric_files:
        record = json.loads(Path(path).read_text())
        ids = {k: record[k] for k in ID_COLUMNS}
        sets = {CLEAN: {k: v for k, v in record.items() if k not in (*ID_COLUMNS, "shifts", PEAK_KEY)},
                **record.get("shifts", {})}
        rows += [{**ids, "test_set": name, "metric": k, "value": v} for name, values in sets.items()
                 for k, v in values.items()]
    frame = pd.DataFrame(rows, columns=[*ID_COLUMNS, "test_set", "metric", "value"])
    frame["clean_first"] = frame["test_set"] != CLEAN
    frame = frame.sort_values([*ID_COLUMNS, "clean_first", "test_set", "metric"], kind="stable")
    return frame.drop(columns="clean_first").reset_index(drop=True)


def clean(long: pd.DataFrame) -> pd.DataFrame:
    """The rows of the clean test set (all rows of a table written without a ``test_set`` column)."""
    return long[long["test_set"] == CLEAN] if "test_set" in long else long


def summary(long: pd.DataFrame, metric_id: str, ties: str = "min") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Mean, std (ddof=0, as the LECE code) and rank tables (rows = sources, columns = methods).

    The std of a cell with one value is NaN: one seed measures no spread.

    ``ties="min"`` as the LECE paper's tables; ``"average"`` as the Dirichlet paper's Friedman test.
    """
    family, _ = lookup(metric_id)
    sub = long[long["metric"] == metric_id]
    grouped = sub.groupby(["source", "method"])["value"]
    mean = grouped.mean().unstack("method")
    std = grouped.std(ddof=0).where(grouped.count() > 1).unstack("method")
    shown = (mean * family.scale).round(family.decimals)
    ranks = family.badness(shown).rank(axis=1, method=ties)
    return mean, std, ranks


def markdown_table(long: pd.DataFrame, metric_id: str, method_order=None) -> str:
    """One metric as a Markdown table: ``mean ± std (rank)`` cells and an average-rank row.

    A cell from one value (one seed) shows ``mean (rank)``: no "±", since it measures no spread.
    """
    family, _ = lookup(metric_id)
    mean, std, ranks = summary(long, metric_id)
    methods = [m for m in (method_order or mean.columns) if m in mean.columns]
    scale, dec = family.scale, family.decimals
    direction = family.direction
    scale_note = f", ×{scale:g}" if scale != 1 else ""
    title = f"{metric_id}{scale_note} ({direction}; mean ± std over seeds, no ± where one seed; rank in parentheses)"
    lines = [f"### {title}", "",
             "| source | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for source in mean.index:
        cells = []
        for m in methods:
            if np.isnan(mean.at[source, m]):
                cells.append("–")
                continue
            spread = "" if np.isnan(std.at[source, m]) else f" ± {std.at[source, m] * scale:.{dec}f}"
            cells.append(f"{mean.at[source, m] * scale:.{dec}f}{spread} ({int(ranks.at[source, m])})")
        lines.append(f"| {source} | " + " | ".join(cells) + " |")
    avg = ranks[methods].mean(axis=0)
    lines.append("| **average rank** | " + " | ".join(f"**{avg[m]:.1f}**" for m in methods) + " |")
    lines += floor_notes(methods)
    return "\n".join(lines) + "\n"


def floor_notes(methods) -> list[str]:
    """Notes naming the methods whose default output is floored away from 0 where the paper's is not
    (a calibrator's ``floor_note``), e.g. IROvA's and H-LECE's ``eps``."""
    from calbench.methods.registry import method_class, split_chain

    notes = []
    for method in methods:
        try:
            parts = split_chain(method)
        except ValueError:  # a column that is not a registered method (e.g. the true map)
            continue
        for part in parts:
            note = method_class(part).floor_note
            if note:
                notes.append(f"- {method}: output floored by default: {note}")
    return ["", "Floored outputs:", *notes] if notes else []


def average_ranks(long: pd.DataFrame, metric_ids) -> pd.DataFrame:
    """Average rank of each method over sources, one column per metric."""
    return pd.DataFrame({m: summary(long, m)[2].mean(axis=0) for m in metric_ids})


def write_tables(metric_files, out_dir, metric_ids, method_order=None) -> list[Path]:
    """Write ``metrics_long.csv`` (every test set), and from the clean test set ``{metric}.md`` per metric,
    ``average_ranks.md`` and ``summary.md``."""
    out_dir = Path(out_dir)
    everything = long_table(metric_files)
    written = [out_dir / "metrics_long.csv"]
    write_text_atomic(written[0], everything.to_csv(index=False, float_format="%.10g"))
    long = clean(everything)
    present = [m for m in metric_ids if m in set(long["metric"])]
    sections = []
    for metric_id in present:
        text = markdown_table(long, metric_id, method_order)
        sections.append(text)
        written.append(out_dir / f"{metric_id}.md")
        write_text_atomic(written[-1], text)
    ranks = average_ranks(long, present)
    order = [m for m in (method_order or ranks.index) if m in ranks.index]
    rank_md = ["### Average rank over sources (lower is better)", "",
               "| method | " + " | ".join(present) + " |", "|---|" + "---|" * len(present)]
    rank_md += [f"| {m} | " + " | ".join(f"{ranks.at[m, c]:.2f}" for c in present) + " |" for m in order]
    written.append(out_dir / "average_ranks.md")
    write_text_atomic(written[-1], "\n".join(rank_md) + "\n")
    written.append(out_dir / "summary.md")
    write_text_atomic(written[-1], "# calbench results\n\n" + "\n".join(sections) + "\n" + "\n".join(rank_md) + "\n")
    return written
