"""The label-shift report job (docs/label_shift.md): per-metric tables of the label-shifted sets, per calibrator and
shift strength, and the adapt-or-not table, with the paired bootstrap of the evaluate jobs' resamples; the computing
is in :mod:`calbench.report.label_shift` and :mod:`calbench.report.label_shift_adapt`."""

from __future__ import annotations

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.label_shift import read_resamples, strength_markdown
from calbench.report.label_shift_adapt import adapt_markdown


def label_shift_report_job(long_csv, metric_files, tables: dict[str, str], adapt_table: str, methods=None) -> None:
    """``tables``: metric → Markdown path; ``adapt_table``: the adapt-or-not table's path; ``metric_files``: the
    metrics JSONs of the sources with label shift."""
    long = pd.read_csv(long_csv)
    resamples = read_resamples(metric_files)
    for metric_id, path in tables.items():
        write_text_atomic(path, strength_markdown(long, metric_id, resamples, methods))
    write_text_atomic(adapt_table, adapt_markdown(long, resamples, methods))
