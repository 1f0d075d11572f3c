"""The table jobs of ``results/tables``: the aggregated metrics, the runtime table, the comparison with a paper."""

from __future__ import annotations

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.paper_comparison import comparison_markdown, paper_table, true_map_rows
from calbench.report.runtime import runtime_frame, runtime_markdown
from calbench.report.tables import clean, write_tables


def aggregate_job(metric_files, out_dir, metrics, methods) -> None:
    """Fold every metrics JSON into the tables of ``results/tables``."""
    write_tables(metric_files, out_dir, metrics, methods)


def write_paper_comparison(long_csv, dump, source: str, seeds, out, table: str) -> None:
    """Read ``metrics_long.csv``, add the true map's rows from ``dump``, write the Markdown to ``out``."""
    long = clean(pd.read_csv(long_csv)).drop(columns="test_set", errors="ignore")
    long = pd.concat([long, true_map_rows(dump, source, seeds, list(paper_table(table)[2]))], ignore_index=True)
    write_text_atomic(out, comparison_markdown(long, source, table))


def write_runtime_table(jobs, calibrated_files, calibrate_benchmarks, metric_files, output,
                        method_order=None) -> None:
    frame = runtime_frame(jobs, calibrated_files, calibrate_benchmarks, metric_files)
    write_text_atomic(output, runtime_markdown(frame, method_order))
