"""Our results beside a paper's published table (``results/tables/paper_comparison.md``).

For LECE paper Table 1: per metric and method, our mean ± std over seeds (population std, as the
authors' code) next to the paper's, and whether our mean lies within two of the paper's standard
deviations of its mean (plus half a unit of its last printed digit). The ``true`` column applies
the synthetic task's true calibration map c(·), read from the dump's ``true_probs``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calbench.data import splits
from calbench.metrics import evaluate
from calbench.report import paper_values

TABLES = {"lece_table1": (paper_values.LECE_TABLE1, paper_values.LECE_TABLE1_METHODS,
                          paper_values.LECE_TABLE1_METRICS, paper_values.LECE_TABLE1_ROUNDING,
                          "LECE paper Table 1 (synthetic task, §4.1)")}


def true_map_rows(dump, source: str, seeds, metric_ids) -> pd.DataFrame:
    """Long rows of the metrics of the true calibration map on each seed's test set."""
    rows = []
    for seed in seeds:
        test = splits.load_split(dump, seed)["test"]
        values = evaluate(test["true_probs"], test["labels"], metric_ids, true_probs=test["true_probs"], seed=seed)
        rows += [{"source": source, "method": "true", "seed": seed, "metric": m, "value": v} for m, v in values.items()]
    return pd.DataFrame(rows)


def within_two_sd(ours: float, paper_mean: float, paper_sd: float, rounding: float) -> bool:
    return abs(ours - paper_mean) <= 2 * paper_sd + rounding


def paper_table(table: str):
    if table not in TABLES:
        raise ValueError(f"paper_comparison.table: expected one of {sorted(TABLES)}, got {table!r}")
    return TABLES[table]


def comparison_markdown(long: pd.DataFrame, source: str, table: str) -> str:
    """The paper's table with our ``mean ± std`` beside its ``mean ± std`` in every cell."""
    reference, methods, metrics, rounding, title = paper_table(table)
    sub = long[long["source"] == source]
    stats = sub.groupby(["metric", "method"])["value"].agg(["mean", lambda v: np.std(v, ddof=0), "count"])
    stats.columns = ["mean", "std", "count"]
    seeds = int(stats["count"].max()) if len(stats) else 0
    lines = [f"# {title}: ours vs paper", "",
             f"Source `{source}`, {seeds} seeds. Each cell: ours mean ± std / paper mean ± std; "
             "✓ when our mean is within two paper standard deviations (+ half a printed digit) of the paper's.",
             "", "| metric | " + " | ".join(methods.values()) + " |", "|---|" + "---|" * len(methods)]
    for metric, label in metrics.items():
        cells = []
        for method in methods:
            mean, sd = reference[metric][method]
            paper = f"{mean:.3f} ± {sd:.3f}"
            if (metric, method) not in stats.index:
                cells.append(f"– / {paper}")
                continue
            ours = stats.loc[(metric, method)]
            mark = "✓" if within_two_sd(ours["mean"], mean, sd, rounding) else "✗"
            cells.append(f"{ours['mean']:.3f} ± {ours['std']:.3f} / {paper} {mark}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
