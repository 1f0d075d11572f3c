"""The study jobs (config key ``studies``): one learning curve per source and method, then their summary."""

from __future__ import annotations

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.learning_curve import learning_curve, learning_curve_figure, markdown, summarise
from calbench.report.plotting import write_csv


def learning_curve_job(dump, output, source: str, method: str, settings: dict, sizes, repeats: int, metrics,
                       seed: int, split: dict | None = None) -> None:
    write_csv(learning_curve(dump, method, settings, sizes, repeats, metrics, seed, split, source), output)


def learning_curve_summary_job(inputs, summary_csv, summary_md, figures: dict[str, str], metrics, methods) -> None:
    """Fold the per-(source, method) CSVs into the summary table and one figure per source."""
    summary = summarise(pd.concat([pd.read_csv(p) for p in inputs], ignore_index=True))
    write_csv(summary, summary_csv)
    write_text_atomic(summary_md, markdown(summary, metrics, methods))
    for source, path in figures.items():
        learning_curve_figure(summary, source, metrics, methods, path)
