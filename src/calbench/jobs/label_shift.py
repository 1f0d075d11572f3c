"""The label-shift report job (docs/label_shift.md): per-metric tables of the label-shifted sets, per calibrator and
shift strength; the computing is in :mod:`calbench.report.label_shift`."""

from __future__ import annotations

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.label_shift import strength_markdown


def label_shift_report_job(long_csv, tables: dict[str, str], methods=None) -> None:
    """``tables``: metric → Markdown path."""
    long = pd.read_csv(long_csv)
    for metric_id, path in tables.items():
        write_text_atomic(path, strength_markdown(long, metric_id, methods))
