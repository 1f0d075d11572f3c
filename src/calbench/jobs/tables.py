"""The table jobs of ``results/tables``: the aggregated metrics, the runtime table, the comparison with a paper."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from calbench.atomic import write_text_atomic
from calbench.report.paper_comparison import comparison_markdown, paper_table, true_map_rows
from calbench.report.runtime import runtime_frame, runtime_markdown
from calbench.report.tables import clean, long_table, paired_verdicts, write_tables


def aggregate_job(metric_files, calibrated_files, out_dir, metrics, methods) -> None:
    """Fold every metrics JSON into the tables of ``results/tables``, marked by the paired bootstrap of the
    test predictions ``calibrated_files`` (the calibrate jobs' outputs, in the order of ``metric_files``)."""
    from calbench.data.store import read_calibrated

    long = clean(long_table(metric_files))
    outputs = {}
    for metrics_json, calibrated in zip(metric_files, calibrated_files, strict=True):
        record = json.loads(Path(metrics_json).read_text())
        outputs[record["source"], record["method"], int(record["seed"])] = calibrated
    verdicts, floors = paired_verdicts(
        long, [m for m in metrics if m in set(long["metric"])],
        lambda key: read_calibrated(outputs[key], "test") if key in outputs else None)
    write_tables(metric_files, out_dir, metrics, methods, verdicts, floors)


def write_paper_comparison(long_csv, dump, source: str, seeds, out, table: str) -> None:
    """Read ``metrics_long.csv``, add the true map's rows from ``dump``, write the Markdown to ``out``."""
    long = clean(pd.read_csv(long_csv)).drop(columns="test_set", errors="ignore")
    long = pd.concat([long, true_map_rows(dump, source, seeds, list(paper_table(table)[2]))], ignore_index=True)
    write_text_atomic(out, comparison_markdown(long, source, table))


def write_runtime_table(jobs, calibrated_files, calibrate_benchmarks, metric_files, output,
                        method_order=None) -> None:
    frame = runtime_frame(jobs, calibrated_files, calibrate_benchmarks, metric_files)
    write_text_atomic(output, runtime_markdown(frame, method_order))
