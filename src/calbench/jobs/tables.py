"""The aggregate job: every metrics JSON folded into the tables of ``results/tables``."""

from __future__ import annotations

from calbench.report.tables import write_tables


def aggregate_job(metric_files, out_dir, metrics, methods) -> None:
    """Fold every metrics JSON into the tables of ``results/tables``."""
    write_tables(metric_files, out_dir, metrics, methods)
