"""The shift report job (docs/shift.md): per-metric severity tables, the clean-versus-shift ranking and the
metric-against-severity figure of each source with shifted test sets; the computing is in
:mod:`calbench.report.shift`."""

from __future__ import annotations

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.plotting import write_csv
from calbench.report.shift import figure_metrics, ranking_markdown, severity_figure, severity_markdown


def shift_report_job(long_csv, tables: dict[str, str], ranking, figures: dict[str, tuple[str, str]], metrics,
                     methods=None) -> None:
    """``tables``: metric → Markdown path; ``ranking``: Markdown path; ``figures``: source → (png, csv)."""
    long = pd.read_csv(long_csv)
    for metric_id, path in tables.items():
        write_text_atomic(path, severity_markdown(long, metric_id, methods))
    write_text_atomic(ranking, ranking_markdown(long, list(metrics), methods))
    for source, (png, csv) in figures.items():
        write_csv(severity_figure(long, source, figure_metrics(metrics), png, methods), csv)
